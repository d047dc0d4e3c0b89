"""Vectorised text formatting for large CSV outputs (no Python loop over rows).

A ``Block`` is a column of short byte strings stored as a ``uint8`` matrix plus a mask of the
bytes that belong to each string (padding is masked out, anywhere in the row). Rows are
assembled by laying blocks side by side and keeping the masked bytes in order, which numpy does
in one boolean-indexing pass: hundreds of MB/s, the same bytes every run.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Block:
    """``n`` strings: ``data[i, mask[i]]`` are the bytes of string ``i``."""

    data: np.ndarray  # uint8 (n, width)
    mask: np.ndarray | None  # bool (n, width); None: every byte belongs (fixed width)

    def __len__(self) -> int:
        return self.data.shape[0]


@dataclass(frozen=True)
class Lut:
    """A lookup table of left-aligned strings; ``take`` gathers a column of them."""

    data: np.ndarray  # uint8 (n, width)
    lens: np.ndarray  # int8 (n,)

    def take(self, idx: np.ndarray) -> Block:
        """The strings at ``idx`` as a block of rows (with a mask of their characters unless
        every string fills the width)."""
        w = self.data.shape[1]
        # Gather whole rows as opaque records (much faster than a 2-D uint8 gather).
        flat = np.asarray(idx).ravel()
        rec = self.data.view(np.dtype((np.void, w))).ravel()[flat]
        data = rec.view(np.uint8).reshape(-1, w)
        if self.fixed:
            return Block(data, None)
        mask = np.arange(w, dtype=np.int8)[None, :] < self.lens[flat][:, None]
        return Block(data, mask)

    @property
    def fixed(self) -> bool:
        """All strings have the table's full width."""
        return bool((self.lens == self.data.shape[1]).all())


def lut(strings: Sequence[str]) -> Lut:
    """A lookup table of ASCII strings (each at most 127 bytes)."""
    enc = [s.encode("ascii") for s in strings]
    width = max((len(b) for b in enc), default=0)
    data = np.zeros((len(enc), max(width, 1)), dtype=np.uint8)
    lens = np.zeros(len(enc), dtype=np.int8)
    for i, b in enumerate(enc):
        data[i, : len(b)] = np.frombuffer(b, dtype=np.uint8)
        lens[i] = len(b)
    return Lut(np.ascontiguousarray(data), lens)


def decimal(values: np.ndarray, decimals: int, int_digits: int = 12, trim: bool = True) -> Block:
    """Non-negative numbers with ``decimals`` decimals (rounded half-even like numpy).

    ``trim`` drops trailing zeros of the fraction but keeps one digit (``31.8``, ``32.0``),
    which is how Python prints floats that are exact at that precision."""
    scale = 10**decimals
    n = np.rint(np.asarray(values, dtype=np.float64) * scale).astype(np.int64)
    if (n < 0).any():
        raise ValueError("decimal() formats non-negative numbers only")
    ip, fp = np.divmod(n, scale)
    rows = len(n)
    width = int_digits + (1 + decimals if decimals else 0)
    data = np.empty((rows, width), dtype=np.uint8)
    mask = np.empty((rows, width), dtype=bool)
    # Integer digits, right-aligned; leading zeros masked (one digit always kept).
    p = 10 ** np.arange(int_digits - 1, -1, -1, dtype=np.int64)
    digits = (ip[:, None] // p[None, :]) % 10
    data[:, :int_digits] = digits + 48
    nonzero = ip[:, None] >= p[None, :]
    nonzero[:, -1] = True
    mask[:, :int_digits] = nonzero
    if decimals:
        data[:, int_digits] = ord(".")
        mask[:, int_digits] = True
        q = 10 ** np.arange(decimals - 1, -1, -1, dtype=np.int64)
        fd = (fp[:, None] // q[None, :]) % 10
        data[:, int_digits + 1 :] = fd + 48
        if trim:
            # Keep fraction digits up to the last non-zero one (at least the first).
            rev_nz = np.flip(np.cumsum(np.flip(fd != 0, axis=1), axis=1), axis=1) > 0
            rev_nz[:, 0] = True
            mask[:, int_digits + 1 :] = rev_nz
        else:
            mask[:, int_digits + 1 :] = True
    return Block(data, mask)


def clock_hms(seconds_of_day: np.ndarray) -> Block:
    """``HH:MM:SS`` of seconds since midnight, computed digit by digit (no table lookup)."""
    s = np.asarray(seconds_of_day, dtype=np.int64)
    h, rem = np.divmod(s, 3600)
    m, sec = np.divmod(rem, 60)
    data = np.empty((len(s), 8), dtype=np.uint8)
    data[:, 0], data[:, 1] = h // 10 + 48, h % 10 + 48
    data[:, 3], data[:, 4] = m // 10 + 48, m % 10 + 48
    data[:, 6], data[:, 7] = sec // 10 + 48, sec % 10 + 48
    data[:, 2] = data[:, 5] = ord(":")
    return Block(data, None)


def join_rows(fields: Sequence[Block | bytes], end: bytes = b"\n") -> bytes:
    """Rows made of ``fields`` in order (constant ``bytes`` fields are written as is), each
    row followed by ``end``. Separators are ordinary constant fields (e.g. ``b","``)."""
    rows = next(len(f) for f in fields if isinstance(f, Block))
    widths = [f.data.shape[1] if isinstance(f, Block) else len(f) for f in fields]
    total = sum(widths) + len(end)
    data = np.empty((rows, total), dtype=np.uint8)
    fixed = all(not isinstance(f, Block) or f.mask is None for f in fields)
    mask = None if fixed else np.ones((rows, total), dtype=bool)
    col = 0
    for f, w in zip(fields, widths, strict=True):
        if isinstance(f, Block):
            data[:, col : col + w] = f.data
            if f.mask is not None and mask is not None:
                mask[:, col : col + w] = f.mask
        else:
            data[:, col : col + w] = np.frombuffer(f, dtype=np.uint8)
        col += w
    data[:, col:] = np.frombuffer(end, dtype=np.uint8)
    return data.tobytes() if mask is None else data[mask].tobytes()
