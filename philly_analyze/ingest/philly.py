"""The five files of the published Philly trace (msr-fiddle/philly-traces).

- ``cluster_machine_list``: CSV with a space after every comma (``m0,2, 12GB``).
- ``cluster_job_log``: one JSON array of ~117k jobs (1+ GB). Streamed object by object with
  ``json.JSONDecoder.raw_decode`` over a sliding buffer: never loaded whole.
- ``cluster_gpu_util``, ``cluster_cpu_util``, ``cluster_mem_util``: per-minute CSVs with
  ``PDT``/``PST`` time suffixes, ``NA`` for offline, and (gpu) a trailing comma on every data
  row. Read by DuckDB with declared columns (see ``csvcopy``).

Job-log quirks handled: attempts missing, ``null`` or empty; attempt times ``"None"``, ``null``
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

from philly_analyze import schemas
from philly_analyze.bounds import GPU_INDEX, GPU_MEM_GB, MACHINE_GPUS, TIME, excerpt, json_int
from philly_analyze.errors import InputFormatError
from philly_analyze.ingest.csvcopy import CsvSpec, copy_csv, header_fields
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
from philly_analyze.store import Batch, connect, sql_literal
from philly_analyze.timeutil import fold_offset, localize_naive

STATUS_MAP = {"Pass": "passed", "Killed": "killed", "Failed": "unsuccessful"}
#: Outcome of a job's last attempt, by job status (earlier attempts failed and were retried).
LAST_OUTCOME = {"passed": "passed", "killed": "killed", "unsuccessful": "failed"}
_TIME_RE = re.compile(r"^\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}$")
_GPU_RE = re.compile(r"gpu(\d+)")
_MISSING_TIMES = (None, "", "None", "none", "null", "NULL")
CHUNK_JOBS = 20_000
READ_CHARS = 4 << 20
MAX_OBJECT_CHARS = 256 << 20


# --------------------------------------------------------------------------- machine list
@register
class PhillyMachineList(Format):
    name = "philly_machine_list"
    description = "Philly cluster_machine_list (CSV: machineId, number of GPUs, single GPU mem)"

    def sniff(self, name: str, head: bytes) -> bool:
        fields = [f.strip().lower() for f in first_line(head).split(",")]
        return fields[:2] == ["machineid", "number of gpus"]

    def session(self, batch: Batch, ctx: IngestContext) -> _MachineListSession:
        return _MachineListSession(batch, ctx)


@dataclass
class _MachineListSession:
    batch: Batch
    ctx: IngestContext

    def feed(self, source: Source) -> SourceResult:
        ids: list[str] = []
        gpus: list[int] = []
        mem: list[float | None] = []
        rejected = 0
        for line_no, line in source.text_lines(self.ctx.tracker):
            if line_no == 1 or not line.strip():
                continue
            try:
                row = [c.strip() for c in csv_fields(line, skipinitialspace=True)]
                if len(row) != 3:
                    raise ValueError(f"expected 3 fields, found {len(row)}")
                mid, n_text, m = row
                if not mid:
                    raise ValueError("empty machine id")
                count = MACHINE_GPUS.int_of(n_text)
                mem_gb = None
                if m:
                    mem_gb = GPU_MEM_GB.check(float(m.upper().removesuffix("GB")), shown=m)
            except ValueError as e:
                self.batch.reject(source.name, line_no, str(e), line)
                rejected += 1
                continue
            ids.append(mid)
            gpus.append(count)
            mem.append(mem_gb)
        n = self.batch.write(
            "machines",
            {
                "machine_id": ids,
                "listed_num_gpus": pa.array(gpus, pa.int16()),
                "gpu_mem_gb": pa.array(mem, pa.float32()),
                "source": [PhillyMachineList.name] * len(ids),
            },
        )
        return SourceResult({"machines": n}, rejected, "machines: listed_num_gpus, gpu_mem_gb")

    def finish(self) -> dict[str, int]:
        return {}


# --------------------------------------------------------------------------- job log
@register
class PhillyJobLog(Format):
    name = "philly_job_log"
    description = "Philly cluster_job_log (JSON array of jobs with attempts and placements)"

    def sniff(self, name: str, head: bytes) -> bool:
        text = head[:4096].decode("utf-8", "replace").lstrip()
        return text.startswith("[") and ('"jobid"' in text or '"submitted_time"' in text)

    def session(self, batch: Batch, ctx: IngestContext) -> _JobLogSession:
        return _JobLogSession(batch, ctx)


def iter_json_array(source: Source, ctx: IngestContext) -> Iterator[tuple[int, Any]]:
    """(line number, value) for each element of a top-level JSON array, streamed.

    Raises ``InputFormatError`` with the line of the problem for a missing ``[``, a syntax
    error or a truncated array (elements before it have been yielded already)."""
    decoder = json.JSONDecoder(parse_int=json_int)
    with source.open(ctx.tracker) as raw:
        text = io.TextIOWrapper(raw, encoding="utf-8", errors="replace")
        buf = ""
        pos = 0
        line = 1
        eof = False
        started = False

        def fill() -> bool:
            nonlocal buf, pos, eof
            if eof:
                return False
            chunk = text.read(READ_CHARS)
            if not chunk:
                eof = True
                return False
            buf = buf[pos:] + chunk
            pos = 0
            return True

        def skip_ws(extra: str = "") -> None:
            nonlocal pos, line
            while True:
                while pos < len(buf) and (buf[pos].isspace() or buf[pos] in extra):
                    if buf[pos] == "\n":
                        line += 1
                    pos += 1
                if pos < len(buf) or not fill():
                    return

        fill()
        skip_ws()
        if pos >= len(buf) or buf[pos] != "[":
            found = "end of file" if pos >= len(buf) else repr(buf[pos : pos + 20])
            raise InputFormatError(
                f"expected a JSON array '[', found {found}", source=source.name, line=line
            )
        pos += 1
        started = True
        while started:
            skip_ws(",")
            if pos >= len(buf):
                raise InputFormatError(
                    "truncated JSON array (no closing ']')", source=source.name, line=line
                )
            if buf[pos] == "]":
                return
            while True:
                try:
                    value, end = decoder.raw_decode(buf, pos)
                    break
                except RecursionError:
                    raise InputFormatError(
                        "JSON nested too deeply", source=source.name, line=line
                    ) from None
                except json.JSONDecodeError as e:
                    # Incomplete element at the end of the buffer: read more and retry.
                    if len(buf) - pos > MAX_OBJECT_CHARS or not fill():
                        err_line = line + buf.count("\n", pos, e.pos)
                        what = "truncated JSON" if eof and e.pos >= len(buf) - 1 else "invalid JSON"
                        raise InputFormatError(
                            f"{what}: {e.msg}", source=source.name, line=err_line
                        ) from None
            yield line, value
            line += buf.count("\n", pos, end)
            pos = end


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
    pass


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
class _JobLogSession:
    batch: Batch
    ctx: IngestContext
    rows: dict[str, int] = field(default_factory=dict)

    def feed(self, source: Source) -> SourceResult:
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
        return {}

    def _add_job(self, chunk: _JobChunk, obj: Any) -> None:
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
        seq: list[int] = []
        times_start = len(chunk.times)
        submit = _time_or_none(obj.get("submitted_time"), "submitted_time")
        chunk.times.append(submit)
        seq.append(times_start)
        if submit is None:
            flags.append("no_submit")
        attempts = obj.get("attempts") or []
        if not isinstance(attempts, list):
            raise _BadJob("attempts is not a list")
        if not attempts:
            flags.append("no_attempts")
        att_rows: list[tuple[Any, ...]] = []
        pl_att: list[int] = []
        pl_machine: list[str] = []
        pl_gpu: list[int | None] = []
        for i, att in enumerate(attempts):
            if not isinstance(att, dict):
                raise _BadJob(f"attempt {i} is not an object")
            start = _time_or_none(att.get("start_time"), f"attempts[{i}].start_time")
            end = _time_or_none(att.get("end_time"), f"attempts[{i}].end_time")
            si = len(chunk.times)
            chunk.times.extend([start, end])
            seq.extend([si, si + 1])
            detail = att.get("detail") or []
            if not isinstance(detail, list):
                raise _BadJob(f"attempts[{i}].detail is not a list")
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
                    pl_att.append(i)
                    pl_machine.append(ip)
                    pl_gpu.append(_gpu_index(g, f"attempts[{i}].detail"))
            last = i == len(attempts) - 1
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
            att_rows.append((job_id, i, si, si + 1, n_gpus or None, len(detail), outcome))
        # Only now, with the whole job valid, append its rows.
        chunk.jobs["job_id"].append(job_id)
        chunk.jobs["vc"].append(_str_or_none(obj.get("vc")))
        chunk.jobs["user_id"].append(_str_or_none(obj.get("user")))
        chunk.jobs["status"].append(status)
        chunk.jobs["submit_idx"].append(times_start)
        chunk.jobs["flags"].append(flags or None)
        for r in att_rows:
            for k, v in zip(_ATT_KEYS, r, strict=True):
                chunk.attempts[k].append(v)
        pl = chunk.placements
        pl["job_id"].extend([job_id] * len(pl_att))
        pl["attempt_idx"].extend(pl_att)
        pl["machine_id"].extend(pl_machine)
        pl["gpu_idx"].extend(pl_gpu)
        chunk.sequences.append(seq)

    def _flush(self, chunk: _JobChunk, source: Source) -> int:
        if not len(chunk):
            return 0
        utc = self._convert_times(chunk)
        ts = pa.array(utc, type=pa.timestamp("us")).cast(UTC_TS)
        j = chunk.jobs
        src = [PhillyJobLog.name]
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
        a = chunk.attempts
        start = ts.take(pa.array(a["start_idx"], pa.int64()))
        end = ts.take(pa.array(a["end_idx"], pa.int64()))
        delta = utc[a["end_idx"]] - utc[a["start_idx"]]
        dur = np.where(
            np.isnat(delta), np.nan, delta.astype("timedelta64[us]").astype(np.int64) / 1e6
        )
        self._count(
            "attempts",
            self.batch.write(
                "attempts",
                {
                    "job_id": a["job_id"],
                    "attempt_idx": pa.array(a["attempt_idx"], pa.int32()),
                    "start_time": start,
                    "end_time": end,
                    "num_gpus": pa.array(a["num_gpus"], pa.int32()),
                    "num_machines": pa.array(a["num_machines"], pa.int32()),
                    "duration_s": pa.array(dur, from_pandas=True),
                    "outcome": a["outcome"],
                    "source": src * len(a["job_id"]),
                },
            ),
        )
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


def _str_or_none(v: Any) -> str | None:
    if v is None:
        return None
    return str(v)


# --------------------------------------------------------------------------- util CSVs
def _csv_columns(head: bytes, names: list[str], types: list[str]) -> list[tuple[str, str]]:
    """Declared columns; one extra empty column when data rows end with a comma."""
    _, nfields = header_fields(head)
    cols = list(zip(names, types, strict=True))
    if nfields is not None and nfields == len(names) + 1:
        cols.append(("__trailing", "VARCHAR"))
    return cols


@dataclass
class _CsvSession:
    batch: Batch
    ctx: IngestContext
    fmt: type[_PhillyCsv]

    def feed(self, source: Source) -> SourceResult:
        try:
            spec = self.fmt.spec(source.head)
        except InputFormatError as e:
            raise InputFormatError(e.message, source=source.name, line=e.line) from None
        written, rejected = copy_csv(
            source,
            self.batch,
            spec,
            timezone=self.ctx.timezone,
            tracker=self.ctx.tracker,
            memory_limit=self.ctx.memory_limit,
        )
        table = schemas.logical_table(spec.table)
        rows = {table: written}
        if table == "gpu_util":
            rows["machine_observations"] = self._observe(spec.table)
        return SourceResult(rows, rejected, table)

    def _observe(self, table: str) -> int:
        """Per machine, how many GPUs carried data (for machines.observed_num_gpus), from the
        staged files of ``table`` (gpu_util, or its wide form)."""
        files = sorted((self.batch.staging / table).rglob("*.parquet"))
        if not files:
            return 0
        lst = ", ".join(sql_literal(str(f)) for f in files)
        if table == "gpu_util":
            gpus = "max(gpu_idx) + 1"
        else:
            # Plain per-column counts: a CASE per value per row cost 3x as much.
            gpus = "greatest({})".format(
                ", ".join(
                    f"CASE WHEN count({g}) > 0 THEN {i + 1} END"
                    for i, g in enumerate(schemas.wide_value_columns(schemas.TABLES[table]))
                )
            )
        con = connect()
        try:
            tbl = con.sql(
                f"SELECT machine_id, n::SMALLINT AS observed_num_gpus, first_seen, last_seen, "
                f"{sql_literal(self.fmt.name)} AS source FROM ("
                f"SELECT machine_id, {gpus} AS n, min(time) AS first_seen, "
                f"max(time) AS last_seen FROM read_parquet([{lst}]) GROUP BY machine_id) "
                f"WHERE n IS NOT NULL"
            ).to_arrow_table()
        finally:
            con.close()
        return self.batch.write("machine_observations", tbl)

    def finish(self) -> dict[str, int]:
        return {}


class _PhillyCsv(Format):
    header: tuple[str, ...] = ()

    def sniff(self, name: str, head: bytes) -> bool:
        fields = [f.strip() for f in first_line(head).split(",")]
        return tuple(fields[: len(self.header)]) == self.header

    def session(self, batch: Batch, ctx: IngestContext) -> _CsvSession:
        return _CsvSession(batch, ctx, type(self))

    @classmethod
    def spec(cls, head: bytes) -> CsvSpec:
        raise NotImplementedError


@register
class PhillyGpuUtil(_PhillyCsv):
    name = "philly_gpu_util"
    description = "Philly cluster_gpu_util (per-minute gpu0..gpu7 utilization per machine)"
    header = ("time", "machineId", "gpu0_util")

    @classmethod
    def spec(cls, head: bytes) -> CsvSpec:
        names, _ = header_fields(head)
        gpus = [n for n in names if re.fullmatch(r"gpu\d+_util", n)]
        if len(gpus) != len(names) - 2 or len(set(gpus)) != len(gpus):
            why = "unexpected" if len(set(gpus)) == len(gpus) else "a column repeated in the"
            raise InputFormatError(f"{why} header {excerpt(','.join(names))}", line=1)
        cols = _csv_columns(
            head, ["time", "machine_id", *gpus], ["VARCHAR"] * 2 + ["FLOAT"] * len(gpus)
        )
        wide = schemas.wide_value_columns(schemas.GPU_UTIL_WIDE)
        if set(gpus) <= set(wide):
            # Rows as they come, one per machine-minute (the gpu_util view unpivots them):
            # writing 4-5 long rows per line instead took twice DuckDB's CSV-to-Parquet time.
            # NaN becomes NULL so that the footer's null counts count the values.
            values = ", ".join(
                f"CASE WHEN isnan({g}) THEN NULL ELSE {g} END AS {g}"
                if g in gpus
                else f"NULL AS {g}"
                for g in wide
            )
            select = f"SELECT __utc AS time, machine_id, {values}, __month FROM parsed"
            return CsvSpec(cols, select, schemas.GPU_UTIL_WIDE.name)
        # More GPU columns than the wide table holds: unpivot here (column position = index).
        util_list = ", ".join(gpus)
        select = (
            f"SELECT __utc AS time, machine_id, (g - 1)::SMALLINT AS gpu_idx, u[g] AS util, "
            f"__month FROM (SELECT __utc, __month, machine_id, [{util_list}] AS u FROM parsed), "
            f"range(1, {len(gpus) + 1}) AS r(g) WHERE u[g] IS NOT NULL AND NOT isnan(u[g])"
        )
        return CsvSpec(cols, select, "gpu_util")


@register
class PhillyCpuUtil(_PhillyCsv):
    name = "philly_cpu_util"
    description = "Philly cluster_cpu_util (per-minute CPU utilization per machine)"
    header = ("time", "machine_id", "cpu_util")

    @classmethod
    def spec(cls, head: bytes) -> CsvSpec:
        cols = _csv_columns(
            head, ["time", "machine_id", "cpu_util"], ["VARCHAR", "VARCHAR", "FLOAT"]
        )
        select = (
            "SELECT __utc AS time, machine_id, cpu_util AS util, __month FROM parsed "
            "WHERE cpu_util IS NOT NULL AND NOT isnan(cpu_util)"
        )
        return CsvSpec(cols, select, "cpu_util")


@register
class PhillyMemUtil(_PhillyCsv):
    name = "philly_mem_util"
    description = "Philly cluster_mem_util (per-minute mem_total, mem_free per machine)"
    header = ("time", "machine_id", "mem_total", "mem_free")

    @classmethod
    def spec(cls, head: bytes) -> CsvSpec:
        cols = _csv_columns(
            head,
            ["time", "machine_id", "mem_total", "mem_free"],
            ["VARCHAR", "VARCHAR", "DOUBLE", "DOUBLE"],
        )
        # mem_total == 0 rows carry no information (formats.md): skipped.
        select = (
            "SELECT __utc AS time, machine_id, mem_total, mem_free, __month FROM parsed "
            "WHERE mem_total IS NOT NULL AND mem_total > 0 AND mem_free IS NOT NULL"
        )
        return CsvSpec(cols, select, "mem_util")
