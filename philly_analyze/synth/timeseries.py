"""Per-minute machine metrics of the history, one day at a time (bounded memory).

For every minute of the window and every GPU: the utilization of the job holding it (a draw
around that GPU's level, Beta-distributed so the mean is kept) or 0 when idle; for every
machine: CPU utilization and free memory driven by its busy GPUs; monitoring gaps (offline
minutes) where every metric is missing. A minute ``m`` (starting at ``60 m`` s) belongs to an
attempt when ``start <= 60 m < end``.

Values are integers of the output grids so every writer prints the same numbers: GPU
utilization in 1/30 % (nvidia-smi averages print as ``99.366666667``; most values are snapped
to 0.1 %), CPU in 0.001 %, memory in 0.0001 KB. Each day's draws come from a generator keyed by
(seed, day), so days can be produced in any order or process and the bytes stay the same.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import stats

from philly_analyze.synth.calibration import Calibration
from philly_analyze.synth.history import History

DAY = 1440
POOL = 64
#: GPU utilization grid: value = k / UTIL_DEN percent.
UTIL_DEN = 30
NA = -1
_SALT = 0x5EED_D1A


@dataclass
class DayMetrics:
    """Metrics of minutes ``[m0, m0 + n)``; NA where ``offline``."""

    m0: int
    util: np.ndarray  # int16 (n, M, G) in 1/30 %, NA for offline or absent GPUs
    cpu: np.ndarray  # float64 (n, M) percent, NaN offline
    mem_free: np.ndarray  # float64 (n, M) KB, NaN offline
    offline: np.ndarray  # bool (n, M)
    reboot: np.ndarray  # bool (n, M): first minute back after an outage
    pid: np.ndarray  # int32 (n, M, G): index of the placement holding the GPU, -1 idle


class MinuteModel:
    """Prepared per-placement minute ranges and value pools for ``day()``."""

    def __init__(self, hist: History, cal: Calibration, seed: int):
        self.seed = seed
        self.hist = hist
        cl = hist.cluster
        self.machines = cl.num_machines
        self.slots = cl.largest
        self.minutes = -(-hist.horizon // 60)
        self.days = -(-self.minutes // DAY)
        counts = np.diff(hist.ra_pl_offsets)
        start = np.repeat(hist.ra_start, counts)
        end = np.repeat(np.where(hist.ra_end < 0, hist.horizon, hist.ra_end), counts)
        m_start = -(-start // 60)
        m_end = np.minimum(-(-end // 60), self.minutes)
        keep = m_end > m_start
        order = np.argsort(m_start[keep], kind="stable")
        self.p_start = m_start[keep][order]
        self.p_end = m_end[keep][order]
        self.p_cell = (hist.pl_machine.astype(np.int64) * self.slots + hist.pl_gpu)[keep][order]
        self.p_level = np.rint(hist.pl_level[keep][order] * 10).astype(np.int16)  # 0.1 %
        rng = np.random.default_rng([seed, _SALT])
        # Share of the GPU's memory a job uses (constant over the placement).
        self.p_fb = rng.uniform(0.25, 0.95, len(self.p_start)).astype(np.float32)
        noise = cal.section("utilization", "noise")
        self.pool = _value_pool(
            float(noise["minute_concentration"]), float(noise["long_decimal_share"])
        )
        self.present = np.arange(self.slots)[None, :] < cl.gpus[:, None]  # (M, G)
        self.gpu_mem_mb = (cl.gpu_mem_gb * 1024).astype(np.float32)
        self.host = cal.section("host")
        self.mem_total = cl.host_mem_kb
        q = cal.section("cluster", "quirks")
        self.offline = _offline_intervals(
            rng,
            self.machines,
            self.minutes,
            q["offline_episodes_per_30_days"],
            q["offline_mean_minutes"],
        )

    def day(self, d: int) -> DayMetrics:
        """Metrics of day ``d`` (minutes ``[d*1440, (d+1)*1440)`` cut at the window's end)."""
        m0 = d * DAY
        n = min(DAY, self.minutes - m0)
        M, G = self.machines, self.slots
        rng = np.random.default_rng([self.seed, _SALT, d])
        hi = int(np.searchsorted(self.p_start, m0 + n, "left"))
        sel = np.flatnonzero(self.p_end[:hi] > m0)
        # Placement index holding each GPU each minute, -1 idle (never double-booked): fill
        # every placement's minutes at once in a (cell, minute) layout.
        a = np.maximum(self.p_start[sel] - m0, 0)
        b = np.minimum(self.p_end[sel] - m0, n)
        lens = b - a
        owner = np.repeat(sel, lens)
        first = np.repeat(self.p_cell[sel] * n + a - np.cumsum(lens) + lens, lens)
        pid_t = np.full(M * G * n, -1, dtype=np.int32)
        pid_t[first + np.arange(len(owner))] = owner
        pid = np.ascontiguousarray(pid_t.reshape(M * G, n).T).reshape(n, M, G)
        busy = pid >= 0
        held = np.maximum(pid, 0)
        r = rng.integers(0, POOL, size=(n, M, G), dtype=np.uint8)
        flat = self.p_level[held].astype(np.int32) * POOL + r
        util = np.where(busy, self.pool.ravel()[flat], 0).astype(np.int16)
        off = np.zeros((n, M), dtype=bool)
        back = np.zeros((n, M), dtype=bool)
        for mi, s, e in self.offline:
            if s < m0 + n and e > m0:
                off[max(s - m0, 0) : min(e - m0, n), mi] = True
            if m0 <= e < m0 + n:
                back[e - m0, mi] = True
        back &= ~off
        absent = ~self.present[None, :, :] | off[:, :, None]
        util[absent] = NA
        # Host metrics from the machine's GPUs.
        ngpu = self.present.sum(axis=1)
        mean_util = np.where(busy, util, 0).sum(axis=2) / UTIL_DEN / ngpu[None, :]
        h = self.host
        cpu = (100.0 - h["cpu_idle_base"]) + h["cpu_per_busy_gpu_util"] * mean_util
        cpu = np.clip(cpu + rng.normal(0.0, 1.5, size=(n, M)), 0.2, 100.0)
        busy_frac = busy.sum(axis=2) / ngpu[None, :]
        used = h["mem_used_base"] + h["mem_used_per_busy_gpu"] * 8 * busy_frac
        used = np.clip(used * (1 + rng.normal(0.0, 0.02, size=(n, M))), 0.01, 0.98)
        mem_free = self.mem_total[None, :] * (1.0 - used)
        cpu[off] = np.nan
        mem_free[off] = np.nan
        return DayMetrics(m0, util, cpu, mem_free, off, back, pid)

    def fb_mb(self, day: DayMetrics) -> np.ndarray:
        """GPU memory used (MB) per minute and GPU: the holding job's share of the GPU's
        memory, 2 MB when idle, NaN when offline or absent."""
        busy = day.pid >= 0
        fb = np.where(busy, self.p_fb[np.maximum(day.pid, 0)], 0.0) * self.gpu_mem_mb[None, :, None]
        fb = fb + np.where(busy, 0.0, 2.0)
        return np.where(day.util == NA, np.nan, fb).astype(np.float32)


def _value_pool(kappa: float, long_share: float) -> np.ndarray:
    """(1001, POOL) grid values (1/30 %) for mean levels 0.0 .. 100.0 % in 0.1 % steps:
    stratified Beta quantiles (the mean of a row is its level), most snapped to 0.1 %."""
    lv = np.clip(np.arange(1001) / 1000.0, 0.002, 0.998)
    q = (np.arange(POOL) + 0.5) / POOL
    x = stats.beta.ppf(q[None, :], lv[:, None] * kappa, (1 - lv[:, None]) * kappa) * 100.0
    k = np.rint(x * UTIL_DEN).astype(np.int64)
    # Deterministic choice of which pool entries keep nvidia-smi's 1/30 precision.
    keep_long = (np.arange(POOL) * 0.6180339887 % 1.0) < long_share
    snapped = np.rint(k / 3).astype(np.int64) * 3
    k = np.where(keep_long[None, :], k, snapped)
    return np.clip(k, 0, 100 * UTIL_DEN).astype(np.int16)


def _offline_intervals(
    rng: np.random.Generator, machines: int, minutes: int, per_30_days: float, mean_min: float
) -> list[tuple[int, int, int]]:
    """Monitoring gaps: (machine, first minute, end minute)."""
    out: list[tuple[int, int, int]] = []
    lam = per_30_days * minutes / (30 * DAY)
    counts = rng.poisson(lam, size=machines)
    if counts.sum() == 0 and minutes >= 120:
        # Even a tiny sample shows the quirk: one outage somewhere.
        counts[rng.integers(machines)] = 1
    for mi in np.flatnonzero(counts):
        starts = rng.integers(0, minutes, size=counts[mi])
        lens = np.maximum(1, rng.exponential(mean_min, size=counts[mi]).astype(np.int64))
        for s, ln in zip(starts.tolist(), lens.tolist(), strict=True):
            out.append((int(mi), s, min(s + ln, minutes)))
    return sorted(out)
