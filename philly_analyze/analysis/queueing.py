"""Table 2 and Figure 3: queueing delay, and why jobs waited.

Delays. A job's queueing delay is ``first_start - submit_time`` (``jobs.queue_delay_s``, the
official notebook's definition), zero delays kept, negative ones (clock glitches) counted as
zero. Per attempt, the delay of attempt 0 is that same wait; a retry's delay is the gap between
the previous attempt's end and its start (a failed job goes back to the queue). Per-VC
percentiles are by GPU bucket (1, 2-4, 5-8, >8, from ``jobs.num_gpus``).

Decomposition (Table 2). Every moment a job waited -- from submit to its first start, and from
each failed attempt's end to the next attempt's start -- is classified from the cluster's state
at that moment, rebuilt from every attempt and placement in the store
(``analysis.clusterstate``), with the waiting job's VC ``v`` and GPU demand ``n`` (the GPUs of
the attempt it waited for):

1. **fair_share** when the VC had used its quota: ``used(v) + n > quota(v)``, i.e. starting
   the job would take the VC past its quota (this includes being at or over it);
2. otherwise **fragmentation** when no placement meeting the locality constraint
   (``locality.fits_strict``: one server with ``n`` free GPUs, or ``ceil(n / 8)`` wholly free
   8-GPU servers in one rack) was free;
3. otherwise **other**: quota left and a placement free, yet the job waited (scheduler
   latency, jobs ahead of it in the queue, or GPUs busy with work the data does not show).

When both causes hold, the moment is fair-share: the scheduler checks the quota first, and
"fragmentation" means the quota would have allowed the job. The classification is a step
function between change points (attempt starts and ends), so each interval's seconds of each
kind are integrals computed with prefix sums, vectorised per (VC, demand) pair.

Per job (``decompose``): seconds of each kind summed over its waits, and ``cause``: the kind
with the most seconds (ties: fair_share, fragmentation, other), ``none`` for a job that never
waited. ``cause_two_way`` is the same choice with other counted as fragmentation, for
comparison with schedulers that record only two causes (the synthesizer's and the replay's
ground truth decide by quota alone: every quota-left second is fragmentation there).
Table 2 counts waiting jobs by cause and GPU bucket. A job that never started waited from
submit to its end in the scheduler log (``scheduler_events``: the app's FINISHED, FAILED or
KILLED transition, e.g. cancelled in the queue); without such a log it is left out (its wait
has no known end). ``started`` says which jobs ran. Quotas: ``--vc-quotas FILE`` or ``vcquota.quotas_for_store``
(proportional to GPU-time shares); a VC missing from the quotas has quota 0.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from philly_analyze.analysis import clusterstate, paper
from philly_analyze.analysis.common import (
    BUCKET_LABELS,
    Context,
    Scope,
    gpu_bucket,
    quantiles,
)
from philly_analyze.analysis.result import ResultTable, Section
from philly_analyze.store import Store

WAIT_KINDS: tuple[str, ...] = ("fair_share", "fragmentation", "other")
#: Table 2 bucket columns: our label -> column name (paper's CSV names).
_T2_COLS = {"1": "gpus_1", "2-4": "gpus_2_4", "5-8": "gpus_5_8", ">8": "gpus_gt8"}
PER_JOB_COLUMNS = (
    "job_id",
    "vc",
    "num_gpus",
    "gpu_bucket",
    "started",
    "queue_delay_s",
    "retry_wait_s",
    "wait_s",
    "fair_share_s",
    "fragmentation_s",
    "other_s",
    "cause",
    "cause_two_way",
)


def waits(ctx: Context) -> pd.DataFrame:
    """Every waiting interval of the scoped jobs: job_id, attempt_idx, kind (initial/retry),
    vc, n (GPUs), a_us, b_us (epoch microseconds; b may precede a for clock glitches)."""
    return ctx.cached("queueing_waits", lambda: _waits(ctx)).copy()


def _waits(ctx: Context) -> pd.DataFrame:
    # Jobs that never started but whose end the scheduler logged (cancelled or failed while
    # queued): they waited from submit to that end. Only scheduler logs tell it.
    unstarted = ""
    if ctx.has("scheduler_events"):
        unstarted = f"""
        UNION ALL
        SELECT j.job_id, 0 AS attempt_idx, 'unstarted' AS kind, coalesce(j.vc, '') AS vc,
               coalesce(j.num_gpus, 0)::BIGINT AS n, epoch_us(j.submit_time) AS a_us,
               epoch_us(e.t) AS b_us
        FROM {ctx.jobs} j JOIN (
            SELECT job_id, min(time) AS t FROM scheduler_events
            WHERE entity = 'app' AND to_state IN ('FINISHED', 'FAILED', 'KILLED')
            GROUP BY job_id) e USING (job_id)
        WHERE j.first_start IS NULL AND j.submit_time IS NOT NULL"""
    return ctx.df(
        f"""WITH a AS (
            SELECT job_id, attempt_idx, start_time, num_gpus,
                   lag(end_time) OVER w AS prev_end, row_number() OVER w = 1 AS first
            FROM {ctx.attempts} WHERE start_time IS NOT NULL
            WINDOW w AS (PARTITION BY job_id ORDER BY attempt_idx))
        SELECT * FROM (
        SELECT a.job_id, a.attempt_idx,
               CASE WHEN a.first THEN 'initial' ELSE 'retry' END AS kind,
               coalesce(j.vc, '') AS vc, coalesce(a.num_gpus, j.num_gpus, 0)::BIGINT AS n,
               epoch_us(CASE WHEN a.first THEN j.submit_time ELSE a.prev_end END) AS a_us,
               epoch_us(a.start_time) AS b_us
        FROM a JOIN {ctx.jobs} j USING (job_id)
        WHERE (CASE WHEN a.first THEN j.submit_time ELSE a.prev_end END) IS NOT NULL
        {unstarted})
        ORDER BY job_id, attempt_idx"""
    )


def decompose(ctx: Context) -> pd.DataFrame:
    """Per scoped job that started: seconds of fair-share, fragmentation and other waiting
    (columns ``PER_JOB_COLUMNS``; join on job_id). Cached per context."""
    return ctx.cached("queueing_per_job", lambda: _decompose(ctx))


def decompose_store(
    store: Store, vc_quotas: str | dict[str, int] | None = None, scope: Scope | None = None
) -> pd.DataFrame:
    """``decompose`` on a store directly (for checks against a ground truth)."""
    with Context(store, scope or Scope(), vc_quotas) as ctx:
        return decompose(ctx)


def _decompose(ctx: Context) -> pd.DataFrame:
    w = waits(ctx)
    jobs = ctx.df(
        f"SELECT job_id, coalesce(vc, '') AS vc, num_gpus, first_start IS NOT NULL AS started "
        f"FROM {ctx.jobs} ORDER BY job_id"
    )
    jobs = jobs[jobs["started"] | jobs["job_id"].isin(w["job_id"])]
    a = w["a_us"].to_numpy(np.int64)
    b = w["b_us"].to_numpy(np.int64)
    wait = np.maximum(b - a, 0) / 1e6
    kinds = {k: np.zeros(len(w)) for k in WAIT_KINDS}
    pos = np.flatnonzero(wait > 0)
    if len(pos):
        tl = ctx.cached(
            "timeline", lambda: clusterstate.build(ctx, int(a[pos].min()), int(b.max()))
        )
        quotas = ctx.quotas
        sub = w.iloc[pos]
        for (vc, n), rows in sub.groupby(["vc", "n"], sort=True).indices.items():
            idx = pos[rows]
            fair = tl.vc_usage(str(vc)) + int(n) > quotas.get(str(vc), 0)
            frag = ~fair & ~tl.fits(int(n))
            kinds["fair_share"][idx] = tl.measure(fair, a[idx], b[idx])
            kinds["fragmentation"][idx] = tl.measure(frag, a[idx], b[idx])
        # Rounding of the integrals must not make "other" negative.
        kinds["other"] = np.maximum(wait - kinds["fair_share"] - kinds["fragmentation"], 0.0)
    per = pd.DataFrame(
        {
            "job_id": w["job_id"],
            "initial": np.where(w["kind"] != "retry", wait, 0.0),
            "retry": np.where(w["kind"] == "retry", wait, 0.0),
            **{f"{k}_s": v for k, v in kinds.items()},
        }
    )
    g = per.groupby("job_id", sort=True).sum()
    out = jobs.merge(g, left_on="job_id", right_index=True, how="left").fillna(
        {c: 0.0 for c in g.columns}
    )
    out = out.rename(columns={"initial": "queue_delay_s", "retry": "retry_wait_s"})
    out["wait_s"] = out["queue_delay_s"] + out["retry_wait_s"]
    out["gpu_bucket"] = gpu_bucket(out["num_gpus"].fillna(0).to_numpy())
    secs = out[[f"{k}_s" for k in WAIT_KINDS]].to_numpy()
    cause = np.array(WAIT_KINDS, dtype=object)[np.argmax(secs, axis=1)]
    out["cause"] = np.where(out["wait_s"] > 0, cause, "none")
    # Schedulers that record two causes call every quota-left second fragmentation.
    quota_left = out["fragmentation_s"] + out["other_s"]
    two = np.where(out["fair_share_s"] >= quota_left, "fair_share", "fragmentation")
    out["cause_two_way"] = np.where(out["wait_s"] > 0, two, "none")
    return out[list(PER_JOB_COLUMNS)].reset_index(drop=True)


def _delay_stats(delays_min: np.ndarray) -> dict[str, object]:
    p50, p90, p95, p99 = quantiles(delays_min, (0.5, 0.9, 0.95, 0.99))
    return {
        "jobs": len(delays_min),
        "waiting_jobs": int((delays_min > 0).sum()),
        "mean_min": float(delays_min.mean()) if len(delays_min) else None,
        "p50_min": p50,
        "p90_min": p90,
        "p95_min": p95,
        "p99_min": p99,
    }


def compute(ctx: Context) -> Section:
    """Delay percentiles per VC and bucket, per attempt, and the Table 2 decomposition."""
    sec = Section("queueing", "Queueing delay and its causes (Table 2, Figure 3)")
    if note := ctx.lacking("queueing"):
        sec.notes.append(note)
        return sec
    per = decompose(ctx)
    if per.empty:
        sec.notes.append("no job in scope has both a submit time and a started attempt")
        return sec
    # Figure 3's delays: jobs that started (a job cancelled in the queue has no first start).
    started = per[per["started"]].assign(delay_min=lambda d: d["queue_delay_s"] / 60.0)
    rows = []
    for vc in ["all", *sorted(started["vc"].unique())]:
        pv = started if vc == "all" else started[started["vc"] == vc]
        for bucket in ("all", *BUCKET_LABELS):
            pb = pv if bucket == "all" else pv[pv["gpu_bucket"] == bucket]
            if len(pb) or vc == "all":
                rows.append(
                    {
                        "vc": vc or "(none)",
                        "gpu_bucket": bucket,
                        **_delay_stats(pb["delay_min"].to_numpy()),
                    }
                )
    sec.tables.append(
        ResultTable(
            "delay_by_vc",
            "Queueing delay (minutes) per VC and GPU demand",
            pd.DataFrame(rows),
            paper="Figure 3 (as percentiles)",
            description="Delay = first start - submit; zero delays kept.",
            display=("vc", "gpu_bucket", "jobs", "mean_min", "p50_min", "p90_min", "p95_min"),
        )
    )
    sec.tables.append(_attempt_table(ctx))
    sec.tables.extend(_table2(per))
    sec.data["delays"] = started[["vc", "gpu_bucket", "delay_min"]]
    sec.data["per_job"] = per
    _notes(ctx, sec, per)
    return sec


def _attempt_table(ctx: Context) -> ResultTable:
    w = waits(ctx)
    w["delay_min"] = np.maximum(w["b_us"] - w["a_us"], 0) / 6e7
    w["gpu_bucket"] = gpu_bucket(w["n"].to_numpy())
    rows = []
    for kind in ("initial", "retry", "unstarted", "all"):
        wk = w if kind == "all" else w[w["kind"] == kind]
        if kind == "unstarted" and wk.empty:
            continue
        for bucket in ("all", *BUCKET_LABELS):
            wb = wk if bucket == "all" else wk[wk["gpu_bucket"] == bucket]
            st = _delay_stats(wb["delay_min"].to_numpy())
            rows.append(
                {
                    "wait": kind,
                    "gpu_bucket": bucket,
                    "attempts": st.pop("jobs"),
                    "waiting_attempts": st.pop("waiting_jobs"),
                    **st,
                }
            )
    return ResultTable(
        "delay_by_attempt",
        "Queueing delay (minutes) per attempt: first start, and retries after a failure",
        pd.DataFrame(rows),
        description="A retry waits from the previous attempt's end to its own start; "
        "unstarted: jobs that ended in the queue (end from the scheduler log).",
        display=("wait", "gpu_bucket", "attempts", "mean_min", "p50_min", "p90_min", "p95_min"),
    )


def _table2(per: pd.DataFrame) -> list[ResultTable]:
    waiting = per[per["wait_s"] > 0]
    # Jobs that ended in the queue before any attempt have no known GPU demand: a column of
    # their own, so that each row's buckets add up to its "all".
    unknown = waiting["gpu_bucket"].isna()
    counts = []
    for kind in WAIT_KINDS:
        row: dict[str, object] = {"delay_type": kind}
        for bucket, col in _T2_COLS.items():
            row[col] = int(((waiting["cause"] == kind) & (waiting["gpu_bucket"] == bucket)).sum())
            if col != "gpus_1":
                row[f"paper_{col}"] = paper.lookup("table2", "delay_type", kind, col)
        if unknown.any():
            row["gpus_unknown"] = int(((waiting["cause"] == kind) & unknown).sum())
        row["all"] = int((waiting["cause"] == kind).sum())
        counts.append(row)
    secs = []
    for bucket in ("all", *BUCKET_LABELS):
        wb = waiting if bucket == "all" else waiting[waiting["gpu_bucket"] == bucket]
        total = float(wb["wait_s"].sum())
        secs.append(
            {
                "gpu_bucket": bucket,
                "waiting_jobs": len(wb),
                "wait_hours": total / 3600.0,
                **{
                    f"{k}_pct": (100.0 * float(wb[f"{k}_s"].sum()) / total if total else None)
                    for k in WAIT_KINDS
                },
            }
        )
    return [
        ResultTable(
            "table2",
            "Waiting jobs by main cause of their wait and GPU demand",
            pd.DataFrame(counts),
            paper="Table 2",
            description="A job counts under the cause that took most of its waiting time; "
            "gpus_unknown (when present): jobs that ended in the queue, demand unknown.",
        ),
        ResultTable(
            "wait_seconds",
            "Share of waiting time by cause and GPU demand",
            pd.DataFrame(secs),
            description="Seconds of each kind over all waits (first start and retries).",
        ),
    ]


def _notes(ctx: Context, sec: Section, per: pd.DataFrame) -> None:
    never = ctx.scalar(f"SELECT count(*) FROM {ctx.jobs} WHERE first_start IS NULL")
    ended = int((~per["started"]).sum())
    if never and ctx.has("scheduler_events"):
        sec.notes.append(
            f"{int(never):,} jobs never started: left out of the delay percentiles; "
            f"{ended:,} of them have an end in the scheduler log and count in Table 2"
        )
    elif never:  # without a scheduler log their wait has no known end: not "0 of them"
        sec.notes.append(
            f"{int(never):,} jobs never started: left out of the delay percentiles and of "
            "Table 2 (no scheduler log gives the end of their wait)"
        )
    neg = ctx.scalar(f"SELECT count(*) FROM {ctx.jobs} WHERE queue_delay_s < 0")
    if neg:
        sec.notes.append(f"{int(neg):,} jobs started before their submit time: delay taken as 0")
    quotas = ctx.quotas
    missing = sorted({v for v in per.loc[per["wait_s"] > 0, "vc"].unique()} - set(quotas))
    if missing:
        sec.notes.append(
            "VCs without a quota (treated as 0): " + ", ".join(v or "(none)" for v in missing)
        )
    if quotas:
        sec.notes.append(
            f"VC quotas ({ctx.quota_source}): "
            + ", ".join(f"{k}={v}" for k, v in sorted(quotas.items()))
        )
    else:
        sec.notes.append(
            "no VC quotas (none given, and none inferable: the store lists no GPUs or no GPU "
            "time): every wait counts as fair-share; give --vc-quotas FILE"
        )
    tl = ctx.cache.get("timeline")
    if tl is not None and tl.attempts_without_placements:
        sec.notes.append(
            f"{tl.attempts_without_placements:,} attempts have no placements: they count toward "
            "their VC's usage but occupy no known server, so fragmentation is underestimated"
        )
    _end_unknown_notes(ctx, sec, tl is not None)


def _end_unknown_notes(ctx: Context, sec: Section, with_timeline: bool) -> None:
    """Attempts without a recorded end in jobs that ended (``attempts.timing``): the cluster
    state leaves them out, and a retry after one has no known start of its wait."""
    note = ctx.runs_note(whole_store=True)
    if note and with_timeline:
        sec.notes.append(f"cluster state: {note}")
    unknown = ctx.scalar(
        f"""SELECT count(*) FROM (
            SELECT lag(end_time) OVER w AS prev_end, row_number() OVER w > 1 AS retry
            FROM {ctx.attempts} WHERE start_time IS NOT NULL
            WINDOW w AS (PARTITION BY job_id ORDER BY attempt_idx))
        WHERE retry AND prev_end IS NULL"""
    )
    if unknown:
        sec.notes.append(
            f"{int(unknown):,} retries follow an attempt whose end is not recorded: their wait "
            "is unknown and left out"
        )
