"""Bounds of the numbers and times ingest accepts: one definition, used by every parser.

A GPU count of ``99999999999999999999``, a date in year 9999 or a duration of ``1e23`` s is
not a measurement: it is damage or filler, and left alone it overflows a 16-bit store column,
a time-zone conversion or the replay's integer microseconds (a traceback, or worse a value
silently wrapped). Each bound (``data/input_bounds.toml``, with why) lies far beyond any real
cluster and inside what the store and the replay hold. Parsers check values with ``Bound``
and turn an ``OutOfRange`` into a ``rejects`` row naming the file, the line and the reason.
"""

from __future__ import annotations

import math
import re
import tomllib
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import cache, cached_property
from importlib import resources
from typing import Any

import numpy as np

#: Longest excerpt of file content quoted in a reason or an error line.
EXCERPT_CHARS = 80
#: Decimal integers longer than this are out of every bound (and never parsed).
MAX_INT_DIGITS = 24
_INT_RE = re.compile(rf"[+-]?\d{{1,{MAX_INT_DIGITS}}}")


class OutOfRange(ValueError):
    """A value outside its bound (the message is the reason recorded in ``rejects``)."""


def excerpt(text: Any, limit: int = EXCERPT_CHARS) -> str:
    """``repr`` of ``text`` cut to about ``limit`` characters (file content quoted in a
    message: a 64 KB field must not become a 64 KB error line)."""
    s = text if isinstance(text, str) else str(text)
    if len(s) <= limit:
        return repr(s)
    return repr(s[:limit]) + f"... ({len(s):,} characters)"


@dataclass(frozen=True)
class Bound:
    """Closed interval ``[lo, hi]`` of one kind of value (``what`` names it in reasons)."""

    name: str
    what: str
    lo: float
    hi: float
    why: str

    def range_text(self) -> str:
        """``0 to 1,024``."""
        return f"{_num(self.lo)} to {_num(self.hi)}"

    def reason(self, value: Any) -> str:
        """Why ``value`` (as read) is rejected."""
        return f"{self.what} {excerpt(value)} out of range ({self.range_text()})"

    def ok(self, value: float) -> bool:
        """Whether one number (an int of any size, a float; NaN is not) lies inside."""
        return bool(self.lo <= value <= self.hi)

    def check(self, value: float, shown: Any = None) -> float:
        """``value`` if inside the bound (NaN never is), else ``OutOfRange``."""
        if not self.ok(value):
            raise OutOfRange(self.reason(value if shown is None else shown))
        return value

    def int_of(self, text: str | int) -> int:
        """A decimal integer (text or int) inside the bound. ``ValueError`` for text that is
        not an integer, ``OutOfRange`` for one outside the bound (however many digits)."""
        if isinstance(text, bool):
            raise ValueError(f"{self.what} {text!r} is not an integer")
        if isinstance(text, int):
            self.check(text)
            return text
        s = text.strip()
        if _INT_RE.fullmatch(s) is None:
            if re.fullmatch(r"[+-]?\d+", s):
                raise OutOfRange(self.reason(text))
            raise ValueError(f"{self.what} {excerpt(text)} is not an integer")
        return int(self.check(int(s), text))

    def mask(self, values: np.ndarray) -> np.ndarray:
        """Which values lie inside the bound (NaN does not)."""
        v = np.asarray(values, dtype=np.float64)
        with np.errstate(invalid="ignore"):
            return (v >= self.lo) & (v <= self.hi)


@dataclass(frozen=True)
class TimeBound:
    """Times a store may hold: ``[lo, hi)`` (naive wall-clock or UTC alike)."""

    lo: datetime
    hi: datetime
    why: str

    # Cached (``ok_us`` is called per value, and the conversion cost 3 µs a call).
    @cached_property
    def lo_us(self) -> int:
        """``lo`` as UTC epoch microseconds."""
        return _epoch_us(self.lo)

    @cached_property
    def hi_us(self) -> int:
        """``hi`` as UTC epoch microseconds (excluded)."""
        return _epoch_us(self.hi)

    def range_text(self) -> str:
        """``1970-01-01 to 2200-01-01``."""
        return f"{self.lo:%Y-%m-%d} to {self.hi:%Y-%m-%d}"

    def reason(self, value: Any) -> str:
        """Why the time ``value`` (as read) is rejected."""
        return f"time {excerpt(value)} out of range ({self.range_text()})"

    def mask(self, times: np.ndarray) -> np.ndarray:
        """Which ``datetime64`` values lie inside (NaT does not)."""
        t = np.asarray(times).astype("datetime64[us]")
        lo = np.datetime64(self.lo.replace(tzinfo=None), "us")
        hi = np.datetime64(self.hi.replace(tzinfo=None), "us")
        return (t >= lo) & (t < hi)

    def mask_us(self, us: np.ndarray) -> np.ndarray:
        """Which epoch-microsecond values (any numeric dtype, NaN allowed) lie inside."""
        v = np.asarray(us)
        with np.errstate(invalid="ignore"):
            return (v >= self.lo_us) & (v < self.hi_us)

    def ok(self, t: datetime) -> bool:
        """Whether one naive (wall-clock) or aware datetime lies inside."""
        naive = t.astimezone(UTC).replace(tzinfo=None) if t.tzinfo else t
        return self.lo.replace(tzinfo=None) <= naive < self.hi.replace(tzinfo=None)

    def ok_us(self, us: int | float) -> bool:
        """Whether epoch microseconds lie inside (NaN and inf do not)."""
        return isinstance(us, int | float) and not math.isnan(us) and self.lo_us <= us < self.hi_us


#: JSON integers longer than this are read as floats (``json_int``).
MAX_JSON_INT_DIGITS = 4000


def json_int(text: str) -> int | float:
    """``parse_int`` of the project's JSON readers: an integer of more digits than Python
    converts (4,300) is read as a float (inf), which the value's check then rejects, instead
    of a ValueError that ends the file."""
    return int(text) if len(text) <= MAX_JSON_INT_DIGITS else float(text)


def _num(x: float) -> str:
    """A bound as people write it: 1,024 or 1e10."""
    return f"{int(x):,}" if x == int(x) and abs(x) < 1e7 else f"{x:g}".replace("e+", "e")


def _epoch_us(t: datetime) -> int:
    return int((t.replace(tzinfo=UTC) - datetime(1970, 1, 1, tzinfo=UTC)).total_seconds()) * 10**6


@cache
def _table() -> dict[str, Any]:
    text = resources.files("philly_analyze").joinpath("data/input_bounds.toml").read_text()
    return tomllib.loads(text)


@cache
def bound(name: str) -> Bound:
    """The bound called ``name`` in ``data/input_bounds.toml``."""
    b = _table()[name]
    return Bound(name, b["what"], float(b["min"]), float(b["max"]), " ".join(b["why"].split()))


@cache
def time_bound() -> TimeBound:
    """The times a store may hold."""
    b = _table()["time"]
    lo, hi = (datetime.fromisoformat(b[k]).replace(tzinfo=UTC) for k in ("min", "max"))
    return TimeBound(lo, hi, " ".join(b["why"].split()))


def all_bounds() -> list[Bound]:
    """Every numeric bound, in file order (for the docs)."""
    return [bound(k) for k in _table() if k != "time"]


RELATIVE_S = bound("relative_s")
DURATION_S = bound("duration_s")
JOB_GPUS = bound("job_gpus")
MACHINE_GPUS = bound("machine_gpus")
GPU_INDEX = bound("gpu_index")
GPU_MEM_GB = bound("gpu_mem_gb")
ATTEMPT = bound("attempt")
STEP = bound("step")
RANK = bound("rank")
TIME = time_bound()
