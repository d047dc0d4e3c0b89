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
the attempt it waited for), by the one definition in ``philly_analyze.waitcause``:
**fair_share** (``used(v) + n > quota(v)``), else **capacity** (fewer than ``n`` GPUs free in
the whole cluster), else **fragmentation** (``n`` GPUs free, but no placement meeting
``locality.fits_strict``), else **other** (quota left and a placement free, yet the job
waited), or **undetermined** where the data cannot tell: a waiting job's GPU demand unknown
(``waitcause.UNKNOWN_DEMAND``), or attempts whose end or GPU count is unknown, which the
cluster state holds between two bounds (``clusterstate``; ``waitcause``, *Incomplete data*):
a moment whose cause differs between the bounds is undetermined. The classification is a step
function between change points (attempt starts and ends), so each interval's seconds of each
cause are integrals computed with prefix sums, vectorised per (VC, demand) pair.

Per job (``decompose``): seconds of each cause summed over its waits, and ``cause``: the cause
with the most seconds (ties: fair_share, fragmentation, capacity, other), ``undetermined``
when its undetermined seconds could change which that is, ``none`` for a job that never
waited. ``cause_paper`` is the same choice over the paper's Table 2 categories
(``waitcause.PAPER_CAUSE``: fragmentation and capacity are the paper's fragmentation; other
and undetermined stay apart), ``cause_two_way`` over fair-share against every quota-left
second (other counted as fragmentation too), for ground truths that record two causes. ``table2`` counts waiting jobs
by ``cause_paper`` beside the paper's counts; ``table2_causes`` by ``cause``. A job that never
started waited from submit to its end in the scheduler log (``scheduler_events``: the app's
FINISHED, FAILED or KILLED transition, e.g. cancelled in the queue); without such a log it is
left out (its wait has no known end). ``started`` says which jobs ran. Quotas: ``--vc-quotas
FILE`` or ``vcquota.quotas_for_store`` (proportional to GPU-time shares); a VC missing from the
quotas has quota 0, one whose quota cannot be inferred (``Context.quotas_unknown``) none: its
waits are undetermined.
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
from philly_analyze.waitcause import (
    CAUSES,
    PAPER_CAUSE,
    REPORT_CAUSES,
    UNKNOWN_DEMAND,
    split_waits,
)

WAIT_KINDS: tuple[str, ...] = REPORT_CAUSES
#: Table 2's rows in the paper's view: its two causes, and ours that the paper has no row for.
PAPER_KINDS: tuple[str, ...] = ("fair_share", "fragmentation", "other", "undetermined")
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
    "capacity_s",
    "other_s",
    "undetermined_s",
    "cause",
    "cause_paper",
    "cause_two_way",
)


def waits(ctx: Context) -> pd.DataFrame:
    """Every waiting interval of the scoped jobs: job_id, attempt_idx, kind (initial/retry),
    vc, n (GPUs, ``waitcause.UNKNOWN_DEMAND`` when the data does not give them), a_us, b_us
    (epoch microseconds; b may precede a for clock glitches)."""
    return ctx.cached("queueing_waits", lambda: _waits(ctx)).copy()


def _waits(ctx: Context) -> pd.DataFrame:
    # Jobs that never started but whose end the scheduler logged (cancelled or failed while
    # queued): they waited from submit to that end. Only scheduler logs tell it.
    unstarted = ""
    if ctx.has("scheduler_events"):
        unstarted = f"""
        UNION ALL
        SELECT j.job_id, 0 AS attempt_idx, 'unstarted' AS kind, coalesce(j.vc, '') AS vc,
               coalesce(j.num_gpus, {UNKNOWN_DEMAND})::BIGINT AS n,
               epoch_us(j.submit_time) AS a_us,
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
               coalesce(j.vc, '') AS vc,
               coalesce(a.num_gpus, j.num_gpus, {UNKNOWN_DEMAND})::BIGINT AS n,
               epoch_us(CASE WHEN a.first THEN j.submit_time ELSE a.prev_end END) AS a_us,
               epoch_us(a.start_time) AS b_us
        FROM a JOIN {ctx.jobs} j USING (job_id)
        WHERE (CASE WHEN a.first THEN j.submit_time ELSE a.prev_end END) IS NOT NULL
        {unstarted})
        ORDER BY job_id, attempt_idx"""
    )


def decompose(ctx: Context) -> pd.DataFrame:
    """Per scoped job that waited or started: seconds of each of ``WAIT_KINDS`` (columns
    ``PER_JOB_COLUMNS``; join on job_id). Cached per context."""
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
    wait = np.maximum(w["b_us"].to_numpy(np.int64) - w["a_us"].to_numpy(np.int64), 0) / 1e6
    secs = _wait_causes(ctx, w)
    per = pd.DataFrame(
        {
            "job_id": w["job_id"],
            "initial": np.where(w["kind"] != "retry", wait, 0.0),
            "retry": np.where(w["kind"] == "retry", wait, 0.0),
            **{f"{k}_s": secs[:, i] for i, k in enumerate(WAIT_KINDS)},
        }
    )
    g = per.groupby("job_id", sort=True).sum()
    out = jobs.merge(g, left_on="job_id", right_index=True, how="left").fillna(
        {c: 0.0 for c in g.columns}
    )
    out = out.rename(columns={"initial": "queue_delay_s", "retry": "retry_wait_s"})
    out["wait_s"] = out["queue_delay_s"] + out["retry_wait_s"]
    out["gpu_bucket"] = gpu_bucket(out["num_gpus"].fillna(0).to_numpy())
    waited = out["wait_s"] > 0
    out["cause"] = _main_cause(out, {k: (k,) for k in CAUSES}, waited)
    paper_kinds = {k: tuple(c for c in CAUSES if PAPER_CAUSE[c] == k) for k in PAPER_KINDS[:-1]}
    out["cause_paper"] = _main_cause(out, paper_kinds, waited)
    # Schedulers that record two causes call every quota-left second fragmentation.
    two = {"fair_share": ("fair_share",), "fragmentation": CAUSES[1:]}
    out["cause_two_way"] = _main_cause(out, two, waited)
    return out[list(PER_JOB_COLUMNS)].reset_index(drop=True)


def _wait_causes(ctx: Context, w: pd.DataFrame) -> np.ndarray:
    """Seconds of each of ``WAIT_KINDS`` per wait of ``waits``; also caches, per wait, the
    seconds during which an attempt whose end is unknown may have held GPUs (for the notes)."""
    a = w["a_us"].to_numpy(np.int64)
    b = w["b_us"].to_numpy(np.int64)
    secs = np.zeros((len(w), len(WAIT_KINDS)))
    overlap = np.zeros(len(w))
    pos = np.flatnonzero(b > a)
    if len(pos):
        tl = ctx.cached(
            "timeline", lambda: clusterstate.build(ctx, int(a[pos].min()), int(b.max()))
        )
        split = split_waits(
            tl.steps,
            w["vc"].to_numpy(object),
            w["n"].to_numpy(np.int64),
            a,
            b,
            tl.vc_usage,
            {**ctx.quotas, **dict.fromkeys(ctx.quotas_unknown)},
            most=tl.most_held(),
        )
        secs = split.seconds()
        if tl.end_unknown:
            overlap = tl.end_unknown_us(a, b) / 1e6
    ctx.cache["queueing_wait_causes"] = (secs, overlap)
    return secs


def _main_cause(
    per: pd.DataFrame, groups: dict[str, tuple[str, ...]], waited: pd.Series
) -> np.ndarray:
    """The group of causes with the most seconds (ties: the first group), ``none`` for jobs
    that never waited, ``undetermined`` when the undetermined seconds could change which
    group that is (the leader would not keep the lead if they all went to a rival)."""
    secs = np.column_stack([per[[f"{c}_s" for c in cs]].sum(axis=1) for cs in groups.values()])
    und = per["undetermined_s"].to_numpy(float)[:, None]
    best = np.argmax(secs, axis=1)[:, None]
    lead = np.take_along_axis(secs, best, axis=1)
    rival = secs + und
    order = np.arange(secs.shape[1])[None, :]
    keeps = (lead > rival) | ((lead == rival) & (best < order)) | (order == best)
    cause = np.array(list(groups), dtype=object)[best[:, 0]]
    cause = np.where(keeps.all(axis=1), cause, "undetermined")
    return np.where(waited, cause, "none")


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
            paper="Figure 3, as percentiles",
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
            "Waiting jobs by main cause of their wait and GPU demand, in the paper's two causes",
            _cause_counts(waiting, "cause_paper", PAPER_KINDS, with_paper=True),
            paper="Table 2",
            description="A job counts under the cause that took most of its waiting time; "
            "fragmentation here is the paper's: no placement free with quota left, i.e. our "
            "fragmentation + capacity; other (no paper row): quota and a placement free; "
            "undetermined (no paper row): the moments whose cause the data cannot tell could "
            "change which cause took most; gpus_unknown (when present): jobs whose GPU demand "
            "is unknown (ended in the queue, or a source that names no GPUs).",
        ),
        ResultTable(
            "table2_causes",
            "Waiting jobs by main cause of their wait and GPU demand: fair-share, "
            "fragmentation, capacity, other, undetermined",
            _cause_counts(waiting, "cause", WAIT_KINDS, with_paper=False),
            description="fair_share: the VC at or past its quota; capacity: quota left, fewer "
            "GPUs free in the whole cluster than the job needs; fragmentation: quota left, "
            "enough GPUs free, none in a placement meeting the locality constraint; other: "
            "quota and a placement free, yet the job waited; undetermined: the data cannot "
            "tell (an unknown GPU demand, or an attempt whose end is unknown, on which the "
            "cause depends: see the notes).",
        ),
        ResultTable(
            "wait_seconds",
            "Share of waiting time by cause and GPU demand",
            pd.DataFrame(secs),
            description="Seconds of each cause over all waits (first start and retries); "
            "undetermined: moments whose cause the data cannot tell.",
        ),
    ]


def _cause_counts(
    waiting: pd.DataFrame, column: str, kinds: tuple[str, ...], *, with_paper: bool
) -> pd.DataFrame:
    """Waiting jobs per cause (rows) and GPU bucket (columns, the paper's CSV names)."""
    # Jobs that ended in the queue before any attempt have no known GPU demand: a column of
    # their own, so that each row's buckets add up to its "all".
    unknown = waiting["gpu_bucket"].isna()
    counts = []
    for kind in kinds:
        is_kind = waiting[column] == kind
        row: dict[str, object] = {"delay_type": kind}
        for bucket, col in _T2_COLS.items():
            row[col] = int((is_kind & (waiting["gpu_bucket"] == bucket)).sum())
            if with_paper and col != "gpus_1":
                row[f"paper_{col}"] = paper.lookup("table2", "delay_type", kind, col)
        if unknown.any():
            row["gpus_unknown"] = int((is_kind & unknown).sum())
        row["all"] = int(is_kind.sum())
        counts.append(row)
    return pd.DataFrame(counts)


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
    waiting = {v for v in per.loc[per["wait_s"] > 0, "vc"].unique()}
    unknown = sorted(waiting & set(ctx.quotas_unknown))
    if unknown:
        sec.notes.append(
            "VCs whose quota cannot be inferred (no job of theirs that ran has a known GPU "
            "time): " + ", ".join(unknown) + "; their waits are undetermined (fair-share at a "
            "quota of 0, not at a large one); give --vc-quotas FILE"
        )
    missing = sorted(waiting - set(quotas) - set(unknown))
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
            "their VC's usage but occupy no known server, so the free GPUs are overestimated "
            "(capacity and fragmentation too low, other too high)"
        )
    _end_unknown_notes(ctx, sec, tl is not None)


def _end_unknown_notes(ctx: Context, sec: Section, with_timeline: bool) -> None:
    """What the data leaves open and how much of the waiting it makes undetermined: waits of
    unknown demand, attempts without a recorded end in jobs that ended (``attempts.timing``),
    attempts of unknown GPU count; and a retry after an attempt without an end has no known
    start of its wait."""
    tl = ctx.cache.get("timeline")
    done = ctx.cache.get("queueing_wait_causes")
    if with_timeline and tl is not None and done is not None:
        secs, overlap = done
        w = waits(ctx)
        und = secs[:, WAIT_KINDS.index("undetermined")]
        length = np.maximum((w["b_us"] - w["a_us"]).to_numpy(), 0) / 1e6
        demand = (w["n"] == UNKNOWN_DEMAND).to_numpy() & (length > 0)
        if demand.any():
            sec.notes.append(
                f"{int(demand.sum()):,} waits ({_dur(length[demand].sum())}) are of jobs whose "
                "GPU demand is unknown (ended in the queue before any attempt, or a source that "
                "names no GPUs): a moment is decided only where every demand of at least 1 GPU "
                "gives the same cause (fair-share when even 1 GPU would take the VC past its "
                f"quota); {_dur(und[demand].sum())} of them undetermined"
            )
        known_und = _dur(und[~demand].sum())
        if tl.end_unknown:
            jobs = ctx.scalar(
                f"SELECT count(DISTINCT job_id) FROM {ctx.all_attempts} "
                "WHERE timing = 'end_unknown'"
            )
            hit = overlap > 0
            sec.notes.append(
                f"cluster state: {tl.end_unknown:,} attempts of {int(jobs):,} jobs have no "
                "recorded end although the job ended (a final status or a later attempt): each "
                "held its GPUs from its start for a time the data does not give, at most to its "
                "job's next attempt or the end of the data, and the causes are computed at both "
                f"bounds; {int(hit.sum()):,} waits ({_dur(overlap.sum())}) overlap such a "
                f"possible run; {known_und} of the waits of known demand are undetermined "
                "(the two bounds give different causes)"
            )
        if tl.gpus_unknown:
            sec.notes.append(
                f"{tl.gpus_unknown:,} attempts have no known GPU count: each counts for its VC "
                "as at least 1 GPU and at most any number, and a moment whose cause depends on "
                f"it is undetermined ({known_und} of the waits of known demand are)"
            )
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


def _dur(seconds: float) -> str:
    """Seconds as a short duration (hours from one hour up)."""
    if seconds >= 3600:
        return f"{seconds / 3600:,.1f} h"
    if seconds >= 60:
        return f"{seconds / 60:,.1f} min"
    return f"{seconds:,.0f} s"
