"""What a sharing simulation returns, and the accumulators that build it without keeping every
GPU-minute (histograms and sums, not samples). The part a store keeps (``SharingOutput``) is
defined with the store's files, in ``philly_analyze.sharingout``."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from philly_analyze.sharingout import LN_BIN, LN_BINS, SharingOutput
from philly_analyze.sim.sharing.config import SharingConfig

#: Eviction reasons (also attempt outcomes in ``SharingResult.attempts``).
EVICTION_REASONS = (
    "memory_limit",  # xCUDA refused an allocation over the offline limit: offline OOM only
    "oom_crash",  # no limit: the GPU ran out of memory, online crashed too
    "monitor",  # SysMonitor evicted the offline workload
    "error_signal",  # SIGINT/SIGTERM-type error, intercepted: offline process only
    "error_reset",  # other error under mixed handling: CUDA context reset, short outage
    "error_propagated",  # plain MPS: the error reached every client on the GPU
)


@dataclass
class Accumulator:
    """Running sums over the simulation (one instance per run)."""

    n_online: int
    n_ordinary: int
    steps: int = 0
    minutes: float = 0.0
    sums: dict[str, float] = field(default_factory=dict)
    ln_hist: np.ndarray = field(default_factory=lambda: np.zeros(LN_BINS, np.int64))
    evictions: dict[str, int] = field(default_factory=lambda: dict.fromkeys(EVICTION_REASONS, 0))
    lost_gpu_minutes: float = 0.0
    sm_restarts: int = 0
    outage_events: int = 0
    rows: list[tuple[float, ...]] = field(default_factory=list)

    def add(self, key: str, value: float) -> None:
        """Add ``value`` to the running sum ``key``."""
        self.sums[key] = self.sums.get(key, 0.0) + float(value)

    def add_slowdowns(self, ln_sigma: np.ndarray) -> None:
        """Record the ln(slowdown) of shared online GPU-minutes."""
        b = np.minimum((np.maximum(ln_sigma, 0.0) / LN_BIN).astype(np.int64), LN_BINS - 1)
        self.ln_hist += np.bincount(b, minlength=LN_BINS)

    def slowdown_quantile(self, q: float) -> float | None:
        """The ``q`` quantile of the online slowdown over shared GPU-minutes (None if none)."""
        total = int(self.ln_hist.sum())
        if total == 0:
            return None
        idx = int(np.searchsorted(np.cumsum(self.ln_hist), q * total))
        return float(np.exp((idx + 0.5) * LN_BIN))


@dataclass(kw_only=True)
class SharingResult(SharingOutput):
    """Outcome of ``simulate_sharing``: a ``SharingOutput`` plus the schedule.

    ``jobs``: one row per offline job (minutes from the origin; NaN if it never started/ended).
    ``attempts``: one row per placement of a job: start, end, outcome (the observed outcome of
    the attempt whose work it finished: ``passed``, ``failed`` (retried), ``killed``, None if
    unknown; an eviction reason; or ``running`` at the horizon), kind
    (``shared``/``ordinary``), global GPU ids
    (online GPUs are ``0..online_gpus-1``, ordinary ones follow)."""

    jobs: pd.DataFrame
    attempts: pd.DataFrame
    config: SharingConfig
    origin: pd.Timestamp | None = None
    #: Wall-clock figures (not deterministic, so not in ``metrics``): seconds, solver_seconds.
    timing: dict[str, Any] = field(default_factory=dict)


def _pct(x: np.ndarray, q: float) -> float | None:
    return float(np.quantile(x, q)) if len(x) else None


def job_metrics(jobs: pd.DataFrame, minutes: float) -> dict[str, Any]:
    """Offline-side metrics from the per-job table."""
    done = jobs[jobs["end_min"].notna()]
    started = jobs[jobs["first_start_min"].notna()]
    jct = (done["end_min"] - done["submit_min"]).to_numpy()
    queue = (started["first_start_min"] - started["submit_min"]).to_numpy()
    return {
        "offline_jobs": len(jobs),
        "offline_completed": len(done),
        "offline_throughput_jobs_per_hour": len(done) / (minutes / 60.0) if minutes else None,
        "offline_jct_mean_min": float(jct.mean()) if len(jct) else None,
        "offline_jct_p50_min": _pct(jct, 0.5),
        "offline_jct_p95_min": _pct(jct, 0.95),
        "offline_queue_mean_min": float(queue.mean()) if len(queue) else None,
        "offline_queue_p50_min": _pct(queue, 0.5),
        "offline_queue_p95_min": _pct(queue, 0.95),
    }


def round_metrics(m: dict[str, Any], digits: int = 4) -> dict[str, Any]:
    """Floats rounded for display and JSON (counts stay ints)."""
    out: dict[str, Any] = {}
    for k, v in m.items():
        if isinstance(v, float | np.floating):
            out[k] = round(float(v), digits)
        elif isinstance(v, np.integer):
            out[k] = int(v)
        else:
            out[k] = v
    return out
