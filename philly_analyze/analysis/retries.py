"""Figure 9: retries and the unsuccessful rate by GPU demand.

A job's retries are its attempts after the first, except an attempt that resumes a preempted
one (the attempt before it was ``killed``: a scheduler's preemption, e.g. in a ``las`` replay
or a MuxFlow eviction, is not a failure retried); in the published trace every attempt but the
last failed, so this is ``num_attempts - 1``. Jobs that never ran are left out. Jobs from job
lists (``schemas.RUN_LIST_SOURCES``: one run per job, its attempts not recorded) have unknown
retries: they count in ``jobs`` and the unsuccessful rate, not in ``retries`` and
``avg_retries``, which are absent (not 0) when no job of the bucket has recorded attempts. The
unsuccessful rate is the share of the jobs with a known final status that ended
``unsuccessful``. The bucket is the job's GPU demand (``jobs.num_gpus``, from its first
attempt).
"""

from __future__ import annotations

import pandas as pd

from philly_analyze.analysis import paper
from philly_analyze.analysis.common import BUCKET_LABELS, Context, gpu_bucket_sql
from philly_analyze.analysis.result import ResultTable, Section
from philly_analyze.schemas import RUN_LIST_SOURCES

#: Bucket label in our tables -> label in the paper's Figure 9 data.
_PAPER_BUCKET = {"1": "1", "2-4": "2-4", "5-8": "5-8", ">8": "gt8", "all": "all"}


def compute(ctx: Context) -> Section:
    """Average retries and unsuccessful rate per GPU bucket and overall."""
    sec = Section("retries", "Retries and unsuccessful jobs by GPU demand (Figure 9)")
    df = _per_bucket(ctx)
    if df.empty or df["jobs"].sum() == 0:
        sec.notes.append("no job with an attempt in scope (needs the attempts table)")
        return sec
    total = df[df["gpu_bucket"].isna()].iloc[0]
    sec.notes.extend(_notes(total))
    df = _with_paper(df)
    sec.tables.append(
        ResultTable(
            "fig9",
            "Average retries and unsuccessful rate by GPU demand",
            df,
            paper="Figure 9, values read off the plot",
            description="Retries = attempts after the first; rates are fractions of jobs.",
        )
    )
    sec.data["fig9"] = df
    return sec


def _per_bucket(ctx: Context) -> pd.DataFrame:
    """Jobs, retries (known ones), unsuccessful rate and resumed attempts per GPU bucket,
    and a total row (``gpu_bucket`` NULL)."""
    run_lists = ", ".join(f"'{s}'" for s in RUN_LIST_SOURCES)
    return ctx.df(
        f"""WITH a AS (
                SELECT job_id, attempt_idx, source,
                       lag(outcome) OVER (PARTITION BY job_id ORDER BY attempt_idx) AS prev
                FROM {ctx.attempts}),
            r AS (
                SELECT job_id, bool_or(source IN ({run_lists})) AS run_list_source,
                       count(*) FILTER (WHERE attempt_idx > 0
                                        AND prev IS DISTINCT FROM 'killed') AS retries,
                       count(*) FILTER (WHERE attempt_idx > 0 AND prev = 'killed') AS resumed
                FROM a GROUP BY job_id),
            k AS (
                -- Attempts not recorded: from a job list, or replayed from one (its flag).
                SELECT j.num_gpus, j.status, r.retries, r.resumed,
                       r.run_list_source
                       OR list_contains(coalesce(j.flags, []), 'attempts_unknown') AS run_list
                FROM {ctx.jobs} j JOIN r USING (job_id) WHERE j.num_attempts >= 1)
            SELECT coalesce({gpu_bucket_sql("num_gpus")}, 'unknown') AS gpu_bucket,
                   count(*) AS jobs,
                   avg(retries) FILTER (WHERE NOT run_list) AS avg_retries,
                   avg(CASE WHEN status = 'unsuccessful' THEN 1.0 ELSE 0.0 END)
                       FILTER (WHERE status IS NOT NULL) AS unsuccessful_rate,
                   sum(retries) FILTER (WHERE NOT run_list)::BIGINT AS retries,
                   count(*) FILTER (WHERE run_list) AS run_list_jobs,
                   sum(resumed)::BIGINT AS resumed
            FROM k
            GROUP BY GROUPING SETS ((gpu_bucket), ())
            ORDER BY gpu_bucket"""
    )


def _notes(total: pd.Series) -> list[str]:
    """What the total row says the table cannot show: unknown retries, resumed attempts,
    an unknown unsuccessful rate."""
    notes: list[str] = []
    if total["run_list_jobs"]:
        notes.append(
            f"{int(total['run_list_jobs']):,} jobs come from job lists (one run per job, its "
            "attempts not recorded): their retries are unknown, left out of retries and "
            "avg_retries"
            + (
                " (absent: no job with recorded attempts)"
                if total["jobs"] == total["run_list_jobs"]
                else ""
            )
        )
    if total["resumed"]:
        notes.append(
            f"{int(total['resumed']):,} attempts resume a preempted one (the attempt before "
            "was killed): not retries"
        )
    if total["unsuccessful_rate"] is None or pd.isna(total["unsuccessful_rate"]):
        notes.append("no job with a final status: the unsuccessful rate is unknown")
    return notes


def _with_paper(df: pd.DataFrame) -> pd.DataFrame:
    """The buckets in the paper's order with the paper's values beside ours."""
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
    return df
