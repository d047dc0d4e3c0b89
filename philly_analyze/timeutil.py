"""Wall-clock times without a zone -> UTC, one rule for every format.

Raw logs (the Philly job log, YARN, framework logs) carry local wall-clock times with no zone.
``--timezone`` names the zone they were written in; the default is ``America/Los_Angeles``,
where Philly ran. Two wall-clock cases need a rule:

- the repeated hour when clocks fall back (e.g. 2017-11-05 01:00-01:59 in Los Angeles) is
  read as the *first* occurrence (daylight time), unless the caller knows better: the Philly
  job-log parser reads a job's later time as the second occurrence when the first would put it
  before the job's previous event (see ``philly.py``);
- the skipped hour when clocks spring forward does not exist; such a time is shifted forward by
  the gap (what the clock would have shown), never dropped.

Times that carry a zone (``PDT``/``PST`` suffixes, ISO offsets, epoch seconds) are exact and
need no rule.
"""

from __future__ import annotations

from datetime import UTC, datetime
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import numpy as np
import pandas as pd

from philly_analyze.bounds import RELATIVE_S, TIME
from philly_analyze.errors import UserError

DEFAULT_TIMEZONE = "America/Los_Angeles"

#: Where relative times count from when the data gives no date (Gavel traces' arrival seconds,
#: job lists with submit seconds): a fixed, arbitrary instant inside the published trace's
#: span (2017-08-07 to 2017-12-22), so such jobs sort among Philly's. ``--origin`` changes it.
DEFAULT_ORIGIN = datetime(2017, 10, 1, tzinfo=UTC)
#: Relative times beyond this many seconds (about 317 years) are refused as out of range.
MAX_RELATIVE_S = RELATIVE_S.hi

#: Fixed offsets of the zone abbreviations found in the Philly utilization files (hours east).
ZONE_ABBREVIATIONS: dict[str, int] = {"PDT": -7, "PST": -8, "UTC": 0, "GMT": 0}


def check_timezone(name: str) -> str:
    """Validate an IANA zone name (for ``--timezone``)."""
    try:
        ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError) as e:
        raise UserError(
            f"unknown time zone {name!r}: use an IANA name such as America/Los_Angeles or UTC"
        ) from e
    return name


def parse_origin(text: str) -> datetime:
    """An ``--origin``: ISO 8601 (``2017-10-01``, ``2017-10-01T08:00:00-07:00``; no offset
    means UTC) or ``epoch`` (1970-01-01 UTC, for Unix times). ``ValueError`` otherwise."""
    if text.strip().lower() == "epoch":
        return datetime(1970, 1, 1, tzinfo=UTC)
    t = datetime.fromisoformat(text.strip())
    return t.replace(tzinfo=UTC) if t.tzinfo is None else t.astimezone(UTC)


def localize_naive(naive: np.ndarray, tz: str) -> tuple[np.ndarray, np.ndarray]:
    """Convert naive wall-clock ``datetime64`` values in ``tz`` to UTC ``datetime64[us]``.

    Returns ``(utc, ambiguous)``: ambiguous fall-back times are resolved to the first
    occurrence and flagged in the mask so a caller can choose the second (+ the DST offset)
    instead; nonexistent spring-forward times are shifted forward. NaT stays NaT, and so
    does a time outside ``bounds.TIME`` (year 9999 fails the zone conversion): callers reject
    those first (``bounds.TIME.mask``), so none is lost silently."""
    values = np.asarray(naive, dtype="datetime64[us]")
    inside = TIME.mask(values)
    if not inside.all():
        values = np.where(inside, values, np.datetime64("NaT", "us"))
    idx = pd.DatetimeIndex(values)
    if tz == "UTC":
        return np.array(idx.to_numpy(dtype="datetime64[us]")), np.zeros(len(idx), dtype=bool)
    probe = idx.tz_localize(tz, ambiguous="NaT", nonexistent="shift_forward")
    ambiguous = np.asarray(probe.isna()) & np.asarray(idx.notna())
    first = idx.tz_localize(
        tz, ambiguous=np.ones(len(idx), dtype=bool), nonexistent="shift_forward"
    )
    utc = np.array(first.tz_convert("UTC").tz_localize(None).to_numpy(dtype="datetime64[us]"))
    return utc, ambiguous


def fold_offset(tz: str, naive: np.datetime64) -> np.timedelta64:
    """For an ambiguous wall-clock time, how much later its second occurrence is (usually 1 h)."""
    ts = pd.Timestamp(naive)
    first = ts.tz_localize(tz, ambiguous=True)
    second = ts.tz_localize(tz, ambiguous=False)
    return np.timedelta64(int((second - first).total_seconds()), "s")
