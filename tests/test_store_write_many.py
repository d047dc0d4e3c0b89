"""``Batch.write_many``: several tables and artefacts of one batch encoded at the same time (the
replay writes its five Parquet files so), with the same files, row counts and file list as
``write``/``write_artifact`` called one after another; a failure leaves the bookkeeping as it
was."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from philly_analyze.sim.replay import run_replay
from philly_analyze.sim.result import encoding_for_store, write_result_store
from philly_analyze.store import Batch, Store, encode_table
from tests._sim_data import observed_store

T0 = datetime(2017, 10, 31, 23, 0, tzinfo=UTC)
T1 = datetime(2017, 11, 1, 1, 0, tzinfo=UTC)
JOBS = {"job_id": ["a", "b", "c"], "num_gpus": [1, 2, 8], "source": ["x", "x", "x"]}
ATTEMPTS = {"job_id": ["a", "b"], "attempt_idx": [0, 0], "start_time": [T0, T1], "source": ["x", "x"]}  # fmt: skip
# Two rows in October, one in November: two files of one table.
CPU = {"time": [T0, T0, T1], "machine_id": ["m1", "m2", "m1"], "util": [10.0, 20.0, 30.0]}
EMPTY: dict[str, list[str]] = {"machine_id": [], "source": []}
WAITING = {"job_id": ["b", "b"], "attempt_idx": [0, 0], "start": [T0, T0], "end": [T1, T1], "seconds": [60.0, 7140.0], "cause": ["fair_share", "capacity"]}  # fmt: skip
QUOTAS = {"vc": ["v1"], "gpus": [4]}
TABLES: dict[str, Any] = {"machines": EMPTY, "jobs": JOBS, "attempts": ATTEMPTS, "cpu_util": CPU}
FILES: dict[str, Any] = {"waiting": WAITING, "vc_quotas": QUOTAS}


def _one_by_one(b: Batch) -> dict[str, int]:
    rows = {t: b.write(t, d) for t, d in TABLES.items()}
    for name, data in FILES.items():
        b.write_artifact(name, data)
    return rows


def _store(path: Path, write: Any) -> tuple[dict[str, int], dict[str, int], list[str], list[str]]:
    """Write TABLES and FILES with ``write(batch)`` and commit; returns what ``write``
    returned, the batch's rows and artefacts, and the files of each table (batch id out)."""
    with Store(path) as st, st.batch() as b:
        returned = write(b)
        rows, arts = dict(b.rows), list(b.artifacts)
        staged = [f"{t}:{rel.replace(b.batch_id, 'B')}" for t, _, rel in b.staged_files()]
        st.commit(b, [])
    return returned, rows, arts, staged


def test_write_many_writes_what_one_after_another_writes(tmp_path: Path) -> None:
    seq = _store(tmp_path / "seq", _one_by_one)
    par = _store(tmp_path / "par", lambda b: b.write_many(TABLES, FILES, threads=4))
    # Counted by hand: 3 jobs, 2 attempts, 3 cpu rows in two months, no machine.
    assert par[0] == {"machines": 0, "jobs": 3, "attempts": 2, "cpu_util": 3}
    assert par[1] == {"jobs": 3, "attempts": 2, "cpu_util": 3}
    assert par[2] == ["waiting", "vc_quotas"]
    assert par[3] == [
        "jobs:parquet/jobs/B-0.parquet",
        "attempts:parquet/attempts/B-1.parquet",
        "cpu_util:parquet/cpu_util/month=2017-10/B-2.parquet",
        "cpu_util:parquet/cpu_util/month=2017-11/B-3.parquet",
    ]
    assert par[1:] == seq[1:]
    assert seq[0] == par[0]
    for table in ("jobs", "attempts", "cpu_util"):
        with Store(tmp_path / "seq", read_only=True) as a, Store(tmp_path / "par", read_only=True) as b:  # fmt: skip
            q = f"SELECT * FROM {table} ORDER BY ALL"
            assert a.arrow(q) == b.arrow(q)
            n = {"jobs": 3, "attempts": 2, "cpu_util": 3}[table]
            assert b.scalar(f"SELECT count(*) FROM {table}") == n
            assert b.scalar(f"SELECT sum(rows) FROM internal._files WHERE tbl = '{table}'") == n  # fmt: skip
    for name in ("waiting.parquet",):
        assert pq.read_table(tmp_path / "par" / name) == pq.read_table(tmp_path / "seq" / name)
    assert (tmp_path / "par" / "vc_quotas.csv").read_text() == "vc,gpus\nv1,4\n"


def test_a_failed_write_raises_and_records_nothing(tmp_path: Path) -> None:
    with Store(tmp_path / "s") as st, st.batch() as b:
        with pytest.raises(ValueError, match="unknown columns"):
            b.write_many({"jobs": JOBS}, {"vc_quotas": {**QUOTAS, "extra": [1]}}, threads=2)
        assert b.rows == {} and b.artifacts == []


def test_one_thread_writes_in_turn(tmp_path: Path) -> None:
    par = _store(tmp_path / "one", lambda b: b.write_many(TABLES, FILES, threads=1))
    assert par[1] == {"jobs": 3, "attempts": 2, "cpu_util": 3}
    assert par[2] == ["waiting", "vc_quotas"]


def test_an_encoded_table_is_staged_as_the_file_write_stages(tmp_path: Path) -> None:
    encoded = {t: encode_table(t, d) for t, d in TABLES.items() if t != "cpu_util"}
    assert encoded["jobs"].num_rows == 3 and encoded["machines"].num_rows == 0
    par = _store(tmp_path / "enc", lambda b: b.write_many({**encoded, "cpu_util": CPU}, FILES))
    seq = _store(tmp_path / "seq", _one_by_one)
    assert par[0] == {"machines": 0, "jobs": 3, "attempts": 2, "cpu_util": 3}
    assert par[1:] == seq[1:]
    for table in ("jobs", "attempts"):
        (a,) = (tmp_path / "enc" / "parquet" / table).glob("*.parquet")
        (b,) = (tmp_path / "seq" / "parquet" / table).glob("*.parquet")
        assert a.read_bytes() == b.read_bytes()


def test_encoding_refuses_what_it_cannot_stage_as_one_file(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="partitioned by month"):
        encode_table("cpu_util", CPU)
    with (
        Store(tmp_path / "s") as st,
        st.batch() as b,
        pytest.raises(ValueError, match="encoded as jobs given as attempts"),
    ):
        b.write_many({"attempts": encode_table("jobs", JOBS)})


def _table_bytes(store: Path) -> dict[str, bytes]:
    return {f.parent.name: f.read_bytes() for f in sorted((store / "parquet").glob("*/*.parquet"))}


def test_a_replay_written_from_its_encoded_tables_is_the_same_store(tmp_path: Path) -> None:
    src = observed_store(tmp_path / "src")
    plain = run_replay(src, "philly")
    with encoding_for_store():
        enc = run_replay(src, "philly")
    assert plain.encoded == {} and set(enc.encoded) == {"jobs", "attempts", "placements"}
    write_result_store(plain, tmp_path / "plain")
    write_result_store(enc, tmp_path / "enc")
    assert set(_table_bytes(tmp_path / "plain")) == {"jobs", "attempts", "placements", "machines"}
    assert _table_bytes(tmp_path / "enc") == _table_bytes(tmp_path / "plain")
    w = "waiting.parquet"
    assert (tmp_path / "enc" / w).read_bytes() == (tmp_path / "plain" / w).read_bytes()
    # A table replaced after the build is written as it is now, not from the old bytes.
    enc.jobs = enc.jobs.slice(0, 1)
    write_result_store(enc, tmp_path / "changed")
    with Store(tmp_path / "changed", read_only=True) as st:
        assert st.scalar("SELECT count(*) FROM jobs") == 1
