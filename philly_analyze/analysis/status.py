"""Table 6: jobs and GPU time by final status.

Jobs in scope with a known status that ran to an end count: at least one attempt, and the last
attempt ended. Jobs that never started (no attempt) or were still running are listed in a note
but not counted: the paper's Table 6 covers 96,260 of the trace's 117,325 jobs, and a job that
never ran has no GPU time to share. GPU time is ``jobs.gpu_time_s``: the sum over the job's
attempts of duration x GPUs, so the GPU time of failed attempts that were retried counts toward
the job's final status, as in the paper. Percentages are of the counted jobs (GPU time).
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
        f"SELECT status, count(*) AS jobs, coalesce(sum(gpu_time_s), 0) AS gpu_s "
        f"FROM {ctx.jobs} WHERE num_attempts > 0 AND last_end IS NOT NULL GROUP BY status"
    )
    not_run = ctx.scalar(
        f"SELECT count(*) FROM {ctx.jobs} WHERE status IS NOT NULL "
        f"AND (num_attempts = 0 OR last_end IS NULL)"
    )
    if not_run:
        sec.notes.append(
            f"{int(not_run):,} jobs that never started or had not ended are not counted "
            "(as in the paper's Table 6, which covers 96,260 of the trace's 117,325 jobs)"
        )
    unknown = int(df.loc[df["status"].isna(), "jobs"].sum())
    known = df[df["status"].isin(STATUSES)].set_index("status")
    if known.empty:
        sec.notes.append("no jobs with a final status in scope (needs the jobs table)")
        return sec
    if unknown:
        sec.notes.append(f"{unknown:,} jobs without a final status (still running) left out")
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
