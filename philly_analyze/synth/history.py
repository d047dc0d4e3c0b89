"""One consistent cluster history: the workload as scheduled, cut at the window's end.

Everything every renderer writes comes from here, so the same jobs, attempts, placements,
utilization and losses appear in every format:

- application ids ``application_<clusterTs>_<seq>`` in submission order; one ResourceManager
  restart part-way through gives later submissions a new cluster timestamp (and YARN epoch);
- attempts that started before the window's end; one still running at the end has no end time;
- per job a mean GPU utilization (``utillevels``), per placed GPU a level around it;
- per job a loss curve and, per epoch, the attempt and moment that finished it (``loss``).

Times are integer seconds from the window start (``Window.start_epoch`` in UTC).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from philly_analyze.synth import loss, utillevels
from philly_analyze.synth.calibration import Calibration
from philly_analyze.synth.cluster import SynthCluster
from philly_analyze.synth.schedule import Schedule
from philly_analyze.synth.workload import A_FAILED, JobPlan, Window

#: Realized attempt outcome codes: the workload's, plus running at the window's end.
R_RUNNING = 3
OUTCOME_NAMES = ("passed", "killed", "failed", "running")
STATUS_NAMES = ("passed", "killed", "unsuccessful")


@dataclass
class History:
    """The realized history (module docstring). ``ra_*`` arrays describe realized attempts,
    sorted by job then attempt index; ``pl_*`` their placements (CSR by ``ra_pl_offsets``)."""

    window: Window
    cluster: SynthCluster
    wl: JobPlan
    sched: Schedule
    job_ids: list[str]
    app_cluster_ts: np.ndarray  # int64 ms, per job
    app_seq: np.ndarray  # int64, per job
    app_epoch: np.ndarray  # int32 RM epoch (restarts before the job's submission), per job
    restarts: list[tuple[int, int]]  # (window second, new cluster timestamp ms)
    ra: np.ndarray  # workload attempt index
    ra_job: np.ndarray
    ra_idx: np.ndarray
    ra_start: np.ndarray
    ra_end: np.ndarray  # -1 when running at the end
    ra_outcome: np.ndarray
    ra_reason: np.ndarray
    ra_pl_offsets: np.ndarray
    pl_machine: np.ndarray
    pl_gpu: np.ndarray
    pl_level: np.ndarray
    job_level: np.ndarray
    job_spans: np.ndarray
    job_measurable: np.ndarray
    curves: loss.LossCurves
    ep_attempt: np.ndarray  # workload attempt finishing each epoch (CSR order of curves)
    ep_time: np.ndarray  # window second when each epoch finished

    @property
    def horizon(self) -> int:
        """The window's length in seconds (times at or after it are outside the logs)."""
        return self.window.seconds

    def first_started(self) -> np.ndarray:
        """Per job: index into ``ra_*`` of its first realized attempt, -1 if none."""
        out = np.full(self.wl.num_jobs, -1, dtype=np.int64)
        first = np.ones(len(self.ra_job), dtype=bool)
        first[1:] = self.ra_job[1:] != self.ra_job[:-1]
        out[self.ra_job[first]] = np.flatnonzero(first)
        return out


def realize(
    cal: Calibration,
    cluster: SynthCluster,
    window: Window,
    wl: JobPlan,
    sched: Schedule,
    rng: np.random.Generator,
) -> History:
    """Cut the schedule at the window's end and attach utilization and losses."""
    h = window.seconds
    ids, ts, seq, epoch, restarts = _app_ids(cal, window, wl, rng)
    # A scheduler may run past the window (the replay engine runs every job to its end).
    started = (sched.att_start >= 0) & (sched.att_start < h)
    ra = np.flatnonzero(started)
    ra_start = sched.att_start[ra]
    end = sched.att_end[ra]
    running = end > h
    ra_end = np.where(running, -1, end)
    outcome = np.where(running, R_RUNNING, wl.att_outcome[ra]).astype(np.int8)
    reason = np.where(outcome == A_FAILED, wl.att_reason[ra], -1).astype(np.int16)
    counts = sched.pl_offsets[ra + 1] - sched.pl_offsets[ra]
    ra_off, pl_src = _csr_subset(sched.pl_offsets[ra], counts)
    pl_machine = sched.pl_machine[pl_src]
    pl_gpu = sched.pl_gpu[pl_src]
    ra_job = wl.att_job[ra]
    spans = _first_attempt_spans(wl, ra_job, ra_off, pl_machine)
    # Minutes of utilization in the window: a job with none has no measurable utilization.
    vis_end = np.minimum(end, h)
    minutes = -(-vis_end // 60) - (-(-ra_start // 60))
    measurable = np.bincount(ra_job, weights=np.maximum(minutes, 0), minlength=wl.num_jobs) > 0
    level, pl_level = _levels(cal, wl, ra_job, counts, spans, measurable, rng)
    curves, ep_att, ep_time = _losses(cal, wl, sched, ra_job, rng)
    return History(
        window=window,
        cluster=cluster,
        wl=wl,
        sched=sched,
        job_ids=ids,
        app_cluster_ts=ts,
        app_seq=seq,
        app_epoch=epoch,
        restarts=restarts,
        ra=ra,
        ra_job=ra_job,
        ra_idx=wl.att_idx[ra],
        ra_start=ra_start,
        ra_end=ra_end,
        ra_outcome=outcome,
        ra_reason=reason,
        ra_pl_offsets=ra_off,
        pl_machine=pl_machine,
        pl_gpu=pl_gpu,
        pl_level=pl_level,
        job_level=level,
        job_spans=spans,
        job_measurable=measurable,
        curves=curves,
        ep_attempt=ep_att,
        ep_time=ep_time,
    )


def _csr_subset(starts: np.ndarray, counts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Offsets of the chosen rows' placements packed together, and where each packed
    placement comes from in the full placement arrays (rows start at ``starts``)."""
    off = np.zeros(len(starts) + 1, dtype=np.int64)
    np.cumsum(counts, out=off[1:])
    src = np.repeat(starts, counts) + (np.arange(int(off[-1])) - np.repeat(off[:-1], counts))
    return off, src


def _first_attempt_spans(
    wl: JobPlan, ra_job: np.ndarray, ra_off: np.ndarray, pl_machine: np.ndarray
) -> np.ndarray:
    """Servers spanned by each job's first started attempt (0 if none started)."""
    spans = np.zeros(wl.num_jobs, dtype=np.int64)
    first = np.ones(len(ra_job), dtype=bool)
    first[1:] = ra_job[1:] != ra_job[:-1]
    for i in np.flatnonzero(first & (wl.gpus[ra_job] > 1)):
        spans[ra_job[i]] = len(np.unique(pl_machine[ra_off[i] : ra_off[i + 1]]))
    spans[ra_job[first & (wl.gpus[ra_job] == 1)]] = 1
    return spans


def _levels(
    cal: Calibration,
    wl: JobPlan,
    ra_job: np.ndarray,
    counts: np.ndarray,
    spans: np.ndarray,
    measurable: np.ndarray,
    rng: np.random.Generator,
) -> tuple[np.ndarray, np.ndarray]:
    """Each job's mean GPU utilization level and each placed GPU's level around it."""
    level = utillevels.job_levels(cal, wl.gpus, wl.status, spans, measurable, rng)
    pl_job = np.repeat(ra_job, counts)
    spread = float(cal.section("utilization", "noise")["gpu_spread"])
    pl_att = np.repeat(np.arange(len(ra_job)), counts)
    pl_level = utillevels.gpu_levels(level[pl_job], pl_att, spread, rng)
    return level, pl_level


def _losses(
    cal: Calibration, wl: JobPlan, sched: Schedule, ra_job: np.ndarray, rng: np.random.Generator
) -> tuple[loss.LossCurves, np.ndarray, np.ndarray]:
    """Loss curves over each job's planned run time (all attempts, as planned), the attempt
    finishing each epoch and the window second it finished (-1: never started)."""
    # Run times as they happened (a scheduler may stretch spread-out attempts), as planned for
    # attempts that never started.
    dur = np.where(sched.att_start >= 0, sched.att_end - sched.att_start, wl.att_duration)
    run_time = np.bincount(wl.att_job, weights=dur, minlength=wl.num_jobs)
    ran = np.zeros(wl.num_jobs, dtype=bool)
    ran[ra_job] = True
    curves = loss.build_curves(cal, wl.status, np.where(ran, run_time, 0.0), rng)
    ep_att, ep_off = loss.epoch_attempts(curves, wl.att_job, dur, wl.first_attempt)
    ep_start = sched.att_start[ep_att]
    ep_time = np.where(ep_start >= 0, ep_start + np.floor(ep_off), -1).astype(np.int64)
    return curves, ep_att, ep_time


def _app_ids(
    cal: Calibration, window: Window, wl: JobPlan, rng: np.random.Generator
) -> tuple[list[str], np.ndarray, np.ndarray, np.ndarray, list[tuple[int, int]]]:
    """Application ids in submission order, with one RM restart (module docstring)."""
    ts0 = window.start_epoch * 1000 - int(rng.integers(86_400_000, 6 * 86_400_000))
    restarts: list[tuple[int, int]] = []
    frac = float(cal.section("yarn")["restart_at_fraction"])
    n = wl.num_jobs
    ts = np.full(n, ts0, dtype=np.int64)
    epoch = np.zeros(n, dtype=np.int32)
    seq = np.arange(n, dtype=np.int64) + int(rng.integers(1, 5000))
    if window.seconds >= 86400 and n:
        at = int(window.seconds * frac)
        ts1 = (window.start_epoch + at) * 1000 + int(rng.integers(1000, 60000))
        restarts.append((at, ts1))
        # Submissions before the new RM was up went to the old one.
        after = (window.start_epoch + wl.submit) * 1000 >= ts1
        if after.any():
            ts[after] = ts1
            epoch[after] = 1
            seq[after] = np.arange(int(after.sum())) + 1
    ids = [f"application_{t}_{s:04d}" for t, s in zip(ts.tolist(), seq.tolist(), strict=True)]
    return ids, ts, seq, epoch, restarts
