"""Writers of small published-format Philly files for tests (shapes as in formats.md §1)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

GPU_HEADER = "time,machineId," + ",".join(f"gpu{i}_util" for i in range(8)) + "\n"


def write_big_gpu_util(path: Path, minutes: int, machines: int = 20) -> None:
    """A ``cluster_gpu_util`` of ``minutes`` x ``machines`` lines (about 70 bytes each) that
    takes a while to read: values repeat from minute to minute, times do not."""
    rng = np.random.default_rng(0)
    block = "".join(
        "{ts}," + f"m{k}," + ",".join(f"{v:.3f}" for v in rng.uniform(0, 100, 8)) + ",\n"
        for k in range(machines)
    )
    times = np.datetime64("2017-10-01T00:00") + np.arange(minutes).astype("timedelta64[m]")
    with open(path, "w") as f:
        f.write(GPU_HEADER)
        f.write("".join(block.replace("{ts}", str(t).replace("T", " ") + ":00 PDT") for t in times))


def write_machine_list(path: Path, machines: list[tuple[str, int, str]]) -> Path:
    """``machines``: (id, gpus, mem) -> ``m0,2, 12GB`` lines (space after each comma)."""
    lines = ["machineId, number of GPUs, single GPU mem\n"]
    lines += [f"{m},{g}, {mem}\n" for m, g, mem in machines]
    path.write_text("".join(lines))
    return path


def write_job_log(path: Path, jobs: list[dict[str, Any]], pretty: bool = False) -> Path:
    """A JSON array, one job per line like the published file (or indented)."""
    if pretty:
        path.write_text(json.dumps(jobs, indent=2))
    else:
        path.write_text("[" + ",\n".join(json.dumps(j) for j in jobs) + "]\n")
    return path


def gpu_row(time: str, machine: str, values: list[str]) -> str:
    """A cluster_gpu_util data row: 8 values (pad with NA) and the trailing comma."""
    vals = [*values, *(["NA"] * (8 - len(values)))]
    return f"{time},{machine}," + ",".join(vals) + ",\n"


def write_gpu_util(path: Path, rows: list[str]) -> Path:
    path.write_text(GPU_HEADER + "".join(rows))
    return path


def job(
    jobid: str,
    submitted: Any,
    attempts: list[dict[str, Any]] | None,
    status: str = "Pass",
    vc: str = "vc1",
    user: str = "u1",
) -> dict[str, Any]:
    d: dict[str, Any] = {
        "status": status,
        "vc": vc,
        "jobid": jobid,
        "submitted_time": submitted,
        "user": user,
    }
    if attempts is not None:
        d["attempts"] = attempts
    return d


def attempt(start: Any, end: Any, detail: dict[str, list[int]]) -> dict[str, Any]:
    return {
        "start_time": start,
        "end_time": end,
        "detail": [{"ip": m, "gpus": [f"gpu{g}" for g in gs]} for m, gs in detail.items()],
    }
