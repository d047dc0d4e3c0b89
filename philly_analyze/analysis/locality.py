"""Table 5 and Figure 4: locality -- how many servers a job spans, and what it costs.

- Table 5: per-minute GPU utilization of 16-GPU attempts by the number of servers the attempt
  spanned (distinct machines among its placements): mean, p50, p90, p95 over every GPU-minute
  sample (from the same join as Table 3, ``analysis.utilization``; percentiles exact to 1%).
  Rows for 2, 4 and 8 servers carry the paper's values; other counts are listed too.
  ``table5_per_attempt`` gives the same with each attempt weighing the same (its own mean),
  as Table 3's mean over jobs does: the GPU-minute view lets a few long attempts dominate.
- Queueing delay versus servers spanned: jobs by GPU bucket and by the servers their first
  attempt spanned, with delay percentiles (minutes). Needs only placements.

The shared definition of the locality constraint itself is ``philly_analyze.locality``.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import cast

import numpy as np
import pandas as pd

from philly_analyze.analysis import paper, utilization
from philly_analyze.analysis.common import BUCKET_LABELS, Context, gpu_bucket, hist_quantiles
from philly_analyze.analysis.result import ResultTable, Section


def compute(ctx: Context) -> Section:
    """Table 5 and the delay-versus-servers table."""
    sec = Section("locality", "Locality: servers spanned (Table 5, Figure 4)")
    if note := ctx.lacking("locality"):
        sec.notes.append(note)
        return sec
    agg = utilization.aggregates(ctx)
    if agg is not None and (runs_note := ctx.runs_note()):
        # Table 5 reads the same join as Table 3: attempts without a recorded end are left out.
        sec.notes.append(runs_note)
    if agg is None:
        sec.notes.append("Table 5 needs per-minute GPU utilization (gpu_util); not in the store")
    elif agg.by_servers16.empty:
        sec.notes.append("no 16-GPU attempt with utilization samples in scope (Table 5)")
    else:
        sec.tables.append(_table5(agg.by_servers16, agg.attempts))
        per_attempt = _table5_per_attempt(agg.attempts)
        if per_attempt is not None:
            sec.tables.append(per_attempt)
        sec.data["servers16"] = agg.by_servers16
    delay = ctx.df(
        f"""WITH first AS (
            SELECT job_id, arg_min(attempt_idx, attempt_idx) AS attempt_idx
            FROM {ctx.attempts} WHERE start_time IS NOT NULL GROUP BY job_id),
        srv AS (
            SELECT p.job_id, count(DISTINCT p.machine_id) AS servers
            FROM {ctx.placements} p JOIN first USING (job_id, attempt_idx) GROUP BY p.job_id)
        SELECT j.job_id, j.num_gpus, srv.servers, greatest(j.queue_delay_s, 0) / 60.0 AS delay_min
        FROM {ctx.jobs} j JOIN srv USING (job_id)
        WHERE j.queue_delay_s IS NOT NULL ORDER BY j.job_id"""
    )
    if delay.empty:
        sec.notes.append("no started job with placements and a submit time in scope")
        return sec
    delay["gpu_bucket"] = gpu_bucket(delay["num_gpus"].to_numpy())
    rows = _delay_rows(delay)
    sec.tables.append(
        ResultTable(
            "delay_by_servers",
            "Queueing delay (minutes) by GPU demand and servers spanned by the first attempt",
            pd.DataFrame(rows),
            paper="Figure 4",
            description="Servers = distinct machines among the first attempt's placements.",
        )
    )
    sec.data["delay_by_servers"] = delay
    return sec


def _delay_rows(delay: pd.DataFrame) -> list[dict[str, object]]:
    """Per GPU bucket and servers spanned: jobs, mean, median and p90 delay (minutes)."""
    rows: list[dict[str, object]] = []
    for bucket in BUCKET_LABELS:
        db = delay[delay["gpu_bucket"] == bucket]
        for servers, ds in _by_servers(db):
            v = ds["delay_min"].to_numpy()
            p50, p90 = np.quantile(v, [0.5, 0.9])
            rows.append(
                {
                    "gpu_bucket": bucket,
                    "servers": int(servers),
                    "jobs": len(v),
                    "mean_min": float(v.mean()),
                    "p50_min": float(p50),
                    "p90_min": float(p90),
                }
            )
    return rows


def _with_paper(servers: int, stats: dict) -> dict:
    """Each Table 5 statistic followed by the paper's value for that server count."""
    out: dict = {}
    for key, value in stats.items():
        out[key] = value
        out[f"paper_{key}"] = paper.lookup("table5", "servers", servers, key)
    return out


def _table5_per_attempt(attempts: pd.DataFrame) -> ResultTable | None:
    """Table 5 with each 16-GPU attempt weighing the same (its mean over its GPU-minutes), the
    counterpart of Table 3's mean over jobs: long attempts do not dominate."""
    a = attempts[(attempts["job_gpus"] == 16) & (attempts["minutes"] > 0)]
    if a.empty:
        return None
    rows = []
    for servers, g in _by_servers(a):
        u = (g["util_sum"] / g["minutes"]).to_numpy(dtype=float)
        p50, p90, p95 = np.quantile(u, [0.5, 0.9, 0.95])
        stats = {"mean": float(u.mean()), "p50": float(p50), "p90": float(p90), "p95": float(p95)}
        rows.append(
            {"servers": int(servers), "attempts": len(u), **_with_paper(int(servers), stats)}
        )
    return ResultTable(
        "table5_per_attempt",
        "GPU utilization (%) of 16-GPU jobs by servers spanned, each attempt weighing the same",
        pd.DataFrame(rows),
        paper="Table 5, for comparison",
        description="Each attempt's mean over its GPU-minutes; mean and percentiles over attempts.",
    )


def _table5(h: pd.DataFrame, attempts: pd.DataFrame) -> ResultTable:
    att16 = attempts[attempts["job_gpus"] == 16]
    rows = []
    for servers, hs in _by_servers(h):
        n = float(hs["minutes"].sum())
        p50, p90, p95 = hist_quantiles(
            hs["ubin"].to_numpy(), hs["minutes"].to_numpy(), (0.5, 0.9, 0.95)
        )
        rows.append(
            {
                "servers": int(servers),
                "attempts": int((att16["servers"] == servers).sum()),
                "gpu_minutes": int(n),
                **_with_paper(
                    int(servers),
                    {
                        "mean": float(hs["util_sum"].sum()) / n if n else None,
                        "p50": p50,
                        "p90": p90,
                        "p95": p95,
                    },
                ),
            }
        )
    return ResultTable(
        "table5",
        "GPU utilization (%) of 16-GPU jobs by servers spanned",
        pd.DataFrame(rows),
        paper="Table 5",
        description="Over every GPU-minute of 16-GPU attempts; percentiles to the nearest 1%.",
    )


def _by_servers(df: pd.DataFrame) -> Iterator[tuple[int, pd.DataFrame]]:
    """``df``'s rows grouped by their ``servers`` count, fewest first."""
    for servers, g in df.groupby("servers", sort=True):
        # pandas-stubs types a group's key as any scalar; this column holds counts.
        yield int(cast(int, servers)), g
