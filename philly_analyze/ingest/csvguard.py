"""Lines of a utilization CSV that DuckDB must not see: too long, too wide, or holding NUL.

With ``store_rejects``, DuckDB's CSV reader records one error for each field beyond the
declared columns, each repeating the line (up to 10,000 characters). The cost grows with the
line's width times its length: one line of 50,000 fields (200 KB) in a ``cluster_gpu_util``
cost 32 CPU seconds and 1.77 GB for a single reject, and one of 2.5 million fields (10 MB) ran
for more than 300 s (measured with DuckDB 2.0.1).

So every line is checked first, vectorized per chunk, as the file is fed to DuckDB through a
pipe (``LineGuard``): a line with more fields than the declared columns, longer than
``MAX_LINE_BYTES`` or holding a NUL byte (which DuckDB would keep inside a value, as a machine
named ``m<NUL>2``), is a reject naming its line, and DuckDB reads the file with that line
blanked (an empty line, which DuckDB skips while keeping the file's line numbers). Other bad
lines (too few fields, a value that is not a number) are left to DuckDB, which then records at
most one error per declared column of a line. Checking costs 2 to 4 ms of CPU per MB.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

#: A line longer than this (bytes, newline excluded) is rejected unread. Lines of the Philly
#: utilization files are under 100 bytes.
MAX_LINE_BYTES = 64 * 1024
#: Bytes of a rejected line kept for ``rejects.raw`` (which holds its first 1,000 characters).
RAW_KEPT = 4000


@dataclass
class GuardReject:
    """One line the guard kept from DuckDB."""

    line_no: int
    reason: str
    raw: str


@dataclass
class _LongLine:
    """A line longer than the bound, not ended yet: its start and what was counted so far."""

    line_no: int
    start: bytes
    size: int
    fields: int


class LineGuard:
    """Finds and blanks the lines of a delimited text stream that are too long or too wide, or
    hold a NUL byte.

    ``feed`` takes the stream's chunks in order and gives back the bytes to pass on: whole
    lines only (a line not ended yet is held back; ``end`` gives it out), with each rejected
    line replaced by an empty line. The header (first line) is not checked for its width.
    """

    def __init__(
        self,
        columns: int,
        *,
        delimiter: bytes = b",",
        max_bytes: int = MAX_LINE_BYTES,
    ):
        self.columns = columns
        self.max_bytes = max_bytes
        self._delim = delimiter
        self._delim_code = delimiter[0]
        self.restart()

    def restart(self) -> None:
        """Forget everything: the next ``feed`` is the stream's first byte."""
        self.rejects: list[GuardReject] = []
        self._line = 1  # the line the next byte belongs to
        self._carry = b""  # the start of a line not ended yet (at most max_bytes)
        self._long: _LongLine | None = None

    def feed(self, data: bytes) -> bytes:
        """The whole lines of ``data`` (after what was held back) to pass on."""
        out: list[bytes] = []
        if self._long is not None:
            nl = data.find(b"\n")
            piece = data if nl < 0 else data[:nl]
            if len(self._long.start) < RAW_KEPT:
                self._long.start += piece[: RAW_KEPT - len(self._long.start)]
            self._long.size += len(piece)
            self._long.fields += piece.count(self._delim)
            if nl < 0:
                return b""
            self._reject_long(self._long)
            out.append(b"\n")
            data = data[nl + 1 :]
        buf = self._carry + data if self._carry else data
        cut = buf.rfind(b"\n") + 1
        if cut:
            out.append(self._check(buf[:cut]))
        rest = buf[cut:]
        if len(rest) > self.max_bytes:
            # Held no further: only its start (for rejects.raw) and its counts are kept.
            start = rest[:RAW_KEPT]
            self._long = _LongLine(self._line, start, len(rest), rest.count(self._delim) + 1)
            self._carry = b""
        else:
            self._carry = rest
        return out[0] if len(out) == 1 else b"".join(out)

    def end(self) -> bytes:
        """The stream ended: its last line, if it had no newline (or nothing, if rejected)."""
        if self._long is not None:
            self._reject_long(self._long)
            return b""
        rest, self._carry = self._carry, b""
        if not rest:
            return b""
        kept = self._check(rest + b"\n")
        return kept[:-1]

    def _reject_long(self, long: _LongLine) -> None:
        self._long = None
        self.rejects.append(
            GuardReject(long.line_no, self._reason(long.size, long.fields), _raw(long.start))
        )
        self._line = long.line_no + 1

    def _reason(self, size: int, fields: int, nul: bool = False) -> str:
        if size > self.max_bytes:
            return f"line of {size:,} bytes, longer than the {self.max_bytes:,} allowed: not read"
        if fields > self.columns:
            return (
                f"TOO MANY COLUMNS: {fields:,} fields where {self.columns} are declared: not read"
            )
        assert nul
        return "binary data (a NUL byte) in a text line: not read"

    def _check(self, whole: bytes) -> bytes:
        """``whole`` (lines, ending with a newline) with its bad lines blanked."""
        a = np.frombuffer(whole, np.uint8)
        nl = np.flatnonzero(a == 10)
        fields = np.diff(np.searchsorted(np.flatnonzero(a == self._delim_code), nl), prepend=0) + 1
        sizes = np.diff(nl, prepend=-1) - 1
        bad = (sizes > self.max_bytes) | (fields > self.columns)
        nul = np.zeros(len(nl), dtype=bool)
        if b"\x00" in whole:  # a fast scan; DuckDB would keep the NUL inside a value
            nul[np.searchsorted(nl, np.flatnonzero(a == 0))] = True
            bad |= nul
        first = self._line
        self._line += len(nl)
        if first == 1:  # the header: its width is what the columns were declared from
            bad[0] = sizes[0] > self.max_bytes or nul[0]
        if not bad.any():
            return whole
        out: list[bytes] = []
        start = 0
        for i in np.flatnonzero(bad).tolist():
            lo = 0 if i == 0 else int(nl[i - 1]) + 1
            out.append(whole[start:lo])
            out.append(b"\n")
            start = int(nl[i]) + 1
            self.rejects.append(
                GuardReject(
                    first + i,
                    self._reason(int(sizes[i]), int(fields[i]), bool(nul[i])),
                    _raw(whole[lo : min(int(nl[i]), lo + RAW_KEPT)]),
                )
            )
        out.append(whole[start:])
        return b"".join(out)


def _raw(start: bytes) -> str:
    """The start of a rejected line, for ``rejects.raw``."""
    return start.decode("utf-8", "replace").rstrip("\r\n")
