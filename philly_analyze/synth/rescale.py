"""Run times corrected for queueing: one fixed-point pass on the scheduled finishes.

``workload`` solves the three run-time factors (passed final attempts, killed final attempts,
failed attempts) so that Table 6's GPU-time shares hold among the jobs that finish inside the
window, estimating a job's finish as its submission plus its run time. Jobs also wait: their
startup latency, their VC's quota, a placement, and again for each retry. Those waits push
finishes past the window's end, and not evenly: unsuccessful jobs, which queue again for
every failed attempt, and long jobs are cut most, so the shares among the jobs that do finish
drift from the targets (by 3-4 points of GPU time at 24,000 jobs on 150 servers over 14 days
for some seeds, against a 2-point tolerance).

``after_queueing`` takes the plan and its first schedule, keeps each job's waiting as
scheduled (its finish less its run time) and how much longer each attempt ran than planned
(spread placements run slower), and solves the three factors again with finishes estimated as
submission + that waiting + the rescaled run times. The total planned GPU time is kept (the
offered load does not move). The synthesizer then schedules the corrected plan once more;
its waits differ a little from the first schedule's, which is why one pass is not exact.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from philly_analyze.synth.calibration import Calibration
from philly_analyze.synth.runtimes import attempt_class, attempt_floors, scaled, solve_factors
from philly_analyze.synth.workload import JobPlan


def job_waiting(
    wl: JobPlan, att_start: np.ndarray, att_end: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per job, the seconds from submission to its last attempt's end that it did not run
    (startup latency and every wait), and whether all its attempts ran to an end; per attempt,
    its run time as scheduled over its planned one (1 for attempts that did not run)."""
    ran = (att_start >= 0) & (att_end >= att_start)
    planned = wl.att_duration.astype(float)
    stretch = np.where(ran & (planned > 0), (att_end - att_start) / np.maximum(planned, 1), 1.0)
    n_ran = np.bincount(wl.att_job, weights=ran, minlength=wl.num_jobs)
    complete = n_ran == wl.num_attempts
    last = wl.first_attempt + wl.num_attempts - 1
    ran_s = np.bincount(
        wl.att_job, weights=np.where(ran, att_end - att_start, 0), minlength=wl.num_jobs
    )
    wait = np.where(complete, att_end[last] - wl.submit - ran_s, 0.0)
    return np.maximum(wait, 0.0), complete, stretch


def after_queueing(
    cal: Calibration,
    wl: JobPlan,
    att_start: np.ndarray,
    att_end: np.ndarray,
    horizon: int,
    cap: float,
) -> JobPlan:
    """The plan with its run times rescaled on the scheduled finishes (module docstring):
    ``att_start``/``att_end`` are the first schedule's, per attempt of ``wl`` (-1: did not
    run); ``cap`` the longest attempt. Held jobs (never scheduled) count nowhere, as in
    ``workload``; carried-over jobs count like the others (the output shows their remaining
    run, which is what an analysis of it counts)."""
    wait, complete, stretch = job_waiting(wl, att_start, att_end)
    cls = attempt_class(wl.att_outcome)
    floors = attempt_floors(cal, wl.att_outcome)
    runs = wl.withdraw < 0
    weight = wl.gpus[wl.att_job].astype(float) * runs[wl.att_job]
    base = wl.att_duration.astype(float)
    total = float((weight * base).sum())
    counted = complete & runs

    def done(dur: np.ndarray) -> np.ndarray:
        """Per attempt: whether its job, with its waits and these run times, ends inside the
        window."""
        run = np.bincount(wl.att_job, weights=dur * stretch, minlength=wl.num_jobs)
        return ((wl.submit + wait + run <= horizon) & counted)[wl.att_job]

    f = solve_factors(
        cal, base, cls, floors, cap, weight, wl.status[wl.att_job], done, total, stretch
    )
    dur = np.round(scaled(base, f, cls, floors, cap)).astype(np.int64)
    scales = {k: v * float(f[i]) for i, (k, v) in enumerate(wl.scales.items())}
    return dataclasses.replace(wl, att_duration=dur, scales=scales)
