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

import lzma
import re
import zlib
from collections import Counter, OrderedDict
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa

from philly_analyze.errors import InputFormatError
from philly_analyze.failures import Evidence, Scanner, load_rules
from philly_analyze.ingest.formats import (
    Format,
    IngestContext,
    SkipSource,
    SourceResult,
    register,
)
from philly_analyze.ingest.framework_ids import APP_RE, CONTAINER_RE, Mapping, resolve
from philly_analyze.ingest.framework_progress import UNITS, ProgressRows, line_array, line_arrays
from philly_analyze.ingest.source import Source
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
        if _MARKERS.search(head):
            return True
        cut = head.rfind(b"\n") + 1
        return bool(cut) and _scanner().scan(line_array(head[:cut])) is not None

    def session(self, batch: Batch, ctx: IngestContext) -> _Session:
        return _Session(batch, ctx)


def _scanner() -> Scanner:
    global _SCANNER
    if _SCANNER is None:
        _SCANNER = Scanner(load_rules())
    return _SCANNER


_SCANNER: Scanner | None = None


@dataclass
class _Session:
    batch: Batch
    ctx: IngestContext
    scanner: Scanner = field(default_factory=_scanner)
    evidence: dict[AttemptKey, Evidence] = field(default_factory=dict)
    seen: OrderedDict[AttemptKey, set[int]] = field(default_factory=OrderedDict)
    pending: list[pa.Table] = field(default_factory=list)
    pending_rows: int = 0
    how: Counter[str] = field(default_factory=Counter)
    mapping: Mapping = field(init=False)

    def __post_init__(self) -> None:
        self.mapping = Mapping(self.ctx.framework_mapping)

    def feed(self, source: Source) -> SourceResult:
        found = resolve(source.name, source.head, self.mapping)
        if isinstance(found, str):
            self.how["skipped"] += 1
            raise SkipSource(found)
        self.how[found.how] += 1
        key: AttemptKey = (found.job_id, found.attempt_idx)
        ev = self.evidence.setdefault(key, Evidence(self.scanner))
        progress = ProgressRows()
        line_no = 1
        error: InputFormatError | None = None
        try:
            with source.open(self.ctx.tracker) as raw:
                for first, lines in line_arrays(raw):
                    line_no = first
                    hits = self.scanner.scan(lines)
                    if hits is not None:
                        ev.add(source.name, first, lines, hits)
                    progress.add(first, lines)
        except (OSError, EOFError, zlib.error, lzma.LZMAError) as e:
            # Corrupt compressed data: keep what was read before it (pipeline rejects the rest).
            error = InputFormatError(f"cannot read further: {e}", source=source.name, line=line_no)
        n = self._add_epochs(key, progress)
        if error is not None:
            raise error
        return SourceResult(
            {"epochs": n} if n else {},
            0,
            f"epochs: {key[0]} attempt {key[1]}; failures: evidence ({found.how} id)",
        )

    def _add_epochs(self, key: AttemptKey, progress: ProgressRows) -> int:
        cols = progress.finish(self.ctx.timezone)
        if cols is None:
            return 0
        seen = self.seen.get(key)
        if seen is None:
            seen = self.seen[key] = set()
            if len(self.seen) > SEEN_ATTEMPTS:
                self.seen.popitem(last=False)
        else:
            self.seen.move_to_end(key)
        codes = cols["epoch"] * len(UNITS) + cols["unit"]
        fresh = np.array([c not in seen for c in codes.tolist()], dtype=bool)
        seen.update(codes.tolist())
        n = int(fresh.sum())
        if n == 0:
            return 0
        idx = pa.array(np.flatnonzero(fresh))
        self.pending.append(
            pa.table(
                {
                    "job_id": pa.array([key[0]] * n, pa.string()),
                    "attempt_idx": pa.array([key[1]] * n, pa.int32()),
                    "epoch": pa.array(cols["epoch"][fresh], pa.int64()),
                    "unit": pa.array(np.array(UNITS)[cols["unit"][fresh]], pa.string()),
                    "loss": pa.array(cols["loss"][fresh], pa.float64()),
                    "time": cols["time"].take(idx),
                    "line_no": pa.array(cols["line_no"][fresh], pa.int64()),
                }
            )
        )
        self.pending_rows += n
        if self.pending_rows >= FLUSH_ROWS:
            self._flush()
        return n

    def _flush(self) -> None:
        if self.pending:
            self.batch.write("epochs", pa.concat_tables(self.pending))
            self.pending = []
            self.pending_rows = 0

    def finish(self) -> dict[str, int]:
        self._flush()
        rows: dict[str, list] = {
            k: []
            for k in (
                "job_id",
                "attempt_idx",
                "reason",
                "categories",
                "signature",
                "line_no",
                "message",
                "verdict",
                "log_file",
            )
        }
        for (job, attempt), ev in self.evidence.items():
            m = ev.result()
            for k, v in (
                ("job_id", job),
                ("attempt_idx", attempt),
                ("reason", m.reason),
                ("categories", m.categories),
                ("signature", m.signature),
                ("line_no", m.line_no),
                ("message", m.message),
                ("verdict", m.verdict),
                ("log_file", m.log),
            ):
                rows[k].append(v)
        if self.how:
            found = ", ".join(
                f"{n} from the {how}" for how, n in sorted(self.how.items()) if how != "skipped"
            )
            skipped = self.how["skipped"]
            self.ctx.note(
                f"framework_log: job attempt of {found or 'no file'}"
                + (f"; {skipped} skipped (job unknown)" if skipped else "")
            )
        n = self.batch.write("failures", rows) if self.evidence else 0
        return {"failures": n} if n else {}
