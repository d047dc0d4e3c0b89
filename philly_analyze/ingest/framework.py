"""Deep-learning framework logs: each job attempt's stdout/stderr -> ``epochs`` and ``failures``.

One file (or several: stdout and stderr) per attempt. Which attempt a file belongs to comes
from ``--framework-mapping``, its path or its first lines (``framework_ids``); a file whose
job cannot be told is listed as skipped, not fatal, and not recorded (so a later run with a
mapping picks it up). The synthesizer writes ``framework/<application_id>/attempt_<idx>/
stdout.txt`` and ``stderr.txt``, which the path rules read directly.

Each file is read once, in 8 MB chunks turned into zero-copy Arrow string arrays; RE2 gates
over each chunk find progress lines (``framework_progress``) and failure evidence
(``philly_analyze.failures``). Memory is bounded by the chunk size plus one file's progress
rows plus a few hundred bytes per attempt.

Output:
- ``epochs``: per file, rows of the lowest rank, one per (unit, epoch); across the files of an
  attempt, a (unit, epoch) already seen is not repeated.
- ``failures``: one row per attempt seen in this ingest call, written at the end, with the
  verdict and reason of ``philly_analyze.failures.classify`` over all of the attempt's files.
"""

from __future__ import annotations

import re
from collections import Counter, OrderedDict
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from philly_analyze.errors import InputFormatError
from philly_analyze.failures import ChunkHits, Evidence, Scanner, load_rules
from philly_analyze.ingest.formats import (
    Format,
    IngestContext,
    SkipSource,
    SourceResult,
    register,
)
from philly_analyze.ingest.framework_ids import (
    APP_RE,
    CONTAINER_RE,
    AttemptId,
    Mapping,
    from_file,
    resolve,
)
from philly_analyze.ingest.framework_progress import (
    CHUNK_BYTES,
    UNITS,
    ProgressRows,
    line_array,
    line_arrays,
    progress_gate,
)
from philly_analyze.ingest.source import READ_FAILURES, ByteReader, Source
from philly_analyze.store import Batch

#: Content that marks a deep-learning training log (banners, progress, launchers, tags).
_MARKERS = re.compile(
    rb"Finished Epoch\[|Epoch\[\s*\d+ of \d+\]|INFO:tensorflow:|tensorflow/|Epoch: \[\d+\]\["
    rb"|\biteration\s+\d+/\s*\d+ \||Node\[\d+\] Epoch\[|MPI Rank \d+: |\[\d+,\d+\]<std(?:out|err)>:"
    rb"|\[default\d+\]:|NCCL (?:INFO|WARN)|:::ML(?:L|LOG|Pv)|torch\.distributed|\bCNTK\b"
    rb"|__COMPLETED__|[Hh]orovod|\bmxnet\b|\btorch\b|\bcntk\b|\bkeras\b|\bcaffe\b"
)
#: Rows of ``epochs`` buffered before a write (one Parquet row group).
FLUSH_ROWS = 200_000
#: Files up to this size are read whole and scanned together, CHUNK_BYTES at a time (each
#: RE2 pass has a fixed cost of a few ms, too much per file for 100,000s of small logs).
SMALL_FILE_BYTES = 1 << 20
READ_PIECE = 64 * 1024
#: Attempts whose seen (unit, epoch) keys are remembered to de-duplicate across their files
#: (files of one attempt are adjacent in the sorted walk of a folder).
SEEN_ATTEMPTS = 256

AttemptKey = tuple[str, int | None]


@register
class FrameworkLog(Format):
    name = "framework_log"
    description = "Deep-learning framework stdout/stderr of one job attempt (CNTK, TF, PyTorch...)"
    grouped = True

    def sniff(self, name: str, head: bytes) -> bool:
        # Last in detection order: any text file under a YARN application/container folder,
        # or one whose head looks like a training log or holds failure evidence.
        if APP_RE.search(name) or CONTAINER_RE.search(name):
            return True
        if _looks_like_documentation(name, head):
            # A README or provenance note may quote failure messages; it is not a log.
            return False
        if _MARKERS.search(head):
            return True
        cut = head.rfind(b"\n") + 1
        return bool(cut) and _scanner().scan(line_array(head[:cut])) is not None

    def session(self, batch: Batch, ctx: IngestContext) -> _Session:
        return _Session(batch, ctx)


_DOC_SUFFIXES = (".md", ".markdown", ".rst", ".html", ".htm", ".adoc")


def _looks_like_documentation(name: str, head: bytes) -> bool:
    """Markdown/HTML documents (by suffix, or a Markdown heading plus a table rule up front)
    and JSON documents (a log is lines of text, never one object or array)."""
    if name.lower().endswith((*_DOC_SUFFIXES, ".json")):
        return True
    text = head[:4096].lstrip()
    if text.startswith(b'{"') or text.startswith(b"{\n") or text.startswith(b"[{"):
        return True
    return text.startswith(b"# ") and b"|---" in text


def _scanner() -> Scanner:
    global _SCANNER
    if _SCANNER is None:
        _SCANNER = Scanner(load_rules())
    return _SCANNER


_SCANNER: Scanner | None = None


@dataclass
class _Pending:
    """A small file waiting to be scanned with others in one batch."""

    name: str
    key: AttemptKey
    data: bytes  # ends with a newline


@dataclass
class _Session:
    batch: Batch
    ctx: IngestContext
    scanner: Scanner = field(default_factory=_scanner)
    evidence: dict[AttemptKey, Evidence] = field(default_factory=dict)
    seen: OrderedDict[AttemptKey, set[int]] = field(default_factory=OrderedDict)
    small: list[_Pending] = field(default_factory=list)
    small_bytes: int = 0
    deferred_rows: int = 0
    #: Progress lines of small files rejected at their (deferred) scan.
    deferred_rejects: int = 0
    out: list[pa.Table] = field(default_factory=list)
    out_rows: int = 0
    how: Counter[str] = field(default_factory=Counter)
    #: Jobs keyed by a file or folder name: key -> (folder it is unique in, first file).
    key_scopes: dict[str, tuple[str, str]] = field(default_factory=dict)
    mapping: Mapping = field(init=False)
    gate: str = field(init=False)

    def __post_init__(self) -> None:
        self.mapping = Mapping(self.ctx.framework_mapping)
        self.gate = f"{self.scanner.gate}|{progress_gate()}"

    def feed(self, source: Source) -> SourceResult:
        found = resolve(source.name, source.head, self.mapping)
        if isinstance(found, str) and self.ctx.framework_job_key != "ids":
            own = from_file(source.name, self.ctx.framework_job_key)
            found = self._claim(*own, source.name) if own else found
        if isinstance(found, str):
            self.how["skipped"] += 1
            raise SkipSource(found)
        self.how[found.how] += 1
        key: AttemptKey = (found.job_id, found.attempt_idx)
        ev = self.evidence.get(key)
        if ev is None:
            ev = self.evidence[key] = Evidence(self.scanner)
        ev.register(source.name)
        provided = f"epochs, failures: {key[0]} attempt {key[1]} (from the {found.how})"
        parts: list[bytes] = []
        try:
            with source.open(self.ctx.tracker) as raw:
                size = _read_up_to(raw, SMALL_FILE_BYTES + 1, parts)
                if size <= SMALL_FILE_BYTES:
                    # Small file (most are): scanned later with others, one RE2 pass per batch.
                    self._add_small(source.name, key, b"".join(parts))
                    return SourceResult({}, 0, provided)
                n, rejected = self._stream(source.name, key, ev, raw, b"".join(parts))
        except READ_FAILURES as e:
            # Corrupt compressed data: keep what was read (the pipeline rejects the rest).
            if parts and sum(map(len, parts)) <= SMALL_FILE_BYTES:
                data = b"".join(parts)
                self._add_small(source.name, key, data[: data.rfind(b"\n") + 1])
            cause = e.__cause__ or e
            raise InputFormatError(f"cannot read further: {cause}", source=source.name) from None
        return SourceResult({"epochs": n} if n else {}, rejected, provided)

    def _claim(self, found: AttemptId, scope: str, name: str) -> AttemptId | str:
        """A job keyed by a file or folder name, unless files of another folder already have
        that key (two runs would merge into one job)."""
        first = self.key_scopes.setdefault(found.job_id, (scope, name))
        if first[0] == scope:
            return found
        return (
            f"job key {found.job_id!r} (its {found.how}) is already the job of {first[1]}, in "
            "another folder: the two would merge into one job; key jobs by "
            "--framework-job-key folder|filename or list the files in --framework-mapping"
        )

    def _add_small(self, name: str, key: AttemptKey, data: bytes) -> None:
        if not data:
            return
        if not data.endswith(b"\n"):
            data += b"\n"
        self.small.append(_Pending(name, key, data))
        self.small_bytes += len(data)
        if self.small_bytes >= CHUNK_BYTES:
            self._flush_small()

    def _flush_small(self) -> None:
        """Scan the pending small files as one array of lines."""
        if not self.small:
            return
        files, self.small, self.small_bytes = self.small, [], 0
        lines = line_array(b"".join(f.data for f in files))
        counts = np.array([f.data.count(b"\n") for f in files], dtype=np.int64)
        starts = np.r_[0, np.cumsum(counts)[:-1]]
        progress = ProgressRows()
        hits = self._scan(lines, 1, progress)
        if hits is not None:
            for f, lo, n in zip(files, starts.tolist(), counts.tolist(), strict=True):
                own = hits.within(lo, lo + n)
                if own is not None:
                    self.evidence[f.key].add(f.name, 1 - lo, lines, own)
        cols = progress.finish(self.ctx.timezone, starts)
        for fi, line_no, why in progress.rejected:
            self.batch.reject(files[fi].name, line_no, why, None)
        self.deferred_rejects += len(progress.rejected)
        if cols is not None:
            # Rows come grouped by file (in line order): one slice per file.
            file_of = cols.pop("file")
            cuts = np.flatnonzero(np.diff(file_of)) + 1
            for lo, hi in zip(
                np.r_[0, cuts].tolist(), np.r_[cuts, len(file_of)].tolist(), strict=True
            ):
                part = {k: v[lo:hi] for k, v in cols.items()}
                self.deferred_rows += self._add_epochs(files[int(file_of[lo])].key, part)

    def _stream(
        self, name: str, key: AttemptKey, ev: Evidence, raw: ByteReader, head: bytes
    ) -> tuple[int, int]:
        """Read a large file chunk by chunk; its epochs rows are final. Returns (rows,
        rejected progress lines)."""
        progress = ProgressRows()
        for first, lines in line_arrays(raw, CHUNK_BYTES, initial=head):
            hits = self._scan(lines, first, progress)
            if hits is not None:
                ev.add(name, first, lines, hits)
        cols = progress.finish(self.ctx.timezone)
        for _, line_no, why in progress.rejected:
            self.batch.reject(name, line_no, why, None)
        if cols is None:
            return 0, len(progress.rejected)
        cols.pop("file")
        return self._add_epochs(key, cols), len(progress.rejected)

    def _scan(
        self, lines: pa.Array, first_line_no: int, progress: ProgressRows
    ) -> ChunkHits | None:
        """One RE2 pass over the chunk for anything of interest, then failure evidence (hits
        returned, positions in ``lines``) and progress rows (into ``progress``) from the
        candidate lines only."""
        cand = np.flatnonzero(
            pc.match_substring_regex(lines, self.gate).to_numpy(zero_copy_only=False)
        )
        if len(cand) == 0:
            return None
        sub = lines.take(pa.array(cand))
        progress.add(sub, cand + first_line_no)
        hits = self.scanner.scan(sub)
        return None if hits is None else hits.at(cand)

    def _add_epochs(self, key: AttemptKey, cols: dict) -> int:
        """Queue one file's rows, without the (unit, epoch) pairs its attempt already has."""
        seen = self.seen.get(key)
        if seen is None:
            seen = self.seen[key] = set()
            if len(self.seen) > SEEN_ATTEMPTS:
                self.seen.popitem(last=False)
        else:
            self.seen.move_to_end(key)
        codes = (cols["epoch"] * len(UNITS) + cols["unit"]).tolist()
        fresh = np.array([c not in seen for c in codes], dtype=bool)
        seen.update(codes)
        n = int(fresh.sum())
        if n == 0:
            return 0
        self.out.append(
            pa.table(
                {
                    "job_id": pa.array([key[0]] * n, pa.string()),
                    "attempt_idx": pa.array([key[1]] * n, pa.int32()),
                    "epoch": pa.array(cols["epoch"][fresh], pa.int64()),
                    "unit": pa.array(np.array(UNITS)[cols["unit"][fresh]], pa.string()),
                    "loss": pa.array(cols["loss"][fresh], pa.float64()),
                    "time": cols["time"].filter(pa.array(fresh)),
                    "line_no": pa.array(cols["line_no"][fresh], pa.int64()),
                }
            )
        )
        self.out_rows += n
        if self.out_rows >= FLUSH_ROWS:
            self._write_epochs()
        return n

    def _write_epochs(self) -> None:
        if self.out:
            self.batch.write("epochs", pa.concat_tables(self.out))
            self.out = []
            self.out_rows = 0

    def finish(self) -> dict[str, int]:
        self._flush_small()
        self._write_epochs()
        extra: dict[str, int] = {}
        if self.deferred_rows:
            extra["epochs"] = self.deferred_rows
        if self.deferred_rejects:
            extra["rejects"] = self.deferred_rejects
        n = self._write_failures()
        if n:
            extra["failures"] = n
        if self.how:
            found = ", ".join(
                f"{n} from the {how}" for how, n in sorted(self.how.items()) if how != "skipped"
            )
            skipped = self.how["skipped"]
            self.ctx.note(
                f"framework_log: job attempt of {found or 'no file'}"
                + (f"; {skipped} skipped (job unknown)" if skipped else "")
                + "; epochs of files under 1 MB are counted on the 'assembled' line"
            )
        return extra

    def _write_failures(self) -> int:
        cols = ("reason", "categories", "signature", "line_no", "message", "verdict", "log")
        rows: dict[str, list] = {c: [] for c in ("job_id", "attempt_idx", *cols)}
        for (job, attempt), ev in self.evidence.items():
            m = ev.result()
            rows["job_id"].append(job)
            rows["attempt_idx"].append(attempt)
            for c in cols:
                rows[c].append(getattr(m, c))
        rows["log_file"] = rows.pop("log")
        return self.batch.write("failures", rows) if self.evidence else 0


def _read_up_to(raw: ByteReader, n: int, parts: list[bytes]) -> int:
    """Append up to ``n`` bytes to ``parts`` (in pieces, so a read error keeps what came
    before it); fewer only at the end of the stream, where the source's SHA-256 is finished.
    Returns the number of bytes read."""
    got = 0
    while got < n:
        data = raw.read(min(READ_PIECE, n - got))
        if not data:
            raw.read(1)  # at EOF: lets the hashing reader record the digest
            break
        parts.append(data)
        got += len(data)
    return got
