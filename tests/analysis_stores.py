"""Tiny hand-made stores for the analysis and report tests.

Times are minutes after ``T0`` so a test can write its schedule as small integers and work the
expected answer out by hand. Rows go through ``Store.batch()`` and ``schemas.conform``, i.e.
exactly what the parsers write.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pyarrow as pa

from philly_analyze.store import Store

T0 = datetime(2017, 10, 2, tzinfo=UTC)


def t(minutes: float) -> datetime:
    """``T0`` plus ``minutes``."""
    return T0 + timedelta(minutes=minutes)


@dataclass
class Att:
    """One attempt: start/end in minutes (None = missing), outcome, GPUs as {machine: [idx]}."""

    start: float | None
    end: float | None
    outcome: str | None
    gpus: dict[str, list[int]] = field(default_factory=dict)


@dataclass
class Job:
    job_id: str
    vc: str | None
    user: str | None
    status: str | None
    submit: float | None
    attempts: list[Att] = field(default_factory=list)
    num_gpus: int | None = None  # for jobs that never ran


def write_store(
    path: Path,
    *,
    machines: dict[str, int] | None = None,
    jobs: Sequence[Job] = (),
    racks: dict[str, str] | None = None,
    source: str = "philly_job_log",
    extra: dict[str, dict[str, Any] | pa.Table] | None = None,
) -> Path:
    """Write a store at ``path`` with these machines, jobs (attempts, placements) and extra
    tables (``{"gpu_util": {...columns...}, "failures": ...}``)."""
    machines = machines or {}
    with Store(path) as store, store.batch() as b:
        if machines:
            b.write(
                "machines",
                {
                    "machine_id": list(machines),
                    "listed_num_gpus": pa.array(list(machines.values()), pa.int16()),
                    "rack": [(racks or {}).get(m) for m in machines],
                    "source": ["philly_machine_list"] * len(machines),
                },
            )
        jrows: dict[str, list[Any]] = {
            k: [] for k in ("job_id", "vc", "user_id", "status", "submit_time", "num_gpus")
        }
        arows: dict[str, list[Any]] = {
            k: []
            for k in (
                "job_id",
                "attempt_idx",
                "start_time",
                "end_time",
                "num_gpus",
                "num_machines",
                "duration_s",
                "outcome",
            )
        }
        prows: dict[str, list[Any]] = {k: [] for k in ("job_id", "attempt_idx", "machine_id")}
        prows["gpu_idx"] = []
        for j in jobs:
            first = sum(len(v) for v in j.attempts[0].gpus.values()) if j.attempts else None
            jrows["job_id"].append(j.job_id)
            jrows["vc"].append(j.vc)
            jrows["user_id"].append(j.user)
            jrows["status"].append(j.status)
            jrows["submit_time"].append(None if j.submit is None else t(j.submit))
            jrows["num_gpus"].append(j.num_gpus if j.num_gpus is not None else first)
            for i, a in enumerate(j.attempts):
                n = sum(len(v) for v in a.gpus.values())
                arows["job_id"].append(j.job_id)
                arows["attempt_idx"].append(i)
                arows["start_time"].append(None if a.start is None else t(a.start))
                arows["end_time"].append(None if a.end is None else t(a.end))
                arows["num_gpus"].append(n)
                arows["num_machines"].append(len(a.gpus))
                arows["duration_s"].append(
                    None if a.start is None or a.end is None else (a.end - a.start) * 60.0
                )
                arows["outcome"].append(a.outcome)
                for m, idx in a.gpus.items():
                    for g in idx:
                        prows["job_id"].append(j.job_id)
                        prows["attempt_idx"].append(i)
                        prows["machine_id"].append(m)
                        prows["gpu_idx"].append(g)
        if jobs:
            b.write(
                "jobs", {**_typed(jrows, {"submit_time": "ts"}), "source": [source] * len(jobs)}
            )
        if arows["job_id"]:
            b.write(
                "attempts",
                {
                    **_typed(arows, {"start_time": "ts", "end_time": "ts"}),
                    "source": [source] * len(arows["job_id"]),
                },
            )
        if prows["job_id"]:
            b.write("placements", {**prows, "source": [source] * len(prows["job_id"])})
        for table, data in (extra or {}).items():
            b.write(table, data)
        store.commit(
            b,
            [{"source": f"test:{path.name}", "format": "test", "rows": sum(b.rows.values())}],
            source_format=source,
        )
    return path


def _typed(cols: dict[str, list[Any]], kinds: dict[str, str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in cols.items():
        if kinds.get(k) == "ts":
            out[k] = pa.array(v, pa.timestamp("us", tz="UTC"))
        else:
            out[k] = v
    return out


def minutes_util(rows: Sequence[tuple[float, str, int, float]]) -> dict[str, Any]:
    """gpu_util columns from (minute, machine, gpu, util) tuples."""
    return {
        "time": pa.array([t(r[0]) for r in rows], pa.timestamp("us", tz="UTC")),
        "machine_id": [r[1] for r in rows],
        "gpu_idx": pa.array([r[2] for r in rows], pa.int16()),
        "util": pa.array([r[3] for r in rows], pa.float32()),
    }
