"""Scheduling the synthetic jobs with the replay engine's ``philly`` policy.

``philly_analyze.sim.simulate(workload, cluster, "philly", quotas, params, seed)`` replays the
jobs' planned attempts (durations and outcomes) on the synthetic cluster: VC quotas with
borrowing, gang scheduling, locality-first placement relaxed after a wait, retries, and the
locality slowdown of jobs spread over more servers (so a spread attempt ends later than
planned). Its result carries the schedule and the true waiting causes, which become the
synthesizer's ``Schedule``.

Differences from the built-in scheduler: the policy's parameters come from the data file's
``[scheduler.philly]`` table (``borrow_limit`` and ``locality_wait_spread`` differ from the
policy's defaults, so replaying the synthesized trace under the same settings needs ``replay
--policy philly --param borrow_limit=... --param locality_wait_spread=... --quotas
ground_truth/vc_quotas.csv``, docs/synth.md), and the engine has no user cancellations:
impatient users never give up here (held jobs are still killed before they are scheduled,
outside the engine).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from philly_analyze.synth.cluster import SynthCluster
from philly_analyze.synth.schedule import Schedule, split_causes, vc_quotas
from philly_analyze.synth.workload import A_FAILED, A_KILLED, A_PASSED, Workload

_OUTCOMES = {A_PASSED: "passed", A_KILLED: "killed", A_FAILED: "failed"}
US = 1_000_000


class ReplayScheduler:
    """Adapter from the synthesizer's workload to ``philly_analyze.sim`` and back."""

    name = "philly"

    def __init__(self, params: dict[str, Any] | None = None):
        self.params = dict(params or {})

    def run(self, wl: Workload, cluster: SynthCluster, horizon: int, seed: int) -> Schedule:
        from philly_analyze.sim import Cluster, simulate
        from philly_analyze.sim import Workload as SimWorkload

        runs = np.flatnonzero(wl.withdraw < 0)
        # Zero-padded indexes as ids: the engine orders jobs by (submit, id), as ours are.
        width = len(str(max(wl.num_jobs - 1, 0)))
        ids = [f"{j:0{width}d}" for j in runs.tolist()]
        first = wl.first_attempt
        n_att = wl.num_attempts
        durs = [
            (wl.att_duration[first[j] : first[j] + n_att[j]] * US).tolist() for j in runs.tolist()
        ]
        outs = [
            [_OUTCOMES[int(o)] for o in wl.att_outcome[first[j] : first[j] + n_att[j]]]
            for j in runs.tolist()
        ]
        swl = SimWorkload.from_columns(
            ids,
            ((wl.submit[runs] + wl.startup[runs]) * US).tolist(),
            [wl.vc_names[v] for v in wl.vc[runs]],
            wl.gpus[runs].tolist(),
            durs,
            outcomes=outs,
            user=[wl.user_names[u] for u in wl.user[runs]],
        )
        scl = Cluster.build(
            list(cluster.machine_ids), cluster.gpus.tolist(), [f"r{r}" for r in cluster.rack]
        )
        quotas = vc_quotas(wl, cluster)
        res = simulate(swl, scl, "philly", quotas, self.params, seed)
        return _to_schedule(res, wl, cluster, quotas, self.name, horizon)


def _job_index(col: Any) -> np.ndarray:
    return np.asarray(col.to_pylist(), dtype=object).astype(np.int64)


def _seconds(col: Any) -> np.ndarray:
    """Timestamps (microseconds from the window start) -> whole seconds, NULL -> -1."""
    arr = col.cast("int64").to_numpy(zero_copy_only=False)
    if col.null_count:
        valid = ~np.asarray(col.is_null().to_pylist(), dtype=bool)
        arr = np.where(valid, arr, -US)
    # Floor: an end and the next start on the same GPU keep their order.
    return np.floor_divide(arr, US).astype(np.int64)


def _to_schedule(
    res: Any,
    wl: Workload,
    cluster: SynthCluster,
    quotas: dict[str, int],
    name: str,
    horizon: int,
) -> Schedule:
    n_att = len(wl.att_duration)
    att_start = np.full(n_att, -1, dtype=np.int64)
    att_end = np.full(n_att, -1, dtype=np.int64)
    a = res.attempts
    job = _job_index(a.column("job_id"))
    idx = np.asarray(a.column("attempt_idx").to_pylist(), dtype=np.int64)
    row = wl.first_attempt[job] + idx
    att_start[row] = _seconds(a.column("start_time"))
    att_end[row] = _seconds(a.column("end_time"))
    p = res.placements
    pjob = _job_index(p.column("job_id"))
    prow = wl.first_attempt[pjob] + np.asarray(p.column("attempt_idx").to_pylist(), np.int64)
    index_of = {m: i for i, m in enumerate(cluster.machine_ids)}
    pm = np.array([index_of[m] for m in p.column("machine_id").to_pylist()], dtype=np.int32)
    pg = np.asarray(p.column("gpu_idx").to_pylist(), dtype=np.int16)
    order = np.lexsort((pg, pm, prow))
    off = np.zeros(n_att + 1, dtype=np.int64)
    np.cumsum(np.bincount(prow, minlength=n_att), out=off[1:])
    cancel = np.where(wl.withdraw >= 0, wl.submit + wl.withdraw, -1).astype(np.int64)
    start_us = np.zeros(n_att, np.int64)
    start_us[row] = a.column("start_time").cast("int64").to_numpy()
    waits = _waits(res.waiting, wl, start_us, att_start, horizon)
    w_job, w_att, ws, we, secs, cause = split_causes(
        waits,
        att_start,
        att_end,
        off,
        pm[order],
        wl,
        cluster,
        [quotas.get(v, 0) for v in wl.vc_names],
    )
    return Schedule(
        att_start=att_start,
        att_end=att_end,
        pl_offsets=off,
        pl_machine=pm[order],
        pl_gpu=pg[order],
        cancelled=cancel >= 0,
        cancel_time=cancel,
        wait_job=w_job,
        wait_attempt=w_att,
        wait_start=ws,
        wait_end=we,
        wait_seconds=secs,
        wait_cause=cause,
        quotas=quotas,
        scheduler=name,
    )


def _waits(
    w: Any, wl: Workload, start_us: np.ndarray, start: np.ndarray, horizon: int
) -> np.ndarray:
    """(job, attempt, ready, end) in whole seconds: each replayed attempt's wait, from its
    ready time (its start less the waiting the engine recorded for it) to its start or the
    window's end, whichever comes first."""
    wrow = wl.first_attempt[_job_index(w.column("job_id"))] + np.asarray(
        w.column("attempt_idx").to_pylist(), dtype=np.int64
    )
    secs = np.asarray(w.column("seconds").to_pylist(), dtype=np.float64)
    total = np.round(np.bincount(wrow, weights=secs * US, minlength=len(start))).astype(np.int64)
    rows = np.flatnonzero(total > 0)
    ready = np.floor_divide(start_us[rows] - total[rows], US)
    end = np.minimum(start[rows], horizon)
    keep = end > ready
    rows = rows[keep]
    return np.stack([wl.att_job[rows], wl.att_idx[rows], ready[keep], end[keep]], axis=1)
