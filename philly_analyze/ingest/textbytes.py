"""Text or binary, and the bytes of a text file that are not text.

A log that picked up a NUL byte (a crash while it was written) or one byte that is not UTF-8
(a path name in latin-1) is still a log: its lines are read with the bad bytes replaced
(U+FFFD), and the bytes are counted for the ingest summary (``TextDamage``). A file is taken as
binary, and skipped, only when more than ``BINARY_SHARE`` of the first ``BINARY_SAMPLE``
bytes are not text (``binary_share``).

Not text: bytes that are not valid UTF-8, NUL, and the other ASCII control bytes except tab,
newline, carriage return, vertical tab, form feed, backspace and escape (logs hold those: colour
codes, progress bars), and DEL. Runs of ``NUL_HOLE`` or more NUL bytes are left out of the
share: a crash leaves such holes in a log, and what surrounds them is text.

The threshold was set from files measured on the development machine (share of the first
8 KB not text): the text logs of ../shared/reference/real-samples 0%; a pickle 37%, Parquet
47-55%, PDF 48%, Python .pyc 50-60%, PNG, JPEG and GIF 52-55%, zip and wheel 53-71%, TrueType
63%, ELF executables and libraries 76-93%, a DuckDB database 81%. A NumPy .npy (19%, most of
its 96 bytes are a text header) is read as text, and then not recognised as any format.
"""

from __future__ import annotations

import builtins
import re
from dataclasses import dataclass, field

#: How much of a file's (decompressed) start the binary test looks at.
BINARY_SAMPLE = 8192
#: A file is binary when more than this share of its sample is not text.
BINARY_SHARE = 0.30
#: A run of at least this many NUL bytes is a hole, not counted in the share.
NUL_HOLE = 64

_CONTROLS = bytes(b for b in range(32) if b not in b"\t\n\v\f\r\x08\x1b") + b"\x7f"
_HOLES = re.compile(b"\x00{%d,}" % NUL_HOLE)


def non_text_bytes(data: bytes) -> int:
    """How many bytes of ``data`` are not text (see the module's docstring)."""
    # Both counts run in C: ASCII control bytes cannot be part of a multi-byte character,
    # and what the "ignore" decoder drops is exactly the bytes that are not valid UTF-8.
    n = len(data) - len(data.translate(None, _CONTROLS))
    if not data.isascii():
        n += len(data) - len(data.decode("utf-8", "ignore").encode("utf-8"))
    return n


def _utf8_tail(data: bytes) -> int:
    """Length of a multi-byte character cut at the end of ``data`` (0 when none)."""
    for back in range(1, min(4, len(data)) + 1):
        b = data[-back]
        if b < 0x80:
            return 0
        if b >= 0xC0:  # a lead byte: cut if it announces more bytes than follow it
            need = 2 if b < 0xE0 else 3 if b < 0xF0 else 4
            return back if need > back else 0
    return 0


def binary_share(head: bytes) -> float:
    """Share of the first ``BINARY_SAMPLE`` bytes of ``head`` that are not text (NUL holes
    left out; 1.0 when nothing but holes is left)."""
    sample = head[:BINARY_SAMPLE]
    if len(head) > BINARY_SAMPLE:  # a character cut by the sample's end is not damage
        sample = sample[: len(sample) - _utf8_tail(sample)]
    if not sample:
        return 0.0
    rest = _HOLES.sub(b"", sample)
    if not rest:
        return 1.0
    return non_text_bytes(rest) / len(rest)


def looks_binary(head: bytes) -> bool:
    """Whether a file starting with ``head`` is binary (not a text log or trace)."""
    return binary_share(head) > BINARY_SHARE


@dataclass
class TextDamage:
    """Counts, over a stream fed in chunks, the bytes that are not text and the lines (counted
    by newline, from 1) that hold them. Clean chunks cost a few C-level scans."""

    bytes: int = 0
    lines: int = 0
    first_line: int | None = None
    _newlines: int = 0
    _last_line: int = 0
    # `bytes` above is a field, so the type is spelt builtins.bytes inside this class.
    _tail: builtins.bytes = field(default=b"", repr=False)

    def feed(self, data: builtins.bytes) -> None:
        """Count ``data``, the next bytes of the stream."""
        if self._tail:
            data, self._tail = self._tail + data, b""
        cut = _utf8_tail(data)
        if cut:  # completed by the next chunk
            data, self._tail = data[:-cut], data[-cut:]
        if non_text_bytes(data):
            self._count_lines(data)
        self._newlines += data.count(b"\n")

    def end(self) -> None:
        """The stream ended: a character still cut is damage."""
        if self._tail:
            tail, self._tail = self._tail, b""
            self._count_lines(tail)

    def _count_lines(self, data: builtins.bytes) -> None:
        # Rare (damaged chunks only): line by line, to name the lines.
        for i, line in enumerate(data.split(b"\n")):
            n = non_text_bytes(line)
            if not n:
                continue
            self.bytes += n
            line_no = self._newlines + i + 1
            if line_no != self._last_line:  # a line met in two chunks counts once
                self._last_line = line_no
                self.lines += 1
                if self.first_line is None:
                    self.first_line = line_no

    def describe(self) -> str:
        """For the summary: '3 bytes not text on 2 lines (first: line 17), replaced'."""
        if not self.bytes:
            return ""
        b = f"{self.bytes:,} byte{'s' * (self.bytes != 1)}"
        ln = f"{self.lines:,} line{'s' * (self.lines != 1)}"
        return f"{b} not text (NUL, control or not UTF-8) on {ln} (first: line {self.first_line})"
