"""Progress on stderr: a rich bar when stderr is a terminal, silent otherwise or with --quiet.

Library code deep inside a run (the replay's engines, the sharing simulator) reports to
``current()``, which the CLI sets with ``reporting(tracker)`` around the call: no signature
down the call chain changes, and without a CLI nothing is shown."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:  # rich costs ~0.2 s to import: only when a bar or console is made
    from rich.console import Console
    from rich.progress import Progress, TaskID


class Tracker(Protocol):
    """What long-running library code reports progress to."""

    def advance(self, amount: float = 1) -> None: ...
    def update(self, *, completed: float | None = None, total: float | None = None) -> None: ...
    def describe(self, text: str) -> None: ...


class NullTracker:
    """A tracker that shows nothing (library default)."""

    def advance(self, amount: float = 1) -> None:
        pass

    def update(self, *, completed: float | None = None, total: float | None = None) -> None:
        pass

    def describe(self, text: str) -> None:
        pass


_CURRENT: ContextVar[Tracker | None] = ContextVar("philly_analyze_progress", default=None)


def current() -> Tracker:
    """The tracker that long-running library code reports to (a ``NullTracker`` unless a
    caller set one with ``reporting``)."""
    return _CURRENT.get() or NullTracker()


@contextmanager
def reporting(tracker: Tracker) -> Iterator[Tracker]:
    """Make ``tracker`` the ``current()`` one inside the block."""
    token = _CURRENT.set(tracker)
    try:
        yield tracker
    finally:
        _CURRENT.reset(token)


class _RichTracker:
    def __init__(self, progress: Progress, task: TaskID):
        self._p = progress
        self._t = task

    def advance(self, amount: float = 1) -> None:
        self._p.advance(self._t, amount)

    def update(self, *, completed: float | None = None, total: float | None = None) -> None:
        self._p.update(self._t, completed=completed, total=total)

    def describe(self, text: str) -> None:
        # Drawn at once: a phase's label shows even when the phase ends before the next tick.
        self._p.update(self._t, description=text, refresh=True)


def stderr_console() -> Console:
    """The console for messages and progress (stdout stays for data)."""
    from rich.console import Console

    return Console(stderr=True)


def wants_progress(quiet: bool) -> bool:
    """Show bars only for a human watching: not with --quiet, not when stderr is redirected."""
    return not quiet and sys.stderr.isatty()


@contextmanager
def track(
    description: str, total: float | None, *, unit: str = "bytes", quiet: bool = False
) -> Iterator[Tracker]:
    """A progress bar on stderr for ``total`` units (``bytes`` shows sizes and speed)."""
    if not wants_progress(quiet):
        yield NullTracker()
        return
    from rich.progress import (
        BarColumn,
        DownloadColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
        TransferSpeedColumn,
    )

    cols = (DownloadColumn(), TransferSpeedColumn()) if unit == "bytes" else (MofNCompleteColumn(),)
    with Progress(
        TextColumn("[progress.description]{task.description}"),
        BarColumn(),
        *cols,
        TimeElapsedColumn(),
        TimeRemainingColumn(),
        console=stderr_console(),
        transient=True,
    ) as p:
        yield _RichTracker(p, p.add_task(description, total=total))


def human_bytes(n: int) -> str:
    """A byte count for people: ``596 bytes``, ``3.44 MB``, ``1.06 GB`` (powers of 1000)."""
    x = float(n)
    for unit in ("bytes", "KB", "MB", "GB"):
        if x < 999.5 or unit == "GB":  # 999,999 bytes is "1 MB", not "1e+03 KB"
            return f"{int(x):,} bytes" if unit == "bytes" else f"{x:.3g} {unit}"
        x /= 1000
    return f"{n:,} bytes"
