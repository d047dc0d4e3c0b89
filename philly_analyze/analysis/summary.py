"""Summary: what the report is computed from (counts, time span, cluster size, sources)."""

from __future__ import annotations

import pandas as pd
from pandas.api.typing import NaTType

from philly_analyze.analysis.common import Context
from philly_analyze.analysis.result import ResultTable, Section
from philly_analyze.schemas import RUN_LIST_SOURCES
from philly_analyze.store_notes import store_notes


def compute(ctx: Context) -> Section:
    """Rows of (metric, value): jobs, attempts, users, VCs, machines, GPUs, span, sources.
    A value the store cannot give (users of jobs from a list without users, GPUs of hosts
    whose GPU count is unknown, times of jobs without times) is absent, with a note."""
    sec = Section("summary", "Summary")
    j = ctx.df(
        f"""SELECT count(*) AS jobs, count(*) FILTER (WHERE num_attempts > 0) AS jobs_run,
                   count(DISTINCT vc) AS vcs, count(DISTINCT user_id) AS users,
                   min(submit_time) AS first_submit, max(last_end) AS last_end,
                   sum(gpu_time_s) FILTER (WHERE num_attempts > 0) / 3600.0 AS gpu_hours,
                   count(*) FILTER (WHERE num_attempts > 0 AND gpu_time_s IS NULL)
                       AS gpu_time_unknown,
                   string_agg(DISTINCT source, ',' ORDER BY source) AS sources
            FROM {ctx.jobs}"""
    ).iloc[0]
    a = _attempts(ctx)
    jobs = int(j["jobs"])
    last_end = j["last_end"] if pd.notna(j["last_end"]) else a["last_end"]
    counts: list[tuple[str, object]] = [
        ("jobs", jobs),
        ("jobs that ran", int(j["jobs_run"])),
        ("attempts", _recorded(sec, int(a["attempts"]), int(a["run_list_jobs"]))),
        ("virtual clusters", _known(sec, jobs, int(j["vcs"]), "virtual clusters")),
        ("users", _known(sec, jobs, int(j["users"]), "users")),
    ]
    if not ctx.has("jobs"):  # e.g. framework logs only: the jobs are not known, not 0
        counts = [(k, None) for k, _ in counts]
        sec.notes.append(
            "jobs, attempts, virtual clusters, users: unknown (no scheduler data: ingest a "
            "job log, YARN logs or a job list)"
        )
    rows: list[tuple[str, object]] = [
        ("scope", ctx.scope.describe()),
        *counts,
        *_machines(ctx, sec),
        ("first submit", _time(j["first_submit"])),
        ("last end", _time(last_end)),
        # Absent, not 0, when no job that ran has a known GPU time.
        ("GPU hours used", None if pd.isna(j["gpu_hours"]) else float(j["gpu_hours"])),
        ("job sources", _sources(j["sources"])),
    ]
    if pd.notna(j["first_submit"]) and pd.notna(j["last_end"]):
        rows.append(("span (days)", (j["last_end"] - j["first_submit"]).total_seconds() / 86400))
    for table, n in sorted(ctx.store.merged_row_counts().items()):
        if n and table not in ("jobs", "attempts", "machines"):
            rows.append((f"rows in store: {table}", int(n)))
    frame = pd.DataFrame(rows, columns=["metric", "value"])
    frame["value"] = frame["value"].astype(object)
    sec.tables.append(ResultTable("summary", "What the report is computed from", frame))
    if jobs == 0 and ctx.has("jobs"):
        sec.notes.append("no jobs in scope")
    # Sources that disagree and machines the list does not name (as ingest printed them).
    sec.notes += store_notes(ctx.store)
    if int(j["gpu_time_unknown"]):
        sec.notes.append(
            f"GPU hours leave out {int(j['gpu_time_unknown']):,} jobs whose GPU time is unknown "
            "(an attempt still running, without a recorded end, or without a GPU count)"
        )
    return sec


def _attempts(ctx: Context) -> pd.Series:
    """Attempts recorded, jobs from job lists, the last end and first start. Attempts of jobs
    from job lists (one run per job, or replayed from one: its flag) are not recorded: counted
    apart, as Figure 9 leaves their retries out."""
    run_lists = ", ".join(f"'{s}'" for s in RUN_LIST_SOURCES)
    return ctx.df(
        f"""SELECT count(*) FILTER (WHERE NOT run_list) AS attempts,
                   count(DISTINCT job_id) FILTER (WHERE run_list) AS run_list_jobs,
                   max(end_time) AS last_end, min(start_time) AS first_start
            FROM (SELECT a.*, a.source IN ({run_lists})
                          OR list_contains(coalesce(j.flags, []), 'attempts_unknown') AS run_list
                  FROM {ctx.attempts} a LEFT JOIN {ctx.jobs} j USING (job_id))"""
    ).iloc[0]


def _recorded(sec: Section, recorded: int, run_list_jobs: int) -> int | None:
    """Attempts recorded; None (with a note) when every job that ran comes from a job list."""
    if not run_list_jobs:
        return recorded
    if not recorded:
        sec.notes.append(
            "attempts: unknown (the jobs come from job lists, which record one run per job, "
            "not its attempts)"
        )
        return None
    sec.notes.append(
        f"attempts leave out the {run_list_jobs:,} jobs from job lists (one run per job: their "
        "attempts are not recorded)"
    )
    return recorded


def _known(sec: Section, jobs: int, n: int, what: str) -> int | None:
    """A count of distinct values over the jobs: None (with a note) when there are jobs but
    none of them has a value: the sources do not say."""
    if jobs and not n:
        sec.notes.append(f"{what}: unknown (no job in scope records one)")
        return None
    return n


def _time(t: pd.Timestamp | NaTType | None) -> pd.Timestamp | None:
    return None if pd.isna(t) else t


def _machines(ctx: Context, sec: Section) -> list[tuple[str, object]]:
    """machines, GPUs and machine shapes; absent when the store knows no machine."""
    m = ctx.df(
        "SELECT count(*) AS machines, sum(num_gpus) AS gpus, "
        "count(*) FILTER (WHERE num_gpus IS NULL) AS unknown FROM machines"
    ).iloc[0]
    n, unknown = int(m["machines"]), int(m["unknown"])
    if n == 0:
        sec.notes.append("machines and GPUs: unknown (no machine list, placements or utilization)")
        return [("machines", None), ("GPUs", None)]
    if unknown:
        sec.notes.append(f"GPUs leave out {unknown:,} machines whose GPU count is unknown")
    shapes = ctx.df(
        "SELECT num_gpus, count(*) AS n FROM machines GROUP BY num_gpus ORDER BY num_gpus"
    )
    return [
        ("machines", n),
        ("GPUs", None if unknown == n else int(m["gpus"])),
        (
            "machine shapes",
            ", ".join(
                f"{int(n)} x {'?' if pd.isna(g) else int(g)} GPUs"
                for n, g in zip(shapes["n"].tolist(), shapes["num_gpus"].tolist(), strict=True)
            ),
        ),
    ]


def _sources(joined: object) -> str | None:
    """The job sources as a readable list: a job known to two sources has the value
    ``philly_job_log,yarn_rm_log``, so the distinct values are split, deduplicated and sorted
    (``philly_job_log, yarn_rm_log``)."""
    if joined is None or (isinstance(joined, float) and pd.isna(joined)):
        return None
    return ", ".join(sorted({s.strip() for s in str(joined).split(",") if s.strip()}))
