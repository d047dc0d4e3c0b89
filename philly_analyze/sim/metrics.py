"""Comparison metrics of a replay and the true waiting causes, vectorised with numpy.

Waiting causes (the scheduler's ground truth, checked against the report's reconstruction):
an attempt waiting between its ready time and its start waits for

- ``fair_share`` while its VC's GPUs in use plus its demand exceed the VC's quota (the quota
  is used up; the policy found no idle capacity it could borrow, or it would have started);
- ``fragmentation`` while the quota has room for it, so what is missing is a placement that
  meets the locality constraint (``locality.fits_strict``; relaxed after the locality wait).

The cause is a function of the VC's usage over time, so it is computed after the run from the
usage log by splitting each waiting interval where usage crosses ``quota - demand``. Policies
without quotas (fifo, las, srtf) have an unbounded quota: every wait is fragmentation.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

CAUSES = ("fair_share", "fragmentation")

#: Metric keys, in display order, with what they mean (docs/replay.md lists the same).
METRICS: dict[str, str] = {
    "jobs": "jobs replayed that ran",
    "jobs_unscheduled": "jobs that never started (e.g. demand beyond quota with no borrowing)",
    "attempts": "attempts started (preempted segments count)",
    "preemptions": "attempts cut short by preemption",
    "jct_mean_s": "job completion time (last end - submit), mean",
    "jct_p50_s": "JCT median",
    "jct_p95_s": "JCT 95th percentile",
    "jct_p99_s": "JCT 99th percentile",
    "queue_mean_s": "queueing delay (first start - submit), mean",
    "queue_p50_s": "queueing delay median",
    "queue_p95_s": "queueing delay 95th percentile",
    "queue_p99_s": "queueing delay 99th percentile",
    "fair_share_delay_s": "total waiting time attributed to fair share (quota used)",
    "fragmentation_delay_s": "total waiting time attributed to fragmentation (no placement)",
    "fair_share_delay_frac": "fair share / (fair share + fragmentation) waiting time",
    "gpu_util_allocated_pct": "GPU-time allocated / (cluster GPUs x makespan)",
    "gpu_util_effective_pct": "GPU-time of useful work (locality slowdown removed) / same",
    "makespan_s": "last end - first submit",
    "vc_fairness_jain": "Jain's index over VCs of mean (run time / JCT); 1 = equal service",
    "vc_worst_mean_queue_s": "mean queueing delay of the worst-served VC",
    "fidelity_queue_median_abs_err_s": "median |replayed - observed| queueing delay "
    "(observed data only)",
    "fidelity_queue_p90_abs_err_s": "90th percentile of |replayed - observed| queueing delay: "
    "the median is 0 whenever most jobs never queue, this one shows the queued jobs",
    "fidelity_jobs": "jobs with an observed start used for the fidelity metrics",
}
#: Former metric names, still accepted where a user types one (``sweep --metric``) and read
#: from older outputs, -> the current name. Deprecated: they will go.
METRIC_ALIASES: dict[str, str] = {
    # A median, never a mean absolute error.
    "fidelity_queue_mae_s": "fidelity_queue_median_abs_err_s",
}


def waiting_causes(
    ready: np.ndarray,
    start: np.ndarray,
    vc: np.ndarray,
    demand: np.ndarray,
    quota: np.ndarray | None,
    use_t: np.ndarray,
    use_vc: np.ndarray,
    use_d: np.ndarray,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Split waiting intervals ``[ready, start)`` by cause.

    Returns (row, piece_start, piece_end, cause_code) where row indexes the inputs and
    cause_code indexes ``CAUSES``. ``quota[v]`` per VC (None: no quotas)."""
    waiting = np.flatnonzero(start > ready)
    if quota is None or len(waiting) == 0:
        return waiting, ready[waiting], start[waiting], np.ones(len(waiting), np.int8)
    out_r, out_s, out_e, out_c = [], [], [], []
    order = np.argsort(use_t, kind="stable")
    ut, uv, ud = use_t[order], use_vc[order], use_d[order]
    for v in np.unique(vc[waiting]):
        rows_v = waiting[vc[waiting] == v]
        sel = uv == v
        t_v = ut[sel]
        cum = np.cumsum(ud[sel])
        # Usage after all changes at a timestamp: keep the last change of each time.
        if len(t_v):
            last = np.r_[t_v[1:] != t_v[:-1], True]
            t_v, cum = t_v[last], cum[last]
        for n in np.unique(demand[rows_v]):
            rows = rows_v[demand[rows_v] == n]
            exhausted = (cum + n > quota[v]).astype(np.int8)
            # State changes only.
            if len(exhausted):
                flip = np.r_[True, exhausted[1:] != exhausted[:-1]]
                ft, fs = t_v[flip], exhausted[flip]
            else:
                ft, fs = t_v, exhausted
            s, e = ready[rows], start[rows]
            i0 = np.searchsorted(ft, s, side="right")
            i1 = np.searchsorted(ft, e, side="left")
            pieces = 1 + np.maximum(i1 - i0, 0)
            rep = np.repeat(np.arange(len(rows)), pieces)
            k = np.arange(len(rep)) - np.repeat(np.cumsum(pieces) - pieces, pieces)
            bidx = i0[rep] + k - 1  # boundary index before this piece (-1: none)
            p_start = np.where(k == 0, s[rep], ft[np.clip(bidx, 0, None)] if len(ft) else 0)
            nxt = i0[rep] + k
            is_last = k == pieces[rep] - 1
            p_end = np.where(is_last, e[rep], ft[np.clip(nxt, 0, len(ft) - 1)] if len(ft) else 0)
            state0 = int(n > quota[v])  # before the VC's first start its usage is 0
            state = np.where(bidx >= 0, fs[np.clip(bidx, 0, None)] if len(fs) else 0, state0)
            out_r.append(rows[rep])
            out_s.append(p_start)
            out_e.append(p_end)
            out_c.append(np.where(state == 1, 0, 1).astype(np.int8))
    r = np.concatenate(out_r)
    o = np.argsort(r, kind="stable")
    return (
        r[o],
        np.concatenate(out_s)[o],
        np.concatenate(out_e)[o],
        np.concatenate(out_c)[o],
    )


def _pct(x: np.ndarray, q: float) -> float:
    return float(np.percentile(x, q)) if len(x) else math.nan


def compute_metrics(
    *,
    submit: np.ndarray,
    first_start: np.ndarray,
    last_end: np.ndarray,
    run_vc: np.ndarray,
    row_gpus: np.ndarray,
    row_start: np.ndarray,
    row_end: np.ndarray,
    row_intrinsic: np.ndarray,
    wait_cause: np.ndarray,
    wait_len: np.ndarray,
    total_gpus: int,
    unscheduled: int,
    preemptions: int,
    obs_start: np.ndarray | None,
) -> tuple[dict[str, Any], dict[int, dict[str, float]]]:
    """The flat metrics dict (seconds; see ``METRICS``) and per-VC figures."""
    us = 1e6
    jct = (last_end - submit) / us
    queue = (first_start - submit) / us
    m: dict[str, Any] = {
        "jobs": len(submit),
        "jobs_unscheduled": unscheduled,
        "attempts": len(row_start),
        "preemptions": preemptions,
        "jct_mean_s": float(jct.mean()) if len(jct) else math.nan,
        "jct_p50_s": _pct(jct, 50),
        "jct_p95_s": _pct(jct, 95),
        "jct_p99_s": _pct(jct, 99),
        "queue_mean_s": float(queue.mean()) if len(queue) else math.nan,
        "queue_p50_s": _pct(queue, 50),
        "queue_p95_s": _pct(queue, 95),
        "queue_p99_s": _pct(queue, 99),
    }
    fs = float(wait_len[wait_cause == 0].sum()) / us
    fr = float(wait_len[wait_cause == 1].sum()) / us
    m["fair_share_delay_s"] = fs
    m["fragmentation_delay_s"] = fr
    m["fair_share_delay_frac"] = fs / (fs + fr) if fs + fr > 0 else 0.0
    span = (float(row_end.max()) - float(submit.min())) / us if len(row_end) else 0.0
    cap = total_gpus * span
    alloc = float((row_gpus * (row_end - row_start)).sum()) / us
    useful = float((row_gpus * row_intrinsic).sum()) / us
    m["gpu_util_allocated_pct"] = 100 * alloc / cap if cap > 0 else math.nan
    m["gpu_util_effective_pct"] = 100 * useful / cap if cap > 0 else math.nan
    m["makespan_s"] = span
    per_vc: dict[int, dict[str, float]] = {}
    run_time = jct - queue
    service = np.where(jct > 0, run_time / np.where(jct > 0, jct, 1), 1.0)
    for v in np.unique(run_vc):
        sel = run_vc == v
        per_vc[int(v)] = {
            "jobs": int(sel.sum()),
            "queue_mean_s": float(queue[sel].mean()),
            "jct_mean_s": float(jct[sel].mean()),
            "service_ratio": float(service[sel].mean()),
        }
    x = np.array([d["service_ratio"] for d in per_vc.values()])
    m["vc_fairness_jain"] = float(x.sum() ** 2 / (len(x) * (x**2).sum())) if len(x) else math.nan
    m["vc_worst_mean_queue_s"] = (
        max(d["queue_mean_s"] for d in per_vc.values()) if per_vc else math.nan
    )
    if obs_start is not None:
        have = obs_start != np.iinfo(np.int64).min
        if have.any():
            err = np.abs((first_start[have] - obs_start[have]) / us)
            m["fidelity_queue_median_abs_err_s"] = float(np.median(err))
            m["fidelity_queue_p90_abs_err_s"] = float(np.percentile(err, 90))
            m["fidelity_jobs"] = int(have.sum())
    return m, per_vc
