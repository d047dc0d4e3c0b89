"""Ctrl-C stops a running DuckDB query at once, and the process within ``GRACE_SECONDS``.

Python runs a signal handler only between bytecodes of the main thread: while a DuckDB query
runs there, the handler waits for the query to end. DuckDB's own check of Ctrl-C, and its
``interrupt()``, are not looked at during all of its work either: in its CSV error handling a
Ctrl-C took effect only when the query ended, minutes later. So, while the CLI runs a verb
(``stop_queries_on_ctrl_c``):

- the C-level signal handler also writes the signal's number to a pipe
  (``signal.set_wakeup_fd``), where a watcher thread reads it and calls ``interrupt()`` on
  every open connection made by ``store.connect`` (``register``): a query that looks at its
  interrupt flag ends within milliseconds, and the verb unwinds as for any Ctrl-C;
- if a connection was open and the verb has not ended ``GRACE_SECONDS`` later, the watcher
  prints "interrupted" and ends the process with status 130 (``os._exit``). The store then
  keeps its previous state as after a kill: a batch is published by one catalog transaction,
  and its staged files are removed by the next write. A store commit in progress
  (``no_hard_exit``) is waited for first, and the clean-ups registered with ``at_hard_exit``
  run (a store this run created and committed nothing to is removed; a pipe's folder is).
"""

from __future__ import annotations

import os
import signal
import threading
import time
import weakref
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from typing import Any

from philly_analyze.errors import ExitStatus

#: How long the verb has to end by itself after a Ctrl-C before the process is ended.
GRACE_SECONDS = 1.0

_connections: weakref.WeakSet[Any] = weakref.WeakSet()
_lock = threading.RLock()  # re-entered by clean-ups asking commits_done()
_commits = 0  # store commits in progress (no hard exit during one)
_committed = 0  # store commits done by this process
_cleanups: list[Callable[[], None]] = []


def register(con: Any) -> Any:
    """Have Ctrl-C interrupt ``con`` (a DuckDB connection) while it is open; returns it."""
    with _lock:
        _connections.add(con)
    return con


def interrupt_all() -> int:
    """Interrupt the running query of every registered connection; how many were asked."""
    with _lock:
        cons = list(_connections)
    for con in cons:
        with suppress(Exception):  # closed meanwhile
            con.interrupt()
    return len(cons)


@contextmanager
def no_hard_exit() -> Iterator[None]:
    """A store commit: the process is not ended during one (the watcher waits), and one that
    succeeds is counted (``commits_done``)."""
    global _commits, _committed
    with _lock:
        _commits += 1
    done = False
    try:
        yield
        done = True
    finally:
        with _lock:
            _commits -= 1
            _committed += done


def commits_done() -> int:
    """How many store commits this process has made."""
    with _lock:
        return _committed


@contextmanager
def at_hard_exit(cleanup: Callable[[], None]) -> Iterator[None]:
    """Inside, a hard exit after Ctrl-C runs ``cleanup`` first (its errors are ignored)."""
    with _lock:
        _cleanups.append(cleanup)
    try:
        yield
    finally:
        with _lock:
            _cleanups.remove(cleanup)


@contextmanager
def stop_queries_on_ctrl_c() -> Iterator[None]:
    """Inside, a SIGINT interrupts the registered connections' queries and, if the block has
    not ended ``GRACE_SECONDS`` later, ends the process with status 130. Call it from the main
    thread with a Python SIGINT handler installed (else it does nothing)."""
    read_fd, write_fd = os.pipe()
    os.set_blocking(write_fd, False)
    try:
        previous = signal.set_wakeup_fd(write_fd, warn_on_full_buffer=False)
    except ValueError:  # not the main thread
        os.close(read_fd)
        os.close(write_fd)
        yield
        return
    ended = threading.Event()
    watcher = threading.Thread(target=_watch, args=(read_fd, ended), daemon=True)
    watcher.start()
    try:
        yield
    finally:
        ended.set()
        signal.set_wakeup_fd(previous)
        with suppress(OSError):
            os.write(write_fd, b"\0")  # wake the watcher, which then sees `ended`
        watcher.join()
        os.close(read_fd)
        os.close(write_fd)


def _watch(read_fd: int, ended: threading.Event) -> None:
    while True:
        try:
            data = os.read(read_fd, 64)
        except OSError:
            return
        if ended.is_set() or not data:
            return
        # With no DuckDB connection open, no query holds the main thread: the usual Ctrl-C
        # handling (a worker pool shutting down, say) is left alone.
        if signal.SIGINT in data and interrupt_all() and not ended.wait(GRACE_SECONDS):
            _end_process(ended)
            return


def _end_process(ended: threading.Event) -> None:
    """The verb did not end after the interrupt (DuckDB work that ignores it): end the process,
    after any store commit in progress."""
    while not ended.is_set():
        with _lock:  # held to the end: no commit can start in between
            if _commits == 0:
                for cleanup in reversed(_cleanups):
                    with suppress(Exception):
                        cleanup()
                with suppress(OSError):
                    os.write(2, b"\ninterrupted\n")
                os._exit(ExitStatus.INTERRUPTED)
        time.sleep(0.05)
