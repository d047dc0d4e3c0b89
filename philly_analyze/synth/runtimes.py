"""Scaling the sampled run times: per-VC factors for the VCs' GPU-time shares, and the three
class factors (passed final, killed final, failed attempts) that give the offered load and
Table 6's GPU-time shares (``workload`` before scheduling, ``rescale`` after it)."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from philly_analyze.synth.calibration import Calibration
from philly_analyze.synth.cluster import SynthCluster
from philly_analyze.synth.codes import A_FAILED


def vc_factors(
    cal: Calibration,
    raw: np.ndarray,
    att_job: np.ndarray,
    gpus: np.ndarray,
    vc: np.ndarray,
    fin: np.ndarray,
    runs: np.ndarray,
) -> np.ndarray:
    """Per VC, the factor on final run times that gives each VC its share of the GPU time
    (``[workload.vcs] gpu_time_shares``; failed attempts keep Table 7's runtimes). A few
    fixed-point steps; factors kept within ``factor_bounds`` so a VC of a handful of jobs in a
    small run cannot take extreme run times."""
    vcs = cal.section("workload", "vcs")
    target = np.asarray(vcs["gpu_time_shares"], dtype=float)
    f_lo, f_hi = (float(x) for x in vcs["factor_bounds"])
    n_vc = len(target)
    live = runs[att_job]
    gt = gpus[att_job] * raw * live
    avc = vc[att_job]
    f = np.ones(n_vc)
    for _ in range(int(vcs["factor_iterations"])):
        with_f = np.where(fin, gt * f[avc], gt)
        have = np.bincount(avc, weights=with_f, minlength=n_vc)
        present = have > 0
        share = have / have.sum()
        want = target * present / (target * present).sum()
        f = np.where(present, np.clip(f * want / np.maximum(share, 1e-12), f_lo, f_hi), 1.0)
    return f


def scale_durations(
    cal: Calibration,
    cluster: SynthCluster,
    seconds: int,
    cap: float,
    raw: np.ndarray,
    att_job: np.ndarray,
    outcome: np.ndarray,
    gpus: np.ndarray,
    status: np.ndarray,
    submit: np.ndarray,
    runs: np.ndarray,
    window_from: int = 0,
) -> tuple[np.ndarray, dict[str, float]]:
    """Scale raw run times so the offered GPU time is the target load and Table 6's GPU-time
    shares hold among the jobs that will finish inside the window.

    Three factors: passed final attempts, killed final attempts, failed attempts (all jobs).
    Jobs that cannot finish in the window (their run time from submission passes its end) are
    left out of the shares, as an analysis of the output must leave them out (long killed jobs
    would otherwise be under-represented); so are the lead-in's jobs (submitted before
    ``window_from``: only the few still running at the window's start are kept, cut). Finishes
    are estimated without queueing here: ``rescale.after_queueing`` corrects the factors on the
    scheduled finishes. ``runs`` masks the jobs that will be scheduled at all."""
    load = cal.section("workload", "load")["offered_load"]
    target = load * cluster.total_gpus * seconds
    live = runs[att_job]
    n = gpus[att_job].astype(float) * live
    counted = (submit >= window_from) & runs

    def done(dur: np.ndarray) -> np.ndarray:
        """Per attempt: whether its job, run back to back from submission, ends in the window."""
        finish = submit + np.bincount(att_job, weights=dur, minlength=len(submit))
        return ((finish <= seconds) & counted)[att_job]

    f = solve_factors(
        cal,
        raw,
        attempt_class(outcome),
        attempt_floors(cal, outcome),
        cap,
        n,
        status[att_job],
        done,
        target,
    )
    dur = scaled(raw, f, attempt_class(outcome), attempt_floors(cal, outcome), cap)
    scales = {"passed_final": float(f[0]), "killed_final": float(f[1]), "failed": float(f[2])}
    return np.round(dur).astype(np.int64), scales


def attempt_class(outcome: np.ndarray) -> np.ndarray:
    """Scale class of each attempt: 0 passed final, 1 killed final, 2 failed."""
    return np.where(outcome == A_FAILED, 2, outcome).astype(np.int64)


def attempt_floors(cal: Calibration, outcome: np.ndarray) -> np.ndarray:
    """Shortest run time of each attempt: a final attempt's, or a failed one's."""
    floor_fin = float(cal.section("workload", "durations")["min_seconds"])
    floor_fail = float(cal.section("failures")["min_seconds"])
    return np.where(outcome == A_FAILED, floor_fail, floor_fin)


def scaled(
    base: np.ndarray, f: np.ndarray, cls: np.ndarray, floors: np.ndarray, cap: float
) -> np.ndarray:
    """Run times ``base`` times their class's factor, within [floor, cap]."""
    return np.clip(base * f[cls], floors, cap)


def solve_factors(
    cal: Calibration,
    base: np.ndarray,
    cls: np.ndarray,
    floors: np.ndarray,
    cap: float,
    weight: np.ndarray,
    att_status: np.ndarray,
    done: Callable[[np.ndarray], np.ndarray],
    total: float,
    stretch: np.ndarray | None = None,
) -> np.ndarray:
    """The three class factors (``attempt_class``) on run times ``base`` that make the GPU
    time ``weight`` x run time sum to ``total`` and Table 6's GPU-time shares hold over the
    attempts ``done(run times)`` counts (``stretch``: how much longer each attempt runs than
    planned, for the shares; 1 when absent). Damped fixed-point iteration, with the damping and
    the bounds on the factors' ratios of the data file's ``[workload.durations.solver]``."""
    share = cal.section("status", "gpu_time_pct")
    s = np.array([share["passed"], share["killed"], share["unsuccessful"]]) / 100.0
    s /= s.sum()
    sv = cal.section("workload", "durations", "solver")
    lo = np.array([1.0, sv["killed_ratio"][0], sv["failed_ratio"][0]])
    hi = np.array([1.0, sv["killed_ratio"][1], sv["failed_ratio"][1]])
    st = np.ones(len(base)) if stretch is None else stretch
    f = np.ones(3)
    for _ in range(int(sv["iterations"])):
        f *= total / max((weight * scaled(base, f, cls, floors, cap)).sum(), 1e-9)
        dur = scaled(base, f, cls, floors, cap)
        sel = done(dur)
        by_status = np.bincount(att_status[sel], weights=(weight * dur * st)[sel], minlength=3)
        if (by_status <= 0).any():
            break
        adj = (s / (by_status / by_status.sum())) ** float(sv["damping"])
        f *= adj
        # Small windows cannot always meet the shares: keep the factors within plausible
        # ratios of the passed jobs' factor rather than degenerate.
        f[1:] = np.clip(f[1:], lo[1:] * f[0], hi[1:] * f[0])
        if np.abs(adj - 1).max() < float(sv["tolerance"]):
            break
    f *= total / max((weight * scaled(base, f, cls, floors, cap)).sum(), 1e-9)
    return f
