"""How the store's views merge several sources (schemas.SOURCE_PRIORITY)."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import duckdb
import pyarrow as pa

from philly_analyze.store import Store

T0 = dt.datetime(2017, 10, 1, tzinfo=dt.UTC)


def _cpu(machines: list[str], util: float) -> dict:
    return {
        "time": pa.array([T0] * len(machines), pa.timestamp("us", tz="UTC")),
        "machine_id": machines,
        "util": [util] * len(machines),
    }


def _write(store: Store, fmt: str, table: str, data: dict) -> None:
    with store.batch() as b:
        b.write(table, data)
        store.commit(b, [{"source": f"{fmt}-src", "format": fmt}], source_format=fmt)


def test_time_series_take_each_machine_from_its_preferred_source(store_dir: Path) -> None:
    with Store(store_dir) as s:
        _write(s, "ganglia_csv", "cpu_util", _cpu(["m1", "m3"], 10.0))
        _write(s, "philly_cpu_util", "cpu_util", _cpu(["m1", "m2"], 20.0))
        got = s.df("SELECT machine_id, util FROM cpu_util ORDER BY 1").values.tolist()
    # m1 is in both: the published trace wins; m3 only Ganglia has; m2 only the trace.
    assert got == [["m1", 20.0], ["m2", 20.0], ["m3", 10.0]]


def test_wide_gpu_util_merges_with_long_rows_of_other_sources(store_dir: Path) -> None:
    """Files of gpu_util_wide are gpu_util rows: unpivoted, ranked by source like long files,
    and counted as the long rows they hold."""
    wide = {
        "time": pa.array([T0, T0], pa.timestamp("us", tz="UTC")),
        "machine_id": ["m1", "m2"],
        "gpu0_util": [20.0, 21.0],
        "gpu1_util": [None, 22.0],
    }
    long = {
        "time": pa.array([T0] * 3, pa.timestamp("us", tz="UTC")),
        "machine_id": ["m1", "m3", "m3"],
        "gpu_idx": pa.array([0, 0, 1], pa.int16()),
        "util": [10.0, 11.0, 12.0],
    }
    with Store(store_dir) as s:
        _write(s, "ganglia_csv", "gpu_util", long)
        _write(s, "philly_gpu_util", "gpu_util_wide", wide)
        got = s.df("SELECT machine_id, gpu_idx, util FROM gpu_util ORDER BY 1, 2").values.tolist()
        # Before merging: 3 long rows + 3 values in the wide rows; after: m1 from the trace only.
        assert s.row_counts()["gpu_util"] == 6
        assert s.merged_row_counts()["gpu_util"] == 5
    assert got == [
        ["m1", 0, 20.0],
        ["m2", 0, 21.0],
        ["m2", 1, 22.0],
        ["m3", 0, 11.0],
        ["m3", 1, 12.0],
    ]


def test_jobs_merge_column_by_column_and_attempts_come_from_one_source(store_dir: Path) -> None:
    with Store(store_dir) as s:
        _write(
            s,
            "yarn_rm_log",
            "jobs",
            {
                "job_id": ["j1"],
                "vc": ["queueA"],
                "user_id": ["alice"],
                "status": [None],
                "source": ["yarn_rm_log"],
            },
        )
        _write(
            s,
            "philly_job_log",
            "jobs",
            {
                "job_id": ["j1"],
                "vc": ["vcA"],
                "user_id": [None],
                "status": ["passed"],
                "source": ["philly_job_log"],
            },
        )
        row = s.df("SELECT vc, user_id, status, source FROM jobs").values.tolist()
    # vc and status from the trace (preferred), user from YARN (the trace has none).
    assert row == [["vcA", "alice", "passed", "philly_job_log,yarn_rm_log"]]


def test_merged_row_counts_are_what_the_views_hold(store_dir: Path) -> None:
    with Store(store_dir) as s:
        _write(s, "ganglia_csv", "cpu_util", _cpu(["m1", "m3"], 10.0))
        _write(s, "philly_cpu_util", "cpu_util", _cpu(["m1", "m2"], 20.0))
        # Four rows read from two sources; m1 is in both, so the analyses see three.
        assert s.row_counts()["cpu_util"] == 4
        assert s.merged_row_counts()["cpu_util"] == 3


def _old_views(store_dir: Path) -> None:
    """What an older philly-analyze might have left: other view SQL, another views version."""
    with Store(store_dir) as s:
        _write(s, "philly_cpu_util", "cpu_util", _cpu(["m1", "m2"], 20.0))
        s.con.execute(
            "CREATE OR REPLACE VIEW cpu_util AS SELECT * FROM internal.cpu_util_all LIMIT 0"
        )
        s.con.execute("UPDATE internal._meta SET value = 'old' WHERE key = 'views'")


def _plain_count(store_dir: Path) -> list[tuple]:
    con = duckdb.connect(str(store_dir / "catalog.duckdb"), read_only=True)
    try:
        return con.execute("SELECT count(*) FROM cpu_util").fetchall()
    finally:
        con.close()


def test_views_made_by_another_version_are_rebuilt_on_open(store_dir: Path) -> None:
    """A store keeps working across upgrades that change the views' SQL: even a read-only
    open (report, info) rebuilds them in the catalog, so plain DuckDB sees them too."""
    _old_views(store_dir)
    assert _plain_count(store_dir) == [(0,)]
    with Store(store_dir, read_only=True) as s:
        assert s.scalar("SELECT count(*) FROM cpu_util") == 2
        assert s.repaired == (
            "the views were made by another philly-analyze version (views old): "
            "views rebuilt in the catalog"
        )
    assert _plain_count(store_dir) == [(2,)]
    with Store(store_dir, read_only=True) as s:  # nothing left to repair
        assert s.repaired is None


def test_views_are_rebuilt_for_the_session_when_the_catalog_is_busy(store_dir: Path) -> None:
    """When the catalog cannot be written (here: another connection holds it read-only), the
    views are rebuilt as temporary views and the catalog is left as it was."""
    _old_views(store_dir)
    other = duckdb.connect(str(store_dir / "catalog.duckdb"), read_only=True)
    try:
        with Store(store_dir, read_only=True) as s:
            assert s.scalar("SELECT count(*) FROM cpu_util") == 2
            assert s.repaired is not None and "for this session only" in s.repaired
        assert other.execute("SELECT count(*) FROM cpu_util").fetchall() == [(0,)]
    finally:
        other.close()
