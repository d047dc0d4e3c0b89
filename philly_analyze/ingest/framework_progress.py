"""Training progress (loss per epoch or step) from framework logs, vectorised with Arrow.

Lines arrive as Arrow string arrays (``line_arrays``: zero-copy over chunks of the file, each
element one line with its newline). A literal gate per shape picks candidate lines and one RE2
``extract_regex`` reads the numbers, so Python never loops over lines.

Shapes (``SHAPES``; ``epoch`` is the number as printed: CNTK counts from 1, the others from 0):

- CNTK ``Finished Epoch[ 1 of 10]: [Training] ce = 1.669 * 50000; ...``: unit ``epoch``, the
  first criterion after ``[Training]`` (the training criterion; ``[Validate]`` lines and the
  per-minibatch ``Epoch[..]-Minibatch[..]`` lines are not stored).
- TensorFlow ``INFO:tensorflow:loss = 2.36, step = 1`` and TF-slim
  ``INFO:tensorflow:global step 100: loss = 2.3``: unit ``step``.
- PyTorch imagenet-style ``Epoch: [3][ 400/5005] ... Loss 3.1416e+00 (3.2071e+00)``: unit
  ``step``, step = epoch x iterations per epoch + iteration, loss = the current value (the
  bracketed running average is not stored).
- Megatron ``iteration 10/ 1000 | ... | lm loss: 1.2E+01 | ...``: unit ``step``.
- MXNet ``Epoch[3] Train-cross-entropy=1.2`` (also ``Train-ce``, ``Train-loss`` ...): unit
  ``epoch``. MXNet's ``Batch [..] Speed: ... accuracy=`` lines carry no loss: not stored.

Ranks: a line tagged with a rank (``MPI Rank N:``, Open MPI/Horovod ``[1,N]<stdout>:``,
``[N]<stdout>:``, torch elastic ``[defaultN]:``, MXNet ``Node[N]``) counts only if N is the
lowest rank that printed progress in that file (rank 0 when present); untagged lines count as
rank 0. Then each (unit, epoch) is kept once, at its first line: interleaved untagged ranks
print the same step several times.

Times: a leading ``MM/dd/yyyy HH:mm:ss:`` (CNTK) or ``yyyy-MM-dd HH:mm:ss[,.fff]`` stamp,
after the rank tag, is wall-clock in ``--timezone`` and stored in UTC; no stamp, NULL time.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from philly_analyze.bounds import RANK, STEP, TIME, Bound
from philly_analyze.schemas import UTC_TS
from philly_analyze.timeutil import localize_naive

if TYPE_CHECKING:
    from philly_analyze.ingest.source import ByteReader

CHUNK_BYTES = 8 << 20
#: A "line" longer than this without a newline is processed in pieces (same line number).
MAX_LINE_BYTES = 8 << 20

NUM = r"[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?|[-+]?(?i:nan|inf(?:inity)?)"
#: An epoch, step or iteration counter as printed: any number, so that one that is not a
#: whole number in its bound (``-5``, ``inf``, ``1.5``) is a progress line to reject, not a
#: line passed over (``\d+`` alone skipped ``step = -5`` and read ``step = 1.5`` as 1). A dot
#: with no digit after it is not taken: ``step = 100.`` ends a sentence.
CNT = r"[-+]?(?:\d+(?:\.\d+)?|\.\d+)(?:[eE][-+]?\d+)?|[-+]?(?i:nan|inf(?:inity)?)"
#: Rank tag and time stamp at the start of a line (every group optional: always matches).
HEAD = (
    r"^(?:MPI Rank (?P<r_mpi>\d+): |\[\d+,(?P<r_ompi>\d+)\]<std(?:out|err)>:"
    r"|\[(?P<r_hvd>\d+)\]<std(?:out|err)>:|\[default(?P<r_elastic>\d+)\]:)?\s*"
    r"(?:(?P<t_us>\d\d/\d\d/\d{4} \d\d:\d\d:\d\d):"
    r"|\[?(?P<t_iso>\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d)(?:[.,](?P<t_frac>\d{1,6}))?)?"
)
UNITS = ("epoch", "step")
#: Why a progress line is rejected, by the code in its ``bad`` column (0: not rejected).
BAD_REASONS = (
    "",
    f"progress line: {STEP.what} out of range ({STEP.range_text()})",
    f"progress line: {RANK.what} out of range ({RANK.range_text()})",
    f"progress line: time out of range ({TIME.range_text()})",
)


@dataclass(frozen=True)
class Shape:
    """One progress-line shape: a literal gate and an RE2 pattern with named groups
    ``epoch`` and ``loss`` (optionally ``iter``/``iters`` for per-epoch iterations and
    ``rank``)."""

    name: str
    unit: str
    gate: str
    pattern: str


SHAPES: tuple[Shape, ...] = (
    Shape(
        "cntk",
        "epoch",
        "Finished Epoch[",
        rf"Finished Epoch\[\s*(?P<epoch>{CNT}) of \d+\]: \[Training(?: Set)?\] [^=\s]+ = (?P<loss>{NUM})",
    ),
    Shape(
        "tensorflow",
        "step",
        "INFO:tensorflow:loss = ",
        rf"INFO:tensorflow:loss = (?P<loss>{NUM}), step = (?P<epoch>{CNT})",
    ),
    Shape(
        "tf-slim",
        "step",
        "INFO:tensorflow:global step ",
        rf"INFO:tensorflow:global step (?P<epoch>{CNT}): loss = (?P<loss>{NUM})",
    ),
    Shape(
        "pytorch",
        "step",
        "Epoch: [",
        rf"Epoch: \[(?P<epoch>{CNT})\]\[\s*(?P<iter>{CNT})/(?P<iters>{CNT})\].*?\bLoss\s+(?P<loss>{NUM})",
    ),
    Shape(
        "megatron",
        "step",
        "iteration ",
        rf"\biteration\s+(?P<epoch>{CNT})/\s*\d+ \|.*?\blm loss: (?P<loss>{NUM})",
    ),
    Shape(
        "mxnet",
        "epoch",
        "] Train-",
        rf"(?:Node\[(?P<rank>\d+)\] )?Epoch\[(?P<epoch>{CNT})\] "
        rf"Train-(?:cross-entropy|ce|loss|nll-loss|nll_loss|softmax-ce|mse)=(?P<loss>{NUM})",
    ),
)


def progress_gate() -> str:
    """RE2 pattern matching every line ``ProgressRows.add`` may use (the shapes' gates)."""
    return "|".join(re.escape(s.gate) for s in SHAPES)


def line_array(buf: bytes) -> pa.Array:
    """Zero-copy string array over ``buf`` (which ends with a newline), one line per element,
    newline included. Invalid UTF-8 is replaced first, so the array is valid."""
    if not buf.isascii():
        buf = buf.decode("utf-8", "replace").encode("utf-8")
    nl = np.flatnonzero(np.frombuffer(buf, np.uint8) == 10)
    offsets = np.empty(len(nl) + 1, dtype=np.int32)
    offsets[0] = 0
    offsets[1:] = nl + 1
    return pa.Array.from_buffers(
        pa.string(), len(nl), [None, pa.py_buffer(offsets), pa.py_buffer(buf)]
    )


def line_arrays(
    raw: ByteReader, chunk_bytes: int = CHUNK_BYTES, initial: bytes = b""
) -> Iterator[tuple[int, pa.Array]]:
    """(line number of the first element, lines) for chunks of a byte stream (preceded by
    ``initial``, bytes already read from it). Lines are counted by ``\\n`` (a lone ``\\r``
    stays inside its line); a last line without a newline is kept; a line longer than
    ``MAX_LINE_BYTES`` comes in pieces sharing its line number."""
    carry = b""
    line_no = 1
    pending = initial
    while True:
        data, pending = (pending, b"") if pending else (raw.read(chunk_bytes), b"")
        if not data:
            if carry:
                yield line_no, line_array(carry + b"\n")
            return
        buf = carry + data if carry else data
        cut = buf.rfind(b"\n") + 1
        if cut == 0:
            if len(buf) >= MAX_LINE_BYTES:
                yield line_no, line_array(buf + b"\n")
                carry = b""
            else:
                carry = buf
            continue
        arr = line_array(buf[:cut])
        yield line_no, arr
        line_no += len(arr)
        carry = buf[cut:]


@dataclass
class ProgressRows:
    """Progress lines of one file, accumulated chunk by chunk (numpy columns). Lines whose
    counters, rank or time lie outside ``bounds`` are not rows: ``finish`` lists them in
    ``rejected`` as (file, line, reason)."""

    parts: list[dict[str, np.ndarray]] = field(default_factory=list)
    rejected: list[tuple[int, int, str]] = field(default_factory=list)

    def add(self, lines: pa.Array, line_nos: np.ndarray) -> None:
        """Extract every progress line of one chunk; ``line_nos[i]`` is the line number of
        ``lines[i]`` (chunks may be pre-filtered subsets)."""
        if len(lines) == 0:
            return
        # Shapes absent from the chunk's bytes are skipped without a pass over its lines.
        data = lines.buffers()[2]
        raw = data.to_pybytes() if data is not None else b""
        for shape in SHAPES:
            if shape.gate.encode() not in raw:
                continue
            cand = np.flatnonzero(
                pc.match_substring(lines, shape.gate).to_numpy(zero_copy_only=False)
            )
            if len(cand) == 0:
                continue
            sub = lines.take(pa.array(cand))
            ext = pc.extract_regex(sub, shape.pattern)
            ok = ext.is_valid().to_numpy(zero_copy_only=False)
            if not ok.any():
                continue
            sel = pa.array(np.flatnonzero(ok))
            ext = ext.take(sel)
            head = pc.extract_regex(sub.take(sel), HEAD)
            epoch, bad = _counters(ext, {f.name for f in ext.type})
            rank, bad_rank = _rank(head, ext)
            bad = np.where(bad, 1, np.where(bad_rank, 2, 0)).astype(np.int8)
            self.parts.append(
                {
                    "line_no": line_nos[cand[ok]],
                    "unit": np.full(len(epoch), UNITS.index(shape.unit), dtype=np.int8),
                    "epoch": epoch,
                    "loss": pc.cast(ext.field("loss"), pa.float64()).to_numpy(zero_copy_only=False),
                    "rank": np.maximum(rank, 0),
                    "t_us": head.field("t_us"),
                    "t_iso": head.field("t_iso"),
                    "t_frac": head.field("t_frac"),
                    "bad": bad,
                }
            )

    def finish(
        self, timezone: str, file_starts: np.ndarray | None = None
    ) -> dict[str, np.ndarray] | None:
        """Rows after rank selection and de-duplication per file (see module docstring), in
        line order, with UTC times; None when there were no progress lines.

        ``file_starts``: when the lines of several files were added as one array (with
        ``first_line_no`` 1), the index of each file's first line; the result then has a
        ``file`` column and ``line_no`` counts within each file."""
        if not self.parts:
            return None
        cols = {k: np.concatenate([p[k] for p in self.parts]) for k in NUMERIC}
        stamps = {k: pa.concat_arrays([p[k] for p in self.parts]) for k in STAMPS}
        if file_starts is None:
            cols["file"] = np.zeros(len(cols["line_no"]), dtype=np.int64)
        else:
            idx = cols["line_no"] - 1
            cols["file"] = np.searchsorted(file_starts, idx, side="right") - 1
            cols["line_no"] = idx - file_starts[cols["file"]] + 1
        rows = np.lexsort((cols["line_no"], cols["file"]))  # file, then line order
        rows = self._reject(rows, cols["bad"][rows], cols)
        if not len(rows):
            return None
        file, rank = cols["file"][rows], cols["rank"][rows]
        # Lowest rank of each file.
        new_file = np.r_[True, file[1:] != file[:-1]]
        low = np.minimum.reduceat(rank, np.flatnonzero(new_file))
        rows = rows[rank == low[np.cumsum(new_file) - 1]]
        # First line of each (file, unit, epoch): sort by key then position, take group heads.
        n = len(rows)
        by_key = np.lexsort(
            (np.arange(n), cols["epoch"][rows], cols["unit"][rows], cols["file"][rows])
        )
        k = rows[by_key]
        head = np.r_[
            True,
            (cols["file"][k][1:] != cols["file"][k][:-1])
            | (cols["unit"][k][1:] != cols["unit"][k][:-1])
            | (cols["epoch"][k][1:] != cols["epoch"][k][:-1]),
        ]
        rows = rows[np.sort(by_key[head])]
        take = pa.array(rows)
        t_us, t_iso, t_frac = (stamps[c].take(take) for c in STAMPS)
        times, far = _times(t_us, t_iso, t_frac, timezone)
        rows = self._reject(rows, np.where(far, 3, 0), cols)
        out = {c: cols[c][rows] for c in ("file", "line_no", "unit", "epoch", "loss")}
        out["time"] = times.filter(pa.array(~far)) if far.any() else times
        return out if len(rows) else None

    def _reject(self, rows: np.ndarray, bad: np.ndarray, cols: dict[str, np.ndarray]) -> np.ndarray:
        """``rows`` without the ones whose ``bad`` code is set (listed in ``rejected``)."""
        hit = np.flatnonzero(bad)
        for i in hit.tolist():
            r = rows[i]
            self.rejected.append(
                (int(cols["file"][r]), int(cols["line_no"][r]), BAD_REASONS[bad[i]])
            )
        return np.delete(rows, hit) if len(hit) else rows


NUMERIC = ("line_no", "unit", "epoch", "loss", "rank", "bad")
STAMPS = ("t_us", "t_iso", "t_frac")


def _ints(col: pa.Array, bound: Bound, missing: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Counter strings -> int64 ('' for a group that did not take part -> ``missing``), and
    which are not a whole number within ``bound`` (those values are 0; ``missing`` is not
    outside): a sign, a fraction, an exponent, inf, nan or more digits than int64 holds."""
    empty = pc.equal(col, "").to_numpy(zero_copy_only=False)
    # Up to 18 digits always fit in int64; no bound of a counter reaches 1e18.
    whole = pc.match_substring_regex(col, r"^\d{1,18}$").to_numpy(zero_copy_only=False)
    vals = pc.cast(pc.if_else(pa.array(whole), col, "0"), pa.int64()).to_numpy(zero_copy_only=False)
    vals = np.where(empty, missing, vals)
    out = ~empty & ~(whole & (vals >= bound.lo) & (vals <= bound.hi))
    return np.where(out, 0, vals), out


def _counters(ext: pa.StructArray, names: set[str]) -> tuple[np.ndarray, np.ndarray]:
    """The epoch or step of each progress line (PyTorch: epoch x iterations + iteration),
    and which lie outside ``bounds.STEP``."""
    epoch, bad = _ints(ext.field("epoch"), STEP)
    if "iters" in names:
        iters, bad_n = _ints(ext.field("iters"), STEP)
        it, bad_i = _ints(ext.field("iter"), STEP)
        step = epoch.astype(np.float64) * iters + it
        bad = bad | bad_n | bad_i | ~STEP.mask(step)
        epoch = np.where(bad, 0, epoch * iters + it)
    return epoch, bad


def _rank(head: pa.StructArray, ext: pa.StructArray) -> tuple[np.ndarray, np.ndarray]:
    """The rank of each progress line (-1: untagged), and which lie outside ``bounds.RANK``."""
    rank = np.full(len(ext), -1, dtype=np.int64)
    bad = np.zeros(len(ext), dtype=bool)
    sources = [head.field(n) for n in ("r_mpi", "r_ompi", "r_hvd", "r_elastic")]
    if "rank" in {f.name for f in ext.type}:
        sources.append(ext.field("rank"))
    for col in sources:
        vals, out = _ints(col, RANK, missing=-1)
        bad |= out
        rank = np.where(rank < 0, np.where(out, -1, vals), rank)
    return rank, bad


def _times(
    t_us: pa.Array, t_iso: pa.Array, t_frac: pa.Array, tz: str
) -> tuple[pa.Array, np.ndarray]:
    """Line time stamps (wall-clock in ``tz``) -> UTC timestamps; NULL where none ('' = no
    stamp: the regex group did not take part). Also which stamps lie outside ``bounds.TIME``
    (NULL in the result: the caller rejects those lines)."""
    naive = np.full(len(t_us), np.datetime64("NaT"), dtype="datetime64[us]")
    if pc.any(pc.not_equal(t_us, "")).as_py():
        parsed = pc.strptime(t_us, format="%m/%d/%Y %H:%M:%S", unit="us", error_is_null=True)
        naive = _fill(naive, parsed.to_numpy(zero_copy_only=False))
    if pc.any(pc.not_equal(t_iso, "")).as_py():
        parsed = pc.strptime(
            pc.replace_substring(t_iso, "T", " "),
            format="%Y-%m-%d %H:%M:%S",
            unit="us",
            error_is_null=True,
        )
        # ",633" -> 633000 us: pad the fraction's digits to six.
        frac = pc.utf8_rpad(t_frac, width=6, padding="0")
        micros = pc.cast(frac, pa.int64()).to_numpy(zero_copy_only=False)
        stamped = parsed.to_numpy(zero_copy_only=False) + micros.astype("timedelta64[us]")
        naive = _fill(naive, stamped)
    far = ~np.isnat(naive) & ~TIME.mask(naive)
    utc, _ = localize_naive(naive, tz)
    return pa.array(utc, pa.timestamp("us")).cast(UTC_TS), far


def _fill(current: np.ndarray, new: np.ndarray) -> np.ndarray:
    return np.where(np.isnat(current), new.astype("datetime64[us]"), current)
