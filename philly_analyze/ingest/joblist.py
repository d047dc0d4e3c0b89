"""Job lists without placements, for replaying real arrival patterns at full scale.

``job_list_csv``: a CSV with a header naming at least a submit time, a duration and a GPU count,
e.g. the Pollux artifact's ``philly.csv`` (``timestamp,duration,num_gpus,gpu_time,cluster``:
82,247 real Philly jobs) or RFold's ``philly_trace.csv`` (``#job id,arrival time (sec),topology,
shape,size,duration (sec)``: 111,549 arrivals). Column names are compared after normalising
them (lower case, a leading ``#`` dropped, spaces and dashes as ``_``) and taking a unit off
their end, in brackets or after ``_`` (``(sec)``, ``[s]``, ``_s``, ``_ms``, ``_min``, ``_h``):

==========  ===================================================================================
submit      ``timestamp``, ``submit_time``, ``submitted_time``, ``submit``, ``submission_time``,
            ``arrival_time``, ``arrival``
duration    ``duration``, ``run_time``, ``runtime`` (seconds unless a unit says otherwise)
GPUs        ``num_gpus``, ``gpus``, ``num_gpu``, ``gpu_num``, ``gpu``, ``size`` (RFold's)
VC          ``cluster``, ``vc``, ``virtual_cluster``, ``queue``
user        ``user``, ``user_id``
id          ``job_id``, ``jobid``, ``id``
status      ``status``
==========  ===================================================================================

A submit column with a unit, or whose first value is a number, holds **relative times**:
``--origin`` + value x unit (default origin ``timeutil.DEFAULT_ORIGIN``; ``--origin epoch`` for
Unix times), kept to the microsecond. Otherwise it holds wall-clock datetimes, read in
``--timezone`` (also to the microsecond). Without an id column a job is ``<file stem>-<line>``.
Each job gets one attempt with its duration and no start (the data has none), so queueing delay
is unknown until replayed. Gavel's traces are in ``gavel.py``.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pyarrow as pa

from philly_analyze.bounds import DURATION_S, JOB_GPUS, RELATIVE_S, TIME, OutOfRange, excerpt
from philly_analyze.errors import InputFormatError
from philly_analyze.ingest.formats import (
    Format,
    IngestContext,
    SourceResult,
    csv_fields,
    first_line,
    register,
)
from philly_analyze.ingest.source import Source
from philly_analyze.schemas import UTC_TS
from philly_analyze.store import Batch
from philly_analyze.timeutil import DEFAULT_ORIGIN, localize_naive

COLUMNS: dict[str, tuple[str, ...]] = {
    "submit": (
        "timestamp",
        "submit_time",
        "submitted_time",
        "submit",
        "submission_time",
        "arrival_time",
        "arrival",
    ),
    "duration": ("duration", "run_time", "runtime"),
    "gpus": ("num_gpus", "gpus", "num_gpu", "gpu_num", "gpu", "size"),
    "vc": ("cluster", "vc", "virtual_cluster", "queue"),
    "user": ("user", "user_id"),
    "job_id": ("job_id", "jobid", "id"),
    "status": ("status",),
}
REQUIRED = ("submit", "duration", "gpus")
#: Seconds per unit of a column name's unit suffix.
UNITS: dict[str, float] = {
    **dict.fromkeys(("s", "sec", "secs", "second", "seconds"), 1.0),
    "ms": 0.001,
    **dict.fromkeys(("min", "mins", "minute", "minutes"), 60.0),
    **dict.fromkeys(("h", "hr", "hrs", "hour", "hours"), 3600.0),
}
STATUS_MAP = {
    "pass": "passed",
    "passed": "passed",
    "killed": "killed",
    "failed": "unsuccessful",
    "unsuccessful": "unsuccessful",
}
LAST_OUTCOME = {"passed": "passed", "killed": "killed", "unsuccessful": "failed"}
#: Relative submit times at least this large look like Unix times (2001 onwards).
UNIX_LIKE_S = 1e9
#: More GPUs than this for one job is not a real job (and overflows the store's int32).
MAX_GPUS = int(JOB_GPUS.hi)
_BRACKETED_UNIT = re.compile(r"\s*[(\[]\s*([a-z]+)\s*[)\]]$")


@dataclass(frozen=True)
class Column:
    """A recognised column: its index and the seconds per unit its name states (None: none)."""

    index: int
    unit: float | None


def _name_and_unit(header_cell: str) -> tuple[str, float | None]:
    """Normalised column name and the unit its name states."""
    name = header_cell.strip().lower().lstrip("#").strip()
    unit: float | None = None
    m = _BRACKETED_UNIT.search(name)
    if m and m[1] in UNITS:
        unit, name = UNITS[m[1]], name[: m.start()]
    name = re.sub(r"[\s\-]+", "_", name.strip())
    if unit is None and "_" in name:
        base, _, suffix = name.rpartition("_")
        if suffix in UNITS and not any(name in names for names in COLUMNS.values()):
            unit, name = UNITS[suffix], base
    return name, unit


def header_map(line: str) -> dict[str, Column] | None:
    """The recognised columns of a header line, or None if it lacks a required one (or is
    not a CSV line)."""
    try:
        cells = [_name_and_unit(f) for f in csv_fields(line)]
    except ValueError:
        return None
    found: dict[str, Column] = {}
    for key, names in COLUMNS.items():
        for i, (name, unit) in enumerate(cells):
            if name in names:
                found[key] = Column(i, unit)
                break
    return found if all(k in found for k in REQUIRED) else None


def stem_of(name: str) -> str:
    """A source's file name without extensions (archive members: the member's)."""
    base = Path(name.split("!")[-1]).name
    return base.split(".")[0] or base


def write_jobs(
    batch: Batch,
    fmt: str,
    ids: Sequence[str],
    submit_utc: np.ndarray,
    vc: Sequence[str | None],
    user: Sequence[str | None],
    status: Sequence[str | None],
    gpus: Sequence[int],
    dur: Sequence[float | None],
    flags: Sequence[list[str] | None] | None = None,
) -> dict[str, int]:
    """One job with one attempt (its duration, no start) per list element."""
    ts = pa.array(submit_utc.astype("datetime64[us]"), pa.timestamp("us")).cast(UTC_TS)
    n = len(ids)
    # One run per job: its attempts (and so its retries) are not recorded.
    job_flags = [["attempts_unknown", *(f or [])] for f in (flags or [None] * n)]
    jobs = {
        "job_id": ids,
        "vc": pa.array(vc, pa.string()),
        "user_id": pa.array(user, pa.string()),
        "status": pa.array(status, pa.string()),
        "submit_time": ts,
        "num_gpus": pa.array(gpus, pa.int32()),
        "flags": pa.array(job_flags, pa.list_(pa.string())),
        "source": [fmt] * n,
    }
    return {
        "jobs": batch.write("jobs", jobs),
        "attempts": batch.write(
            "attempts",
            {
                "job_id": ids,
                "attempt_idx": pa.array(np.zeros(n, np.int32)),
                "num_gpus": pa.array(gpus, pa.int32()),
                "duration_s": pa.array(dur, pa.float64()),
                "outcome": pa.array([LAST_OUTCOME.get(s or "") for s in status], pa.string()),
                "source": [fmt] * n,
            },
        ),
    }


@register
class JobListCsv(Format):
    name = "job_list_csv"
    description = (
        "job list CSV (submit time, duration, GPUs[, VC, user, id]), e.g. Pollux's philly.csv"
    )

    def sniff(self, name: str, head: bytes) -> bool:
        line = first_line(head)
        return "," in line and header_map(line) is not None

    def session(self, batch: Batch, ctx: IngestContext) -> _CsvSession:
        return _CsvSession(batch, ctx)


def _number(text: str) -> float | None:
    try:
        v = float(text)
    except ValueError:
        return None
    return v if math.isfinite(v) else None


@dataclass
class _Rows:
    """The columns of one job list, as read."""

    ids: list[str] = field(default_factory=list)
    submit: list[str | float] = field(default_factory=list)
    vc: list[str | None] = field(default_factory=list)
    user: list[str | None] = field(default_factory=list)
    status: list[str | None] = field(default_factory=list)
    gpus: list[int] = field(default_factory=list)
    dur: list[float | None] = field(default_factory=list)


@dataclass
class _CsvSession:
    batch: Batch
    ctx: IngestContext

    def feed(self, source: Source) -> SourceResult:
        cols: dict[str, Column] | None = None
        header: list[str] = []
        relative: bool | None = None
        rows = _Rows()
        rejected = 0
        stem = stem_of(source.name)
        for line_no, line in source.text_lines(self.ctx.tracker):
            if cols is None:
                cols = header_map(line)
                if cols is None:
                    raise InputFormatError(
                        "header names no submit time, duration and GPU columns",
                        source=source.name,
                        line=line_no,
                    )
                header = csv_fields(line)
                continue
            if not line.strip():
                continue
            try:
                row = csv_fields(line)
            except ValueError as e:
                row, problem = [], str(e)
            else:
                if relative is None:
                    relative = _is_relative(cols["submit"], row)
                problem = self._add(rows, cols, row, relative, f"{stem}-{line_no}")
            if problem:
                self.batch.reject(source.name, line_no, f"bad row: {problem}", line)
                rejected += 1
        if cols is None:
            return SourceResult({}, rejected, "")
        submit_utc = self._submit_times(rows.submit, relative, cols["submit"])
        if relative:
            self._note_origin(source.name, header[cols["submit"].index], rows.submit)
        out = write_jobs(
            self.batch,
            JobListCsv.name,
            rows.ids,
            submit_utc,
            rows.vc,
            rows.user,
            rows.status,
            rows.gpus,
            rows.dur,
        )
        return SourceResult(out, rejected, "jobs: vc, user_id, submit_time, num_gpus; attempts")

    def _add(
        self, rows: _Rows, cols: dict[str, Column], row: list[str], relative: bool, key: str
    ) -> str:
        """Append one data row; the reason it is bad otherwise."""

        def cell(name: str) -> str | None:
            c = cols.get(name)
            v = row[c.index].strip() if c is not None and c.index < len(row) else ""
            return v or None

        submit = cell("submit") or ""
        try:
            t = self._submit(submit, relative, cols["submit"])
            gpus = _number(cell("gpus") or "")
            if gpus is None or gpus != int(gpus):
                raise ValueError(f"GPUs {excerpt(cell('gpus') or '')} is not a whole number")
            JOB_GPUS.check(gpus, cell("gpus"))
            d = _number(cell("duration") or "")
            if d is None:
                raise ValueError(f"duration {excerpt(cell('duration') or '')} is not a number")
            d = DURATION_S.check(d * (cols["duration"].unit or 1.0), cell("duration"))
        except ValueError as e:
            return str(e)
        rows.ids.append(cell("job_id") or key)
        rows.submit.append(t)
        rows.vc.append(cell("vc"))
        rows.user.append(cell("user"))
        s = cell("status")
        rows.status.append(STATUS_MAP.get(s.lower()) if s else None)
        rows.gpus.append(int(gpus))
        rows.dur.append(d)
        return ""

    def _submit(self, text: str, relative: bool, col: Column) -> str | float:
        """A row's submit time as kept until conversion (seconds, or ISO text); ``ValueError``
        with the reason when it is not one or lies outside ``bounds.TIME``."""
        if not relative:
            # ISO-like date and time as numpy parses it (``T`` separator), parsed once here.
            t = text.replace(" ", "T", 1)
            try:
                when, _ = _as_datetime64(t)
            except (ValueError, OverflowError):
                when = np.datetime64("NaT", "us")
            if np.isnat(when):
                raise ValueError(f"submit time {excerpt(text)} is not a date and time")
            if not TIME.mask(np.array([when]))[0]:
                raise OutOfRange(f"submit {TIME.reason(text)}")
            return t
        v = _number(text)
        if v is None:
            raise ValueError(f"submit time {excerpt(text)} is not a number of seconds")
        try:
            secs = RELATIVE_S.check(v * (col.unit or 1.0), text)
        except OutOfRange as e:
            raise OutOfRange(f"submit time: {e}") from None
        origin = self.ctx.origin.timestamp() * 1e6
        if not TIME.ok_us(origin + secs * 1e6):
            raise OutOfRange(f"submit {TIME.reason(text)} (counted from --origin)")
        return secs

    def _submit_times(self, submit: list, relative: bool | None, col: Column) -> np.ndarray:
        if relative:
            origin = np.datetime64(self.ctx.origin.replace(tzinfo=None), "us")
            us = np.round(np.asarray(submit, dtype=np.float64) * 1e6)
            return origin + us.astype("timedelta64[us]")
        if not any(_OFFSET.search(t) for t in submit):
            utc, _ = localize_naive(np.array(submit, dtype="datetime64[us]"), self.ctx.timezone)
            return utc
        # Times that name their offset are instants; only the others are in --timezone.
        parsed = [_as_datetime64(t) for t in submit]
        values = np.array([v for v, _ in parsed], dtype="datetime64[us]")
        named = np.array([n for _, n in parsed], dtype=bool)
        utc, _ = localize_naive(values, self.ctx.timezone)
        return np.where(named, values, utc)

    def _note_origin(self, name: str, column: str, submit: list) -> None:
        origin = self.ctx.origin
        hint = ""
        if submit and min(submit) >= UNIX_LIKE_S and origin == DEFAULT_ORIGIN:
            hint = "; they look like Unix times: use --origin epoch"
        self.ctx.note(
            f"job_list_csv: {Path(name.rsplit('!', 1)[-1]).name}: {column.strip()!r} counted "
            f"from {origin.isoformat()} (--origin){hint}"
        )

    def finish(self) -> dict[str, int]:
        return {}


def _is_relative(col: Column, first_row: list[str]) -> bool:
    """Whether a list's submit column holds relative seconds: its name states a unit, or its
    first value is a number."""
    if col.unit is not None:
        return True
    return col.index < len(first_row) and _number(first_row[col.index].strip()) is not None


#: A UTC offset (``Z``, ``+05:00``, ``-0700``) after the time of an ISO date and time.
_OFFSET = re.compile(r"T\d{2}:\d{2}(?::\d{2}(?:[.,]\d+)?)?(?:Z|[+-]\d{2}:?\d{2})$")


def _as_datetime64(t: str) -> tuple[np.datetime64, bool]:
    """An ISO date and time (``T`` separator) as ``datetime64[us]``, and whether it named its
    UTC offset: then the value is the UTC instant, else the wall-clock time as written.
    numpy alone would convert an offset to UTC with a warning, and the list's ``--timezone``
    would then be applied on top (09:01 UTC for ``07:01+05:00``, which is 02:01 UTC).
    ``ValueError`` or ``OverflowError`` when it is not one."""
    if _OFFSET.search(t):
        utc = datetime.fromisoformat(t).astimezone(UTC).replace(tzinfo=None)
        return np.datetime64(utc, "us"), True
    return np.datetime64(t, "us"), False
