"""The jobs and attempts views read the rows directly when there is nothing to merge
(``store._nothing_to_merge``): the same rows as the general merge, checked with EXCEPT ALL
both ways on hand-made stores, and the general merge kept whenever a job is listed twice or
attempts come from two sources or batches."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pyarrow as pa

from philly_analyze import schemas
from philly_analyze.store import Store, _canonical_views, _ranked_sql, _union_sql

T0 = dt.datetime(2017, 10, 1, tzinfo=dt.UTC)


def _ts(*hours: float | None) -> pa.Array:
    return pa.array(
        [None if h is None else T0 + dt.timedelta(hours=h) for h in hours],
        pa.timestamp("us", tz="UTC"),
    )


def _jobs(ids: list[str], status: list[str | None], source: str, **extra: list) -> dict:
    n = len(ids)
    return {
        "job_id": ids,
        "vc": extra.get("vc", ["vcA"] * n),
        "user_id": extra.get("user_id", [None] + ["bob"] * (n - 1)),
        "status": status,
        "submit_time": _ts(*range(n)),
        "num_gpus": pa.array(extra.get("num_gpus", [1] * n), pa.int32()),
        "flags": pa.array(extra.get("flags", [None] * n), pa.list_(pa.string())),
        "source": [source] * n,
    }


def _attempts(rows: list[tuple], source: str | list[str]) -> dict:
    """rows: (job, idx, start h, end h, gpus, outcome)."""
    n = len(rows)
    return {
        "job_id": [r[0] for r in rows],
        "attempt_idx": pa.array([r[1] for r in rows], pa.int32()),
        "start_time": _ts(*(r[2] for r in rows)),
        "end_time": _ts(*(r[3] for r in rows)),
        "num_gpus": pa.array([r[4] for r in rows], pa.int32()),
        "duration_s": [
            None if r[3] is None or r[2] is None else (r[3] - r[2]) * 3600.0 for r in rows
        ],
        "outcome": [r[5] for r in rows],
        "source": source if isinstance(source, list) else [source] * n,
    }


def _commit(s: Store, fmt: str, **tables: dict) -> None:
    with s.batch() as b:
        for name, data in tables.items():
            b.write(name, data)
        s.commit(b, [{"source": f"{fmt}-src", "format": fmt}], source_format=fmt)


def _bodies(s: Store) -> tuple[dict[str, str], dict[str, str]]:
    """The general views' bodies and the unmerged ones, whether or not the store qualifies."""
    files = s._files_by_table()
    ranks = s.batch_ranks()
    ranked = {t: _ranked_sql(schemas.TABLES[t], files[t], ranks) for t in ranked_tables()}
    unmerged = {
        "jobs": _union_sql(schemas.JOBS, files["jobs"]),
        "attempts": _union_sql(schemas.ATTEMPTS, files["attempts"]),
    }
    return _canonical_views(ranked), _canonical_views(ranked, unmerged=unmerged)


def ranked_tables() -> tuple[str, ...]:
    return ("machines", "jobs", "attempts", "placements")


def _differ(s: Store, a: str, b: str) -> int:
    """Rows in one and not the other, counting duplicates (EXCEPT ALL both ways)."""
    q = f"SELECT count(*) FROM (({a}) EXCEPT ALL ({b}) UNION ALL (({b}) EXCEPT ALL ({a})))"
    return int(s.scalar(q))


def _same_rows(s: Store) -> None:
    general, fast = _bodies(s)
    for t in ("jobs", "attempts"):
        assert _differ(s, general[t], fast[t]) == 0, t
        # What the store's own views hold (the unmerged bodies when it qualifies).
        assert _differ(s, general[t], f"SELECT * FROM {t}") == 0, t


# Job 1 passed after a failed attempt; job 2 is running (no end, no final status); job 3
# was killed with its last attempt's end unknown; job 4 has no attempt; an attempt of a job
# the jobs table does not list (x9) is kept in the attempts view.
JOBS = _jobs(
    ["j1", "j2", "j3", "j4"],
    ["passed", None, "killed", "passed"],
    "philly_job_log",
    flags=[None, ["attempts_unknown"], [], None],
    num_gpus=[2, 1, 8, 4],
)
ATTEMPTS = [
    ("j1", 0, 0.5, 1.0, 2, "failed"),
    ("j1", 1, 1.5, 3.0, 4, "passed"),
    ("j2", 0, 2.0, None, 1, None),
    ("j3", 0, None, None, 8, "failed"),
    ("j3", 1, 3.0, None, 8, "killed"),
    ("x9", 0, 1.0, 2.0, 1, "passed"),
]


def test_one_ingest_reads_rows_directly_with_the_merged_rows(store_dir: Path) -> None:
    with Store(store_dir) as s:
        _commit(s, "philly_job_log", jobs=JOBS, attempts=_attempts(ATTEMPTS, "philly_job_log"))
        assert s._nothing_to_merge(s._files_by_table()) is not None
        # The store's views are the direct ones (no pick of a status among sources).
        sql = s.scalar("SELECT sql FROM duckdb_views() WHERE view_name = 'attempts'")
        assert "arg_min(status" not in sql
        _same_rows(s)
        # The timings worked out by hand (docs/analyses.md): j2's only attempt may still run,
        # j3's first has no start, its last no end although the job was killed.
        got = s.df("SELECT job_id, attempt_idx, timing FROM attempts ORDER BY 1, 2").values.tolist()
        assert got == [
            ["j1", 0, "ended"],
            ["j1", 1, "ended"],
            ["j2", 0, "running"],
            ["j3", 0, "start_unknown"],
            ["j3", 1, "end_unknown"],
            ["x9", 0, "ended"],
        ]
        # num_gpus of a job: its first attempt's; j4 (no attempt) keeps its own.
        got = s.df("SELECT job_id, num_gpus, num_attempts FROM jobs ORDER BY 1").values.tolist()
        assert got == [["j1", 2, 2], ["j2", 1, 1], ["j3", 8, 2], ["j4", 4, 0]]


def test_disjoint_jobs_in_two_batches_read_directly(store_dir: Path) -> None:
    with Store(store_dir) as s:
        _commit(s, "philly_job_log", jobs=JOBS, attempts=_attempts(ATTEMPTS, "philly_job_log"))
        _commit(s, "pollux_csv", jobs=_jobs(["k1", "k2"], ["passed", None], "pollux_csv"))
        assert s._nothing_to_merge(s._files_by_table()) is not None
        _same_rows(s)


def test_a_job_listed_again_is_merged(store_dir: Path) -> None:
    """A later batch lists j1 again with another status and other attempts (a conflict the
    merge resolves: the trace's job log is preferred over YARN, attempts come from one
    source): the direct read would give j1 twice and both sets of attempts."""
    with Store(store_dir) as s:
        _commit(s, "philly_job_log", jobs=JOBS, attempts=_attempts(ATTEMPTS, "philly_job_log"))
        yarn = _jobs(["j1"], ["killed"], "yarn_rm_log", vc=["queueB"])
        _commit(s, "yarn_rm_log", jobs=yarn, attempts=_attempts([ATTEMPTS[0]], "yarn_rm_log"))
        assert s._nothing_to_merge(s._files_by_table()) is None
        sql = s.scalar("SELECT sql FROM duckdb_views() WHERE view_name = 'attempts'")
        assert "arg_min(status" in sql  # the general merge
        general, fast = _bodies(s)
        assert _differ(s, general["jobs"], fast["jobs"]) > 0
        assert _differ(s, general["attempts"], fast["attempts"]) > 0
        assert _differ(s, general["jobs"], "SELECT * FROM jobs") == 0
        assert _differ(s, general["attempts"], "SELECT * FROM attempts") == 0
        got = s.df("SELECT job_id, vc, status FROM jobs WHERE job_id = 'j1'").values.tolist()
        assert got == [["j1", "vcA", "passed"]]


def test_attempts_of_two_sources_in_one_batch_are_merged(store_dir: Path) -> None:
    with Store(store_dir) as s:
        sources = ["philly_job_log"] * len(ATTEMPTS) + ["yarn_rm_log"]
        rows = [*ATTEMPTS, ("j1", 0, 0.25, 0.75, 2, "failed")]
        _commit(s, "philly_job_log", jobs=JOBS, attempts=_attempts(rows, sources))
        assert s._nothing_to_merge(s._files_by_table()) is None
        general, fast = _bodies(s)
        assert _differ(s, general["attempts"], fast["attempts"]) > 0
        assert _differ(s, general["attempts"], "SELECT * FROM attempts") == 0


def test_a_job_listed_twice_in_one_batch_is_merged(store_dir: Path) -> None:
    with Store(store_dir) as s:
        twice = _jobs(["j1", "j1"], ["passed", None], "philly_job_log", vc=["vcA", None])
        _commit(s, "philly_job_log", jobs=twice)
        assert s._nothing_to_merge(s._files_by_table()) is None
        assert s.df("SELECT job_id, vc, status FROM jobs").values.tolist() == [
            ["j1", "vcA", "passed"]
        ]


def test_attempts_in_two_batches_are_merged(store_dir: Path) -> None:
    with Store(store_dir) as s:
        _commit(s, "philly_job_log", jobs=JOBS, attempts=_attempts(ATTEMPTS[:2], "philly_job_log"))
        _commit(s, "philly_job_log", attempts=_attempts(ATTEMPTS[2:], "philly_job_log"))
        assert s._nothing_to_merge(s._files_by_table()) is None
        general, _ = _bodies(s)
        assert _differ(s, general["attempts"], "SELECT * FROM attempts") == 0
