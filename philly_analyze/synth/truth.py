"""The ground truth written beside the synthetic sources (``<out>/ground_truth/*.parquet``).

What no log says outright but the synthesizer knows: each job's true final status, each failed
attempt's true failure reason, each waiting interval's true cause as decided by the scheduler,
each job's true loss curve and mean GPU utilization, each machine's true GPU count.
Times are ``timestamp[us, tz=UTC]`` like the store's. Tables:

- ``jobs``: job_id, vc, user_id, status, num_gpus, submit_time, first_start, last_end,
  num_attempts, censored (still running or queued at the window's end), cancelled
  (``withdrawn``: held and killed before it could run; NULL otherwise), util_mean, servers (of the first
  attempt), framework, epochs, planned_epochs, epoch_within_0_1pct, epoch_lowest, util_measurable,
  startup_s (seconds from submission until the scheduler could place the job: the part of the
  queueing delay before its ``waits``), carried_over (submitted before the window and running
  at its start: submit_time is the window's start and only the rest of its run is synthesized);
- ``attempts``: job_id, attempt_idx, start_time, end_time (NULL if running), outcome,
  failure_reason, failure_categories, num_gpus, num_machines;
- ``placements``: job_id, attempt_idx, machine_id, gpu_idx, util_level;
- ``waits``: one row per attempt that waited and cause (``waitcause.CAUSES``: fair_share,
  fragmentation, capacity, other): job_id, attempt_idx, start_time (first moment of that
  cause), end_time (end of its last piece), seconds (its total, up to the window's end), cause;
- ``loss``: job_id, epoch (1-based), loss, attempt_idx (NULL if that epoch never ran in the
  window), time (NULL likewise);
- ``machines``: machine_id, num_gpus, listed_num_gpus, gpu_mem_gb, rack, mislisted.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from philly_analyze.synth.calibration import Calibration
from philly_analyze.synth.history import OUTCOME_NAMES, STATUS_NAMES, History
from philly_analyze.synth.workload import FRAMEWORKS
from philly_analyze.waitcause import CAUSES

UTC = pa.timestamp("us", tz="UTC")


def _ts(hist: History, secs: np.ndarray, valid: np.ndarray | None = None) -> pa.Array:
    """Window seconds as UTC timestamps; NULL where ``valid`` is False."""
    us = (hist.window.start_epoch + np.asarray(secs, dtype=np.int64)) * 1_000_000
    mask = None if valid is None else ~np.asarray(valid, dtype=bool)
    return pa.array(us, type=pa.int64(), mask=mask).cast(UTC)


def _write(path: Path, data: dict[str, pa.Array | list | np.ndarray]) -> Path:
    """Write one table as zstd Parquet (the same bytes for the same data)."""
    pq.write_table(pa.table(data), path, compression="zstd")
    return path


def write_truth(out: Path, cal: Calibration, hist: History) -> list[Path]:
    """Write the ground-truth tables; returns the files."""
    out.mkdir(parents=True, exist_ok=True)
    ids = np.array(hist.job_ids, dtype=object)
    tables = {
        "jobs": _jobs_table(hist, ids),
        "attempts": _attempts_table(cal, hist, ids),
        "placements": _placements_table(hist, ids),
        "waits": _waits_table(hist, ids),
        "loss": _loss_table(hist, ids),
        "machines": _machines_table(hist),
    }
    return [_write(out / f"{name}.parquet", data) for name, data in tables.items()]


def _jobs_table(hist: History, ids: np.ndarray) -> dict[str, pa.Array | list | np.ndarray]:
    """One row per job: its true status, times, attempts, utilization and loss curve."""
    wl, sch = hist.wl, hist.sched
    n = wl.num_jobs
    first = hist.first_started()
    has = first >= 0
    n_real = np.bincount(hist.ra_job, minlength=n)
    last = np.where(has, first + n_real - 1, 0)
    last_end = hist.ra_end[last] if len(hist.ra_end) else np.zeros(n, dtype=np.int64)
    done_cancel = (sch.cancel_time >= 0) & (sch.cancel_time < hist.horizon)
    finished = (has & (n_real == wl.num_attempts) & (last_end >= 0)) | done_cancel
    censored = ~finished
    # Only held jobs are killed unscheduled: users do not give up on queued jobs.
    cancel = np.full(len(done_cancel), None, dtype=object)
    cancel[done_cancel] = "withdrawn"
    c = hist.curves
    return {
        "job_id": ids,
        "vc": [wl.vc_names[v] for v in wl.vc],
        "user_id": [wl.user_names[u] for u in wl.user],
        "status": [STATUS_NAMES[s] for s in wl.status],
        "num_gpus": wl.gpus,
        "submit_time": _ts(hist, wl.submit),
        "first_start": _ts(hist, np.where(has, hist.ra_start[np.maximum(first, 0)], 0), has),
        "last_end": _ts(hist, np.maximum(last_end, 0), has & (last_end >= 0)),
        "num_attempts": n_real.astype(np.int32),
        "censored": censored,
        "startup_s": wl.startup.astype(np.int64),
        "carried_over": np.arange(n) < wl.carried,
        "cancelled": pa.array(cancel.tolist(), pa.string()),
        "util_mean": np.where(has, hist.job_level, np.nan),
        "util_measurable": hist.job_measurable,
        "servers": hist.job_spans.astype(np.int32),
        "framework": [FRAMEWORKS[f] for f in wl.framework],
        "epochs": c.epochs,
        "planned_epochs": c.planned,
        "epoch_within_0_1pct": c.e_within,
        "epoch_lowest": c.e_lowest,
    }


def _attempts_table(
    cal: Calibration, hist: History, ids: np.ndarray
) -> dict[str, pa.Array | list | np.ndarray]:
    """One row per attempt that started: its times, outcome and true failure reason."""
    reasons = cal.reasons
    rname = [reasons[r].name if r >= 0 else None for r in hist.ra_reason]
    rcat = [reasons[r].categories if r >= 0 else None for r in hist.ra_reason]
    counts = np.diff(hist.ra_pl_offsets)
    machines_per = np.array(
        [
            len(np.unique(hist.pl_machine[a:b]))
            for a, b in zip(hist.ra_pl_offsets[:-1], hist.ra_pl_offsets[1:], strict=True)
        ],
        dtype=np.int32,
    )
    return {
        "job_id": ids[hist.ra_job],
        "attempt_idx": hist.ra_idx,
        "start_time": _ts(hist, hist.ra_start),
        "end_time": _ts(hist, np.maximum(hist.ra_end, 0), hist.ra_end >= 0),
        "outcome": [OUTCOME_NAMES[o] for o in hist.ra_outcome],
        "failure_reason": pa.array(rname, pa.string()),
        "failure_categories": pa.array(rcat, pa.string()),
        "num_gpus": counts.astype(np.int32),
        "num_machines": machines_per,
    }


def _placements_table(hist: History, ids: np.ndarray) -> dict[str, pa.Array | list | np.ndarray]:
    """One row per GPU an attempt held, with the utilization level it ran at."""
    counts = np.diff(hist.ra_pl_offsets)
    pl_ra = np.repeat(np.arange(len(hist.ra)), counts)
    mids = np.array(hist.cluster.machine_ids, dtype=object)
    return {
        "job_id": ids[hist.ra_job[pl_ra]],
        "attempt_idx": hist.ra_idx[pl_ra],
        "machine_id": mids[hist.pl_machine],
        "gpu_idx": hist.pl_gpu,
        "util_level": hist.pl_level,
    }


def _waits_table(hist: History, ids: np.ndarray) -> dict[str, pa.Array | list | np.ndarray]:
    """One row per attempt that waited and cause, as the scheduler decided it."""
    sch = hist.sched
    # Waiting inside the window only (the schedulers split waits up to the window's end).
    wk = sch.wait_start < hist.horizon
    return {
        "job_id": ids[sch.wait_job[wk]],
        "attempt_idx": sch.wait_attempt[wk],
        "start_time": _ts(hist, sch.wait_start[wk]),
        "end_time": _ts(hist, np.minimum(sch.wait_end[wk], hist.horizon)),
        "seconds": sch.wait_seconds[wk],
        "cause": [CAUSES[x] for x in sch.wait_cause[wk]],
    }


def _loss_table(hist: History, ids: np.ndarray) -> dict[str, pa.Array | list | np.ndarray]:
    """One row per planned epoch of every job; when and in which attempt it ran, if it did."""
    c = hist.curves
    ep_job = np.repeat(np.arange(hist.wl.num_jobs), c.epochs)
    ep_no = np.arange(len(ep_job)) - c.offsets[ep_job] + 1
    ran = (hist.ep_time >= 0) & (hist.ep_time < hist.horizon)
    ep_idx = hist.wl.att_idx[hist.ep_attempt]
    return {
        "job_id": ids[ep_job],
        "epoch": ep_no.astype(np.int32),
        "loss": c.loss,
        "attempt_idx": pa.array(ep_idx, pa.int32(), mask=~ran),
        "time": _ts(hist, np.maximum(hist.ep_time, 0), ran),
    }


def _machines_table(hist: History) -> dict[str, pa.Array | list | np.ndarray]:
    """One row per machine: its true and listed GPU counts."""
    cl = hist.cluster
    return {
        "machine_id": list(cl.machine_ids),
        "num_gpus": cl.gpus,
        "listed_num_gpus": cl.listed_gpus,
        "gpu_mem_gb": cl.gpu_mem_gb,
        "rack": cl.rack,
        "mislisted": cl.gpus != cl.listed_gpus,
    }
