"""Figure 7: host CPU and memory utilization of servers running GPU jobs.

A per-minute sample of a server counts when at least one attempt of a job in scope was running
on that server at that minute (``[start_time, end_time)`` of any attempt placed on it; only
attempts placed in time, ``ctx.runs``, as for GPU utilization). The
attempts' intervals are merged per server first (so a sample counts once however many jobs
share the server), expanded to the days they cover and hash-joined with the samples on
``(machine_id, day)``, as for GPU utilization. Memory utilization is
``100 * (mem_total - mem_free) / mem_total`` (rows with ``mem_total <= 0`` are skipped), so it
does not depend on the source's units. With ``--since/--until`` samples are cut to that window.
Percentiles come from 1% histograms (nearest rank).
"""

from __future__ import annotations

from typing import cast

import pandas as pd

from philly_analyze.analysis.common import Context, hist_quantiles
from philly_analyze.analysis.result import ResultTable, Section
from philly_analyze.analysis.utilization import running_horizon

#: Join buckets (microseconds): one day. Busy intervals are merged per server, so a
#: (server, day) has one or two of them: wide buckets keep the build side small.
BUCKET_US = 86_400_000_000

_METRICS = {
    "cpu": ("cpu_util", "util"),
    "mem": ("mem_util", "100.0 * (mem_total - mem_free) / mem_total"),
}


def _busy_table(ctx: Context, horizon: object) -> str:
    """A temp table of merged busy intervals per server, one row per hour covered."""
    name = f"_busy_{ctx.jobs}"
    ctx.store.con.execute(
        f"""CREATE OR REPLACE TEMP TABLE {name} AS
        WITH iv AS (
            SELECT DISTINCT p.machine_id, epoch_us(a.start_time) AS s,
                   epoch_us(coalesce(a.end_time, ?::TIMESTAMPTZ)) AS e
            FROM {ctx.placements} p JOIN {ctx.runs} a USING (job_id, attempt_idx)),
        o AS (
            SELECT *, max(e) OVER (PARTITION BY machine_id ORDER BY s, e
                                   ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS prev_e
            FROM iv WHERE e > s),
        g AS (
            SELECT *, sum(CASE WHEN prev_e >= s THEN 0 ELSE 1 END)
                      OVER (PARTITION BY machine_id ORDER BY s, e) AS grp
            FROM o),
        m AS (SELECT machine_id, min(s) AS s, max(e) AS e FROM g GROUP BY machine_id, grp)
        SELECT m.*, coalesce(x.num_gpus, 0) AS server_gpus,
               unnest(range(s // {BUCKET_US}, (e - 1) // {BUCKET_US} + 1)) AS hr
        FROM m LEFT JOIN machines x USING (machine_id)""",
        [horizon],
    )
    return name


def compute(ctx: Context) -> Section:
    """Mean and percentiles of CPU and memory utilization, overall and by server size."""
    sec = Section("host_resources", "Host CPU and memory of servers running GPU jobs (Figure 7)")
    if note := ctx.lacking("host_resources"):
        sec.notes.append(note)
        return sec
    present = {k: ctx.has(t) for k, (t, _) in _METRICS.items()}
    runs_note = ctx.runs_note()
    if runs_note:
        sec.notes.append(runs_note)
    series = "cpu_util" if present["cpu"] else "mem_util"
    busy = _busy_table(ctx, running_horizon(ctx, series))
    hists = _histograms(ctx, sec, present, busy)
    rows = _summary_rows(hists)
    if not rows or all(r["minutes"] == 0 for r in rows):
        sec.notes.append("no host sample falls inside a run of a job in scope")
    sec.tables.append(
        ResultTable(
            "host",
            "CPU and memory utilization (%) of servers while they ran GPU jobs",
            pd.DataFrame(rows),
            paper="Figure 7, as percentiles",
            description="Per-minute samples of servers with at least one running attempt.",
        )
    )
    sec.data["hists"] = hists
    return sec


def _histograms(
    ctx: Context, sec: Section, present: dict[str, bool], busy: str
) -> dict[str, pd.DataFrame]:
    """Per metric present, 1% bins of the samples taken while their server was busy (the
    ``busy`` temp table, dropped here whatever happens); a note for each metric missing."""
    window, params = [], []
    if ctx.scope.since is not None:
        window.append("x.time >= ?")
        params.append(ctx.scope.since)
    if ctx.scope.until is not None:
        window.append("x.time < ?")
        params.append(ctx.scope.until)
    hists: dict[str, pd.DataFrame] = {}
    try:
        for key, (table, expr) in _METRICS.items():
            if not present[key]:
                sec.notes.append(f"no {table} rows: {key} left out")
                continue
            valid = "util IS NOT NULL" if key == "cpu" else "mem_total > 0 AND mem_free IS NOT NULL"
            where = " AND ".join([valid, *window])
            hists[key] = ctx.df(
                f"""WITH x AS (SELECT time, machine_id, {expr} AS v FROM {table} x
                               WHERE {where})
                SELECT b.server_gpus, least(greatest(round(x.v), 0), 100)::SMALLINT AS ubin,
                       count(*) AS minutes, sum(x.v) AS v_sum
                FROM x JOIN {busy} b ON x.machine_id = b.machine_id
                  AND epoch_us(x.time) // {BUCKET_US} = b.hr
                WHERE epoch_us(x.time) >= b.s AND epoch_us(x.time) < b.e
                GROUP BY ALL ORDER BY ALL""",
                params,
            )
    finally:
        ctx.store.con.execute(f"DROP TABLE IF EXISTS {busy}")
    return hists


def _summary_rows(hists: dict[str, pd.DataFrame]) -> list[dict[str, object]]:
    """Minutes, mean and percentiles per metric, over all servers and per server size."""
    rows: list[dict[str, object]] = []
    for key, h in hists.items():
        # pandas-stubs types a group's key as any scalar; server_gpus holds counts.
        groups = [("all", h)] + [
            (f"{int(cast(int, n))}-GPU", g) for n, g in h.groupby("server_gpus", sort=True)
        ]
        for label, g in groups:
            agg = g.groupby("ubin")[["minutes", "v_sum"]].sum().sort_index()
            n = float(agg["minutes"].sum())
            p50, p90, p95 = hist_quantiles(
                agg.index.to_numpy(), agg["minutes"].to_numpy(), (0.5, 0.9, 0.95)
            )
            rows.append(
                {
                    "metric": key,
                    "servers": label,
                    "minutes": int(n),
                    "mean": float(agg["v_sum"].sum()) / n if n else None,
                    "p50": p50,
                    "p90": p90,
                    "p95": p95,
                }
            )
    return rows
