"""Fast wall-clock formatting of many epoch times in the cluster's zone.

Zone offsets change only on whole hours, so the offset (and ``PDT``/``PST``) of every hour of
the window is looked up once; a time's text is then a date from a per-day table plus
``HH:MM:SS`` computed digit by digit, joined with ``textfmt``: millions of
times per second. Times in the fall-back hour print the same wall-clock twice, as real logs do.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from philly_analyze.synth import textfmt
from philly_analyze.synth.workload import Window


class Clock:
    """Formats epoch seconds (UTC) as wall-clock text in the window's zone."""

    def __init__(self, window: Window, margin_days: int = 2):
        self.base = window.start_epoch - margin_days * 86400
        hours = -(-(window.seconds + 2 * margin_days * 86400) // 3600) + 1
        starts = self.base + 3600 * np.arange(hours)
        idx = pd.to_datetime(starts, unit="s", utc=True).tz_convert(window.timezone)
        # The zone's offset at each hour: wall-clock minus UTC.
        self.offset = np.asarray(
            (idx.tz_localize(None) - idx.tz_convert(None)).total_seconds(), dtype=np.int64
        )
        abbrev = list(idx.strftime("%Z"))
        names = sorted(set(abbrev))
        self.zone_lut = textfmt.lut(names)
        self.zone_idx = np.array([names.index(a) for a in abbrev], dtype=np.int64)
        numeric = []
        for off in sorted(set(self.offset.tolist())):
            sign = "-" if off < 0 else "+"
            numeric.append((off, f"{sign}{abs(off) // 3600:02d}:{abs(off) // 60 % 60:02d}"))
        self.num_offsets = dict(numeric)
        first_day = (self.base + self.offset.min()) // 86400 - 1
        n_days = hours // 24 + 4
        days = pd.to_datetime((first_day + np.arange(n_days)) * 86400, unit="s")
        self.first_day = int(first_day)
        self.date_lut = textfmt.lut(list(days.strftime("%Y-%m-%d")))

    def _hour(self, epoch: np.ndarray) -> np.ndarray:
        h = (np.asarray(epoch, dtype=np.int64) - self.base) // 3600
        return np.clip(h, 0, len(self.offset) - 1)

    def local(self, epoch: np.ndarray) -> np.ndarray:
        """Naive local seconds (wall-clock as if it were UTC)."""
        e = np.asarray(epoch, dtype=np.int64)
        return e + self.offset[self._hour(e)]

    def fields(self, epoch: np.ndarray, sep: bytes = b" ") -> list[textfmt.Block | bytes]:
        """``YYYY-MM-DD<sep>HH:MM:SS`` as fields for ``textfmt.join_rows``."""
        loc = self.local(epoch)
        day = loc // 86400 - self.first_day
        return [self.date_lut.take(day), sep, textfmt.clock_hms(loc % 86400)]

    def zone(self, epoch: np.ndarray) -> textfmt.Block:
        """``PDT``/``PST`` of each time."""
        return self.zone_lut.take(self.zone_idx[self._hour(epoch)])

    def strings(self, epoch: np.ndarray, with_zone: bool = False) -> list[str]:
        """Python strings ``YYYY-MM-DD HH:MM:SS`` (``+ ' PDT'`` with ``with_zone``)."""
        if len(np.asarray(epoch)) == 0:
            return []
        f = self.fields(epoch)
        if with_zone:
            f += [b" ", self.zone(epoch)]
        return textfmt.join_rows(f).decode("ascii").split("\n")[:-1]

    def iso(self, epoch: np.ndarray) -> list[str]:
        """ISO-8601 with the zone's offset: ``2017-10-03T00:08:00-07:00``."""
        e = np.asarray(epoch, dtype=np.int64)
        off = self.offset[self._hour(e)]
        names = sorted(self.num_offsets)
        off_lut = textfmt.lut([self.num_offsets[o] for o in names])
        f = [*self.fields(e, b"T"), off_lut.take(np.searchsorted(names, off))]
        return textfmt.join_rows(f).decode("ascii").split("\n")[:-1]
