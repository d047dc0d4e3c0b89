"""Comparison metrics of a replay and the true waiting causes, vectorised with numpy.

Waiting causes (the scheduler's ground truth, checked against the report's reconstruction):
an attempt waiting between its ready time and its start waits, moment by moment, for one of
``waitcause.CAUSES``, by the one definition of ``philly_analyze.waitcause`` applied to the
replayed cluster: ``fair_share`` while its VC's GPUs in use plus its demand exceed the VC's
quota; else ``capacity`` while fewer GPUs than its demand are free in the whole cluster (other
VCs hold them, borrowed or not); else ``fragmentation`` while that many are free but no
placement meeting the locality constraint is; else ``other`` (a placement was free and the
quota allowed it, yet it waited: head-of-line blocking under ``fifo``). Policies without quotas
(fifo, las, srtf) have no fair-share waits.

The causes are a function of the schedule, so they are computed after the run from its rows
(start, end, placement): the cluster's free GPUs and each VC's usage as step functions
(``waitcause.build_steps``), then each wait measured per cause with its consecutive pieces of
one cause merged (``waitcause.split_waits``): one row per (attempt, cause), whatever the
number of times the cause changed, with the exact total seconds.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from philly_analyze.waitcause import (
    CAUSES,
    Steps,
    WaitSplit,
    build_steps,
    server_events,
    sorted_unique,
    step_index,
    usage_steps,
)
from philly_analyze.waitcause import split_waits as _split_waits

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
    "fair_share_delay_s": "total waiting time attributed to fair share (the VC's GPUs in use "
    "plus the demand past its quota)",
    "fragmentation_delay_s": "total waiting time attributed to fragmentation (enough GPUs "
    "free, no placement meeting the locality constraint)",
    "capacity_delay_s": "total waiting time attributed to capacity (quota left, fewer GPUs "
    "free in the cluster than the demand)",
    "other_delay_s": "total waiting time with quota and a placement free (head-of-line blocking)",
    "fair_share_delay_frac": "fair share / all waiting time (absent when nothing waited)",
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


def cluster_steps(
    sizes: np.ndarray,
    rack: np.ndarray,
    start: np.ndarray,
    end: np.ndarray,
    seg_row: np.ndarray,
    seg_server: np.ndarray,
    seg_gpus: np.ndarray,
) -> tuple[Steps, np.ndarray, np.ndarray]:
    """The replayed cluster's state over time: rows ``[start, end)`` hold ``seg_gpus`` GPUs
    of server ``seg_server`` for each placement segment of row ``seg_row``. Also returns the
    step each row starts and ends at."""
    held = end > start
    times = sorted_unique(np.concatenate([start[held], end[held]]))
    s_idx, e_idx = step_index(times, start), step_index(times, end)
    ev = server_events(seg_server, s_idx[seg_row], e_idx[seg_row], seg_gpus)
    return build_steps(times, sizes, rack, *ev), s_idx, e_idx


def waiting_causes(
    steps: Steps,
    ready: np.ndarray,
    start: np.ndarray,
    s_idx: np.ndarray,
    e_idx: np.ndarray,
    vc: np.ndarray,
    demand: np.ndarray,
    quota: np.ndarray | None,
) -> WaitSplit:
    """Split each row's wait ``[ready, start)`` by cause (``WaitSplit`` with first/last).
    ``s_idx``/``e_idx``: the steps each row starts and ends at (``cluster_steps``): rows also
    make up the VCs' usage; ``vc``/``demand``: each row's VC index and GPUs; ``quota[v]`` per
    VC, None without quotas."""
    if quota is None:
        return _split_waits(steps, vc, demand, ready, start, _no_usage, None, with_bounds=True)
    held = e_idx > s_idx
    order = np.argsort(vc)  # rows grouped by VC; their order within it does not matter
    order = order[held[order]]
    cuts = np.searchsorted(vc[order], np.arange(len(quota) + 1))

    def usage_of(v: int) -> np.ndarray:
        rows = order[cuts[v] : cuts[v + 1]] if 0 <= v < len(quota) else order[:0]
        t = np.concatenate([s_idx[rows], e_idx[rows]])
        return usage_steps(steps, t, np.concatenate([demand[rows], -demand[rows]]))

    quotas = {v: int(q) for v, q in enumerate(quota)}
    return _split_waits(steps, vc, demand, ready, start, usage_of, quotas, with_bounds=True)


def _no_usage(v: int) -> np.ndarray:
    raise AssertionError("no quotas: usage is never asked for")


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
    wait_us: np.ndarray,
    total_gpus: int,
    unscheduled: int,
    preemptions: int,
    obs_start: np.ndarray | None,
) -> tuple[dict[str, Any], dict[int, dict[str, float]]]:
    """The flat metrics dict (seconds; see ``METRICS``) and per-VC figures. ``wait_us``:
    microseconds of waiting per row (or any grouping) and cause, columns in ``CAUSES`` order."""
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
    # Integer microseconds per cause: the totals are exact whatever the merging of pieces.
    by_cause = wait_us.sum(axis=0) if len(wait_us) else np.zeros(len(CAUSES), np.int64)
    for c, total in zip(CAUSES, by_cause.tolist(), strict=True):
        m[f"{c}_delay_s"] = total / us
    all_wait = int(by_cause.sum())
    # A share of no waiting is not 0: absent (NaN -> null, "-") when nothing waited.
    m["fair_share_delay_frac"] = int(by_cause[0]) / all_wait if all_wait else math.nan
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
