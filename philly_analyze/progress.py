"""Progress on stderr: a rich bar when stderr is a terminal, silent otherwise or with --quiet."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Protocol

from rich.console import Console
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


class _RichTracker:
    def __init__(self, progress: Progress, task: int):
        self._p = progress
        self._t = task

    def advance(self, amount: float = 1) -> None:
        self._p.advance(self._t, amount)

    def update(self, *, completed: float | None = None, total: float | None = None) -> None:
        self._p.update(self._t, completed=completed, total=total)

    def describe(self, text: str) -> None:
        self._p.update(self._t, description=text)


def stderr_console() -> Console:
    """The console for messages and progress (stdout stays for data)."""
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
