"""Table 3 and Figures 5-6: GPU utilization by job size and final status.

The join (one pass over ``gpu_util``): every per-minute sample of a GPU counts for the attempt
that held that GPU at that minute, i.e. the sample's ``(machine_id, gpu_idx)`` is one of the
attempt's placements and its minute start ``time`` lies in ``[start_time, end_time)``. Only
attempts placed in time count (``ctx.runs``: see ``analysis.common``): a running attempt (the
last of a job without a final status) counts up to the last utilization sample; an attempt
without a recorded end in a job that ended is left out (noted).

Efficient formulation: a plain range join would compare each of the ~270M samples of the public
trace with every placement of its GPU. Instead each placement is expanded into the hours it
overlaps (6-hour buckets: about a million rows at trace scale), the samples are hash-joined
to that on ``(machine_id, gpu_idx, bucket)`` and the exact ``[start, end)`` test is a residual
filter: each sample meets one or a few candidates. The join feeds one ``GROUPING SETS`` aggregation that yields, in the same pass,

- per attempt: GPU-minutes and the sum of utilization (per-attempt and per-job means);
- per (job GPUs, status, utilization rounded to 1%): a histogram for Table 3 and the CDFs;
- per (servers spanned, 1% bin) for 16-GPU attempts: Table 5 (see ``analysis.locality``).

Table 3's cells are the mean over every per-minute sample of the cell's jobs ("mean per-minute
utilization": a long job weighs more than a short one). The mean of per-job means is given
beside it as a second table. Percentiles come from the 1% histograms (nearest rank, so exact
to 1 point). Samples above 100% are clamped to 100 in the histograms only.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from philly_analyze.analysis import paper
from philly_analyze.analysis.common import STATUSES, Context
from philly_analyze.analysis.result import ResultTable, Section

#: Job sizes of Table 3 (GPUs); "all" is every size.
TABLE3_SIZES: tuple[int, ...] = (1, 4, 8, 16)
#: Width of the join's time buckets (microseconds): six hours. Wider buckets mean a smaller
#: build side (cache-friendlier probes) but more candidate placements per sample (short jobs
#: share a GPU within a bucket); on a synthesized Philly-like trace 6 h gives ~2 candidates
#: per (GPU, bucket) against 1.1 for 1 h and 5 for 24 h, and on the benchmark store it cost
#: 16.7 s of CPU against 18.3 s for 1 h.
BUCKET_US = 21_600_000_000


@dataclass
class UtilAggregates:
    """What the one pass over ``gpu_util`` yields."""

    #: job_id, attempt_idx, job_gpus, status, servers, minutes, util_sum
    attempts: pd.DataFrame
    #: job_gpus, status, ubin, minutes, util_sum  (per-minute histogram)
    by_size_status: pd.DataFrame
    #: servers, ubin, minutes, util_sum  (16-GPU attempts only)
    by_servers16: pd.DataFrame


def aggregates(ctx: Context) -> UtilAggregates | None:
    """The per-attempt / histogram aggregates (cached per context); None without data."""
    if not (ctx.has("gpu_util") and ctx.has("placements")):
        return None
    return ctx.cached("util_aggregates", lambda: _compute(ctx))


def _compute(ctx: Context) -> UtilAggregates:
    """One pass over gpu_util joined to the placed GPUs' runs: per-attempt sums and
    per-(size, status, servers) 1% histograms together (GROUPING SETS)."""
    horizon = running_horizon(ctx, "gpu_util")
    con = ctx.store.con
    att, pl = f"_att_{ctx.jobs}", f"_pl_{ctx.jobs}"
    # Attempts with integer ids: the aggregation hashes small integers, not job-id strings.
    # ``cell`` numbers the (job GPUs, status, servers) combinations for the histograms.
    con.execute(
        f"""CREATE OR REPLACE TEMP TABLE {att} AS
        WITH srv AS (
            SELECT job_id, attempt_idx, count(DISTINCT machine_id) AS servers
            FROM {ctx.placements} GROUP BY ALL)
        SELECT a.job_id, a.attempt_idx, j.num_gpus AS job_gpus, j.status, srv.servers,
               epoch_us(a.start_time) AS s_us,
               epoch_us(coalesce(a.end_time, ?::TIMESTAMPTZ)) AS e_us,
               (row_number() OVER (ORDER BY a.job_id, a.attempt_idx))::INTEGER AS att,
               (dense_rank() OVER (ORDER BY j.num_gpus, j.status, srv.servers))::INTEGER AS cell
        FROM {ctx.runs} a JOIN {ctx.jobs} j USING (job_id) JOIN srv USING (job_id, attempt_idx)""",
        [horizon],
    )
    # Build side: one row per placed GPU per hour its attempt overlaps.
    con.execute(
        f"""CREATE OR REPLACE TEMP TABLE {pl} AS
        SELECT p.machine_id, p.gpu_idx, a.att, a.cell, a.s_us, a.e_us,
               unnest(range(a.s_us // {BUCKET_US}, (a.e_us - 1) // {BUCKET_US} + 1)) AS hr
        FROM {ctx.placements} p JOIN {att} a USING (job_id, attempt_idx)
        WHERE p.gpu_idx IS NOT NULL AND a.e_us > a.s_us"""
    )
    try:
        res = ctx.df(
            f"""SELECT GROUPING(att, cell, ubin) AS g, att, cell, ubin,
                       count(*) AS minutes, sum(util) AS util_sum
            FROM (
                SELECT ph.att, ph.cell, u.util,
                       least(greatest(round(u.util), 0), 100)::SMALLINT AS ubin
                FROM gpu_util u JOIN {pl} ph
                  ON u.machine_id = ph.machine_id AND u.gpu_idx = ph.gpu_idx
                 AND epoch_us(u.time) // {BUCKET_US} = ph.hr
                WHERE u.util IS NOT NULL
                  AND epoch_us(u.time) >= ph.s_us AND epoch_us(u.time) < ph.e_us)
            GROUP BY GROUPING SETS ((att), (cell, ubin))"""
        )
        meta = ctx.df(
            f"SELECT att, cell, job_id, attempt_idx, job_gpus, status, servers FROM {att}"
        )
    finally:
        con.execute(f"DROP TABLE IF EXISTS {pl}")
        con.execute(f"DROP TABLE IF EXISTS {att}")
    return _shape(res, meta)


def _shape(res: pd.DataFrame, meta: pd.DataFrame) -> UtilAggregates:
    """The aggregates from the grouped query's rows (``res``) and the attempts' ids and cells
    (``meta``)."""
    # GROUPING bitmask over (att, cell, ubin): a bit is 1 when the column is aggregated away.
    per_att = res[res["g"] == 0b011][["att", "minutes", "util_sum"]]
    attempts = meta.merge(per_att, on="att").sort_values(["job_id", "attempt_idx"])
    attempts = attempts.drop(columns=["att", "cell"]).reset_index(drop=True)
    cells = meta.drop_duplicates("cell")[["cell", "job_gpus", "status", "servers"]]
    hist = res[res["g"] == 0b100][["cell", "ubin", "minutes", "util_sum"]].merge(cells, on="cell")
    by_size_status = (
        hist.groupby(["job_gpus", "status", "ubin"], dropna=False)[["minutes", "util_sum"]]
        .sum()
        .reset_index()
    )
    srv = hist[hist["job_gpus"] == 16]
    by_servers16 = srv.groupby(["servers", "ubin"])[["minutes", "util_sum"]].sum().reset_index()
    return UtilAggregates(
        attempts,
        by_size_status.astype({"ubin": int}),
        by_servers16.astype({"servers": int, "ubin": int}),
    )


def running_horizon(ctx: Context, series: str) -> object:
    """Where a running attempt stops counting: the last sample of ``series`` (one scan, only
    when such attempts exist), or the latest attempt time."""
    last = ctx.scalar(
        f"SELECT max(greatest(start_time, coalesce(end_time, start_time))) FROM {ctx.runs}"
    )
    running = ctx.scalar(f"SELECT count(*) FROM {ctx.runs} WHERE timing = 'running'")
    if running:
        tail = ctx.scalar(f"SELECT max(time) + INTERVAL 1 MINUTE FROM {series}")
        if tail is not None and (last is None or tail > last):
            return tail
    return last


def job_utilization(ctx: Context) -> pd.DataFrame:
    """Per job: GPU-minutes with data and mean per-minute utilization over all its attempts
    (columns job_id, job_gpus, status, minutes, util). Empty without utilization data."""
    agg = aggregates(ctx)
    if agg is None or agg.attempts.empty:
        return pd.DataFrame(columns=["job_id", "job_gpus", "status", "minutes", "util"])
    g = agg.attempts.groupby("job_id", sort=True).agg(
        job_gpus=("job_gpus", "first"),
        status=("status", "first"),
        minutes=("minutes", "sum"),
        util_sum=("util_sum", "sum"),
    )
    g["util"] = g["util_sum"] / g["minutes"]
    return g.drop(columns="util_sum").reset_index()


def _cell(h: pd.DataFrame) -> float | None:
    """Mean utilization of a histogram's minutes; None when it has none (absent, not 0)."""
    m = float(h["minutes"].sum())
    return float(h["util_sum"].sum()) / m if m else None


def compute(ctx: Context) -> Section:
    """Table 3 (per-minute and per-job means) and the CDF inputs of Figures 5 and 6."""
    sec = Section("gpu_utilization", "GPU utilization by job size and status (Table 3)")
    agg = aggregates(ctx)
    if agg is None:
        sec.notes.append(ctx.lacking("gpu_utilization"))
        return sec
    runs_note = ctx.runs_note()
    if runs_note:
        sec.notes.append(runs_note)
    if agg.attempts.empty:
        sec.notes.append("no utilization sample falls inside an attempt's placed GPUs and run")
        return sec
    h = agg.by_size_status
    jobs = job_utilization(ctx)
    rows, job_rows = _table3_rows(h, jobs)
    # The primary table weighs each job the same: the paper's "all" column is the job-count
    # mix of its status columns (52.43, 42.98, 60.43 at 69.3/13.5/17.2% of jobs -> 52.53,
    # printed 52.32), not the GPU-time mix (-> 50.28), so its cells are means over jobs.
    sec.tables.append(
        ResultTable(
            "table3",
            "Mean GPU utilization (%) by job size (GPUs) and final status",
            pd.DataFrame(job_rows),
            paper="Table 3",
            description="Each job's mean per-minute utilization over its placed GPUs and run, "
            "averaged over jobs (each job weighs the same, as in the paper).",
        )
    )
    sec.tables.append(
        ResultTable(
            "table3_minute_weighted",
            "Mean per-minute GPU utilization (%) by job size and status, per GPU-minute",
            pd.DataFrame(rows),
            paper="Table 3, for comparison: it weighs each job alike",
            description="Each GPU-minute sample weighs the same: long and large jobs weigh more.",
        )
    )
    sec.data["hist"] = h
    sec.data["jobs"] = jobs
    cover = ctx.scalar(f"SELECT count(DISTINCT job_id) FROM {ctx.runs}")
    if cover and len(jobs) < cover:
        sec.notes.append(
            f"{len(jobs):,} of {int(cover):,} jobs that ran have utilization samples on their GPUs"
        )
    return sec


def _table3_rows(
    h: pd.DataFrame, jobs: pd.DataFrame
) -> tuple[list[dict[str, object]], list[dict[str, object]]]:
    """Table 3's rows per job size (and all): per GPU-minute means from the histograms
    ``h``, per-job means from ``jobs``, each beside the paper's value."""
    rows: list[dict[str, object]] = []
    job_rows: list[dict[str, object]] = []
    for size in (*TABLE3_SIZES, "all"):
        hs = h if size == "all" else h[h["job_gpus"] == size]
        js = jobs if size == "all" else jobs[jobs["job_gpus"] == size]
        row: dict[str, object] = {"job_size": str(size), "jobs": len(js)}
        jrow: dict[str, object] = {"job_size": str(size), "jobs": len(js)}
        for st in (*STATUSES, "all"):
            cell = hs if st == "all" else hs[hs["status"] == st]
            jcell = js if st == "all" else js[js["status"] == st]
            row[st] = _cell(cell)
            row[f"paper_{st}"] = paper.lookup("table3", "job_size", size, st)
            jrow[st] = float(jcell["util"].mean()) if len(jcell) else None
            jrow[f"paper_{st}"] = row[f"paper_{st}"]
        row["gpu_minutes"] = int(hs["minutes"].sum())
        rows.append(row)
        job_rows.append(jrow)
    return rows, job_rows
