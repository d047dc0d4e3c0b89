"""Figure 9: retries and the unsuccessful rate by GPU demand.

A job's retries are its attempts after the first (``num_attempts - 1``); jobs that never ran
are left out. The unsuccessful rate is the share of those jobs whose final status is
``unsuccessful`` (among jobs with a known status). The bucket is the job's GPU demand
(``jobs.num_gpus``, from its first attempt).
"""

from __future__ import annotations

from philly_analyze.analysis import paper
from philly_analyze.analysis.common import BUCKET_LABELS, Context, gpu_bucket_sql
from philly_analyze.analysis.result import ResultTable, Section

#: Bucket label in our tables -> label in the paper's Figure 9 data.
_PAPER_BUCKET = {"1": "1", "2-4": "2-4", "5-8": "5-8", ">8": "gt8", "all": "all"}


def compute(ctx: Context) -> Section:
    """Average retries and unsuccessful rate per GPU bucket and overall."""
    sec = Section("retries", "Retries and unsuccessful jobs by GPU demand (Figure 9)")
    df = ctx.df(
        f"""SELECT coalesce({gpu_bucket_sql("num_gpus")}, 'unknown') AS gpu_bucket,
                   count(*) AS jobs,
                   avg(num_attempts - 1) AS avg_retries,
                   avg(CASE WHEN status = 'unsuccessful' THEN 1.0 ELSE 0.0 END)
                       FILTER (WHERE status IS NOT NULL) AS unsuccessful_rate,
                   sum(num_attempts - 1)::BIGINT AS retries
            FROM {ctx.jobs} WHERE num_attempts >= 1
            GROUP BY GROUPING SETS ((gpu_bucket), ())
            ORDER BY gpu_bucket"""
    )
    if df.empty or df["jobs"].sum() == 0:
        sec.notes.append("no job with an attempt in scope (needs the attempts table)")
        return sec
    df["gpu_bucket"] = df["gpu_bucket"].fillna("all")
    order = {b: i for i, b in enumerate((*BUCKET_LABELS, "unknown", "all"))}
    df = df.sort_values("gpu_bucket", key=lambda s: s.map(order)).reset_index(drop=True)
    df["paper_avg_retries"] = [
        paper.lookup("fig9", "gpu_bucket", _PAPER_BUCKET.get(b), "avg_retries")
        for b in df["gpu_bucket"]
    ]
    df["paper_unsuccessful_rate"] = [
        paper.lookup("fig9", "gpu_bucket", _PAPER_BUCKET.get(b), "unsuccessful_rate")
        for b in df["gpu_bucket"]
    ]
    df = df[
        [
            "gpu_bucket",
            "jobs",
            "retries",
            "avg_retries",
            "paper_avg_retries",
            "unsuccessful_rate",
            "paper_unsuccessful_rate",
        ]
    ]
    sec.tables.append(
        ResultTable(
            "fig9",
            "Average retries and unsuccessful rate by GPU demand",
            df,
            paper="Figure 9 (values read off the plot)",
            description="Retries = attempts after the first; rates are fractions of jobs.",
        )
    )
    sec.data["fig9"] = df
    return sec
