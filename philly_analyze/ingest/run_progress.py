"""One progress bar for a whole ``ingest`` run, in bytes of its input files on disk.

The total is the size of every file the run's paths name or hold (folders walked, archives
counted whole), known once they are listed, before any is read. As a file is read the bar moves
from the sizes of the files before it (the *base*) by what its reader reports:

- Python parsers report the bytes they take from the stream (``Source.open``; for compressed
  files the compressed bytes, so a ``.gz`` moves the bar by its own size);
- DuckDB reading a plain CSV itself reports a percentage, polled (``csvcopy``), which counts as
  that share of the file;
- an archive's members are read as one stream: the archive's own bytes move the bar, not the
  members' (``source.archive_members``).

A file's reports never move the bar past its end or back, and a file skipped or read in part
still ends at its end when the next file starts; what is read again beyond the listed files
(members of a rebuilt batch) is added to the total when it starts.
"""

from __future__ import annotations

import threading

from philly_analyze.progress import NullTracker, Tracker

#: The bar moves by at least this many bytes (or a thousandth of the total) at a time.
STEP = 1 << 20


class RunProgress:
    """The run's bar (a ``Tracker`` for the current file's readers) over ``bar``."""

    def __init__(self, bar: Tracker):
        self.bar = bar
        self.total = 0
        self._base = 0
        self._size = 0
        self._done = 0.0
        self._shown = 0.0
        #: Inside an archive: its members' reports are not bytes of the archive.
        self._muted = False
        self._lock = threading.Lock()

    @property
    def shown(self) -> bool:
        """Whether a bar is drawn at all (not under --quiet or when stderr is not a terminal)."""
        return not isinstance(self.bar, NullTracker)

    def set_total(self, total: int) -> None:
        """The bytes of every listed input (called once, before any is read)."""
        self.total = total
        self.bar.update(completed=0, total=total)

    def start(self, size: int, *, archive: bool = False) -> None:
        """The next listed file (``size`` bytes on disk) begins."""
        with self._lock:
            self._base += self._size
            self._size, self._done, self._muted = size, 0.0, archive
            self._show(force=True)

    def extra(self, size: int) -> None:
        """A file not in the total begins (read again for a rebuilt batch)."""
        with self._lock:
            self.total += size
            self.bar.update(total=self.total)
        self.start(size)

    def archive_read(self, amount: int) -> None:
        """Bytes of the current archive read (its members' own reports are muted)."""
        with self._lock:
            self._done += amount
            self._show()

    def finish(self) -> None:
        """Every file is done: the bar at its total."""
        with self._lock:
            self._base, self._size = self.total, 0
            self._show(force=True)

    # -- Tracker, for the readers of the current file
    def advance(self, amount: float = 1) -> None:
        with self._lock:
            if not self._muted:
                self._done += amount
                self._show()

    def update(self, *, completed: float | None = None, total: float | None = None) -> None:
        """``completed``: bytes of the current file done (DuckDB's share of it); ``total`` is
        the run's, set by ``set_total``, and ignored here."""
        if completed is None:
            return
        with self._lock:
            if not self._muted:
                self._done = max(self._done, completed)
                self._show()

    def describe(self, text: str) -> None:
        self.bar.describe(text)

    def _show(self, force: bool = False) -> None:
        at = self._base + min(self._done, self._size)
        # Never back; and not for every 8 KB a reader takes (a redraw costs microseconds).
        if at > self._shown and (force or at - self._shown >= max(STEP, self.total / 1000)):
            self._shown = at
            self.bar.update(completed=at)
