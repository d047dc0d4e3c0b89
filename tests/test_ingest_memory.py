"""Ingest's memory limit (ingest/memory.py): one setting, work split to fit, one line beyond it.

Before, the limit was a fixed 400 MB in two modules, Ganglia was resampled in one query, and
running out of memory was a DuckDB ``OutOfMemoryException`` traceback (it is not a
``MemoryError``, which the CLI caught). Measured on the code before this change, with its
fixed limit set to 8 MB or 10 MB: the export of ``_long_host`` ran out of memory (it needed
12 MB; a 3,000-minute version of it ran at 8 MB); here it finishes at 8 MB.
"""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import duckdb
import pandas as pd
import pytest
from click.testing import CliRunner, Result

from philly_analyze.cli import main
from philly_analyze.ingest import memory
from philly_analyze.ingest.ganglia_route import Part, budget_rows, plan
from philly_analyze.store import Store

T0 = dt.datetime(2017, 10, 3, 0, 1, tzinfo=dt.UTC)
MB = 1_000_000


def ingest(store: Path, *args: str | Path, env: dict[str, str] | None = None) -> Result:
    return CliRunner().invoke(
        main, ["ingest", *map(str, args), "--store", str(store), "--format", "json"], env=env
    )


def _stamp(i: int) -> str:
    return (T0 + dt.timedelta(minutes=i)).strftime("%Y-%m-%dT%H:%M:%S+00:00")


def _csv(path: Path, metric: str, rows: list[tuple[int, float]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"Timestamp,{metric}\n" + "".join(f"{_stamp(i)},{v}\n" for i, v in rows))


N = 30_000


def _long_host(root: Path) -> Path:
    """Host ``big``: cpu_idle and mem_free every minute for N minutes (rows stamped at the end
    of their 60 s step: row i is minute i - 1 after T0, i.e. minute i from 00:00), mem_total
    only in the first two minutes; a second export of its cpu_idle disagreeing on three
    minutes near the end; host ``small``: 500 minutes of GPU 0."""
    d = root / "export"
    _csv(d / "big" / "cpu_idle.csv", "cpu_idle", [(i, i % 97) for i in range(N)])
    _csv(d / "big" / "mem_free.csv", "mem_free", [(i, 1000 + i % 13) for i in range(N)])
    _csv(d / "big" / "mem_total.csv", "mem_total", [(0, 64000), (1, 64000)])
    _csv(d / "again" / "big" / "cpu_idle.csv", "cpu_idle", [(i, 500) for i in range(N - 10, N - 7)])
    _csv(d / "small" / "gpu0_util.csv", "gpu0_util", [(i, 50) for i in range(500)])
    return d


def _tables(store: Path) -> dict[str, pd.DataFrame]:
    with Store(store, read_only=True) as s:
        return {
            t: s.df(f"SELECT * FROM {t} ORDER BY ALL")
            for t in ("gpu_util", "cpu_util", "mem_util", "host_metrics", "rejects")
        }


def test_a_small_limit_finishes_in_parts_with_the_rows_of_one_pass(tmp_path: Path) -> None:
    export = _long_host(tmp_path)
    small, large = tmp_path / "small", tmp_path / "large"
    # The six conflicting samples below are made on purpose: accepted (--max-rejects 6).
    r = ingest(small, export, "--memory-limit", "8MB", "--max-rejects", "6")
    assert r.exit_code == 0, r.output
    r2 = ingest(large, export, "--memory-limit", "2GB", "--max-rejects", "6")
    assert r2.exit_code == 0, r2.output
    a, b = _tables(small), _tables(large)
    for t in a:
        pd.testing.assert_frame_equal(a[t], b[t], obj=t)
    # The rule, by hand: cpu_util = 100 - cpu_idle of each minute but the three in conflict
    # (six samples in rejects); mem_util has the first minutes' mem_total in every minute,
    # also in the host's later parts of time.
    cpu = a["cpu_util"]
    assert len(cpu) == N - 3
    minutes = ((cpu.time - pd.Timestamp(T0)) // pd.Timedelta(minutes=1)).to_numpy() + 1
    assert set(range(N)) - set(minutes) == {N - 10, N - 9, N - 8}
    assert (cpu.util.to_numpy() == 100 - minutes % 97).all()
    assert len(a["rejects"]) == 6 and json.loads(r.stdout)["rejected"] == 6
    mem = a["mem_util"]
    assert len(mem) == N and (mem.mem_total == 64000).all()
    assert len(a["host_metrics"]) == N - 3 and len(a["gpu_util"]) == 500
    # 8 MB: parts of budget_rows(8 MB) = 6,666 per-minute rows; host big alone estimates
    # 60,005 (two 30,000-minute series, 2 + 3 more samples): ten ranges of its minutes.
    assert budget_rows(8 * MB) == 6_666


def test_plan_groups_hosts_and_cuts_a_long_one_in_time() -> None:
    con = duckdb.connect()
    m = 60_000_000
    # a: 10 one-minute samples; b: 10; c: 25 (minutes 100..124); d: one 5-minute sample.
    rows = [("a", i * m, (i + 1) * m) for i in range(10)]
    rows += [("b", i * m, (i + 1) * m) for i in range(10)]
    rows += [("c", i * m, (i + 1) * m) for i in range(100, 125)]
    rows += [("d", 0, 5 * m)]
    con.execute("CREATE TABLE s (machine_id VARCHAR, t0 BIGINT, t1 BIGINT)")
    con.executemany("INSERT INTO s VALUES (?, ?, ?)", rows)
    parts = plan(con, "s", 20)
    # a and b fill a part of 20; c (25 > 20) is cut into 2 ranges of 13 minutes; d alone.
    assert parts == [
        Part(["a", "b"]),
        Part(["c"], (100, 113)),
        Part(["c"], (113, 125)),
        Part(["d"]),
    ]


def test_out_of_memory_is_one_line_naming_the_file_and_the_setting(
    tmp_path: Path, store_dir: Path
) -> None:
    _csv(tmp_path / "m5" / "gpu0_util.csv", "gpu0_util", [(0, 10), (1, 20)])
    r = ingest(store_dir, tmp_path / "m5", "--memory-limit", "2MB")
    assert r.exit_code == 1
    assert isinstance(r.exception, SystemExit) and "Traceback" not in r.output
    errors = [ln for ln in r.stderr.splitlines() if ln.startswith("error:")]
    assert len(errors) == 1
    assert errors[0].startswith(
        f"error: {tmp_path / 'm5' / 'gpu0_util.csv'}: out of memory resampling Ganglia samples ("
    )
    assert "limit 2 MB): raise --memory-limit or PHILLY_MEMORY_LIMIT" in errors[0]
    assert not store_dir.exists()  # a failed first ingest leaves no store


def test_the_environment_variable_sets_it_and_the_option_wins(
    tmp_path: Path, store_dir: Path
) -> None:
    _csv(tmp_path / "m5" / "gpu0_util.csv", "gpu0_util", [(0, 10), (1, 20)])
    r = ingest(store_dir, tmp_path / "m5", env={"PHILLY_MEMORY_LIMIT": "2MB"})
    assert r.exit_code == 1 and "limit 2 MB)" in r.stderr
    r = ingest(store_dir, tmp_path / "m5", "--memory-limit", "1GB", env={memory.ENV: "2MB"})
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["rows_added"]["gpu_util"] == 2


@pytest.mark.parametrize(
    ("option", "env", "message"),
    [
        ("lots", None, "--memory-limit 'lots': expected a size such as 500MB"),
        ("10KB", None, "--memory-limit '10KB': at least 1 MB"),
        (None, "-5GB", "PHILLY_MEMORY_LIMIT '-5GB': expected a size"),
    ],
)
def test_bad_values_are_usage_errors(
    tmp_path: Path, store_dir: Path, option: str | None, env: str | None, message: str
) -> None:
    args = ["--memory-limit", option] if option else []
    r = ingest(store_dir, tmp_path, *args, env={memory.ENV: env} if env else None)
    assert r.exit_code == 2
    assert message in r.stderr
    assert not store_dir.exists()


def test_sizes() -> None:
    assert memory.parse_size("500MB") == 500 * MB
    assert memory.parse_size("1.5GB") == 1_500 * MB
    assert memory.parse_size("2g") == 2_000 * MB
    assert memory.parse_size("512MiB") == 512 * 2**20
    assert memory.parse_size("3000000") == 3 * MB
    for bad in ("", "GB", "1.2.3GB", "5 parsecs", "0.5MB"):
        with pytest.raises(ValueError):
            memory.parse_size(bad)


@pytest.mark.parametrize(
    ("machine", "limit"),
    [
        (None, 256 * MB),  # unknown: the lower bound
        (512 * MB, 256 * MB),  # a quarter is 128 MB: raised to the lower bound
        (4_000 * MB, 1_000 * MB),  # a quarter
        (64_000 * MB, 2_000 * MB),  # a quarter is 16 GB: capped
    ],
)
def test_default_is_a_quarter_of_the_machine_within_bounds(
    monkeypatch: pytest.MonkeyPatch, machine: int | None, limit: int
) -> None:
    monkeypatch.setattr(memory, "machine_memory", lambda: machine)
    monkeypatch.delenv(memory.ENV, raising=False)
    assert memory.default_limit() == limit
    assert memory.resolve(None) == (limit, "default")


def test_out_of_memory_anywhere_else_is_one_line_too(
    tmp_path: Path, store_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Where no verb names the source (here: counting the store's rows after the ingest),
    DuckDB's OutOfMemoryException still ends the command with one line, not a traceback."""

    def fail(self: Store) -> dict[str, int]:
        raise duckdb.OutOfMemoryException("Out of Memory Error: could not allocate (test)")

    monkeypatch.setattr(Store, "merged_row_counts", fail)
    _csv(tmp_path / "m5" / "gpu0_util.csv", "gpu0_util", [(0, 10), (1, 20)])
    r = ingest(store_dir, tmp_path / "m5")
    assert r.exit_code == 1
    assert isinstance(r.exception, SystemExit)
    assert r.stderr.splitlines()[-1] == (
        "error: out of memory in DuckDB (Out of Memory Error: could not allocate (test)): for "
        "ingest, raise --memory-limit or PHILLY_MEMORY_LIMIT; else try a smaller input or fewer "
        "at once"
    )
