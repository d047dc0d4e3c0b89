"""The synthetic cluster: Philly's shape (2-GPU and 8-GPU servers) scaled to any size.

By default 552 machines, 321 with 2 GPUs of 12 GB and 231 with 8 GPUs of 24 GB, as in the
published machine list (carried as facts in ``data/synth_calibration.toml``). Other sizes keep
the same proportion. Servers stand in racks of one type (see the data file); machine ids are
``m<k>`` with gaps, like the real list, and the two types are interleaved in id order.

The machine-list quirk of the real trace is reproduced: a few 8-GPU machines are *listed* as
``2, 12GB`` while jobs use all 8 of their GPUs (ground truth keeps the true count).

``SynthCluster`` is a replay ``Cluster`` (the shape the replay engine schedules on) with what
the machine list says beside it and the machines' memory.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from philly_analyze.sim import Cluster
from philly_analyze.synth.calibration import Calibration


@dataclass(frozen=True)
class SynthCluster(Cluster):
    """Machines of the synthetic cluster, index-aligned arrays: a ``Cluster`` (``gpus``: the
    true GPU count, what the scheduler uses; ``rack``: dense rack index) plus the machine
    list's view and memory sizes."""

    #: GPU count written in the machine list (differs for mislisted machines).
    listed_gpus: np.ndarray
    gpu_mem_gb: np.ndarray
    listed_gpu_mem_gb: np.ndarray
    host_mem_kb: np.ndarray


def build_cluster(cal: Calibration, machines: int, rng: np.random.Generator) -> SynthCluster:
    """A cluster of ``machines`` servers in Philly's proportions."""
    c = cal.section("cluster")
    if machines < 1:
        raise ValueError("need at least one machine")
    share8 = c["machines_8gpu"] / (c["machines_8gpu"] + c["machines_2gpu"])
    n8 = round(machines * share8)
    n8 = min(max(n8, 1), machines - 1) if machines >= 2 else 1
    # Ids with gaps (the real list skips numbers): choose from a slightly larger range.
    pool = int(machines * 1.08) + 1
    numbers = np.sort(rng.choice(pool, size=machines, replace=False))
    is8 = np.zeros(machines, dtype=bool)
    is8[rng.choice(machines, size=n8, replace=False)] = True
    gpus = np.where(is8, 8, 2).astype(np.int16)
    mem = np.where(is8, c["gpu_mem_gb_8gpu"], c["gpu_mem_gb_2gpu"]).astype(np.float32)
    host = np.where(is8, c["host_mem_kb_8gpu"], c["host_mem_kb_2gpu"]).astype(np.float64)
    per_rack = int(c["racks"]["servers_per_rack"])
    rack = np.zeros(machines, dtype=np.int32)
    idx8, idx2 = np.flatnonzero(is8), np.flatnonzero(~is8)
    rack[idx8] = np.arange(len(idx8)) // per_rack
    n_racks8 = -(-len(idx8) // per_rack)
    rack[idx2] = n_racks8 + np.arange(len(idx2)) // per_rack
    listed = gpus.copy()
    listed_mem = mem.copy()
    q = c["quirks"]
    if n8 >= 2:
        k = max(1, round(n8 * q["mislisted_fraction_of_8gpu"]))
        wrong = rng.choice(idx8, size=k, replace=False)
        listed[wrong] = 2
        listed_mem[wrong] = c["gpu_mem_gb_2gpu"]
    # Ids in increasing number are also the replay's natural order (m2 < m10), and racks are
    # numbered from 0 without gaps: the shape is what ``Cluster.build`` would make of it.
    return SynthCluster(
        machine_ids=tuple(f"m{k}" for k in numbers),
        gpus=gpus,
        rack=rack,
        rack_names=tuple(f"rack{r}" for r in range(int(rack.max()) + 1)),
        listed_gpus=listed,
        gpu_mem_gb=mem,
        listed_gpu_mem_gb=listed_mem,
        host_mem_kb=host,
    )
