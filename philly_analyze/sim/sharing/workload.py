"""The two sides of a shared GPU: the online fleet (one inference service per online GPU, with a
diurnal load) and the offline jobs (training work from a store, or a synthetic backlog)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from philly_analyze.errors import UserError
from philly_analyze.sim.sharing.config import SharingConfig

MINUTES_PER_DAY = 1440.0

#: States of an offline job in the simulation.
FUTURE, PENDING, SHARED, ORDINARY, DONE = 0, 1, 2, 3, 4


class OnlineFleet:
    """Per-GPU arrays describing each online GPU's service and its load at the current minute.

    The relative load is ``q = trough + (1 - trough) (1 + cos(2 pi (t - peak) / day)) / 2``
    plus an AR(1) noise (stationary std ``noise_sigma``). Busy fraction ``u = min(0.98,
    peak_util_g q)``; SMs occupied while busy ``sm_low + (sm_high - sm_low) min(q, 1)``;
    memory ``mem_static_g + mem_load_g q``."""

    def __init__(self, cfg: SharingConfig, n: int, rng: np.random.Generator) -> None:
        on = cfg.online
        specs = on.services
        self.n = n
        self.names = tuple(s.name for s in specs)
        shares = np.array([s.share for s in specs])
        # Deterministic proportional split (largest remainder), shuffled over GPUs.
        counts = np.floor(shares * n).astype(int)
        counts[np.argsort(-(shares * n - counts))[: n - counts.sum()]] += 1
        self.svc = rng.permutation(np.repeat(np.arange(len(specs)), counts))

        def per(attr: str) -> np.ndarray:
            return np.array([getattr(s, attr) for s in specs], float)[self.svc]

        # Lognormal multipliers with mean 1, so the fleet means equal the services' values.
        spread = rng.normal(0.0, on.util_spread, n)
        self.peak_util = per("peak_util") * np.exp(spread - on.util_spread**2 / 2)
        mspread = rng.normal(0.0, on.mem_spread, n)
        mmult = np.exp(mspread - on.mem_spread**2 / 2)
        self.mem_static = np.minimum(per("mem_static") * mmult, 0.9)
        self.mem_load = per("mem_load") * mmult
        self.trough = per("trough")
        self.sm_low = per("sm_low")
        self.sm_high = per("sm_high")
        self.slo = per("slo")
        self.sens_svc = self.svc  # index into the service interference tables
        peak_h = per("peak_hour") + rng.normal(0.0, on.peak_jitter_hours, n)
        self.peak_minute = (peak_h * 60.0) % MINUTES_PER_DAY
        self.noise_sigma = on.noise_sigma
        self.rho = on.noise_rho
        self._z = rng.normal(0.0, on.noise_sigma, n)
        self._rng = rng
        floor = on.load_sensitivity_floor
        self.lam_floor = floor
        #: Highest load expected (the deterministic peak plus two noise sigmas).
        self.q_max = 1.0 + 2.0 * on.noise_sigma
        self.mem_peak = np.minimum(self.mem_static + self.mem_load * self.q_max, 0.98)

    def base_load(self, t: float | np.ndarray) -> np.ndarray:
        """Deterministic diurnal load (no noise) at minute(s) ``t``; broadcasts."""
        phase = 2.0 * np.pi * (np.asarray(t) - self.peak_minute) / MINUTES_PER_DAY
        return self.trough + (1.0 - self.trough) * 0.5 * (1.0 + np.cos(phase))

    def step(self, t: float) -> np.ndarray:
        """Advance the noise one step and return the load ``q`` of every GPU at minute ``t``."""
        innov = self._rng.standard_normal(self.n)
        self._z = self.rho * self._z + np.sqrt(1.0 - self.rho**2) * self.noise_sigma * innov
        return np.clip(self.base_load(t) + self._z, 0.02, 1.5)

    def forecast_peak(self, t: float, horizon: float, idx: np.ndarray | None = None) -> np.ndarray:
        """Predicted peak load over ``[t, t + horizon]``: the diurnal curve's maximum (its peak
        if the window holds the peak minute, else the larger end) plus two noise sigmas (the
        online side's known profile, no future noise)."""
        sel = slice(None) if idx is None else idx
        ahead = (self.peak_minute[sel] - t) % MINUTES_PER_DAY
        ends = np.maximum(self.base_load(t)[sel], self.base_load(t + horizon)[sel])
        return np.where(ahead <= horizon, 1.0, ends) + 2.0 * self.noise_sigma

    def util(self, q: np.ndarray, idx: np.ndarray | slice = slice(None)) -> np.ndarray:
        return np.minimum(0.98, self.peak_util[idx] * q)

    def sm_need(self, q: np.ndarray, idx: np.ndarray | slice = slice(None)) -> np.ndarray:
        """Fraction of SMs a busy online kernel occupies at load q."""
        return self.sm_low[idx] + (self.sm_high[idx] - self.sm_low[idx]) * np.minimum(q, 1.0)

    def memory(self, q: np.ndarray, idx: np.ndarray | slice = slice(None)) -> np.ndarray:
        return np.minimum(self.mem_static[idx] + self.mem_load[idx] * q, 0.98)

    def lam(self, q: np.ndarray) -> np.ndarray:
        """Load factor of interference, both directions: ``floor + (1 - floor) q``."""
        return self.lam_floor + (1.0 - self.lam_floor) * q


@dataclass
class OfflineJobs:
    """Offline jobs sorted by submit time, with their solo profiles (arrays indexed by job)."""

    job_id: np.ndarray  # str (object)
    submit: np.ndarray  # minutes from the simulation's origin
    work: np.ndarray  # solo run time, minutes
    gpus: np.ndarray  # int
    vc: np.ndarray
    user: np.ndarray
    jtype: np.ndarray  # Gavel job-type index (interference profile)
    util: np.ndarray  # busy fraction alone
    sm: np.ndarray  # SM fraction a busy kernel occupies
    mem: np.ndarray  # GPU-memory fraction
    origin: pd.Timestamp | None = None  # wall-clock time of minute 0, if known
    #: The job's observed attempts, in CSR form: attempt ``k`` of job ``j`` is
    #: ``seg_ptr[j] + k``. ``seg_work``: its solo minutes; ``seg_outcome``: its outcome
    #: (``passed``/``killed``/``failed``, None if unknown). A job runs its attempts in turn:
    #: an attempt that is not the last ends with its outcome and the job queues again (a
    #: retry), the last one ends the job with its outcome. Default: one attempt, passed.
    seg_ptr: np.ndarray | None = None
    seg_work: np.ndarray | None = None
    seg_outcome: np.ndarray | None = None

    def __post_init__(self) -> None:
        if self.seg_ptr is None:
            self.seg_ptr = np.arange(self.n + 1, dtype=np.int64)
            self.seg_work = self.work.copy()
            self.seg_outcome = np.full(self.n, "passed", dtype=object)

    @property
    def n(self) -> int:
        return len(self.submit)


def _beta(rng: np.random.Generator, mean: float, conc: float, n: int) -> np.ndarray:
    return rng.beta(mean * conc, (1.0 - mean) * conc, n)


def prepare_offline(
    jobs: pd.DataFrame | dict[str, Any], cfg: SharingConfig, n_types: int, rng: np.random.Generator
) -> OfflineJobs:
    """Validate and profile the offline jobs.

    ``jobs`` needs ``job_id``, ``submit`` (minutes from origin, or ``submit_time`` timestamps),
    ``num_gpus`` and ``duration`` (solo seconds) or ``work_minutes``; ``vc`` and ``user`` are
    optional. Each job gets a Gavel job type uniformly at random and profiles drawn from the
    ``[offline]`` distributions, unless the input carries them: ``job_type`` (Gavel type
    index), ``util`` (solo busy fraction), ``sm`` (SM fraction), ``mem`` (memory fraction).
    Observed attempts (``OfflineJobs.seg_*``): ``attempts_work`` (a list of solo minutes per
    job, summing to its work) and ``attempts_outcome`` (a list of outcomes); without them a
    job is one attempt that passes."""
    df = pd.DataFrame(jobs) if not isinstance(jobs, pd.DataFrame) else jobs
    need = {"job_id", "num_gpus"}
    if not need <= set(df.columns):
        raise UserError(f"offline jobs need columns {sorted(need)}, got {list(df.columns)}")
    origin = None
    if "submit" in df.columns:
        submit = df["submit"].to_numpy(float)
    elif "submit_time" in df.columns:
        ts = pd.to_datetime(df["submit_time"], utc=True)
        origin = ts.min()
        submit = ((ts - origin).dt.total_seconds() / 60.0).to_numpy(float)
    else:
        raise UserError("offline jobs need a submit (minutes) or submit_time column")
    if "work_minutes" in df.columns:
        work = df["work_minutes"].to_numpy(float)
    elif "duration" in df.columns:
        work = df["duration"].to_numpy(float) / 60.0
    else:
        raise UserError("offline jobs need a duration (seconds) or work_minutes column")
    gpus = df["num_gpus"].to_numpy()
    ok = np.isfinite(submit) & np.isfinite(work) & (work > 0) & (gpus >= 1)
    order = np.argsort(submit[ok], kind="stable")
    n = int(ok.sum())
    off = cfg.offline

    def given(col: str, drawn: np.ndarray) -> np.ndarray:
        """A profile column from the input when present (real profiles, tests), else drawn."""
        if col not in df.columns:
            return drawn
        return df[col].to_numpy(drawn.dtype)[ok][order]

    jtype = given("job_type", rng.integers(0, n_types, n))
    if jtype.max(initial=0) >= n_types or jtype.min(initial=0) < 0:
        raise UserError(f"job_type must be in 0..{n_types - 1} (a Gavel job-type index)")
    mem = np.exp(rng.normal(np.log(off.mem_median), off.mem_sigma, n))
    segments = _segments(df, ok, order) if "attempts_work" in df.columns else {}
    if segments and n:  # the job's work is its attempts' (each at least 1e-3 minutes)
        work = np.zeros(len(ok))
        work[np.flatnonzero(ok)[order]] = np.add.reduceat(
            segments["seg_work"], segments["seg_ptr"][:-1]
        )
    return OfflineJobs(
        job_id=df["job_id"].astype(str).to_numpy(object)[ok][order],
        submit=submit[ok][order],
        work=np.maximum(work[ok][order], 1e-3),
        gpus=gpus[ok][order].astype(np.int64),
        vc=(df["vc"] if "vc" in df.columns else pd.Series([None] * len(df))).to_numpy(object)[ok][
            order
        ],
        user=(df["user"] if "user" in df.columns else pd.Series([None] * len(df))).to_numpy(object)[
            ok
        ][order],
        jtype=jtype,
        util=given("util", _beta(rng, off.util_mean, off.util_concentration, n)),
        sm=given("sm", _beta(rng, off.sm_mean, off.sm_concentration, n)),
        mem=given("mem", np.minimum(mem, 0.9)),
        origin=origin,
        **segments,
    )


def _segments(df: pd.DataFrame, ok: np.ndarray, order: np.ndarray) -> dict[str, np.ndarray]:
    """``seg_ptr``, ``seg_work``, ``seg_outcome`` of the kept jobs, in their sorted order."""
    work = df["attempts_work"].to_numpy(object)[ok][order]
    outcome = (
        df["attempts_outcome"].to_numpy(object)[ok][order]
        if "attempts_outcome" in df.columns
        else [[None] * len(w) for w in work]
    )
    counts = np.fromiter((len(w) for w in work), np.int64, len(work))
    if (counts < 1).any():
        raise UserError("every offline job needs at least one attempt in attempts_work")
    return {
        "seg_ptr": np.concatenate([[0], np.cumsum(counts)]).astype(np.int64),
        "seg_work": np.maximum(np.concatenate([np.asarray(w, float) for w in work]), 1e-3)
        if len(work)
        else np.zeros(0),
        "seg_outcome": np.asarray([o for os_ in outcome for o in os_], dtype=object),
    }


def synthetic_offline(
    cfg: SharingConfig, gpus: int, minutes: int, rng: np.random.Generator
) -> pd.DataFrame:
    """The paper scenario's offline work: a backlog at time 0 plus Poisson arrivals carrying
    ``load_factor`` times the GPU-minutes the ``gpus`` could run, lognormal solo durations."""
    sc = cfg.paper
    dur_mean = sc.duration_median_minutes * np.exp(sc.duration_sigma**2 / 2)
    sizes = np.array([1, 2, 4, 8])
    probs = np.array([1 - sc.multi_gpu_fraction, *([sc.multi_gpu_fraction / 3] * 3)])
    mean_gpus = float(sizes @ probs)
    rate = sc.load_factor * gpus / (dur_mean * mean_gpus)  # jobs per minute
    n_arr = rng.poisson(rate * minutes)
    submit = np.concatenate([np.zeros(sc.backlog_jobs), np.sort(rng.uniform(0, minutes, n_arr))])
    n = len(submit)
    dur = np.exp(rng.normal(np.log(sc.duration_median_minutes), sc.duration_sigma, n))
    return pd.DataFrame(
        {
            "job_id": [f"offline-{i:07d}" for i in range(n)],
            "submit": submit,
            "work_minutes": np.maximum(dur, 1.0),
            "num_gpus": rng.choice(sizes, n, p=probs),
            "vc": "offline",
            "user": "best-effort",
        }
    )
