"""The Philly trace's ``cluster_job_log``: one JSON array of ~117k jobs (1+ GB), streamed
object by object with ``json.JSONDecoder.raw_decode`` over a sliding buffer: never loaded whole.
``philly.PhillyJobLog`` is the registered format; this module parses.

Quirks handled: attempts missing, ``null`` or empty; attempt times ``"None"``, ``null``
or ``""``; a last attempt without an end in a job without a final status (still running:
outcome ``running``, flag ``no_end``); an attempt without an end in a job that has a final
status, or before a later attempt (it ended, when is unknown: the outcome its position and the
job's status give, flag ``end_unknown``; see ``attempts.timing``); times in
Pacific wall-clock (``--timezone``) with the repeated fall-back hour read as the first
occurrence unless that would put an event before the job's previous one, in which case the
second occurrence is used.
"""

from __future__ import annotations

import io
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import numpy as np
import pyarrow as pa

from philly_analyze.bounds import GPU_INDEX, TIME, excerpt, json_int
from philly_analyze.errors import InputFormatError
from philly_analyze.ingest.formats import IngestContext, SourceResult
from philly_analyze.ingest.source import Source
from philly_analyze.schemas import UTC_TS
from philly_analyze.store import Batch
from philly_analyze.timeutil import fold_offset, localize_naive

#: The format's registered name, the ``source`` of the rows it writes.
FORMAT_NAME = "philly_job_log"
STATUS_MAP = {"Pass": "passed", "Killed": "killed", "Failed": "unsuccessful"}
#: Outcome of a job's last attempt, by job status (earlier attempts failed and were retried).
LAST_OUTCOME = {"passed": "passed", "killed": "killed", "unsuccessful": "failed"}
_TIME_RE = re.compile(r"^\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}$")
_GPU_RE = re.compile(r"gpu(\d+)")
_MISSING_TIMES = (None, "", "None", "none", "null", "NULL")
CHUNK_JOBS = 20_000
READ_CHARS = 4 << 20
MAX_OBJECT_CHARS = 256 << 20


def iter_json_array(source: Source, ctx: IngestContext) -> Iterator[tuple[int, Any]]:
    """(line number, value) for each element of a top-level JSON array, streamed.

    Raises ``InputFormatError`` with the line of the problem for a missing ``[``, a syntax
    error or a truncated array (elements before it have been yielded already)."""
    decoder = json.JSONDecoder(parse_int=json_int)
    with source.open(ctx.tracker) as raw:
        r = _ArrayReader(io.TextIOWrapper(raw, encoding="utf-8", errors="replace"), source.name)
        r.fill()
        r.skip_ws()
        if r.pos >= len(r.buf) or r.buf[r.pos] != "[":
            found = "end of file" if r.pos >= len(r.buf) else repr(r.buf[r.pos : r.pos + 20])
            raise InputFormatError(
                f"expected a JSON array '[', found {found}", source=source.name, line=r.line
            )
        r.pos += 1
        while True:
            r.skip_ws(",")
            if r.pos >= len(r.buf):
                raise InputFormatError(
                    "truncated JSON array (no closing ']')", source=source.name, line=r.line
                )
            if r.buf[r.pos] == "]":
                return
            value, end = r.decode(decoder)
            yield r.line, value
            r.line += r.buf.count("\n", r.pos, end)
            r.pos = end


class _ArrayReader:
    """A sliding window over a text stream: ``buf[pos:]`` is read and not yet parsed, ``line``
    is the line number at ``pos``. At most one element (plus a read) is held at a time."""

    def __init__(self, text: io.TextIOWrapper, name: str) -> None:
        self.text = text
        self.name = name
        self.buf = ""
        self.pos = 0
        self.line = 1
        self.eof = False

    def fill(self) -> bool:
        """Read more, dropping what was parsed; False at the end of the stream."""
        if self.eof:
            return False
        chunk = self.text.read(READ_CHARS)
        if not chunk:
            self.eof = True
            return False
        self.buf = self.buf[self.pos :] + chunk
        self.pos = 0
        return True

    def skip_ws(self, extra: str = "") -> None:
        """Move past whitespace (and the characters in ``extra``), reading more as needed."""
        # Locals in the loop: it runs once per character between elements.
        buf, pos, line = self.buf, self.pos, self.line
        while True:
            while pos < len(buf) and (buf[pos].isspace() or buf[pos] in extra):
                if buf[pos] == "\n":
                    line += 1
                pos += 1
            self.pos, self.line = pos, line
            if pos < len(buf) or not self.fill():
                return
            buf, pos = self.buf, self.pos

    def decode(self, decoder: json.JSONDecoder) -> tuple[Any, int]:
        """The element at ``pos`` and where it ends, reading more while it is incomplete."""
        while True:
            try:
                return decoder.raw_decode(self.buf, self.pos)
            except RecursionError:
                raise InputFormatError(
                    "JSON nested too deeply", source=self.name, line=self.line
                ) from None
            except json.JSONDecodeError as e:
                # Incomplete element at the end of the buffer: read more and retry.
                if len(self.buf) - self.pos > MAX_OBJECT_CHARS or not self.fill():
                    err_line = self.line + self.buf.count("\n", self.pos, e.pos)
                    truncated = self.eof and e.pos >= len(self.buf) - 1
                    what = "truncated JSON" if truncated else "invalid JSON"
                    raise InputFormatError(
                        f"{what}: {e.msg}", source=self.name, line=err_line
                    ) from None


@dataclass
class _JobChunk:
    """Rows of up to CHUNK_JOBS jobs, converted and written together."""

    jobs: dict[str, list[Any]] = field(default_factory=lambda: {k: [] for k in _JOB_KEYS})
    attempts: dict[str, list[Any]] = field(default_factory=lambda: {k: [] for k in _ATT_KEYS})
    placements: dict[str, list[Any]] = field(default_factory=lambda: {k: [] for k in _PL_KEYS})
    #: Per job: indices into the time list, in event order (submit, start0, end0, start1, ...).
    times: list[str | None] = field(default_factory=list)
    sequences: list[list[int]] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.jobs["job_id"])


_JOB_KEYS: tuple[str, ...] = ("job_id", "vc", "user_id", "status", "submit_idx", "flags")
_ATT_KEYS: tuple[str, ...] = (
    "job_id",
    "attempt_idx",
    "start_idx",
    "end_idx",
    "num_gpus",
    "num_machines",
    "outcome",
)
_PL_KEYS: tuple[str, ...] = ("job_id", "attempt_idx", "machine_id", "gpu_idx")


class _BadJob(ValueError):
    """A job that cannot be read: rejected whole (a ``rejects`` row), the others kept."""


#: "gpu3" -> 3 for the names the trace uses; anything else goes through _GPU_RE.
_GPU_INDEX = {f"gpu{i}": i for i in range(64)}


def _gpu_index(name: Any, what: str) -> int:
    """The index of a GPU named ``gpu<N>`` (N within ``bounds.GPU_INDEX``); any other name
    (``gpu-5``, ``gpuinf``, a number) rejects the job: a NULL index would hide the damage."""
    idx = _GPU_INDEX.get(name) if isinstance(name, str) else None
    if idx is not None:
        return idx
    m = _GPU_RE.fullmatch(name) if isinstance(name, str) else None
    if m is None:
        raise _BadJob(f"GPU name {excerpt(name)} in {what} is not gpu<N>")
    try:
        return GPU_INDEX.int_of(m.group(1))
    except ValueError as e:
        raise _BadJob(f"{e} in {what}") from None


def _time_or_none(value: Any, what: str) -> str | None:
    """A trace time checked for shape, calendar and bounds; None for the missing spellings."""
    if value in _MISSING_TIMES:
        return None
    text = value.strip() if isinstance(value, str) else None
    if text is None or not _TIME_RE.match(text):
        raise _BadJob(f"unparsable time {excerpt(value)} in {what}")
    try:  # the shape is right; the calendar must be too (no 2017-02-30 or 25:61)
        t = datetime.fromisoformat(text)
    except ValueError:
        raise _BadJob(f"impossible time {excerpt(value)} in {what}") from None
    if not TIME.ok(t):
        raise _BadJob(f"{TIME.reason(value)} in {what}")
    return text


@dataclass
class JobLogSession:
    """Reads job logs into a batch, ``CHUNK_JOBS`` jobs at a time."""

    batch: Batch
    ctx: IngestContext
    rows: dict[str, int] = field(default_factory=dict)

    def feed(self, source: Source) -> SourceResult:
        """Read one job log: each job whole or rejected (a ``rejects`` row naming its line)."""
        chunk = _JobChunk()
        rejected = 0
        try:
            for line_no, obj in iter_json_array(source, self.ctx):
                try:
                    self._add_job(chunk, obj)
                except _BadJob as e:
                    self.batch.reject(source.name, line_no, str(e), json.dumps(obj)[:1000])
                    rejected += 1
                if len(chunk) >= CHUNK_JOBS:
                    rejected += self._flush(chunk, source)
                    chunk = _JobChunk()
        finally:
            # Whatever was read before a fatal error is kept.
            rejected += self._flush(chunk, source)
        return SourceResult(
            dict(self.rows),
            rejected,
            "jobs: vc, user_id, status, submit_time; attempts; placements",
        )

    def finish(self) -> dict[str, int]:
        """Nothing is held across files: every file's rows are written by ``feed``."""
        return {}

    def _add_job(self, chunk: _JobChunk, obj: Any) -> None:
        """Add one job's rows to the chunk, or raise ``_BadJob`` and add nothing."""
        if not isinstance(obj, dict):
            raise _BadJob(f"expected a JSON object, found {type(obj).__name__}")
        job_id = obj.get("jobid")
        if not isinstance(job_id, str) or not job_id:
            raise _BadJob("missing jobid")
        flags: list[str] = []
        raw_status = obj.get("status")
        status = STATUS_MAP.get(raw_status) if isinstance(raw_status, str) else None
        if status is None:
            flags.append(f"unknown_status:{raw_status}")
        times_start = len(chunk.times)
        submit = _time_or_none(obj.get("submitted_time"), "submitted_time")
        chunk.times.append(submit)
        if submit is None:
            flags.append("no_submit")
        attempts = obj.get("attempts") or []
        if not isinstance(attempts, list):
            raise _BadJob("attempts is not a list")
        if not attempts:
            flags.append("no_attempts")
        parsed = _JobAttempts(job_id, status, flags, [times_start])
        for i, att in enumerate(attempts):
            parsed.add(chunk, i, att, i == len(attempts) - 1)
        # Only now, with the whole job valid, append its rows.
        chunk.jobs["job_id"].append(job_id)
        chunk.jobs["vc"].append(_str_or_none(obj.get("vc")))
        chunk.jobs["user_id"].append(_str_or_none(obj.get("user")))
        chunk.jobs["status"].append(status)
        chunk.jobs["submit_idx"].append(times_start)
        chunk.jobs["flags"].append(flags or None)
        parsed.append_to(chunk)

    def _flush(self, chunk: _JobChunk, source: Source) -> int:
        """Convert the chunk's times and write its jobs, attempts and placements."""
        if not len(chunk):
            return 0
        utc = self._convert_times(chunk)
        ts = pa.array(utc, type=pa.timestamp("us")).cast(UTC_TS)
        j = chunk.jobs
        src = [FORMAT_NAME]
        self._count(
            "jobs",
            self.batch.write(
                "jobs",
                {
                    "job_id": j["job_id"],
                    "vc": j["vc"],
                    "user_id": j["user_id"],
                    "status": j["status"],
                    "submit_time": ts.take(pa.array(j["submit_idx"], pa.int64())),
                    "flags": pa.array(j["flags"], pa.list_(pa.string())),
                    "source": src * len(j["job_id"]),
                },
            ),
        )
        self._count("attempts", self.batch.write("attempts", _attempt_columns(chunk, utc, ts)))
        p = chunk.placements
        self._count(
            "placements",
            self.batch.write(
                "placements",
                {
                    "job_id": p["job_id"],
                    "attempt_idx": pa.array(p["attempt_idx"], pa.int32()),
                    "machine_id": p["machine_id"],
                    "gpu_idx": pa.array(p["gpu_idx"], pa.int16()),
                    "source": src * len(p["job_id"]),
                },
            ),
        )
        return 0

    def _count(self, table: str, n: int) -> None:
        """Add ``n`` written rows of ``table`` to the session's totals."""
        self.rows[table] = self.rows.get(table, 0) + n

    def _convert_times(self, chunk: _JobChunk) -> np.ndarray:
        """All times of the chunk to UTC datetime64[us], resolving the fall-back hour per job."""
        naive = np.array(
            [np.datetime64("NaT") if t is None else t.replace(" ", "T") for t in chunk.times],
            dtype="datetime64[s]",
        )
        tz = self.ctx.timezone
        utc, ambiguous = localize_naive(naive, tz)
        if ambiguous.any():
            for seq in chunk.sequences:
                prev: np.datetime64 | None = None
                for i in seq:
                    t = utc[i]
                    if np.isnat(t):
                        continue
                    if ambiguous[i] and prev is not None and t < prev:
                        t = t + fold_offset(tz, naive[i])
                        utc[i] = t
                    prev = t
        return utc


@dataclass
class _JobAttempts:
    """One job's attempts and placements while it is parsed: kept apart from the chunk until
    the whole job is valid, so a bad attempt rejects the job without leaving rows behind."""

    job_id: str
    status: str | None
    flags: list[str]
    #: Indices into the chunk's time list in event order (submit, start0, end0, ...).
    seq: list[int]
    rows: list[tuple[Any, ...]] = field(default_factory=list)
    pl_att: list[int] = field(default_factory=list)
    pl_machine: list[str] = field(default_factory=list)
    pl_gpu: list[int | None] = field(default_factory=list)

    def add(self, chunk: _JobChunk, i: int, att: Any, last: bool) -> None:
        """Parse attempt ``i`` (its times go to the chunk's time list at once)."""
        if not isinstance(att, dict):
            raise _BadJob(f"attempt {i} is not an object")
        start = _time_or_none(att.get("start_time"), f"attempts[{i}].start_time")
        end = _time_or_none(att.get("end_time"), f"attempts[{i}].end_time")
        si = len(chunk.times)
        chunk.times.extend([start, end])
        self.seq.extend([si, si + 1])
        detail = att.get("detail") or []
        if not isinstance(detail, list):
            raise _BadJob(f"attempts[{i}].detail is not a list")
        n_gpus = self._placements(i, detail)
        status, flags = self.status, self.flags
        ended_unrecorded = start is not None and end is None and (status or not last)
        if ended_unrecorded and "end_unknown" not in flags:
            # It ended (the job has a final status, or a later attempt), when is not
            # recorded: not running. Analyses leave its run out (attempts.timing).
            flags.append("end_unknown")
        outcome: str | None  # None: a final status the table does not know
        if last and start is not None and end is None and status is None:
            outcome = "running"
            flags.append("no_end")
        elif last:
            outcome = LAST_OUTCOME.get(status or "")
        else:
            outcome = "failed"
        # No GPU in the detail (none, or entries without gpus): the count is not
        # recorded, not 0 (docs/analyses.md, "Absent, not 0").
        self.rows.append((self.job_id, i, si, si + 1, n_gpus or None, len(detail), outcome))

    def _placements(self, i: int, detail: list[Any]) -> int:
        """Record attempt ``i``'s GPUs from its ``detail`` entries; return how many."""
        n_gpus = 0
        for d in detail:
            if not isinstance(d, dict) or not isinstance(d.get("ip"), str):
                raise _BadJob(f"attempts[{i}].detail entry without ip")
            gpus = d.get("gpus") or []
            if not isinstance(gpus, list):  # "gpu0" would count as 4 GPUs
                raise _BadJob(f"attempts[{i}].detail gpus is not a list")
            n_gpus += len(gpus)
            ip = d["ip"]
            for g in gpus:
                self.pl_att.append(i)
                self.pl_machine.append(ip)
                self.pl_gpu.append(_gpu_index(g, f"attempts[{i}].detail"))
        return n_gpus

    def append_to(self, chunk: _JobChunk) -> None:
        """Append the attempts, placements and time sequence to the chunk."""
        for r in self.rows:
            for k, v in zip(_ATT_KEYS, r, strict=True):
                chunk.attempts[k].append(v)
        pl = chunk.placements
        pl["job_id"].extend([self.job_id] * len(self.pl_att))
        pl["attempt_idx"].extend(self.pl_att)
        pl["machine_id"].extend(self.pl_machine)
        pl["gpu_idx"].extend(self.pl_gpu)
        chunk.sequences.append(self.seq)


def _attempt_columns(chunk: _JobChunk, utc: np.ndarray, ts: pa.Array) -> dict[str, Any]:
    """The chunk's attempts as the columns of ``attempts`` (``utc``/``ts``: its times)."""
    a = chunk.attempts
    start = ts.take(pa.array(a["start_idx"], pa.int64()))
    end = ts.take(pa.array(a["end_idx"], pa.int64()))
    delta = utc[a["end_idx"]] - utc[a["start_idx"]]
    dur = np.where(np.isnat(delta), np.nan, delta.astype("timedelta64[us]").astype(np.int64) / 1e6)
    return {
        "job_id": a["job_id"],
        "attempt_idx": pa.array(a["attempt_idx"], pa.int32()),
        "start_time": start,
        "end_time": end,
        "num_gpus": pa.array(a["num_gpus"], pa.int32()),
        "num_machines": pa.array(a["num_machines"], pa.int32()),
        "duration_s": pa.array(dur, from_pandas=True),
        "outcome": a["outcome"],
        "source": [FORMAT_NAME] * len(a["job_id"]),
    }


def _str_or_none(v: Any) -> str | None:
    """A JSON value as text; None stays None."""
    if v is None:
        return None
    return str(v)
