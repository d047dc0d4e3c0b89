"""Ganglia exports: ganglia-web CSV per host and metric, laid out like gmetad's RRD tree.

``ganglia/<cluster>/<host>/<metric>.csv`` with the header ``Timestamp,<metric>`` and rows
``2017-10-03T00:00:00-07:00,60.8`` (ISO-8601 with the zone offset; ``NaN`` when the host sent
nothing), as ganglia-web's ``graph.php?...&csv=1`` writes them. Host names are the machine ids.
Metrics: per GPU ``gpu{i}_util`` (%), ``gpu{i}_mem_util`` (%), ``gpu{i}_fb_memory`` (MB used);
per host ``cpu_user``, ``cpu_system``, ``cpu_idle`` (%), ``mem_total``, ``mem_free`` (KB).

Volume-aware: an export of a long window comes from Ganglia's consolidated archives, so the step
is the finest of Ganglia's default RRA resolutions (1, 6, 42, 168 minutes) that keeps the export
under ``max_values`` values; each row is the mean of the minutes of its step (the same minute
values as the published-format CSVs).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from philly_analyze.synth import textfmt
from philly_analyze.synth.calibration import Calibration
from philly_analyze.synth.history import History
from philly_analyze.synth.timeseries import NA, UTIL_DEN, DayMetrics, MinuteModel

HOST_METRICS = ("cpu_user", "cpu_system", "cpu_idle", "mem_total", "mem_free")
GPU_METRICS = ("util", "mem_util", "fb_memory")


def choose_step(cal: Calibration, hist: History) -> int:
    """Seconds per exported row (module docstring)."""
    g = cal.section("ganglia")
    series = hist.cluster.total_gpus * len(GPU_METRICS) + hist.cluster.num_machines * len(
        HOST_METRICS
    )
    minutes = -(-hist.horizon // 60)
    for step in g["steps_seconds"]:
        if series * (-(-minutes * 60 // step)) <= g["max_values"]:
            return int(step)
    return int(g["steps_seconds"][-1])


@dataclass
class DaySums:
    """Sums over the minutes of each step bin touched by one day."""

    b0: int
    host: np.ndarray  # (bins, M, 5)
    gpu: np.ndarray  # (bins, M, G, 3)
    count: np.ndarray  # (bins, M) minutes with data


def day_sums(
    day: DayMetrics, model: MinuteModel, step_min: int, cpu_system_share: float
) -> DaySums:
    """Per step bin: sums of each metric over the day's minutes in it (offline minutes add
    nothing and are not counted)."""
    n, machines, slots = day.util.shape
    m = day.m0 + np.arange(n)
    bins = m // step_min
    starts = np.flatnonzero(np.r_[True, bins[1:] != bins[:-1]])
    ok = ~day.offline
    util = np.where(day.util == NA, 0, day.util).astype(np.float32) * np.float32(1 / UTIL_DEN)
    fb = np.nan_to_num(model.fb_mb(day))
    mem_util = util * (np.float32(0.2) + np.float32(0.5) * fb / model.gpu_mem_mb[None, :, None])
    gpu = np.empty((len(starts), machines, slots, len(GPU_METRICS)), dtype=np.float32)
    for k, arr in enumerate((util, mem_util, fb)):
        gpu[..., k] = np.add.reduceat(arr, starts, axis=0, dtype=np.float64)
    cpu = np.where(ok, day.cpu, 0.0)
    host = np.empty((len(starts), machines, len(HOST_METRICS)), dtype=np.float64)
    host[..., 0] = np.add.reduceat(cpu * (1 - cpu_system_share), starts, axis=0)
    host[..., 1] = np.add.reduceat(cpu * cpu_system_share, starts, axis=0)
    host[..., 2] = np.add.reduceat(np.where(ok, 100.0 - cpu, 0.0), starts, axis=0)
    host[..., 3] = 0.0  # mem_total is constant per machine (written from the cluster)
    host[..., 4] = np.add.reduceat(np.where(ok, day.mem_free, 0.0), starts, axis=0)
    return DaySums(int(bins[0]), host, gpu, np.add.reduceat(ok.astype(np.int32), starts, axis=0))


@dataclass
class GangliaAccumulator:
    """Sums for every step bin of the window (added day by day, in any order)."""

    bins: int
    machines: int
    slots: int
    host: np.ndarray = field(init=False)
    gpu: np.ndarray = field(init=False)
    count: np.ndarray = field(init=False)

    def __post_init__(self) -> None:
        self.host = np.zeros((self.bins, self.machines, len(HOST_METRICS)), dtype=np.float64)
        self.gpu = np.zeros(
            (self.bins, self.machines, self.slots, len(GPU_METRICS)), dtype=np.float32
        )
        self.count = np.zeros((self.bins, self.machines), dtype=np.int32)

    def add(self, s: DaySums) -> None:
        """Add one day's sums at its bins."""
        k = s.host.shape[0]
        self.host[s.b0 : s.b0 + k] += s.host
        self.gpu[s.b0 : s.b0 + k] += s.gpu
        self.count[s.b0 : s.b0 + k] += s.count


def write_ganglia(
    out: Path, cal: Calibration, hist: History, acc: GangliaAccumulator, step: int
) -> list[Path]:
    """One CSV per host and metric; returns the files written."""
    cluster_name = str(cal.section("ganglia")["cluster_name"])
    # RRDtool labels a consolidated row with the END of its step (the ingester reads it so:
    # ingest/resample.py): bin k covers [start + k*step, start + (k+1)*step).
    t = hist.window.start_epoch + step * (np.arange(acc.bins) + 1)
    iso = pd.to_datetime(t, unit="s", utc=True).tz_convert(hist.window.timezone)
    raw = list(iso.strftime("%Y-%m-%dT%H:%M:%S%z"))
    stamps = textfmt.lut([s[:-2] + ":" + s[-2:] for s in raw])
    ts_blk = stamps.take(np.arange(acc.bins))
    nan = np.frombuffer(b"NaN", dtype=np.uint8)
    files: list[Path] = []
    cl = hist.cluster
    for mi, host in enumerate(cl.machine_ids):
        d = out / cluster_name / host
        d.mkdir(parents=True, exist_ok=True)
        cnt = acc.count[:, mi]
        ok = cnt > 0
        series: list[tuple[str, np.ndarray]] = []
        for k, name in enumerate(HOST_METRICS):
            v = acc.host[:, mi, k] / np.maximum(cnt, 1)
            if name == "mem_total":
                v = np.full(acc.bins, cl.host_mem_kb[mi])
            series.append((name, v))
        for g in range(int(cl.gpus[mi])):
            for k, name in enumerate(GPU_METRICS):
                series.append((f"gpu{g}_{name}", acc.gpu[:, mi, g, k] / np.maximum(cnt, 1)))
        for name, v in series:
            blk = textfmt.decimal(np.where(ok, np.maximum(v, 0.0), 0.0), 4)
            assert blk.mask is not None  # decimal() masks (its strings vary in width)
            data, mask = blk.data.copy(), blk.mask.copy()
            data[~ok, :3] = nan
            mask[~ok] = False
            mask[~ok, :3] = True
            body = textfmt.join_rows([ts_blk, b",", textfmt.Block(data, mask)])
            path = d / f"{name}.csv"
            with open(path, "wb") as f:
                f.write(f"Timestamp,{name}\n".encode())
                f.write(body)
            files.append(path)
    return files
