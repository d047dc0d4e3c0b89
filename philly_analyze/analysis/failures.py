"""Table 7: failures by reason, category and user.

Input: the store's ``failures`` table (one row per attempt with its classified ``reason`` and
``categories``, written by the framework-log parser with the signature rules) joined with the
attempts whose ``outcome`` is ``failed``. Evidence on attempts that did not fail (e.g. an error
printed by a job that later passed) is not a failure and is left out (counted in the notes).
Logs of attempts the scheduler data does not know (a store of framework logs only) count when
their ``verdict`` is ``failed`` or ``unmatched`` (the logs' own view); their RTF is unknown.

Per reason: trials (failed attempts), distinct jobs and users; runtime to failure (RTF, the
failed attempt's duration, minutes) p50/p90/p95 and the reason's share of all RTF; the trials
split by the attempt's GPU demand (1, 2-4, >4); RTF x demand (GPU-minutes) and its share.
Percentiles are linear (numpy's default). ``example`` is the matching log line of the reason's
first trial (log text: every renderer escapes it). Categories: each reason's trials count for every
category it carries (``IF,U`` counts for both), so category shares may add up to over 100%.
Repeat failures: per reason, how many users hit it more than once and the share of its trials
from its most frequent user.
"""

from __future__ import annotations

import pandas as pd

from philly_analyze.analysis import paper
from philly_analyze.analysis.common import Context, pct
from philly_analyze.analysis.result import ResultTable, Section
from philly_analyze.failures.rules import NO_SIGNATURE
from philly_analyze.schemas import FAILURE_CATEGORIES

_PAPER_COLS = (
    "trials",
    "jobs",
    "users",
    "rtf_p50_min",
    "rtf_p90_min",
    "rtf_p95_min",
    "rtf_total_pct",
    "gpu_demand_1",
    "gpu_demand_2_4",
    "gpu_demand_gt4",
    "rtf_x_demand_pct",
)


def failed_trials(ctx: Context) -> pd.DataFrame:
    """One row per (failed attempt, reason): job_id, attempt_idx, user_id, reason,
    categories, message (the matching log line), gpus, rtf_min, from_scheduler (False when
    the attempt is known only from its logs: then ``verdict`` decides and RTF is unknown)."""
    scoped = "" if ctx.scope.is_all else f"SEMI JOIN {ctx.jobs} USING (job_id)"
    # Stores written before failures.verdict existed have no such column.
    verdict = "verdict" if "verdict" in ctx.columns("failures") else "NULL::VARCHAR"
    return ctx.df(
        f"""WITH f AS (
            SELECT job_id, attempt_idx, reason, any_value(categories) AS categories,
                   any_value({verdict}) AS verdict,
                   -- The first matching line; the message breaks ties (two logs of one
                   -- attempt), so the same store always shows the same example.
                   arg_min(message, (coalesce(line_no, 0), message)) AS message
            FROM failures {scoped}
            GROUP BY job_id, attempt_idx, reason)
        SELECT f.job_id, f.attempt_idx, j.user_id, coalesce(f.reason, 'No signature') AS reason,
               coalesce(f.categories, '-') AS categories, f.message,
               coalesce(a.num_gpus, j.num_gpus) AS gpus,
               coalesce(a.duration_s, epoch(a.end_time) - epoch(a.start_time)) / 60.0 AS rtf_min,
               a.job_id IS NOT NULL AS from_scheduler
        FROM f LEFT JOIN {ctx.attempts} a USING (job_id, attempt_idx)
        LEFT JOIN {ctx.jobs} j USING (job_id)
        WHERE a.outcome = 'failed'
           OR (a.job_id IS NULL AND f.verdict IN ('failed', 'unmatched'))
        ORDER BY f.job_id, f.attempt_idx, reason"""
    )


def compute(ctx: Context) -> Section:
    """Table 7, the category summary and repeat failures."""
    sec = Section("failures", "Failures by reason (Table 7)")
    if note := ctx.lacking("failures"):
        sec.notes.append(note)
        return sec
    t = failed_trials(ctx)
    scoped = "" if ctx.scope.is_all else f"SEMI JOIN {ctx.jobs} USING (job_id)"
    # Logs of attempts that did not fail, yet match a failure signature (a traceback printed
    # and survived, say): not trials, left out. Logs matching nothing are not evidence.
    signed_not_failed = ctx.scalar(
        f"""SELECT count(*) FROM (
                SELECT DISTINCT job_id, attempt_idx FROM failures {scoped} WHERE reason <> ?)
            JOIN {ctx.attempts} a USING (job_id, attempt_idx)
            WHERE a.outcome IS DISTINCT FROM 'failed'""",
        [NO_SIGNATURE],
    )
    failed = ctx.scalar(f"SELECT count(*) FROM {ctx.attempts} WHERE outcome = 'failed'")
    if signed_not_failed:
        sec.notes.append(
            f"{int(signed_not_failed):,} attempts whose logs match a failure signature did not "
            "fail: left out"
        )
    if failed:
        on_record = int(
            t.loc[t["from_scheduler"], ["job_id", "attempt_idx"]].drop_duplicates().shape[0]
        )
        sec.notes.append(f"{on_record:,} of {int(failed):,} failed attempts have failure evidence")
    logs_only = int((~t["from_scheduler"]).sum())
    if logs_only:
        sec.notes.append(
            f"{logs_only:,} failed trials are known only from their logs (verdict failed or "
            "unmatched, no attempt in the scheduler data): runtime to failure unknown"
        )
    no_rtf = int((t["from_scheduler"] & t["rtf_min"].isna()).sum())
    if no_rtf:
        sec.notes.append(
            f"{no_rtf:,} failed trials have no recorded end (or start): their runtime to "
            "failure is unknown, left out of the RTF columns"
        )
    unknown = {
        "user": int(t["user_id"].isna().sum()),
        "GPU demand": int(t["gpus"].isna().sum()),
    }
    for what, n in unknown.items():
        if n:
            sec.notes.append(
                f"{n:,} failed trials have no known {what}: left out of the {what} columns "
                "(absent where no trial has one)"
            )
    if t.empty:
        sec.notes.append("no failed attempt in scope has failure evidence")
        return sec
    sec.tables.append(_table7(t))
    sec.tables.append(_categories(t))
    sec.tables.append(_repeats(t))
    sec.data["trials"] = t
    return sec


def _reason_row(reason: str, g: pd.DataFrame, rtf_all: float, rxd_all: float) -> dict:
    rtf = g["rtf_min"].dropna()
    q = rtf.quantile([0.5, 0.9, 0.95]) if len(rtf) else pd.Series([None] * 3)
    # What the data cannot give is absent, not 0: users, GPU demand and RTF x demand of
    # trials known only from their logs (a store of framework logs only).
    rxd_known = (g["rtf_min"] * g["gpus"]).dropna()
    rxd = float(rxd_known.sum()) if len(rxd_known) else None
    gpus = g["gpus"].dropna()
    users = g["user_id"].dropna()

    def demand(mask: pd.Series) -> int | None:
        return int(mask.sum()) if len(gpus) else None

    return {
        "reason": reason,
        "categories": g["categories"].iloc[0] if reason != "total" else "",
        "trials": len(g),
        "jobs": g["job_id"].nunique(),
        "users": users.nunique() if len(users) else None,
        "rtf_p50_min": q.iloc[0],
        "rtf_p90_min": q.iloc[1],
        "rtf_p95_min": q.iloc[2],
        "rtf_total_pct": pct(float(rtf.sum()), rtf_all) if len(rtf) else None,
        "gpu_demand_1": demand(gpus == 1),
        "gpu_demand_2_4": demand((gpus >= 2) & (gpus <= 4)),
        "gpu_demand_gt4": demand(gpus > 4),
        "rtf_x_demand": rxd,
        "rtf_x_demand_pct": pct(rxd, rxd_all) if rxd is not None else None,
        "example": _example(g) if reason != "total" else None,
    }


def _example(g: pd.DataFrame) -> str | None:
    """The first trial's matching log line (raw log text: renderers escape it)."""
    m = g["message"].dropna()
    if m.empty:
        return None
    line = str(m.iloc[0]).strip()
    return line if len(line) <= 160 else line[:159] + "…"


def _table7(t: pd.DataFrame) -> ResultTable:
    rtf_all = float(t["rtf_min"].sum())
    rxd_all = float((t["rtf_min"] * t["gpus"]).sum())
    rows = [_reason_row(str(r), g, rtf_all, rxd_all) for r, g in t.groupby("reason", sort=True)]
    rows.sort(key=lambda r: (r["reason"] == "No signature", -r["trials"], r["reason"]))
    rows.append(_reason_row("total", t, rtf_all, rxd_all))
    df = pd.DataFrame(rows)
    for c in _PAPER_COLS:
        df[f"paper_{c}"] = [
            paper.lookup("table7", "failure_reason", r, c) if r != "total" else None
            for r in df["reason"]
        ]
    order = ["reason", "categories"]
    for c in df.columns:
        if c in order or c.startswith("paper_"):
            continue
        order.append(c)
        if f"paper_{c}" in df.columns:
            order.append(f"paper_{c}")
    return ResultTable(
        "table7",
        "Failures by reason: trials, jobs, users, runtime to failure (RTF, minutes), GPU demand",
        df[order],
        paper="Table 7",
        description="Trials = failed attempts; RTF = runtime to failure; 1 GPU, 2-4 GPUs, "
        ">4 GPUs: trials by the failed attempt's GPU demand; RTF x demand = RTF x GPUs; "
        "example: the log line of the reason's first trial.",
        display=("reason", "categories", "trials", "rtf_p50_min", "rtf_total_pct"),
    )


def _categories(t: pd.DataFrame) -> ResultTable:
    cats = t.assign(category=t["categories"].str.split(",")).explode("category")
    cats["category"] = cats["category"].str.strip()
    total_trials = len(t)
    total_rtf = float(t["rtf_min"].sum())
    rows = []
    for c in (*FAILURE_CATEGORIES, "-"):
        g = cats[cats["category"] == c]
        rows.append(
            {
                "category": c,
                "reasons": g["reason"].nunique(),
                "trials": len(g),
                "trials_pct": pct(len(g), total_trials),
                "jobs": g["job_id"].nunique(),
                "rtf_pct": pct(float(g["rtf_min"].sum()), total_rtf),
            }
        )
    return ResultTable(
        "categories",
        "Failures by category (IF infrastructure, AE AI engine, U user; - none)",
        pd.DataFrame(rows),
        description="A reason with several categories counts for each (shares may exceed 100%).",
    )


def _repeats(t: pd.DataFrame) -> ResultTable:
    rows = []
    groups = [(str(r), g) for r, g in t.groupby("reason", sort=True)] + [("all", t)]
    for reason, g in groups:
        # Trials whose user is unknown (logs without scheduler data) are no user's repeats.
        per_user = g.groupby("user_id", dropna=True).size()
        known = bool(len(per_user))
        rows.append(
            {
                "reason": reason,
                "trials": len(g),
                "users": len(per_user) if known else None,
                "users_repeating": int((per_user > 1).sum()) if known else None,
                "trials_per_user": float(per_user.sum()) / len(per_user) if known else None,
                "top_user_trials_pct": pct(float(per_user.max()), len(g)) if known else None,
            }
        )
    return ResultTable(
        "repeats",
        "Repeat failures per user",
        pd.DataFrame(rows),
        description="Users repeating = users with more than one failed trial of that reason.",
    )
