"""The replay's inputs as a sweep moves them around, and one run on a worker.

Two ways to get the store to a worker (``docs/sweep.md``):

- **shipped** (``ShippedInputs``): the driver reads the store once and sends the loaded
  workload, cluster and quotas (numpy arrays; a few MB for 100k jobs) to each worker: with the
  local pool as the worker initializer's argument, with Ray through its object store
  (``ray.put`` once, every task gets the reference). Workers need no access to the store.
- **shared path** (``StorePath``): workers open the store directory themselves (read-only,
  once per worker process); the path must be the same store on every node (NFS, a copy at
  the same path...). Each worker checks that what it read has the driver's input identity,
  so a stale copy fails loudly instead of mixing results of different stores.

The input identity is a content hash of what the replay reads (workload, cluster, quotas),
not of the store's files: re-ingesting the same data, or moving the store, keeps it; any
change to the jobs, machines, racks or quotas changes it (and so every run key).
"""

from __future__ import annotations

import hashlib
import importlib
import os
import socket
import time
import traceback
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from philly_analyze.errors import UserError

if TYPE_CHECKING:
    from philly_analyze.sim.cluster import Cluster
    from philly_analyze.sim.workload import Workload
    from philly_analyze.sweep.spec import Task

US = 1_000_000


@dataclass
class SweepInputs:
    """What every replay of a sweep reads: the workload, the cluster and the VC quotas."""

    workload: Workload
    cluster: Cluster
    quotas: dict[str, int]
    _identity: str | None = field(default=None, repr=False)

    @property
    def identity(self) -> str:
        """Content hash of the inputs (hex, 20 digits); computed once."""
        if self._identity is None:
            self._identity = input_identity(self.workload, self.cluster, self.quotas)
        return self._identity


def _hash_strings(h: Any, values: Any) -> None:
    # Length-prefixed so that ("ab", "c") and ("a", "bc") differ.
    for v in values:
        b = ("\x00" if v is None else str(v)).encode()
        h.update(len(b).to_bytes(4, "little"))
        h.update(b)


def input_identity(workload: Workload, cluster: Cluster, quotas: dict[str, int]) -> str:
    """sha256 over every array the replay uses (workload, cluster, quotas)."""
    h = hashlib.sha256(b"philly-analyze sweep inputs v1")
    wl = workload
    _hash_strings(h, wl.job_ids)
    for arr in (wl.submit_us, wl.vc, wl.user, wl.num_gpus, wl.att_ptr, wl.att_dur_us):
        h.update(np.ascontiguousarray(arr, dtype=np.int64).tobytes())
    for arr in (wl.att_outcome, wl.att_servers, wl.obs_start_us):
        h.update(np.ascontiguousarray(arr, dtype=np.int64).tobytes())
    _hash_strings(h, wl.vc_names)
    _hash_strings(h, wl.user_names)
    _hash_strings(h, wl.status)
    _hash_strings(h, cluster.machine_ids)
    h.update(np.ascontiguousarray(cluster.gpus, dtype=np.int64).tobytes())
    h.update(np.ascontiguousarray(cluster.rack, dtype=np.int64).tobytes())
    _hash_strings(h, cluster.rack_names)
    _hash_strings(h, [f"{k}={v}" for k, v in sorted(quotas.items())])
    return h.hexdigest()[:20]


def read_inputs(
    store: str | os.PathLike[str],
    racks: int | None = None,
    quotas: str | os.PathLike[str] | dict[str, int] | None = None,
    machines: str | None = None,
) -> SweepInputs:
    """The store's replay inputs, as ``run_replay`` would read them (quotas: a file, a dict,
    or None for the store's own quotas / inferred ones; machines: ``replay --machines``)."""
    from philly_analyze.sim.replay import load_inputs

    qpath = None if isinstance(quotas, dict) else quotas
    wl, cluster, q = load_inputs(store, racks, qpath, machines)
    if len(wl) == 0:
        raise UserError(
            "has no jobs to replay (jobs need a submit time, GPUs and a duration)",
            source=str(store),
        )
    return SweepInputs(wl, cluster, dict(quotas) if isinstance(quotas, dict) else q)


class InputHandle(Protocol):
    """How a worker gets the inputs (picklable; ``load`` is called on the worker)."""

    identity: str

    def load(self) -> SweepInputs: ...


#: Inputs a worker process has already loaded, by identity (a worker runs many tasks).
LOADED: dict[str, SweepInputs] = {}


@dataclass
class ShippedInputs:
    """The loaded inputs themselves, pickled to each worker once."""

    inputs: SweepInputs
    identity: str = ""

    def __post_init__(self) -> None:
        self.identity = self.inputs.identity

    def load(self) -> SweepInputs:
        return self.inputs


@dataclass
class StorePath:
    """A store path every worker can read, plus what the driver read there."""

    path: str
    racks: int | None
    quotas: dict[str, int]
    identity: str
    machines: str | None = None

    def load(self) -> SweepInputs:
        got = LOADED.get(self.identity)
        if got is None:
            got = read_inputs(self.path, self.racks, self.quotas, self.machines)
            if got.identity != self.identity:
                raise UserError(
                    f"the store at this path on {socket.gethostname()} is not the one the "
                    f"sweep started from (inputs {got.identity}, expected {self.identity}); "
                    "shared-path mode needs the same store at the same path on every worker",
                    source=self.path,
                )
            LOADED[self.identity] = got
        return got


def jittered(wl: Workload, seed: int, jitter_s: float) -> Workload:
    """The workload with every job's submission moved by a uniform draw in
    [-jitter_s, +jitter_s] (numpy's PCG64 seeded by ``seed``: the same on every machine).
    Observed starts move with their job, so observed queueing delays (the fidelity metric)
    are unchanged. Jobs are re-sorted by (submit time, job id), as the engines expect."""
    if jitter_s <= 0:
        return wl
    rng = np.random.default_rng(seed)
    shift = np.round(rng.uniform(-jitter_s, jitter_s, len(wl)) * US).astype(np.int64)
    order = np.lexsort((wl.job_ids.astype(str), wl.submit_us + shift))
    out = wl.take(order)
    out.submit_us = (wl.submit_us + shift)[order]
    obs = wl.obs_start_us[order]
    out.obs_start_us = np.where(obs == wl.MISSING, obs, obs + shift[order])
    return out


def execute(handle: InputHandle, task: Task) -> dict[str, Any]:
    """Run one replay; never raises for a run's own failure (the row says ``failed``, with
    the error and traceback), so one bad run cannot lose the others."""
    from philly_analyze.sim.replay import simulate

    t0 = time.perf_counter()
    row: dict[str, Any] = {"run_id": task.run_id, "status": "ok", "error": None}
    row["traceback"] = None
    metrics: dict[str, Any] = {}
    sim_seconds = None
    try:
        for mod in task.imports:
            importlib.import_module(mod)
        inputs = handle.load()
        wl = jittered(inputs.workload, task.seed, task.jitter_s)
        res = simulate(wl, inputs.cluster, task.policy, inputs.quotas, task.params, task.seed)
        metrics, sim_seconds = dict(res.metrics), res.seconds
    except Exception as e:  # a run's failure is data: recorded, never fatal to the sweep
        row.update(status="failed", error=error_text(e), traceback=traceback.format_exc())
    row["metrics"] = metrics
    row["sim_seconds"] = sim_seconds
    row["run_seconds"] = time.perf_counter() - t0
    row["worker"] = f"{socket.gethostname()}:{os.getpid()}"
    row["finished_at"] = datetime.now(UTC)
    return row


def error_text(e: BaseException) -> str:
    """One line: the exception type and message, and where it was raised."""
    msg = str(e).strip().splitlines()[0] if str(e).strip() else ""
    tb = traceback.extract_tb(e.__traceback__)
    where = f" (at {os.path.basename(tb[-1].filename)}:{tb[-1].lineno})" if tb else ""
    return f"{type(e).__name__}: {msg}{where}"


def failed_row(task: Task, error: str) -> dict[str, Any]:
    """The row of a run whose worker died or was lost (no result came back)."""
    return {
        "run_id": task.run_id,
        "status": "failed",
        "error": error,
        "traceback": None,
        "metrics": {},
        "sim_seconds": None,
        "run_seconds": None,
        "worker": None,
        "finished_at": datetime.now(UTC),
    }
