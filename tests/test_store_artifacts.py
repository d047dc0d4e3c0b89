"""The store owns its folder: every file beside the catalog and ``parquet/`` is declared in
``schemas.ARTIFACTS``, written in a batch with the tables (``Batch.write_artifact``, published
by ``Store.commit``, put back as it was when the commit fails) and read conformed to its
declaration (``Store.read_artifact``), including the files of stores written before: those
stores still open and read the same."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

from philly_analyze import schemas
from philly_analyze.analysis import run
from philly_analyze.analysis.paper import muxflow_published
from philly_analyze.cli import main
from philly_analyze.errors import StoreError
from philly_analyze.sharingout import SharingOutput
from philly_analyze.store import Store, has_artifact
from philly_analyze.vcquota import quotas_for_store
from tests._sim_data import T0, observed_store

#: What the store's own entries are, beside the declared files.
STORE_ENTRIES = {"catalog.duckdb", "parquet"}
DECLARED = {a.file for a in schemas.ARTIFACTS.values()}


def _invoke(*args: str) -> None:
    r = CliRunner().invoke(main, list(args))
    assert r.exit_code == 0, r.output


def _entries(store: Path) -> set[str]:
    return {p.name for p in store.iterdir()}


def test_a_replay_store_holds_only_its_tables_and_declared_files(tmp_path: Path) -> None:
    src = observed_store(tmp_path / "s")
    _invoke("replay", "--store", str(src), "--policy", "philly,fifo", "--out", str(tmp_path / "q"), "-q")  # fmt: skip
    _invoke(
        "replay", "--policy", "muxflow", "--scenario", "paper", "--param", "online_gpus=16",
        "--param", "minutes=60", "--out", str(tmp_path / "mux"), "-q",
    )  # fmt: skip
    # philly enforces quotas (it keeps them), fifo none; the sharing policy adds its output.
    assert _entries(tmp_path / "q" / "philly") == STORE_ENTRIES | {
        "replay.json",
        "vc_quotas.csv",
        "waiting.parquet",
    }
    assert _entries(tmp_path / "q" / "fifo") == STORE_ENTRIES | {"replay.json", "waiting.parquet"}
    assert _entries(tmp_path / "mux") == STORE_ENTRIES | {
        "replay.json",
        "waiting.parquet",
        "sharing.json",
        "sharing_timeseries.parquet",
    }
    with Store(tmp_path / "mux", read_only=True) as st:
        assert {a for a in schemas.ARTIFACTS if st.has_artifact(a)} == {
            "replay",
            "waiting",
            "sharing",
            "sharing_timeseries",
        }
        doc = st.read_artifact("sharing")
        assert (doc["policy"], doc["paper_side"], doc["color"]) == ("muxflow", "after", "#1f77b4")
        assert st.read_artifact("waiting").schema == schemas.WAITING.schema
    with Store(tmp_path / "q" / "philly", read_only=True) as st:
        assert st.read_artifact("replay")["quotas"] == {"v": 8}
        assert st.read_artifact("vc_quotas").to_pylist() == [{"vc": "v", "gpus": 8}]


# ---------------------------------------------------------------- the previous layout

#: ``waiting.parquet`` as the previous code declared it (``sim.result.WAITING_SCHEMA``).
OLD_WAITING = pa.schema(
    [
        ("job_id", pa.string()),
        ("attempt_idx", pa.int32()),
        ("start", schemas.UTC_TS),
        ("end", schemas.UTC_TS),
        ("seconds", pa.float64()),
        ("cause", pa.string()),
    ]
)
OLD_SETTINGS = {"policy": "philly", "params": {"locality_wait_min": 10.0}, "seed": 0, "quotas": {"v": 8}}  # fmt: skip


def _old_series() -> pd.DataFrame:
    cols = [c for c in schemas.SHARING_TIMESERIES.schema.names if c != "minute"]
    frame = {"minute": [0.0, 1.0]}
    for i, c in enumerate(cols):
        ints = schemas.SHARING_TIMESERIES.schema.field(c).type == pa.int64()
        frame[c] = [i, i + 1] if ints else [0.25, 0.75]
    return pd.DataFrame(frame)


def _old_layout_store(path: Path, policy: str) -> Path:
    """A replay store with its files written the way the code before ``schemas.ARTIFACTS``
    wrote them: ``json.dumps(indent=2, sort_keys=True)`` without a final newline, the quota
    CSV by hand, ``waiting.parquet`` with its own schema, ``sharing.json`` (indent 1) without
    ``paper_side`` and ``color``, and the time series through pandas (snappy, pandas
    metadata)."""
    observed_store(path)
    (path / "replay.json").write_text(json.dumps(OLD_SETTINGS, indent=2, sort_keys=True))
    (path / "vc_quotas.csv").write_text("vc,gpus\nv,8\n")
    waiting = pa.Table.from_arrays(
        [
            pa.array(["b"]),
            pa.array([0], pa.int32()),
            pa.array([T0 + timedelta(seconds=10)], schemas.UTC_TS),
            pa.array([T0 + timedelta(seconds=40)], schemas.UTC_TS),
            pa.array([30.0]),
            pa.array(["capacity"]),
        ],
        schema=OLD_WAITING,
    )
    pq.write_table(waiting, path / "waiting.parquet", compression="zstd")
    doc = {
        "policy": policy,
        "metrics": {"gpu_util_online": 0.5, "evictions": 2},
        "slowdown_hist": {"bin": 0.001, "index": [100, 200], "count": [3, 1]},
    }
    (path / "sharing.json").write_text(json.dumps(doc, indent=1) + "\n")
    _old_series().to_parquet(path / "sharing_timeseries.parquet", index=False)
    return path


@pytest.mark.parametrize(
    ("policy", "side", "color"),
    [("muxflow", "after", "#1f77b4"), ("dedicated", "before", "#7f7f7f"), ("mps-naive", None, "#d62728")],
)  # fmt: skip
def test_a_store_of_the_previous_layout_reads_the_same(
    tmp_path: Path, policy: str, side: str | None, color: str
) -> None:
    store = _old_layout_store(tmp_path / "old", policy)
    with Store(store, read_only=True) as st:
        assert st.read_artifact("replay") == OLD_SETTINGS
        assert quotas_for_store(st) == {"v": 8}
        w = st.read_artifact("waiting")
        assert w.schema == schemas.WAITING.schema
        assert w.to_pylist() == [
            {
                "job_id": "b",
                "attempt_idx": 0,
                "start": T0 + timedelta(seconds=10),
                "end": T0 + timedelta(seconds=40),
                "seconds": 30.0,
                "cause": "capacity",
            }
        ]
        out = SharingOutput.from_store(st)
    assert out is not None and out.policy == policy
    assert out.metrics == {"gpu_util_online": 0.5, "evictions": 2}
    assert np.flatnonzero(out.slowdown_hist).tolist() == [100, 200]
    assert out.slowdown_hist[[100, 200]].tolist() == [3, 1]
    pd.testing.assert_frame_equal(out.timeseries, _old_series())
    # The side and colour its policy had when such stores were written.
    assert (out.paper_side, out.color) == (side, color)


def test_the_report_of_an_old_sharing_store_has_the_papers_numbers(tmp_path: Path) -> None:
    store = _old_layout_store(tmp_path / "old", "muxflow")
    with Store(store, read_only=True) as st:
        sec = run(st, sections=["gpu_sharing"])["gpu_sharing"]
    rows = {r["metric"]: r for r in sec.frame("sharing_metrics").to_dict("records")}
    # 0.5 of the online GPUs -> 50%, beside MuxFlow's "after" 76% (data/muxflow_model.toml).
    util = rows["GPU utilization of online GPUs (%)"]
    assert (util["value"], util["paper_value"]) == (50.0, 76.0)
    assert rows["evictions of offline work"]["value"] == 2.0


def test_the_published_numbers_are_the_ones_the_model_file_gives_the_simulator() -> None:
    from philly_analyze.sim.sharing.config import SharingConfig

    assert muxflow_published() == SharingConfig.load().paper.published()
    assert muxflow_published()["after"]["gpu_util"] == 0.76  # the paper's 76% [P]


# ---------------------------------------------------------------- writing and reading


def _settings(**kw: object) -> dict[str, object]:
    return {"policy": "philly", "params": {}, "seed": 0, "quotas": {}, **kw}


def _commit_files(path: Path, files: dict[str, object]) -> None:
    with Store(path) as st, st.batch() as b:
        for name, data in files.items():
            b.write_artifact(name, data)
        st.commit(b, [])


def test_every_declared_file_round_trips(tmp_path: Path) -> None:
    waiting = {"job_id": ["a"], "attempt_idx": [1], "start": [T0], "end": [T0], "seconds": [0.5], "cause": ["other"]}  # fmt: skip
    series = {c: [1] for c in schemas.SHARING_TIMESERIES.schema.names}
    sharing = {"policy": "x", "metrics": {"m": 1.5}, "slowdown_hist": {"bin": 0.001, "index": [], "count": []}, "paper_side": None, "color": None}  # fmt: skip
    files = {
        "replay": _settings(seed=3, quotas={"a": 2}),
        "vc_quotas": {"vc": ["a", "b"], "gpus": [2, 0]},
        "waiting": waiting,
        "sharing": sharing,
        "sharing_timeseries": series,
    }
    assert set(files) == set(schemas.ARTIFACTS)
    _commit_files(tmp_path / "s", files)
    with Store(tmp_path / "s", read_only=True) as st:
        assert st.read_artifact("replay") == _settings(seed=3, quotas={"a": 2})
        assert st.read_artifact("sharing") == sharing
        assert quotas_for_store(st) == {"a": 2, "b": 0}
        for name in ("waiting", "sharing_timeseries", "vc_quotas"):
            tbl, table = st.read_artifact(name), schemas.ARTIFACTS[name].table
            assert tbl is not None and table is not None  # tabular artefacts
            assert tbl.schema == schemas.ARTIFACTS[name].schema
            assert tbl.to_pydict() == schemas.conform(table, files[name]).to_pydict()
    assert (tmp_path / "s" / "vc_quotas.csv").read_text() == "vc,gpus\na,2\nb,0\n"


def test_a_file_that_does_not_match_its_declaration_is_refused(tmp_path: Path) -> None:
    with Store(tmp_path / "s") as st, st.batch() as b:
        with pytest.raises(ValueError, match="missing field 'seed'"):
            b.write_artifact("replay", {"policy": "p", "params": {}, "quotas": {}})
        with pytest.raises(ValueError, match="field 'seed' is bool, not integer"):
            b.write_artifact("replay", _settings(seed=True))
        with pytest.raises(ValueError, match="unknown columns"):
            b.write_artifact("vc_quotas", {"vc": ["a"], "gpus": [1], "extra": [0]})


def test_a_damaged_file_is_reported_with_its_name_and_line(tmp_path: Path) -> None:
    store = observed_store(tmp_path / "s")
    (store / "replay.json").write_text('{\n "policy": "p",\n}\n')
    (store / "vc_quotas.csv").write_text("vc,gpus\nv,8\nw,eight\n")
    (store / "sharing.json").write_text('{"policy": "p"}')
    with Store(store, read_only=True) as st:
        with pytest.raises(StoreError, match=r"replay\.json:3: not valid JSON"):
            st.read_artifact("replay")
        with pytest.raises(StoreError, match=r"vc_quotas\.csv:3: gpus 'eight' is not an integer"):
            quotas_for_store(st)
        with pytest.raises(StoreError, match="missing field 'metrics'"):
            st.read_artifact("sharing")
        assert st.read_artifact("waiting") is None  # absent: None, not an error


def test_a_failed_commit_puts_the_files_back(tmp_path: Path) -> None:
    path = tmp_path / "s"
    _commit_files(path, {"replay": _settings(seed=1)})
    assert _entries(path) == {"catalog.duckdb", "replay.json"}  # no table: no parquet/ yet

    def boom(*_: object, **__: object) -> None:
        raise RuntimeError("disk gone")

    with Store(path) as st:
        st._rebuild_views_sql = boom  # type: ignore[method-assign]  # a failing rebuild, injected
        with pytest.raises(RuntimeError, match="disk gone"), st.batch() as b:
            b.write("jobs", {"job_id": ["j"], "source": ["x"]})
            b.write_artifact("replay", _settings(seed=2))
            b.write_artifact("vc_quotas", {"vc": ["a"], "gpus": [1]})
            st.commit(b, [])
    # The earlier file as it was, the new one gone, nothing staged left behind.
    assert _entries(path) - {"parquet"} == {"catalog.duckdb", "replay.json"}
    with Store(path, read_only=True) as st:
        assert st.read_artifact("replay")["seed"] == 1
        assert st.scalar("SELECT count(*) FROM jobs") == 0
    assert not has_artifact(path, "vc_quotas") and has_artifact(path, "replay")
