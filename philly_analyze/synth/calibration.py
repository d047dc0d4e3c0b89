"""The synthesizer's workload model, derived from ``data/synth_calibration.toml``.

The data file holds the paper's tables, the machine-list facts and a few modelling choices,
each with its source. This module turns them into the parameters the samplers use, with small
solves whose inputs are all in the data file:

- **job-size mix**: the multi-GPU sizes keep the Pollux job mix's relative frequencies; the
  1-GPU share is the one that makes Figure 9's per-bucket unsuccessful rates and retries average
  to its "all" row (least squares over both; the Pollux subset alone has too few multi-GPU jobs
  for the paper's averages).
- **status mix per size** (P(passed/killed/unsuccessful | GPUs)): bounded linear least squares
  matching Table 6's job shares, Figure 9's unsuccessful rate per bucket, and Table 3's
  "all statuses" column (a size's mean utilization is the job-weighted mixture of its status
  cells, so that column pins the killed share of sizes 1, 4, 8 and 16).
- **retries**: a job with failures fails ``1 + G`` times, ``G`` geometric with the mean extra
  failures per failing job of Table 7 (trials / jobs - 1); the probability that a job which
  finally passes or is killed failed first is solved per bucket to match Figure 9's retries.
- **failure reasons**: per GPU-demand bucket (1, 2-4, >4), iterative proportional fitting of
  Table 7's demand split to its trial shares (rows) and the model's expected failed trials per
  bucket (columns). A job's consecutive failures repeat the previous reason with probability
  ``1 - jobs/trials`` of that reason (Table 7), drawing a fresh one otherwise from a law chosen
  so the chain's stationary distribution is the fitted mix: trial shares are kept exactly in
  expectation.
- **runtime to failure**: per reason, a quantile function through Table 7's p50/p90/p95
  (piecewise linear in log-minutes against the normal score).
- **utilization**: Table 3 cells; Table 5's per-server-count means for 16-GPU jobs, and a Beta
  concentration per server count fitted to Table 5's p90.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from typing import Any

import numpy as np
from scipy import optimize, stats

STATUSES = ("passed", "killed", "unsuccessful")
#: Figure 9's GPU buckets and Table 7's GPU-demand buckets (upper bounds, inclusive).
FIG9_BUCKETS = ((1, 1), (2, 4), (5, 8), (9, 1 << 30))
DEMAND_BUCKETS = ((1, 1), (2, 4), (5, 1 << 30))
DURATION_KEYS = ("bucket_1", "bucket_2_4", "bucket_5_8", "bucket_gt8")
_Z90 = float(stats.norm.ppf(0.9))
_Z95 = float(stats.norm.ppf(0.95))


def bucket_of(gpus: np.ndarray, buckets: tuple[tuple[int, int], ...]) -> np.ndarray:
    """Index of each GPU count's bucket."""
    out = np.zeros(np.shape(gpus), dtype=np.int64)
    for i, (lo, _hi) in enumerate(buckets):
        out[np.asarray(gpus) >= lo] = i
    return out


@dataclass(frozen=True)
class Reason:
    """One Table 7 failure reason."""

    name: str
    categories: str
    trials: int
    jobs: int
    rtf_minutes: tuple[float, float, float]  # p50, p90, p95
    demand: tuple[int, int, int]  # trials with 1, 2-4, >4 GPUs


@dataclass(frozen=True)
class Calibration:
    """Every derived model parameter (see module docstring)."""

    raw: dict[str, Any]
    sizes: np.ndarray
    size_probs: np.ndarray
    #: (len(sizes), 3): P(passed, killed, unsuccessful | size).
    status_probs: np.ndarray
    #: Per Figure 9 bucket: P(a passed/killed job failed at least once before).
    fail_first_prob: np.ndarray
    #: Mean extra failures of a job that fails (Table 7: trials / jobs - 1).
    extra_failures_mean: float
    reasons: tuple[Reason, ...]
    #: (3 demand buckets, R): stationary reason mix of failed trials.
    reason_mix: np.ndarray
    #: (3, R): law of a fresh draw after a failure that does not repeat its reason.
    reason_fresh: np.ndarray
    #: (R,): probability that the next failure repeats the reason.
    reason_repeat: np.ndarray
    #: Figure 9 targets, kept for the summary.
    fig9_unsuccessful: np.ndarray
    fig9_retries: np.ndarray

    def section(self, *path: str) -> Any:
        """A table of the raw data file, e.g. ``section("utilization", "locality")``."""
        node: Any = self.raw
        for p in path:
            node = node[p]
        return node


@lru_cache(maxsize=1)
def load() -> Calibration:
    """Load and derive the calibration (cached: it is immutable)."""
    text = resources.files("philly_analyze").joinpath("data/synth_calibration.toml").read_text()
    raw = tomllib.loads(text)
    return derive(raw)


def derive(raw: dict[str, Any]) -> Calibration:
    """Derive the model parameters from the raw data-file contents."""
    counts = {int(k): float(v) for k, v in raw["workload"]["sizes"]["counts"].items()}
    sizes = np.array(sorted(counts), dtype=np.int64)
    n = np.array([counts[int(s)] for s in sizes])
    rt = raw["retries"]
    u_b = np.array(rt["unsuccessful_rate"], dtype=float)
    r_b = np.array(rt["avg_retries"], dtype=float)
    size_probs = _size_mix(sizes, n, u_b, r_b, rt["all_unsuccessful_rate"], rt["all_avg_retries"])
    status_probs = _status_mix(raw, sizes, size_probs, u_b)
    reasons = tuple(
        Reason(r[0], r[1], int(r[2]), int(r[3]), (r[5], r[6], r[7]), (r[8], r[9], r[10]))
        for r in raw["failures"]["reasons"]
    )
    trials = np.array([r.trials for r in reasons], dtype=float)
    jobs = np.array([r.jobs for r in reasons], dtype=float)
    extra = float(trials.sum() / jobs.sum() - 1.0)
    fb = bucket_of(sizes, FIG9_BUCKETS)
    fail_first = np.zeros(len(FIG9_BUCKETS))
    for b in range(len(FIG9_BUCKETS)):
        w = size_probs[fb == b]
        u = float((status_probs[fb == b, 2] * w).sum() / w.sum())
        # retries = u * extra + (1 - u) * f * (1 + extra)  ->  f
        fail_first[b] = np.clip((r_b[b] - u * extra) / ((1 - u) * (1 + extra)), 0.0, 1.0)
    # Expected failed trials per job of each size -> per demand bucket (IPF columns).
    p_fail = status_probs[:, 2] + (status_probs[:, 0] + status_probs[:, 1]) * fail_first[fb]
    mass = np.bincount(
        bucket_of(sizes, DEMAND_BUCKETS),
        weights=size_probs * p_fail * (1 + extra),
        minlength=3,
    )
    demand = np.array([r.demand for r in reasons], dtype=float)
    fitted = _ipf(demand + 1e-9, trials / trials.sum(), mass / mass.sum())
    mix = (fitted / fitted.sum(axis=0, keepdims=True)).T  # (3, R)
    repeat = np.clip(1.0 - jobs / trials, 0.0, 0.9)
    fresh = mix * (1.0 - repeat)[None, :]
    fresh /= fresh.sum(axis=1, keepdims=True)
    return Calibration(
        raw=raw,
        sizes=sizes,
        size_probs=size_probs,
        status_probs=status_probs,
        fail_first_prob=fail_first,
        extra_failures_mean=extra,
        reasons=reasons,
        reason_mix=mix,
        reason_fresh=fresh,
        reason_repeat=repeat,
        fig9_unsuccessful=u_b,
        fig9_retries=r_b,
    )


def _size_mix(
    sizes: np.ndarray, n: np.ndarray, u_b: np.ndarray, r_b: np.ndarray, u_all: float, r_all: float
) -> np.ndarray:
    """P(size): multi-GPU sizes in their observed proportions, the 1-GPU share fitted."""
    multi = sizes > 1
    rel = n * multi / (n * multi).sum()
    fb = bucket_of(sizes, FIG9_BUCKETS)
    # Mean of a Figure 9 series over multi-GPU jobs (weights rel).
    u_m = float((rel * u_b[fb]).sum())
    r_m = float((rel * r_b[fb]).sum())
    # x * v1 + (1 - x) * vm = v_all for both series, least squares in x.
    a = np.array([u_b[0] - u_m, (r_b[0] - r_m) / 2.5])
    b = np.array([u_all - u_m, (r_all - r_m) / 2.5])
    x = float(np.clip(a @ b / (a @ a), 0.5, 0.995))
    probs = (1 - x) * rel
    probs[sizes == 1] = x
    return probs


def _status_mix(
    raw: dict[str, Any], sizes: np.ndarray, size_probs: np.ndarray, u_b: np.ndarray
) -> np.ndarray:
    """P(status | size) by bounded least squares (module docstring)."""
    st = raw["status"]["jobs_pct"]
    ut = raw["utilization"]
    t3 = {int(s): i for i, s in enumerate(ut["sizes"])}
    k = len(sizes)
    rows: list[np.ndarray] = []
    rhs: list[float] = []

    def add(coef_u: np.ndarray, coef_k: np.ndarray, target: float, weight: float) -> None:
        rows.append(weight * np.concatenate([coef_u, coef_k]))
        rhs.append(weight * target)

    zero = np.zeros(k)
    fb = bucket_of(sizes, FIG9_BUCKETS)
    for b in range(len(FIG9_BUCKETS)):
        w = np.where(fb == b, size_probs, 0.0)
        add(w / w.sum(), zero, u_b[b], 1.0)
    add(size_probs, zero, st["unsuccessful"] / 100, 3.0)
    add(zero, size_probs, st["killed"] / 100, 3.0)
    for s, i in t3.items():
        e = (sizes == s).astype(float)
        p, kl, un = ut["passed"][i], ut["killed"][i], ut["unsuccessful"][i]
        add(e * (un - p) / 100, e * (kl - p) / 100, (ut["all_sizes"][i] - p) / 100, 1.5)
    # Table 3's "all sizes" row: the job-weighted mean over sizes of each status column. Sizes
    # without a cell are assumed at the row's value (they add nothing to the residual).
    st_cols = (("passed", None), ("killed", "k"), ("unsuccessful", "u"))
    for col, var in st_cols:
        if var is None:
            continue
        w = np.zeros(k)
        for s_, i in t3.items():
            w[sizes == s_] = (ut[col][i] - ut[f"all_{col}"]) / 100
        coef = size_probs * w
        add(coef if var == "u" else zero, coef if var == "k" else zero, 0.0, 6.0)
    # Weak ties for sizes without a Table 3 cell: their bucket's rate, the overall killed share.
    for i in range(k):
        e = np.zeros(k)
        e[i] = 1.0
        add(e, zero, u_b[fb[i]], 0.1)
        add(zero, e, st["killed"] / 100, 0.1)
    res = optimize.lsq_linear(np.array(rows), np.array(rhs), bounds=(0.0, 0.9))
    u, kk = res.x[:k], res.x[k:]
    scale = np.maximum(1.0, (u + kk) / 0.95)
    u, kk = u / scale, kk / scale
    return np.column_stack([1.0 - u - kk, kk, u])


def _ipf(seed: np.ndarray, row_target: np.ndarray, col_target: np.ndarray) -> np.ndarray:
    """Iterative proportional fitting of ``seed`` to row and column sums."""
    m = seed.copy()
    for _ in range(500):
        m *= (row_target / m.sum(axis=1))[:, None]
        m *= (col_target / m.sum(axis=0))[None, :]
        if np.abs(m.sum(axis=1) - row_target).max() < 1e-12:
            break
    return m


# --------------------------------------------------------------------------- samplers
def rtf_seconds(reason: Reason, z: np.ndarray) -> np.ndarray:
    """Runtime to failure for normal scores ``z``: log-minutes piecewise linear through
    Table 7's p50 (z=0), p90 and p95, extrapolated below p50 with the p50-p90 slope; z clipped
    to [-3, 2.5]."""
    p50, p90, p95 = (np.log(max(v, 1e-3)) for v in reason.rtf_minutes)
    z = np.clip(z, -3.0, 2.5)
    lo_slope = (p90 - p50) / _Z90
    hi_slope = (p95 - p90) / (_Z95 - _Z90)
    # Table 7 stops at p95: beyond it the tail grows at a quarter of the p90-p95 slope, so a
    # handful of extrapolated failures cannot dominate the failed GPU time.
    log_m = np.where(
        z <= _Z90,
        p50 + z * lo_slope,
        np.where(
            z <= _Z95,
            p90 + (z - _Z90) * hi_slope,
            p90 + (_Z95 - _Z90) * hi_slope + (z - _Z95) * hi_slope / 4,
        ),
    )
    return np.exp(log_m) * 60.0


def duration_quantile(cal: Calibration, bucket: np.ndarray, u: np.ndarray) -> np.ndarray:
    """Base run time (s) of a final attempt: the Pollux quantile function of the job's GPU
    bucket at ``u`` (log-linear between the stored quantiles)."""
    d = cal.section("workload", "durations")
    q = np.asarray(d["quantiles"], dtype=float)
    out = np.empty(len(u))
    for b, key in enumerate(DURATION_KEYS):
        sel = bucket == b
        if sel.any():
            knots = np.log(np.maximum(np.asarray(d[key], dtype=float), 1.0))
            out[sel] = np.exp(np.interp(u[sel], q, knots))
    return out


def util_beta_concentration(mean: float, p90: float) -> float:
    """Beta concentration (a + b) whose 90th percentile is ``p90`` at mean ``mean`` (0-1)."""

    def gap(log_kappa: float) -> float:
        """How far the 90th percentile at concentration e**log_kappa is from ``p90``."""
        kappa = float(np.exp(log_kappa))
        return float(stats.beta.ppf(0.9, mean * kappa, (1 - mean) * kappa)) - p90

    lo, hi = np.log(0.3), np.log(200.0)
    if gap(lo) * gap(hi) > 0:
        return 2.0
    return float(np.exp(optimize.brentq(gap, lo, hi)))


def cdf_inverse(points: list[list[float]], u: np.ndarray) -> np.ndarray:
    """Inverse of a piecewise-linear CDF given as ``[[x, F(x)], ...]`` (F(x0) may be > 0: an
    atom at x0)."""
    xs = np.array([p[0] for p in points], dtype=float)
    fs = np.array([p[1] for p in points], dtype=float)
    return np.where(u <= fs[0], xs[0], np.interp(u, fs, xs))
