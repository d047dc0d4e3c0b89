"""Where a sweep's runs execute: a local process pool (default) or an existing Ray cluster.

Both call ``inputs.execute`` on the worker, so a run gives the same row wherever it runs.
Ray is optional and imported only here, only when asked for.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import sys
from collections import deque
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from typing import Any

from philly_analyze.cpus import usable_cpus
from philly_analyze.errors import UserError
from philly_analyze.sweep.inputs import LOADED, InputHandle, execute, failed_row
from philly_analyze.sweep.spec import Task

OnRow = Callable[[dict[str, Any]], None]

WORKER_DIED = (
    "the worker process running it died (killed, out of memory, or a crash in native code)"
)
INSTALL_RAY = "pip install 'philly-analyze[distributed]'"
#: Set to 0, Ray uses the loopback address as the node's address (its meaning on macOS and
#: Windows, where it is the default); see ``ray._private.services.get_node_ip_address``.
LOOPBACK_ENV = "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"


def default_workers() -> int:
    """As many workers as the cores this process may use."""
    return usable_cpus()


# ---------------------------------------------------------------------------- local pool
_HANDLE: list[InputHandle] = []


def _init_worker(handle: InputHandle) -> None:
    _HANDLE[:] = [handle]


def _pool_run(task: Task) -> dict[str, Any]:
    return execute(_HANDLE[0], task)


def run_local(handle: InputHandle, tasks: Sequence[Task], workers: int, on_row: OnRow) -> None:
    """Run ``tasks`` on ``workers`` local processes (in this process when ``workers`` is 1),
    calling ``on_row`` with each result as it arrives.

    Workers are *spawned* (not forked: the driver may hold DuckDB and BLAS threads) and get
    the inputs once, through the pool initializer. If a worker dies, Python's pool breaks and
    fails every task in flight; those are re-run one at a time in a fresh pool, so only the
    run that kills its worker is recorded as failed and the others complete."""
    if workers <= 1:
        for t in tasks:
            on_row(execute(handle, t))
        return
    ctx = mp.get_context("spawn")
    pending: deque[Task] = deque(tasks)
    suspects: deque[Task] = deque()
    while pending or suspects:
        pool = ProcessPoolExecutor(workers, ctx, initializer=_init_worker, initargs=(handle,))
        try:
            broken = _drain(pool, suspects, 1, on_row, suspects)
            if not broken:
                _drain(pool, pending, 2 * workers, on_row, suspects)
        finally:
            pool.shutdown(wait=True, cancel_futures=True)


def _drain(
    pool: ProcessPoolExecutor, queue: deque[Task], window: int, on_row: OnRow, suspects: deque[Task]
) -> bool:
    """Submit from ``queue`` keeping at most ``window`` in flight; True if the pool broke
    (the tasks in flight are then in ``suspects``, or recorded failed when run alone)."""
    inflight: dict[Future[dict[str, Any]], Task] = {}
    while queue or inflight:
        while queue and len(inflight) < window:
            t = queue.popleft()
            try:
                inflight[pool.submit(_pool_run, t)] = t
            except BrokenProcessPool:
                queue.appendleft(t)
                break
        done, _ = wait(inflight, return_when=FIRST_COMPLETED)
        if any(_broke(f) for f in done) or not done:
            for fut, task in inflight.items():
                if fut.done() and not _broke(fut):
                    on_row(fut.result())  # finished before the breakage: keep it
                elif window == 1:  # it ran alone: it is the one that killed its worker
                    on_row(failed_row(task, WORKER_DIED))
                else:
                    suspects.append(task)
            return True
        for fut in done:
            on_row(fut.result())
            del inflight[fut]
    return False


def _broke(fut: Future[Any]) -> bool:
    return fut.done() and isinstance(fut.exception(), BrokenProcessPool)


# ---------------------------------------------------------------------------- Ray
@dataclass
class RayInputs:
    """Inputs in Ray's object store. The reference sits in a list so that Ray does not
    resolve it before the task starts: a worker that already holds these inputs (by identity)
    skips fetching and unpickling them again."""

    box: list[Any]
    identity: str

    def load(self) -> Any:
        got = LOADED.get(self.identity)
        if got is None:
            import ray

            got = ray.get(self.box[0])
            LOADED[self.identity] = got
        return got


def _ray_run(handle: InputHandle, task: Task) -> dict[str, Any]:
    return execute(handle, task)


def import_ray() -> Any:
    """``ray``, or a ``UserError`` saying how to install it."""
    try:
        import ray
    except ImportError:
        raise UserError(
            f"--ray needs Ray, which is not installed; install it with: {INSTALL_RAY}"
        ) from None
    return ray


@dataclass
class RaySession:
    """A connection to a Ray cluster for the duration of a sweep."""

    address: str
    ray: Any
    started_here: bool

    @classmethod
    def connect(cls, address: str, local_cpus: int | None = None) -> RaySession:
        """Connect to ``address`` (``host:port``, ``ray://host:port``, ``auto``), or start a
        private single-node instance on the loopback interface for ``local``. A Ray session
        the caller already opened (``ray.init``) is used as is."""
        if address == "local" and "ray" not in sys.modules:
            # A private instance serves this process only: keep every Ray server on the
            # loopback interface. Ray reads this when imported; on Linux it otherwise binds
            # the node's network address (and its GCS port on all interfaces).
            os.environ.setdefault(LOOPBACK_ENV, "0")
        ray = import_ray()
        if ray.is_initialized():
            return cls(address, ray, False)
        import logging

        kw: dict[str, Any] = {"log_to_driver": False, "logging_level": logging.WARNING}
        if address == "local":
            kw.update(
                address="local",
                num_cpus=local_cpus,
                include_dashboard=False,
                _node_ip_address="127.0.0.1",
            )
        else:
            kw["address"] = address
            _check_reachable(address)
        try:
            ray.init(**kw)
        except (ConnectionError, RuntimeError, ValueError) as e:
            raise UserError(f"cannot connect to the Ray cluster at {address!r}: {e}") from None
        return cls(address, ray, True)

    def cpus(self) -> int:
        return int(self.ray.cluster_resources().get("CPU", 0))

    def close(self) -> None:
        if self.started_here:
            self.ray.shutdown()

    def put(self, obj: Any) -> RayInputs:
        return RayInputs([self.ray.put(obj)], obj.identity)

    def run(self, handle: InputHandle, tasks: Sequence[Task], on_row: OnRow) -> None:
        """Submit every task (one CPU each; Ray queues what the cluster cannot run yet) and
        hand rows back as they finish. A task whose worker dies is retried once by Ray, then
        recorded as failed; the other tasks go on."""
        ray = self.ray
        remote = ray.remote(_ray_run).options(num_cpus=1, max_retries=1)
        refs = {remote.remote(handle, t): t for t in tasks}
        try:
            while refs:
                done, _ = ray.wait(list(refs), num_returns=1)
                for ref in done:
                    task = refs.pop(ref)
                    try:
                        on_row(ray.get(ref))
                    except ray.exceptions.RayError as e:
                        on_row(failed_row(task, f"{type(e).__name__}: {_first_line(e)}"))
        finally:
            for ref in refs:  # interrupted: do not leave work queued on a shared cluster
                ray.cancel(ref, force=True)


def _first_line(e: BaseException) -> str:
    text = str(e).strip()
    return text.splitlines()[0] if text else ""


def _check_reachable(address: str, timeout_s: float = 5.0) -> None:
    """Fail fast on a ``host:port`` or ``ray://host:port`` nobody listens on: ``ray.init``
    would otherwise retry the connection for many minutes, printing only C++ warnings."""
    import socket

    target = address.removeprefix("ray://")
    host, sep, port = target.rpartition(":")
    if not sep or not port.isdigit():
        return  # "auto" and other forms: Ray resolves them itself
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=timeout_s):
            pass
    except OSError as e:
        raise UserError(
            f"cannot connect to the Ray cluster at {address!r}: nothing answers on "
            f"{host}:{port} ({e.strerror or e}); start it with `ray start --head` or check "
            "--ray / RAY_ADDRESS"
        ) from None
