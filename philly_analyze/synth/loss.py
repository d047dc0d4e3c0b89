"""Training-loss curves whose convergence matches Figure 8, and when each epoch ended.

For a job of ``E`` completed epochs (1-based), two epochs are drawn first:

- ``e_within``: the first epoch whose loss is within 0.1% of the job's lowest, from Figure 8's
  CDF of ``(e_within - 1) / (E - 1)`` (killed jobs have their own curve; unsuccessful jobs use
  the passed one);
- ``e_lowest``: the epoch of the lowest loss: before the last epoch (uniform in
  ``[e_within, E - 1]``) for a share ``F_lowest(0.99)`` of the jobs (Figure 8), else the last.

The curve then decays geometrically from the initial loss to just above 0.1% over the minimum
before ``e_within``, and stays within 0.1% from there on, wandering between 0.02% and 0.095%
over the minimum except at ``e_lowest``. Printing with 5 significant digits (the PyTorch shape)
cannot move the lowest epoch or the 0.1% crossing.

Epochs are spread over a job's attempts by run time: epoch ``k`` ends when the job's cumulative
run time reaches ``k * tau``; an attempt that fails resumes from the last completed epoch
(checkpointing), so a job's curve is the concatenation of its attempts' epochs.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from philly_analyze.synth.calibration import Calibration, cdf_inverse
from philly_analyze.synth.workload import KILLED, PASSED

#: Shortest epoch: a job that ran for less than this completed no epoch.
MIN_EPOCH_SECONDS = 30


@dataclass
class LossCurves:
    """Per job: epochs completed, the curve (CSR over jobs), convergence epochs, epoch time."""

    epochs: np.ndarray  # int32 completed epochs per job (0: none)
    planned: np.ndarray  # int32 epochs the job was configured for ("of N")
    offsets: np.ndarray  # int64 (jobs + 1)
    loss: np.ndarray  # float64
    e_within: np.ndarray  # int32, 0 when epochs == 0
    e_lowest: np.ndarray  # int32
    tau: np.ndarray  # float64 seconds of run time per epoch


def build_curves(
    cal: Calibration,
    status: np.ndarray,
    run_time: np.ndarray,
    rng: np.random.Generator,
) -> LossCurves:
    """Curves for jobs with final ``status`` and total planned run time ``run_time`` (s)."""
    cm = cal.section("convergence", "model")
    conv = cal.section("convergence")
    n = len(status)
    lo, hi = np.log(cm["epochs_min"]), np.log(cm["epochs_max"] + 1)
    drawn = np.exp(rng.uniform(lo, hi, n)).astype(np.int32)
    epochs = np.minimum(drawn, (run_time // MIN_EPOCH_SECONDS).astype(np.int64)).astype(np.int32)
    partial = rng.uniform(0.0, 1.0, n)
    frac_done = np.where(status == PASSED, 0.0, partial)
    tau = np.where(epochs > 0, run_time / np.maximum(epochs + frac_done, 1e-9), np.inf)
    planned = np.where(
        status == PASSED, epochs, np.ceil(np.maximum(epochs, 1) * rng.uniform(1.25, 3.0, n))
    ).astype(np.int32)
    e_within, e_lowest = _convergence_epochs(conv, status, epochs, rng)
    off, loss = _losses(cm, epochs, e_within, e_lowest, rng)
    return LossCurves(
        epochs=epochs,
        planned=planned,
        offsets=off,
        loss=loss,
        e_within=np.where(epochs > 0, e_within, 0).astype(np.int32),
        e_lowest=np.where(epochs > 0, e_lowest, 0).astype(np.int32),
        tau=tau,
    )


def _convergence_epochs(
    conv: dict, status: np.ndarray, epochs: np.ndarray, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    """Per job, the (1-based) epoch its loss comes within 0.1% of its lowest, and the epoch
    of its lowest loss (Figure 8's distributions)."""
    n = len(status)
    u = rng.random(n)
    killed = status == KILLED
    x01 = np.where(
        killed,
        cdf_inverse(conv["killed_within_0_1pct"], u),
        cdf_inverse(conv["passed_within_0_1pct"], u),
    )
    e_max = np.maximum(epochs, 1)
    # Nearest epoch, but only Figure 8's atom at 0 lands on the first epoch (a job drawn just
    # above 0 reaches the band at the second).
    steps = np.round(x01 * (e_max - 1))
    steps = np.where(x01 > 0, np.maximum(steps, 1), 0)
    e_within = np.clip(1 + steps, 1, e_max).astype(np.int32)
    p_not_last = np.where(killed, conv["killed_lowest"][0][1], conv["passed_lowest"][0][1])
    # Only jobs that reach the band before their last epoch can have their lowest loss earlier:
    # raise the probability among them so the share over all jobs is Figure 8's.
    # (The share is taken over curves long enough to judge, 5+ epochs, as an analysis would.)
    eligible = e_within <= e_max - 1
    long = epochs >= 5
    for grp in (killed, ~killed):
        share = eligible[grp & long].mean() if (grp & long).any() else 1.0
        p_not_last[grp] = np.minimum(1.0, p_not_last[grp] / max(share, 1e-9))
    not_last = (rng.random(n) < p_not_last) & eligible
    span = np.maximum(e_max - e_within, 1)
    e_low_early = e_within + (rng.random(n) * span).astype(np.int32)
    e_lowest = np.where(not_last, np.minimum(e_low_early, e_max - 1), e_max).astype(np.int32)
    e_within = np.minimum(e_within, e_lowest)
    return e_within, e_lowest


def _losses(
    cm: dict,
    epochs: np.ndarray,
    e_within: np.ndarray,
    e_lowest: np.ndarray,
    rng: np.random.Generator,
) -> tuple[np.ndarray, np.ndarray]:
    """The curves' CSR offsets and per-epoch losses: falling log-linearly to the 0.1% band
    at ``e_within``, wandering inside it after, lowest at ``e_lowest``."""
    n = len(epochs)
    off = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(epochs, out=off[1:])
    total = int(off[-1])
    job = np.repeat(np.arange(n), epochs)
    e = (np.arange(total) - off[job] + 1).astype(np.int64)
    low, high = np.log(cm["initial_loss"])
    l0 = np.exp(rng.uniform(low, high, n))
    lmin = l0 * rng.uniform(0.05, 0.6, n)
    g0 = l0 / lmin - 1.0
    gend = 0.0005 * np.exp(rng.uniform(0, np.log(20), n))
    steps = np.maximum(e_within - 2, 1).astype(float)
    # Before e_within: log-linear from g0 (epoch 1) to gend (epoch e_within - 1).
    t = np.clip((e - 1) / steps[job], 0.0, 1.0)
    g_pre = np.exp(np.log(g0[job]) + t * (np.log(gend[job]) - np.log(g0[job])))
    wander = rng.uniform(0.0002, 0.00095, total)
    g = np.where(e < e_within[job], 0.001 + g_pre, wander)
    g[e == e_lowest[job]] = 0.0
    loss = lmin[job] * (1.0 + g)
    return off, loss


def epoch_attempts(
    curves: LossCurves,
    att_job: np.ndarray,
    att_duration: np.ndarray,
    first_attempt: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    """For every epoch of every curve (CSR order): the workload attempt that finished it and the
    run time into that attempt when it finished (s)."""
    n = len(curves.epochs)
    total = int(curves.offsets[-1])
    job = np.repeat(np.arange(n), curves.epochs)
    k = np.arange(total) - curves.offsets[job] + 1
    t_cum = k * curves.tau[job]
    # Cumulative run time at the start of each attempt (attempts of a job are consecutive).
    att_cum_end = np.cumsum(att_duration.astype(np.float64))
    job_base = np.concatenate([[0.0], att_cum_end])[first_attempt]
    global_t = job_base[job] + t_cum
    # The attempt whose cumulative span holds global_t: first with cum_end >= global_t.
    a = np.searchsorted(att_cum_end, global_t - 1e-6, side="left")
    last_att = first_attempt + np.bincount(att_job, minlength=n) - 1
    a = np.minimum(a, last_att[job])
    start_cum = att_cum_end[a] - att_duration[a]
    return a.astype(np.int64), np.maximum(global_t - start_cum, 0.0)
