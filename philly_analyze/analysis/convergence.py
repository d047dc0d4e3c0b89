"""Figure 8: how early training converged, and what an early stop would have saved.

Input: the ``epochs`` table (loss per epoch or step, parsed from framework logs). Per passed or
killed job, the curve is that of its last attempt with at least two loss points, ordered by
``epoch`` (then log line). With ``n`` points indexed ``i = 0..n-1`` and the lowest loss ``L``:

- ``frac_lowest`` = ``i / (n - 1)`` for the first point reaching ``L`` (0 = first epoch,
  1 = last epoch);
- ``frac_within`` = the same for the first point within 0.1% of it (``loss <= L + 0.001 |L|``);
- GPU hours an early stop would save: stopping right after the point within 0.1% skips the
  remaining ``n - 1 - i`` of ``n`` epochs; with equal epoch times that is
  ``(n - 1 - i) / n`` of the attempt's GPU time (duration x GPUs).

Non-finite losses are ignored. The CDF points the paper's Figure 8 shows (read off the plot) are
compared with the fraction of our jobs at or below the same x.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from philly_analyze.analysis import paper
from philly_analyze.analysis.common import Context
from philly_analyze.analysis.result import ResultTable, Section

WITHIN = 0.001  # "within 0.1% of the lowest loss"
_THRESHOLD_COL = {"lowest": "frac_lowest", "within_0.1pct_of_lowest": "frac_within"}


def curves(ctx: Context) -> pd.DataFrame:
    """Per job with a loss curve: job_id, status, n, i_lowest, i_within, frac_lowest,
    frac_within, gpu_hours (of the attempt), saved_gpu_hours."""
    df = ctx.df(
        f"""WITH e AS (
            SELECT job_id, coalesce(attempt_idx, 0) AS attempt_idx, epoch, line_no, loss
            FROM epochs SEMI JOIN {ctx.jobs} USING (job_id)
            WHERE loss IS NOT NULL AND isfinite(loss)),
        pick AS (
            SELECT job_id, max(attempt_idx) AS attempt_idx
            FROM (SELECT job_id, attempt_idx FROM e GROUP BY ALL HAVING count(*) >= 2)
            GROUP BY job_id),
        s AS (
            SELECT e.job_id, e.attempt_idx, e.loss,
                   row_number() OVER w - 1 AS i,
                   count(*) OVER (PARTITION BY e.job_id) AS n,
                   min(e.loss) OVER (PARTITION BY e.job_id) AS best
            FROM e JOIN pick USING (job_id, attempt_idx)
            -- loss last: a total order (two logs of one attempt may share epoch and line).
            WINDOW w AS (PARTITION BY e.job_id ORDER BY e.epoch, e.line_no, e.loss))
        SELECT s.job_id, j.status, s.n,
               min(s.i) FILTER (WHERE s.loss <= s.best) AS i_lowest,
               min(s.i) FILTER (WHERE s.loss <= s.best + {WITHIN} * abs(s.best)) AS i_within,
               any_value(coalesce(a.duration_s, epoch(a.end_time) - epoch(a.start_time))
                         * coalesce(a.num_gpus, j.num_gpus)) / 3600.0 AS gpu_hours
        FROM s JOIN {ctx.jobs} j USING (job_id)
        LEFT JOIN {ctx.attempts} a USING (job_id, attempt_idx)
        WHERE j.status IN ('passed', 'killed')
        GROUP BY s.job_id, j.status, s.n ORDER BY s.job_id"""
    )
    n = df["n"].astype(float)
    df["frac_lowest"] = df["i_lowest"] / (n - 1)
    df["frac_within"] = df["i_within"] / (n - 1)
    df["saved_gpu_hours"] = df["gpu_hours"] * (n - 1 - df["i_within"]) / n
    return df


def compute(ctx: Context) -> Section:
    """Summary per status, the Figure 8 points, and the per-job CDF inputs."""
    sec = Section("convergence", "Convergence: epochs to the lowest loss (Figure 8)")
    if note := ctx.lacking("convergence"):
        sec.notes.append(note)
        return sec
    c = curves(ctx)
    if c.empty:
        sec.notes.append("no passed or killed job in scope has a loss curve of 2+ points")
        return sec
    unknown = int(c["gpu_hours"].isna().sum())
    if unknown:
        sec.notes.append(
            f"{unknown:,} jobs' curve attempts have no known GPU time (duration or GPUs "
            "unknown): left out of gpu_hours and saved_gpu_hours (absent when none is known)"
        )
    rows = _summary_rows(c)
    sec.tables.append(
        ResultTable(
            "summary",
            "Fraction of epochs to the lowest loss / within 0.1% of it; early-stop savings",
            pd.DataFrame(rows),
            paper="Figure 8, summarized",
            description="Fractions of a job's epochs: 0 = first epoch, 1 = last; jobs within "
            "0.1% by 40%: the share of jobs within 0.1% of their lowest loss by 40% of their "
            "epochs; savings: stopping once within 0.1%, epochs assumed of equal length.",
        )
    )
    pts = _fig8_points(c)
    sec.tables.append(
        ResultTable(
            "fig8_points",
            "Share of jobs at or below a fraction of epochs (the points of Figure 8)",
            pd.DataFrame(pts),
            paper="Figure 8, read off the plot",
        )
    )
    sec.data["curves"] = c
    return sec


def _summary_rows(c: pd.DataFrame) -> list[dict[str, object]]:
    """Per status (and all): median fractions of epochs, the share within 0.1% by 40% of the
    epochs, and the GPU hours early stopping would save."""
    rows: list[dict[str, object]] = []
    for st in ("passed", "killed", "all"):
        g = c if st == "all" else c[c["status"] == st]
        timed = g[g["gpu_hours"].notna()]
        gh = float(timed["gpu_hours"].sum()) if len(timed) else None
        saved = float(timed["saved_gpu_hours"].sum()) if len(timed) else None
        rows.append(
            {
                "status": st,
                "jobs": len(g),
                "median_frac_lowest": float(g["frac_lowest"].median()) if len(g) else None,
                "median_frac_within": float(g["frac_within"].median()) if len(g) else None,
                "within_by_40pct": float((g["frac_within"] <= 0.4).mean()) if len(g) else None,
                "gpu_hours": gh,
                "saved_gpu_hours": saved,
                "saved_pct": 100.0 * saved / gh if gh and saved is not None else None,
            }
        )
    return rows


def _fig8_points(c: pd.DataFrame) -> list[dict[str, object]]:
    """Our cumulative share of jobs at each of the paper's Figure 8 points."""
    pts: list[dict[str, object]] = []
    for r in paper.rows("fig8"):
        col = _THRESHOLD_COL[str(r["threshold"])]
        g = c[c["status"] == r["jobs"]]
        ours = float((g[col] <= float(r["fraction_of_epochs"]) + 1e-12).mean()) if len(g) else None
        pts.append(
            {
                "status": r["jobs"],
                "threshold": r["threshold"],
                "fraction_of_epochs": r["fraction_of_epochs"],
                "cumulative_fraction_of_jobs": ours,
                "paper_cumulative_fraction_of_jobs": r["cumulative_fraction_of_jobs"],
            }
        )
    return pts


def cdf(values: pd.Series) -> tuple[np.ndarray, np.ndarray]:
    """Step CDF points over [0, 1] of fractions of epochs."""
    v = np.sort(values.dropna().to_numpy(dtype=float))
    if len(v) == 0:
        return np.array([]), np.array([])
    return v, np.arange(1, len(v) + 1) / len(v)
