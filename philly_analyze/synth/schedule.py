"""Scheduling the synthetic jobs with the replay engine, and the true cause of every wait.

The synthesizer builds the replay's inputs and lets ``philly_analyze.sim`` schedule them:
``replay_inputs`` turns the planned jobs (``synth.workload.JobPlan``) into a replay
``Workload`` (each job's planned attempts, durations and outcomes, submitted when the
scheduler first sees it: submission + startup latency); the synthetic cluster is a replay
``Cluster`` already (``synth.cluster.SynthCluster``). ``schedule`` replays them under the
``philly`` policy (VC quotas with borrowing, gang scheduling, locality-first placement relaxed
after a wait, retries, the locality slowdown of spread jobs) with the calibration's
``[scheduler.philly]`` parameters, and turns the result into a ``Schedule``: the policy's own
defaults otherwise, so replaying the synthesized trace under ``philly`` with the same
parameters uses the same settings. Held jobs (``JobPlan.withdraw``) are killed before they
are scheduled, outside the engine; users never give up on queued jobs (docs/synth.md says
why that model was dropped).

The true cause of each waiting second (``split_causes``) is decided from the schedule by the
one definition of ``philly_analyze.waitcause``: ``fair_share`` when starting the job would
have exceeded its VC's quota, else ``capacity`` (fewer GPUs free in the whole cluster than the
job needs), else ``fragmentation`` (enough free, but no placement meeting the constraint),
else ``other``. Each wait yields one row per cause (its pieces of one cause merged: first
moment, end of the last piece, total seconds).
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from philly_analyze.synth.cluster import SynthCluster
from philly_analyze.synth.workload import A_FAILED, A_KILLED, A_PASSED, JobPlan
from philly_analyze.vcquota import infer_quotas
from philly_analyze.waitcause import (
    CAUSES,  # noqa: F401 (re-exported: the codes of Schedule.wait_cause)
    build_steps,
    server_events,
    sorted_unique,
    split_waits,
    step_index,
    usage_steps,
)

if TYPE_CHECKING:
    from philly_analyze.sim import ReplayResult, Workload

#: The replay policy that schedules the synthetic jobs (``SynthConfig.scheduler``).
POLICY = "philly"
_OUTCOMES = {A_PASSED: "passed", A_KILLED: "killed", A_FAILED: "failed"}
US = 1_000_000


@dataclass
class Schedule:
    """What scheduling decided. Attempt arrays are aligned with the plan's attempts."""

    att_start: np.ndarray  # int64 s, -1 = never started (before the window end)
    att_end: np.ndarray  # int64 s when the attempt ended (may pass the window's end)
    pl_offsets: np.ndarray  # int64 (A+1): placements of attempt a are [off[a], off[a+1])
    pl_machine: np.ndarray  # int32 machine index
    pl_gpu: np.ndarray  # int16 GPU index
    cancelled: np.ndarray  # bool per job: killed while held, before it could be scheduled
    cancel_time: np.ndarray  # int64 s per job (-1)
    #: Waiting per attempt and cause: job, attempt_idx (the attempt waited for), first moment
    #: of that cause, end of its last piece, its total seconds, cause code (``CAUSES``).
    wait_job: np.ndarray
    wait_attempt: np.ndarray
    wait_start: np.ndarray
    wait_end: np.ndarray
    wait_seconds: np.ndarray
    wait_cause: np.ndarray
    quotas: dict[str, int] = field(default_factory=dict)
    scheduler: str = POLICY


def vc_quotas(wl: JobPlan, cluster: SynthCluster) -> dict[str, int]:
    """VC quotas proportional to each VC's nodes (``JobPlan.vc_nodes``), summing to the
    cluster's GPUs (``vcquota.infer_quotas``'s rounding); VCs without nodes get none (they run
    only on borrowed GPUs)."""
    return infer_quotas(
        {v: float(n) for v, n in zip(wl.vc_names, wl.vc_nodes, strict=True)}, cluster.total_gpus
    )


def replay_inputs(wl: JobPlan) -> Workload:
    """The replay's workload: the jobs that reach the scheduler (not the held ones), each
    submitted when the scheduler sees it, with its planned attempts. Job ids are zero-padded
    plan indexes, so the engine's (submit, id) order is the plan's."""
    from philly_analyze.sim import Workload

    runs = np.flatnonzero(wl.withdraw < 0).tolist()
    width = len(str(max(wl.num_jobs - 1, 0)))
    first, n_att = wl.first_attempt, wl.num_attempts
    spans = [slice(first[j], first[j] + n_att[j]) for j in runs]
    return Workload.from_columns(
        [f"{j:0{width}d}" for j in runs],
        ((wl.submit[runs] + wl.startup[runs]) * US).tolist(),
        [wl.vc_names[v] for v in wl.vc[runs]],
        wl.gpus[runs].tolist(),
        [(wl.att_duration[s] * US).tolist() for s in spans],
        outcomes=[[_OUTCOMES[int(o)] for o in wl.att_outcome[s]] for s in spans],
        user=[wl.user_names[u] for u in wl.user[runs]],
    )


def schedule(
    wl: JobPlan,
    cluster: SynthCluster,
    horizon: int,
    seed: int,
    params: Mapping[str, Any] | None = None,
    causes: bool = True,
) -> Schedule:
    """Schedule the plan on ``cluster`` with the replay engine's ``philly`` policy
    (``params``: its parameters, e.g. the calibration's ``[scheduler.philly]``); the waits
    cut at ``horizon`` seconds (the window's end) and, with ``causes``, split by cause (else
    the schedule has no wait rows: a draft schedule only its times are read from)."""
    from philly_analyze.sim import simulate

    quotas = vc_quotas(wl, cluster)
    res = simulate(replay_inputs(wl), cluster, POLICY, quotas, dict(params or {}), seed)
    return _to_schedule(res, wl, cluster, quotas, horizon, causes)


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
    res: ReplayResult,
    wl: JobPlan,
    cluster: SynthCluster,
    quotas: dict[str, int],
    horizon: int,
    causes: bool = True,
) -> Schedule:
    """The replay's attempts, placements and waits in the plan's terms (attempt rows of the
    plan, machine indexes, whole seconds), with the waits split by cause."""
    n_att = len(wl.att_duration)
    att_start = np.full(n_att, -1, dtype=np.int64)
    att_end = np.full(n_att, -1, dtype=np.int64)
    a = res.attempts
    row = wl.first_attempt[_job_index(a.column("job_id"))] + np.asarray(
        a.column("attempt_idx").to_pylist(), dtype=np.int64
    )
    att_start[row] = _seconds(a.column("start_time"))
    att_end[row] = _seconds(a.column("end_time"))
    p = res.placements
    prow = wl.first_attempt[_job_index(p.column("job_id"))] + np.asarray(
        p.column("attempt_idx").to_pylist(), np.int64
    )
    index_of = {m: i for i, m in enumerate(cluster.machine_ids)}
    pm = np.array([index_of[m] for m in p.column("machine_id").to_pylist()], dtype=np.int32)
    pg = np.asarray(p.column("gpu_idx").to_pylist(), dtype=np.int16)
    order = np.lexsort((pg, pm, prow))
    off = np.zeros(n_att + 1, dtype=np.int64)
    np.cumsum(np.bincount(prow, minlength=n_att), out=off[1:])
    cancel = np.where(wl.withdraw >= 0, wl.submit + wl.withdraw, -1).astype(np.int64)
    start_us = np.zeros(n_att, np.int64)
    start_us[row] = a.column("start_time").cast("int64").to_numpy()
    if causes:
        waits = _waits(res.waiting, wl, start_us, att_start, horizon)
        quota = [quotas.get(v, 0) for v in wl.vc_names]
        w_job, w_att, ws, we, secs, cause = split_causes(
            waits, att_start, att_end, off, pm[order], wl, cluster, quota
        )
    else:
        none = np.zeros(0, dtype=np.int64)
        w_job, w_att, ws, we = none, none.astype(np.int32), none, none
        secs, cause = none.astype(np.float64), none.astype(np.int8)
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
    )


def _waits(
    w: Any, wl: JobPlan, start_us: np.ndarray, start: np.ndarray, horizon: int
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


def split_causes(
    waits: np.ndarray,
    att_start: np.ndarray,
    att_end: np.ndarray,
    pl_offsets: np.ndarray,
    pl_machine: np.ndarray,
    wl: JobPlan,
    cluster: SynthCluster,
    quota: list[int],
) -> tuple[np.ndarray, ...]:
    """Each wait ``(job, attempt, start, end)`` (seconds) split by cause from the schedule:
    attempts ``[att_start, att_end)`` (-1: never started) on the machines of their placements
    (``pl_offsets``/``pl_machine``, one entry per GPU). Returns (job, attempt, first, last,
    seconds, cause code), one row per wait and cause that took time, sorted."""
    counts = np.diff(pl_offsets)
    pl_att = np.repeat(np.arange(len(counts)), counts)
    seg, gpus = np.unique(
        np.stack([pl_att, pl_machine.astype(np.int64)]), axis=1, return_counts=True
    )
    no_end = np.iinfo(np.int64).max
    held = (att_start >= 0) & ((att_end < 0) | (att_end > att_start))
    times = sorted_unique(np.r_[att_start[held], att_end[held & (att_end >= 0)]])
    s_idx = step_index(times, att_start)
    e_idx = np.where(att_end >= 0, step_index(times, att_end), no_end)
    ev = server_events(seg[1], s_idx[seg[0]], e_idx[seg[0]], gpus)
    steps = build_steps(times, cluster.gpus.astype(np.int64), cluster.rack, *ev)
    att_vc = wl.vc[wl.att_job]
    att_gpus = wl.gpus[wl.att_job].astype(np.int64)

    def usage(v: Hashable) -> np.ndarray:
        """GPUs VC ``v`` holds at each step (its held attempts' starts and ends)."""
        sel = (att_vc == v) & held
        ended = sel & (att_end >= 0)
        d = np.r_[att_gpus[sel], -att_gpus[ended]]
        return usage_steps(steps, np.r_[s_idx[sel], e_idx[ended]], d)

    job = waits[:, 0]
    split = split_waits(
        steps,
        wl.vc[job],
        wl.gpus[job].astype(np.int64),
        waits[:, 2],
        waits[:, 3],
        usage,
        dict(enumerate(quota)),
        with_bounds=True,
    )
    assert split.first is not None and split.last is not None
    r, c = np.nonzero(split.us > 0)
    order = np.lexsort((c, waits[r, 1], job[r]))
    r, c = r[order], c[order]
    return (
        job[r],
        waits[r, 1].astype(np.int32),
        split.first[r, c],
        split.last[r, c],
        split.us[r, c].astype(np.float64),
        c.astype(np.int8),
    )
