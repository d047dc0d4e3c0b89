"""Table 6: jobs and GPU time by final status.

Jobs in scope with a known status, at least one attempt and a known GPU time count. Jobs that
never started (no attempt), jobs still running (no status) and jobs whose GPU time is unknown
(``jobs.gpu_time_s`` NULL: an attempt without a recorded end or GPU count) are counted in notes
but not in the table, so both columns cover the same jobs: the paper's Table 6 covers 96,260
of the trace's 117,325 jobs, and a job that never ran has no GPU time to share. GPU time is
``jobs.gpu_time_s``: the sum over the job's attempts of duration x GPUs, so the GPU time of
failed attempts that were retried counts toward the job's final status, as in the paper.
Percentages are of the counted jobs (GPU time).
"""

from __future__ import annotations

import pandas as pd

from philly_analyze.analysis import paper
from philly_analyze.analysis.common import STATUSES, Context, pct
from philly_analyze.analysis.result import ResultTable, Section


def compute(ctx: Context) -> Section:
    """Table 6 for the jobs in scope."""
    sec = Section("status", "Final job status (Table 6)")
    df = ctx.df(
        f"SELECT status, count(*) AS jobs, sum(gpu_time_s) AS gpu_s "
        f"FROM {ctx.jobs} WHERE num_attempts > 0 AND gpu_time_s IS NOT NULL GROUP BY status"
    )
    not_run, no_gpu_time, unknown = ctx.df(
        f"SELECT count(*) FILTER (WHERE status IS NOT NULL AND num_attempts = 0), "
        f"count(*) FILTER (WHERE status IS NOT NULL AND num_attempts > 0 "
        f"                 AND gpu_time_s IS NULL), "
        f"count(*) FILTER (WHERE status IS NULL) FROM {ctx.jobs}"
    ).iloc[0]
    if not_run:
        sec.notes.append(
            f"{int(not_run):,} jobs that never started are not counted "
            "(as in the paper's Table 6, which covers 96,260 of the trace's 117,325 jobs)"
        )
    if no_gpu_time:
        sec.notes.append(
            f"{int(no_gpu_time):,} jobs with a final status are not counted: their GPU time is "
            "unknown (an attempt without a recorded end, or without a GPU count)"
        )
    if unknown:
        sec.notes.append(
            f"{int(unknown):,} jobs without a final status (still running, or the source "
            "records none) left out"
        )
    known = df[df["status"].isin(STATUSES)].set_index("status")
    if known.empty:
        sec.notes.append("no job in scope has both a final status and a known GPU time")
        return sec
    total_jobs = float(known["jobs"].sum())
    total_gpu = float(known["gpu_s"].sum())
    rows = []
    for s in (*STATUSES, "total"):
        jobs = total_jobs if s == "total" else float(known["jobs"].get(s, 0))
        gpu = total_gpu if s == "total" else float(known["gpu_s"].get(s, 0.0))
        rows.append(
            {
                "status": s,
                "jobs": int(jobs),
                "paper_jobs": paper.lookup("table6", "status", s, "jobs"),
                "jobs_pct": pct(jobs, total_jobs),
                "paper_jobs_pct": paper.lookup("table6", "status", s, "jobs_pct"),
                "gpu_hours": gpu / 3600.0,
                "gpu_time_pct": pct(gpu, total_gpu),
                "paper_gpu_time_pct": paper.lookup("table6", "status", s, "gpu_time_pct"),
            }
        )
    sec.tables.append(
        ResultTable(
            "table6",
            "Jobs and GPU time by final status",
            pd.DataFrame(rows),
            paper="Table 6",
            description="GPU time = sum over attempts of duration x GPUs (hours).",
        )
    )
    return sec
