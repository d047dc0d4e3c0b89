"""Each job's mean GPU utilization, calibrated to Tables 3 and 5 after scheduling.

A job's level (0-100) is drawn from a Beta law around its cell's target, then each cell is
rescaled so the mean over its jobs *that have utilization minutes in the window* is exactly the
target (a few hundred jobs per cell would otherwise miss Table 3 by several points):

- sizes 1, 4, 8, 16 x status: Table 3's cells;
- other sizes: one level per status chosen so Table 3's "all sizes" row holds;
- 16-GPU jobs: the cell target times Table 5's mean for the number of servers the job's first
  attempt spans, relative to the mean of that factor over the cell's jobs (utilization falls
  with servers spanned, and the cell still averages Table 3's value); rescaled per server
  count; Beta concentration from Table 5's p90 per server count;
- everything else: Beta concentration ``default_concentration`` (Table 5's 2-server row implies
  an almost uniform spread of job means).

Per-GPU levels scatter around the job level by ``gpu_spread`` (relative); the GPUs of one
attempt average exactly the job's level.
"""

from __future__ import annotations

import numpy as np

from philly_analyze.synth.calibration import Calibration, util_beta_concentration

#: Status columns of Table 3 in the order of workload status codes.
_STATUS_KEYS = ("passed", "killed", "unsuccessful")
LO, HI = 0.5, 99.5


def job_levels(
    cal: Calibration,
    gpus: np.ndarray,
    status: np.ndarray,
    spans: np.ndarray,
    measurable: np.ndarray,
    rng: np.random.Generator,
) -> np.ndarray:
    """Mean utilization (%) per job. ``spans``: servers of the first attempt (0 if none);
    ``measurable``: the job has utilization minutes in the window (targets hold over these)."""
    ut = cal.section("utilization")
    loc = cal.section("utilization", "locality")
    n = len(gpus)
    cell_size, target = _cell_targets(ut, gpus, status, measurable)
    mean = target[cell_size, np.clip(status, 0, 2)].copy()
    kappa = np.full(n, float(ut["default_concentration"]))
    is16 = gpus == 16
    if is16.any():
        _locality(loc, status, spans, measurable, is16, mean, kappa)
    m = np.clip(mean / 100.0, 0.01, 0.99)
    level = 100.0 * rng.beta(m * kappa, (1 - m) * kappa)
    level = np.clip(level, LO, HI)
    # Rescale each cell (size group x status; 16-GPU jobs also by servers spanned) so its
    # measurable jobs average the cell's target exactly.
    group = cell_size * 1000 + np.where(is16, np.minimum(spans, 999), 0)
    for c in np.unique(group):
        for st in range(3):
            sel = (group == c) & (status == st)
            meas = sel & measurable
            if meas.any():
                level[sel] = _rescale(level[sel], meas[sel], mean[meas].mean())
    return level


def _cell_targets(
    ut: dict, gpus: np.ndarray, status: np.ndarray, measurable: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Each job's Table 3 size cell (``len(sizes)``: a size the table does not list) and the
    target mean per (cell, status); the unlisted sizes' target makes each status's mean over
    all measurable jobs the table's ``all`` row."""
    n = len(gpus)
    sizes = [int(s) for s in ut["sizes"]]
    t3 = np.array([ut[k] for k in _STATUS_KEYS], dtype=float).T  # (sizes, 3)
    all_row = np.array([ut[f"all_{k}"] for k in _STATUS_KEYS], dtype=float)
    # Cell ids: index of the Table 3 size, or len(sizes) for "other".
    cell_size = np.full(n, len(sizes), dtype=np.int64)
    for i, s in enumerate(sizes):
        cell_size[gpus == s] = i
    target = np.zeros((len(sizes) + 1, 3))
    target[: len(sizes)] = t3
    for st in range(3):
        in_st = measurable & (status == st)
        other = in_st & (cell_size == len(sizes))
        if other.any():
            known = in_st & (cell_size < len(sizes))
            total = all_row[st] * in_st.sum() - t3[cell_size[known], st].sum()
            target[len(sizes), st] = np.clip(total / other.sum(), 5.0, 95.0)
        else:
            target[len(sizes), st] = all_row[st]
    return cell_size, target


def _locality(
    loc: dict,
    status: np.ndarray,
    spans: np.ndarray,
    measurable: np.ndarray,
    is16: np.ndarray,
    mean: np.ndarray,
    kappa: np.ndarray,
) -> None:
    """Table 5 on 16-GPU jobs (in place): scale their means by the servers they span, divided
    by the mean factor of the status's measurable 16-GPU jobs (so the status keeps its Table 3
    mean), and take the beta concentration of their server count."""
    servers = np.asarray(loc["servers"], dtype=float)
    m5 = np.asarray(loc["mean"], dtype=float)
    k5 = np.array(
        [
            util_beta_concentration(m / 100, p / 100)
            for m, p in zip(loc["mean"], loc["p90"], strict=True)
        ]
    )
    x = np.log2(np.maximum(spans[is16], 1))
    factor = np.interp(x, np.log2(servers), m5)
    for st in range(3):
        sel = status[is16] == st
        meas = sel & measurable[is16]
        ref = factor[meas].mean() if meas.any() else factor[sel].mean() if sel.any() else 1.0
        mean[np.flatnonzero(is16)[sel]] *= factor[sel] / ref
    kappa[is16] = np.interp(x, np.log2(servers), k5)


def _rescale(level: np.ndarray, meas: np.ndarray, goal: float) -> np.ndarray:
    """Multiply by a factor (clipping to [LO, HI]) until the measured mean equals ``goal``; when
    clipping stalls the factor, shift instead."""
    out = level.copy()
    for _ in range(30):
        cur = out[meas].mean()
        if abs(cur - goal) < 1e-6:
            break
        if goal > cur and out[meas].min() >= HI - 1e-9:
            break
        f = goal / max(cur, 1e-9)
        nxt = np.clip(out * f, LO, HI)
        if np.allclose(nxt, out):
            nxt = np.clip(out + (goal - cur), LO, HI)
        out = nxt
    return out


def gpu_levels(
    job_level: np.ndarray, group: np.ndarray, spread: float, rng: np.random.Generator
) -> np.ndarray:
    """Per placed GPU: the job's level with a relative scatter, re-centred so the GPUs of each
    ``group`` (one attempt) average exactly the job's level (before clipping to [LO, HI])."""
    dev = job_level * spread * rng.standard_normal(len(job_level))
    n = np.bincount(group)
    mean_dev = np.bincount(group, weights=dev) / np.maximum(n, 1)
    return np.clip(job_level + dev - mean_dev[group], LO, HI)
