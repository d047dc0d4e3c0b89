"""The five files of the published Philly trace, byte-compatible with the real ones.

Quirks reproduced (``formats.md`` §1): a space after every comma of the machine list (and a few
8-GPU machines listed as ``2, 12GB``); the job log as one JSON array with Pacific wall-clock
times (the fall-back hour repeats), a still-running last attempt's end written as ``"None"``,
``null`` or ``""``, never-started jobs with ``"attempts": []`` (or ``null``, or no key); the
utilization CSVs with ``PDT``/``PST`` suffixes, ``NA`` for offline minutes and absent GPUs,
a trailing comma on every ``cluster_gpu_util`` data row, and ``mem_total`` 0 on the first
minute after an outage.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv

from philly_analyze.synth.clock import Clock
from philly_analyze.synth.history import R_RUNNING, History
from philly_analyze.synth.timeseries import UTIL_DEN, DayMetrics
from philly_analyze.synth.workload import KILLED, PASSED

STATUS_WORDS = {PASSED: "Pass", KILLED: "Killed"}
FILES = (
    "cluster_job_log",
    "cluster_machine_list",
    "cluster_gpu_util",
    "cluster_cpu_util",
    "cluster_mem_util",
)


def write_machine_list(path: Path, hist: History) -> None:
    """``machineId, number of GPUs, single GPU mem`` rows, ids in string order like the real
    file (m0, m1, m100, ...)."""
    cl = hist.cluster
    rows = sorted(
        (mid, int(g), int(mem))
        for mid, g, mem in zip(cl.machine_ids, cl.listed_gpus, cl.listed_gpu_mem_gb, strict=True)
    )
    with open(path, "w", newline="") as f:
        f.write("machineId, number of GPUs, single GPU mem\n")
        for mid, g, mem in rows:
            f.write(f"{mid},{g}, {mem}GB\n")


def job_objects(hist: History, clock: Clock, rng: np.random.Generator) -> Iterator[dict]:
    """One JSON object per job, in submission order, with the trace's quirks."""
    wl = hist.wl
    t0 = hist.window.start_epoch
    sub = clock.strings(t0 + wl.submit)
    starts = clock.strings(t0 + hist.ra_start)
    ends = clock.strings(t0 + np.maximum(hist.ra_end, 0))
    mids = hist.cluster.machine_ids
    first = hist.first_started()
    n_ra = len(hist.ra_job)
    end_variant = rng.choice(3, size=n_ra, p=[0.8, 0.15, 0.05])
    none_variant = rng.choice(3, size=wl.num_jobs, p=[0.9, 0.07, 0.03])
    for j in range(wl.num_jobs):
        obj: dict = {
            "status": STATUS_WORDS.get(int(wl.status[j]), "Failed"),
            "vc": wl.vc_names[wl.vc[j]],
            "jobid": hist.job_ids[j],
            "submitted_time": sub[j],
            "user": wl.user_names[wl.user[j]],
        }
        i = int(first[j])
        if i < 0:
            v = int(none_variant[j])
            if v == 0:
                obj["attempts"] = []
            elif v == 1:
                obj["attempts"] = None
            yield obj
            continue
        attempts = []
        while i < n_ra and hist.ra_job[i] == j:
            a, b = hist.ra_pl_offsets[i], hist.ra_pl_offsets[i + 1]
            detail: list[dict] = []
            by_machine: dict[int, list[str]] = {}
            for m, g in zip(hist.pl_machine[a:b].tolist(), hist.pl_gpu[a:b].tolist(), strict=True):
                if m not in by_machine:
                    by_machine[m] = []
                    detail.append({"ip": mids[m], "gpus": by_machine[m]})
                by_machine[m].append(f"gpu{g}")
            if hist.ra_outcome[i] == R_RUNNING:
                end: str | None = ("None", None, "")[int(end_variant[i])]
            else:
                end = ends[i]
            attempts.append({"start_time": starts[i], "end_time": end, "detail": detail})
            i += 1
        obj["attempts"] = attempts
        yield obj


def write_job_log(path: Path, hist: History, clock: Clock, rng: np.random.Generator) -> None:
    """The JSON array, one job per line."""
    with open(path, "w", newline="") as f:
        f.write("[")
        sep = ""
        for obj in job_objects(hist, clock, rng):
            f.write(sep)
            f.write(json.dumps(obj))
            sep = ",\n"
        f.write("]\n")


def util_headers(slots: int) -> tuple[bytes, bytes, bytes]:
    """Header lines of the GPU, CPU and memory CSVs."""
    gpu = ",".join(["time", "machineId", *[f"gpu{i}_util" for i in range(slots)]])
    return (
        (gpu + "\n").encode(),
        b"time,machine_id,cpu_util\n",
        b"time,machine_id,mem_total,mem_free\n",
    )


def util_value_strings() -> pa.Array:
    """Strings of the GPU utilization grid: index 0 is ``NA``, index k+1 is k/30 %, printed
    like Python prints the float (``60.8``, ``99.366666667``, ``100.0``)."""
    out = ["NA"]
    for k in range(100 * UTIL_DEN + 1):
        out.append(f"{k / UTIL_DEN:.1f}" if k % 3 == 0 else repr(round(k / UTIL_DEN, 9)))
    return pa.array(out)


def _dict(codes: np.ndarray, values: pa.Array) -> pa.DictionaryArray:
    return pa.DictionaryArray.from_arrays(pa.array(codes.astype(np.int32, copy=False)), values)


def _csv(columns: dict[str, pa.Array]) -> bytes:
    """Rows without header, no quoting, nulls as ``NA`` (Arrow's C++ CSV writer)."""
    buf = pa.BufferOutputStream()
    pacsv.write_csv(
        pa.table(columns),
        buf,
        pacsv.WriteOptions(
            include_header=False, quoting_style="none", null_string="NA", batch_size=65536
        ),
    )
    return buf.getvalue().to_pybytes()


def format_day(
    day: DayMetrics,
    hist: History,
    clock: Clock,
    value_strings: pa.Array,
    machine_ids: pa.Array,
) -> tuple[bytes, bytes, bytes]:
    """The three CSVs' rows for one day of metrics (minute-major, machines in id order). A
    machine's first minute back after an outage reports ``mem_total`` 0 (a real quirk)."""
    n, machines, slots = day.util.shape
    t0 = hist.window.start_epoch
    times = pa.array(clock.strings(t0 + 60 * (day.m0 + np.arange(n)), with_zone=True))
    rows = n * machines
    t_col = _dict(np.repeat(np.arange(n), machines), times)
    m_col = _dict(np.tile(np.arange(machines), n), machine_ids)
    util = day.util.reshape(rows, slots).astype(np.int32) + 1  # NA (-1) -> index 0
    gpu: dict[str, pa.Array] = {"time": t_col, "machine": m_col}
    for g in range(slots):
        gpu[f"g{g}"] = _dict(util[:, g], value_strings)
    gpu["trailing"] = _dict(np.zeros(rows, dtype=np.int32), pa.array([""]))
    off = day.offline.ravel()
    cpu = pa.array(np.round(day.cpu.ravel(), 3), mask=off)
    zero = day.reboot.ravel()
    totals = pa.array([f"{v:.1f}" for v in hist.cluster.host_mem_kb] + ["0.0"])
    tot_idx = np.where(zero, machines, np.tile(np.arange(machines), n))
    tot = pa.DictionaryArray.from_arrays(
        pa.array(tot_idx.astype(np.int32), mask=off & ~zero), totals
    )
    free = pa.array(np.where(zero, 0.0, np.round(day.mem_free.ravel(), 4)), mask=off & ~zero)
    return (
        _csv(gpu),
        _csv({"time": t_col, "machine": m_col, "cpu": cpu}),
        _csv({"time": t_col, "machine": m_col, "total": tot, "free": free}),
    )
