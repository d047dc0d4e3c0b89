"""A public-trace-shaped store for the report benchmark (and the notebook test when no sample
data exists): jobs scheduled by a small greedy gang scheduler on Philly's machine shape, with
per-minute GPU/CPU/memory utilization written straight to Parquet by DuckDB.

Scale facts of the public trace (../shared/reference/README.md, cluster_machine_list): 117,325
jobs, 552 machines (321 with 2 GPUs, 231 with 8), ~75 days of per-minute utilization. The
workload mix below (sizes, durations, outcomes) is only roughly Philly-like: it exists to time
the report, not to reproduce the paper's numbers.
"""

from __future__ import annotations

import heapq
from datetime import UTC, datetime
from pathlib import Path

import duckdb
import numpy as np
import pyarrow as pa

from philly_analyze.store import Store

T0 = datetime(2017, 10, 1, tzinfo=UTC)
REASONS = (
    ("CPU out of memory", "AE,U"),
    ("Incorrect inputs", "IF,U"),
    ("Semantic error", "IF,U"),
    ("Core dump", "AE,U"),
    ("Model ckpt error", "IF"),
    ("No signature", "-"),
)


def _schedule(
    rng: np.random.Generator, n_jobs: int, sizes: np.ndarray, days: float
) -> dict[str, np.ndarray]:
    """Greedy gang scheduler over arrivals; returns attempt and placement columns."""
    free = sizes.astype(np.int64).copy()
    horizon = days * 86400.0
    submit = np.sort(rng.uniform(0, horizon * 0.97, n_jobs))
    demand = rng.choice(
        [1, 2, 4, 8, 16, 32], n_jobs, p=[0.70, 0.06, 0.11, 0.09, 0.035, 0.005]
    ).astype(np.int64)
    # Heavy-tailed run times (s): lognormal, median ~40 min, capped at 10 days.
    dur = np.minimum(np.exp(rng.normal(9.45, 1.9, n_jobs)), 10 * 86400.0)
    dur = dur * np.where(demand >= 8, 0.5, 1.0)
    status = rng.choice(3, n_jobs, p=[0.69, 0.14, 0.17])  # passed, killed, unsuccessful
    retries = np.where(status == 2, rng.geometric(0.45, n_jobs), rng.binomial(1, 0.15, n_jobs))
    retries = np.minimum(retries, 5)
    largest = int(sizes.max())
    att_job: list[int] = []
    att_idx: list[int] = []
    att_start: list[float] = []
    att_end: list[float] = []
    att_out: list[int] = []
    pl_att: list[int] = []
    pl_mach: list[int] = []
    pl_gpu: list[int] = []
    gpu_busy = [np.zeros(s, bool) for s in sizes]
    pending: list[tuple[float, int, int]] = []  # (ready time, job, attempt idx)
    for j in range(n_jobs):
        pending.append((submit[j], j, 0))
    heapq.heapify(pending)
    running: list[tuple[float, int, list[tuple[int, int]]]] = []  # (end, attempt row, gpus)
    waiting: list[tuple[float, int, int]] = []
    now = 0.0
    while pending or waiting or running:
        # Next event: an arrival/ready or a completion.
        t_next = min(pending[0][0] if pending else np.inf, running[0][0] if running else np.inf)
        if t_next == np.inf:
            break  # waiting jobs that can never fit
        now = t_next
        while running and running[0][0] <= now:
            _, row, gpus = heapq.heappop(running)
            for m, g in gpus:
                free[m] += 1
                gpu_busy[m][g] = False
            j = att_job[row]
            k = att_idx[row]
            if k < retries[j]:  # a failed attempt: the job re-enters the queue
                heapq.heappush(pending, (now + rng.uniform(10, 120), j, k + 1))
        while pending and pending[0][0] <= now:
            waiting.append(heapq.heappop(pending))
        still: list[tuple[float, int, int]] = []
        for pos, (ready, j, k) in enumerate(waiting):
            if pos > 64:  # bounded look-ahead keeps the loop linear
                still.extend(waiting[pos:])
                break
            n = int(demand[j])
            chosen: list[int] = []
            if n <= largest:
                ok = np.flatnonzero(free >= n)
                if len(ok):
                    chosen = [int(ok[np.argmin(free[ok])])]
            else:
                whole = np.flatnonzero((free == sizes) & (sizes == largest))
                need = -(-n // largest)
                if len(whole) >= need:
                    chosen = [int(m) for m in whole[:need]]
            if not chosen:
                still.append((ready, j, k))
                continue
            row = len(att_job)
            last = k == retries[j]
            length = dur[j] if last else dur[j] * rng.uniform(0.01, 0.5)
            gpus = []  # (machine, GPU) pairs, as in `running`
            left = n
            for m in chosen:
                take = min(left, int(free[m]))
                idle = np.flatnonzero(~gpu_busy[m])[:take]
                for g in idle:
                    gpu_busy[m][g] = True
                    gpus.append((m, int(g)))
                    pl_att.append(row)
                    pl_mach.append(m)
                    pl_gpu.append(int(g))
                free[m] -= take
                left -= take
            att_job.append(j)
            att_idx.append(k)
            att_start.append(now)
            att_end.append(now + length)
            att_out.append(int(status[j]) if last else 3)
            heapq.heappush(running, (now + length, row, gpus))
        waiting = still
    return {
        "submit": submit,
        "demand": demand,
        "status": status,
        "att_job": np.array(att_job),
        "att_idx": np.array(att_idx),
        "att_start": np.array(att_start),
        "att_end": np.array(att_end),
        "att_out": np.array(att_out),
        "pl_att": np.array(pl_att),
        "pl_mach": np.array(pl_mach),
        "pl_gpu": np.array(pl_gpu),
    }


def _ts(seconds: np.ndarray) -> pa.Array:
    us = (np.int64(T0.timestamp() * 1_000_000) + (seconds * 1e6).astype(np.int64)).astype(np.int64)
    return pa.array(us, pa.int64()).cast(pa.timestamp("us", tz="UTC"))


def build_store(
    path: str | Path,
    *,
    jobs: int = 117_325,
    two_gpu: int = 321,
    eight_gpu: int = 231,
    days: float = 75.0,
    seed: int = 7,
    util_minutes: bool = True,
) -> Path:
    """Write a store at ``path`` (replaced if present) and return its path."""
    path = Path(path)
    rng = np.random.default_rng(seed)
    sizes = np.array([2] * two_gpu + [8] * eight_gpu, dtype=np.int64)
    mids = np.array([f"m{i}" for i in range(len(sizes))])
    s = _schedule(rng, jobs, sizes, days)
    n_vc = 14
    vc_of = rng.zipf(1.6, jobs) % n_vc
    user_of = rng.integers(0, 300, jobs)
    job_ids = np.array([f"application_1506638472019_{i:06d}" for i in range(jobs)])
    statuses = np.array(["passed", "killed", "unsuccessful"])
    outcomes = np.array(["passed", "killed", "failed", "failed"])
    with Store(path) as store, store.batch() as b:
        b.write(
            "machines",
            {
                "machine_id": mids,
                "listed_num_gpus": pa.array(sizes, pa.int16()),
                "gpu_mem_gb": pa.array(np.where(sizes == 2, 12.0, 24.0), pa.float32()),
                "source": ["philly_machine_list"] * len(sizes),
            },
        )
        b.write(
            "jobs",
            {
                "job_id": job_ids,
                "vc": [f"vc{v:02d}" for v in vc_of],
                "user_id": [f"u{u:03d}" for u in user_of],
                "status": statuses[s["status"]],
                "submit_time": _ts(s["submit"]),
                "num_gpus": pa.array(s["demand"], pa.int32()),
                "source": ["philly_job_log"] * jobs,
            },
        )
        aj = s["att_job"]
        # Servers per attempt: distinct (attempt, machine) pairs counted per attempt.
        pairs = np.unique(np.stack([s["pl_att"], s["pl_mach"]], 1), axis=0)
        nm = np.bincount(pairs[:, 0], minlength=len(aj))
        b.write(
            "attempts",
            {
                "job_id": job_ids[aj],
                "attempt_idx": pa.array(s["att_idx"], pa.int32()),
                "start_time": _ts(s["att_start"]),
                "end_time": _ts(s["att_end"]),
                "num_gpus": pa.array(s["demand"][aj], pa.int32()),
                "num_machines": pa.array(nm, pa.int32()),
                "duration_s": np.round(s["att_end"] - s["att_start"], 0),
                "outcome": outcomes[s["att_out"]],
                "source": ["philly_job_log"] * len(aj),
            },
        )
        pa_ = s["pl_att"]
        b.write(
            "placements",
            {
                "job_id": job_ids[aj[pa_]],
                "attempt_idx": pa.array(s["att_idx"][pa_], pa.int32()),
                "machine_id": mids[s["pl_mach"]],
                "gpu_idx": pa.array(s["pl_gpu"], pa.int16()),
                "source": ["philly_job_log"] * len(pa_),
            },
        )
        failed = np.flatnonzero(s["att_out"] >= 2)
        reason = rng.integers(0, len(REASONS), len(failed))
        b.write(
            "failures",
            {
                "job_id": job_ids[aj[failed]],
                "attempt_idx": pa.array(s["att_idx"][failed], pa.int32()),
                "reason": [REASONS[r][0] for r in reason],
                "categories": [REASONS[r][1] for r in reason],
                "line_no": pa.array(rng.integers(1, 5000, len(failed)), pa.int64()),
                "message": ["Traceback (most recent call last):"] * len(failed),
            },
        )
        # Loss curves for a fifth of the final attempts of passed/killed jobs.
        last = np.flatnonzero(s["att_out"] <= 1)
        last = last[rng.random(len(last)) < 0.2]
        n_ep = rng.integers(5, 60, len(last))
        rows = np.repeat(last, n_ep)
        ep = np.concatenate([np.arange(n) for n in n_ep]) if len(n_ep) else np.array([])
        rate = np.repeat(rng.uniform(0.05, 0.5, len(last)), n_ep)
        loss = 0.5 + 2.0 * np.exp(-rate * ep) + rng.normal(0, 0.002, len(ep))
        b.write(
            "epochs",
            {
                "job_id": job_ids[aj[rows]],
                "attempt_idx": pa.array(s["att_idx"][rows], pa.int32()),
                "epoch": pa.array(ep, pa.int64()),
                "unit": ["epoch"] * len(ep),
                "loss": loss,
            },
        )
        if util_minutes:
            con = duckdb.connect()
            con.execute("SET TimeZone = 'UTC'")
            con.register("mach", pa.table({"machine_id": mids, "ngpu": sizes}))
            minutes = int(days * 1440)
            t0 = T0.isoformat()
            # As ingest stores the published trace's cluster_gpu_util: one wide row per
            # machine-minute (gpu_util_wide), unpivoted by the gpu_util view.
            values = ", ".join(
                f"CASE WHEN {g} < ngpu THEN "
                f"((hash(m * 7919 + (hash(machine_id) % 97) * 31 + {g}) % 1000) / 10.0)::FLOAT "
                f"END AS gpu{g}_util"
                for g in range(8)
            )
            b.copy_query(
                "gpu_util_wide",
                con,
                f"SELECT TIMESTAMPTZ '{t0}' + to_minutes(m) AS time, machine_id, {values} "
                f"FROM range({minutes}) t(m), mach",
            )
            b.copy_query(
                "cpu_util",
                con,
                f"SELECT TIMESTAMPTZ '{t0}' + to_minutes(m) AS time, machine_id, "
                f"((hash(m * 31 + hash(machine_id)) % 1000) / 10.0)::FLOAT AS util "
                f"FROM range({minutes}) t(m), mach",
            )
            b.copy_query(
                "mem_util",
                con,
                f"SELECT TIMESTAMPTZ '{t0}' + to_minutes(m) AS time, machine_id, "
                f"528272672.0 AS mem_total, "
                f"528272672.0 * (hash(m * 17 + hash(machine_id)) % 1000) / 1000.0 AS mem_free "
                f"FROM range({minutes}) t(m), mach",
            )
            con.close()
        store.commit(
            b,
            [{"source": "bench:reportstore", "format": "bench", "rows": sum(b.rows.values())}],
            source_format="philly_job_log",
        )
    return path
