"""YARN ResourceManager logs -> jobs, attempts, placements, scheduler_events (formats.md §2).

All RM log files of one ``ingest`` call form one group (``grouped = True``): rolled files
(``yarn-*-resourcemanager-*.log``, ``.log.1``, ``.log.2.gz``) arrive in any order and an
application's lines may span files. Each file is streamed line by line; the lines that carry
application state become *facts* (the commonest kinds by one regex each, ``yarn_fast.py``; the
rest by ``yarn_lines.py``), buffered in chunks, their times converted
to UTC and written to Parquet in the batch's staging folder. ``finish()`` assembles jobs,
attempts, placements and the scheduler events from all facts in DuckDB (``yarn_assemble.py``),
so memory stays bounded whatever the size of the logs.

Times: log4j wall-clock times carry no zone and are read in ``--timezone`` (default
America/Los_Angeles, ``timeutil``); the repeated fall-back hour is read as its first occurrence
unless the log would then go back in time by more than 30 minutes, in which case it is the
second. The Microsoft record wrapper's ``TS`` and ApplicationSummary epoch milliseconds are
exact. When summary epochs disagree with the wall clock read in the given zone, a note says
which zone the log was probably written in.

Other Hadoop logs (a MapReduce ApplicationMaster's, a NodeManager's, HDFS daemons') are
recognised by ``HadoopOtherLog`` and skipped with a message saying what they are.
"""

from __future__ import annotations

import operator
import re
import tempfile
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import cast
from zoneinfo import ZoneInfo

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from philly_analyze.bounds import TIME, excerpt
from philly_analyze.errors import InputFormatError
from philly_analyze.ingest import memory
from philly_analyze.ingest import yarn_assemble as asm
from philly_analyze.ingest.formats import Format, IngestContext, SkipSource, SourceResult, register
from philly_analyze.ingest.source import READ_FAILURES, Source
from philly_analyze.ingest.yarn_fast import fast_item
from philly_analyze.ingest.yarn_lines import (
    FACT_FIELDS,
    HEADER_RE,
    TS_LIKE_RE,
    WRAPPED_RE,
    Fact,
    Malformed,
    has_key_phrase,
    parse_message,
    split_record,
)
from philly_analyze.schemas import UTC_TS
from philly_analyze.store import Batch, connect, sql_literal
from philly_analyze.timeutil import fold_offset, localize_naive

CHUNK_FACTS = 20_000
#: A wall-clock time this much before the file's latest is the fall-back hour's second pass.
FOLD_BACKSTEP = np.timedelta64(30 * 60 * 1_000_000, "us")
_FIELDS_OF = operator.attrgetter(*FACT_FIELDS)
#: Logger classes of the ResourceManager (the logger token right after the level).
_RM_CLASSES = re.compile(
    r"(?:^|\.)(?:RMAppImpl|RMAppAttemptImpl|RMContainerImpl|RMAuditLogger|ClientRMService|"
    r"CapacityScheduler|FairScheduler|FifoScheduler|SchedulerNode|FiCaSchedulerNode|"
    r"FSSchedulerNode|RMAppManager(?:\$ApplicationSummary)?|ResourceManager|RMStateStore|"
    r"ApplicationMasterService|LeafQueue|ParentQueue|ResourceTrackerService|RMNodeImpl|"
    r"AbstractYarnScheduler|NodesListManager|ZKRMStateStore|FileSystemRMStateStore)(?:[:$]|$)"
)
_THREAD = re.compile(r"^\[[^\]]*\]\s*")
_HADOOP_LOGGER = re.compile(r"^org\.apache\.hadoop\.|^[a-z]\w*\.[A-Z]\w*(?:\$\w+)?:?$")
#: Other Hadoop daemons: (marker in the head, what to call the log).
_OTHER_HADOOP = (
    ("MRAppMaster", "a MapReduce ApplicationMaster log (MRAppMaster)"),
    ("mapreduce.v2.app", "a MapReduce ApplicationMaster log (MRAppMaster)"),
    ("nodemanager", "a YARN NodeManager log"),
    ("hdfs.server.namenode", "an HDFS NameNode log"),
    ("hdfs.server.datanode", "an HDFS DataNode log"),
    ("jobhistory", "a MapReduce JobHistory server log"),
)


def _logger(rest: str) -> str:
    """The logger token of a record (after an optional ``[thread]``)."""
    return _THREAD.sub("", rest, count=1).split(" ", 1)[0]


def _head_records(head: bytes, limit: int = 400) -> list[str]:
    """The first log4j records of a head (after the level), unwrapping the Microsoft record."""
    out = []
    for line in head.decode("utf-8", "replace").splitlines()[:limit]:
        if 'String1="' in line:
            w = WRAPPED_RE.match(line)
            if w:
                line = w.group("inner")
        m = HEADER_RE.match(line)
        if m:
            out.append(m.group("rest"))
    return out


def _is_rm(records: list[str], head: bytes) -> bool:
    return any(_RM_CLASSES.search(_logger(r)) for r in records) or (
        b"Starting ResourceManager" in head
    )


@register
class YarnRmLog(Format):
    name = "yarn_rm_log"
    description = "YARN ResourceManager log (log4j; plain, rolled .log.N, .gz)"
    grouped = True

    def sniff(self, name: str, head: bytes) -> bool:
        records = _head_records(head)
        if _is_rm(records, head):
            return True
        # A head made of the startup banner alone: fall back on the file name.
        return "resourcemanager" in Path(name).name.lower() and b"STARTUP_MSG" in head

    def session(self, batch: Batch, ctx: IngestContext) -> _YarnSession:
        return _YarnSession(batch, ctx)


@register
class HadoopOtherLog(Format):
    name = "hadoop_log"
    description = "Other Hadoop daemon logs (ApplicationMaster, NodeManager, HDFS): skipped"

    def sniff(self, name: str, head: bytes) -> bool:
        records = _head_records(head)
        lines = [ln for ln in head.decode("utf-8", "replace").splitlines()[:400] if ln.strip()]
        if not records or len(records) < 0.5 * len(lines):
            return False
        hadoop = sum(1 for r in records if _HADOOP_LOGGER.search(_logger(r)))
        return hadoop >= 0.8 * len(records)

    def session(self, batch: Batch, ctx: IngestContext) -> _SkipSession:
        return _SkipSession()


class _SkipSession:
    def feed(self, source: Source) -> SourceResult:
        head = source.head.decode("utf-8", "replace")
        what = next(
            (desc for marker, desc in _OTHER_HADOOP if marker.lower() in head.lower()),
            "a Hadoop daemon log",
        )
        raise SkipSource(
            f"{what}, not a YARN ResourceManager log: it holds no scheduler state "
            "transitions (ingest the ResourceManager's yarn-*-resourcemanager-*.log files)"
        )

    def finish(self) -> dict[str, int]:
        return {}


@dataclass
class _Chunk:
    """Facts of up to CHUNK_FACTS lines, one tuple each: the fact's row (FACT_FIELDS order),
    then its time as text, the exact UTC epoch µs or None, the line number and the line."""

    items: list[tuple[object, ...]] = field(default_factory=list)
    #: The time of the file's last record read (for a banner's continuation line).
    last_time: str = ""
    last_exact: int | None = None


#: Where an item's own columns start (after the fact's row).
_TS, _EXACT, _LINE_NO, _RAW = range(len(FACT_FIELDS), len(FACT_FIELDS) + 4)


def _fact_type(name: str) -> pa.DataType:
    if name in ("attempt", "gpus", "node_gpus"):
        return pa.int32()
    if name == "has_cap":
        return pa.bool_()
    if name.startswith("ms"):
        return pa.int64()
    return pa.string()


_FACT_SCHEMA = pa.schema(
    [pa.field(f, _fact_type(f)) for f in FACT_FIELDS]
    + [
        pa.field("t", UTC_TS),
        pa.field("exact", pa.bool_()),
        pa.field("line_no", pa.int64()),
        pa.field("file_idx", pa.int32()),
    ]
)


class _YarnSession:
    def __init__(self, batch: Batch, ctx: IngestContext):
        self.batch = batch
        self.ctx = ctx
        self.dir = Path(tempfile.mkdtemp(prefix="yarn-facts-", dir=batch.staging))
        self.writer: pq.ParquetWriter | None = None
        self.files = 0
        self.kinds: Counter[str] = Counter()
        #: The first source fed, for messages about the whole group.
        self.first = ""

    # ------------------------------------------------------------------ feed
    def feed(self, source: Source) -> SourceResult:
        file_idx = self.files
        self.files += 1
        self.first = self.first or source.name
        self._latest: np.datetime64 | None = None
        kinds: Counter[str] = Counter()
        self._rejected = 0
        chunk = _Chunk()
        line_no = 0
        try:
            for line_no, line in source.text_lines(self.ctx.tracker):
                if "\x00" in line:
                    self._reject(source, line_no, "binary data in a text log", line)
                    continue
                if not has_key_phrase(line):  # most chatter, one substring test
                    continue
                item = fast_item(line, line_no)  # the commonest lines: one regex
                if item is None:
                    if not self._slow_line(chunk, source, line_no, line):
                        continue
                elif isinstance(item, str):  # a record without facts: only its time
                    chunk.last_time, chunk.last_exact = item, None
                    continue
                else:
                    chunk.last_time, chunk.last_exact = cast(str, item[_TS]), None
                    chunk.items.append(item)
                if len(chunk.items) >= CHUNK_FACTS:
                    self._flush(chunk, source, file_idx, kinds)
                    chunk = _Chunk(last_time=chunk.last_time, last_exact=chunk.last_exact)
        except READ_FAILURES as e:
            self._flush(chunk, source, file_idx, kinds)
            self.kinds.update(kinds)
            raise InputFormatError(
                f"cannot read past this line ({(e.__cause__ or e)}); the lines before it were kept",
                source=source.name,
                line=line_no + 1,
            ) from e
        self._flush(chunk, source, file_idx, kinds)
        self.kinds.update(kinds)
        events = sum(kinds[k] for k in ("app", "attempt", "container"))
        return SourceResult({"scheduler_events": events}, self._rejected, _provided(kinds))

    def _slow_line(self, chunk: _Chunk, source: Source, line_no: int, line: str) -> bool:
        """Read one line (with a key phrase, no NUL) the general way (``yarn_lines``): its facts go to ``chunk``, a bad
        line to ``rejects``. Whether a record's facts were added (the chunk may be full)."""
        rec = split_record(line)
        if rec is None:
            if TS_LIKE_RE.match(line) or WRAPPED_RE.match(line):
                self._reject(source, line_no, "unparsable log4j header", line)
            elif "Starting ResourceManager" in line and chunk.last_time:
                # Banner continuation line: the restart happened at the banner's header.
                row = _FIELDS_OF(Fact("rm_start"))
                chunk.items.append((*row, chunk.last_time, chunk.last_exact, line_no, line))
            return False  # (a continuation line never ends a chunk, as before)
        chunk.last_time, chunk.last_exact, rest = rec
        try:
            facts = parse_message(rest)
        except Malformed as e:
            self._reject(source, line_no, str(e), line)
            return False
        for f in facts:
            chunk.items.append((*_FIELDS_OF(f), chunk.last_time, chunk.last_exact, line_no, line))
        return bool(facts)

    def _reject(self, source: Source, line_no: int, why: str, line: str) -> None:
        self.batch.reject(source.name, line_no, why, line)
        self._rejected += 1

    def _flush(self, chunk: _Chunk, source: Source, file_idx: int, kinds: Counter[str]) -> None:
        """Convert the chunk's times, reject the unparsable ones, append to the fact file."""
        if not chunk.items:
            return
        cols = list(zip(*chunk.items, strict=True))  # items to columns, in C
        naive, bad = _parse_times(cols[_TS])
        exact = np.array([e is not None for e in cols[_EXACT]])
        exact_us = np.array([e if e is not None else 0 for e in cols[_EXACT]], dtype=np.int64)
        # A time outside bounds.TIME (year 9999, a FILETIME of 0xFFFF...) is rejected too.
        far = ~bad & np.where(exact, ~TIME.mask_us(exact_us), ~TIME.mask(naive))
        for i in np.flatnonzero(bad | far):
            if not far[i]:
                why = f"unparsable time {excerpt(cols[_TS][i])}"
            else:
                why = TIME.reason(f"{cols[_EXACT][i]} us (TS)" if exact[i] else cols[_TS][i])
            self._reject(source, cols[_LINE_NO][i], why, cols[_RAW][i])
        bad |= far
        naive[bad] = np.datetime64("NaT")
        utc = self._to_utc(naive, exact)
        utc = np.where(exact, exact_us.astype("datetime64[us]"), utc)
        idx = np.flatnonzero(~bad)
        if not len(idx):
            return
        if len(idx) < len(chunk.items):
            cols = list(zip(*(chunk.items[i] for i in idx), strict=True))
        kinds.update(cols[0])
        kinds["gpu_container"] += sum(1 for g in cols[FACT_FIELDS.index("gpus")] if g)
        arrays = [
            pa.array(c, type=_FACT_SCHEMA.field(f).type)
            for f, c in zip(FACT_FIELDS, cols, strict=False)
        ]
        arrays += [
            pa.array(utc[idx], type=pa.timestamp("us")).cast(UTC_TS),
            pa.array(exact[idx]),
            pa.array(cols[_LINE_NO], type=pa.int64()),
            pa.array(np.full(len(idx), file_idx, dtype=np.int32)),
        ]
        table = pa.Table.from_arrays(arrays, schema=_FACT_SCHEMA)
        if self.writer is None:
            self.writer = pq.ParquetWriter(self.dir / "facts.parquet", _FACT_SCHEMA)
        self.writer.write_table(table)

    def _to_utc(self, naive: np.ndarray, exact: np.ndarray) -> np.ndarray:
        """Wall-clock -> UTC in ``--timezone``; the repeated fall-back hour is its second
        occurrence when the first would send the log back in time (file order)."""
        tz = self.ctx.timezone
        utc, ambiguous = localize_naive(naive, tz)
        amb = ambiguous & ~exact
        if amb.any():
            latest = self._latest
            if latest is None:
                self._resolve_file_start(utc, naive, amb, tz)
            for i in range(len(utc)):
                t = utc[i]
                if np.isnat(t):
                    continue
                if amb[i] and latest is not None and t < latest - FOLD_BACKSTEP:
                    t = t + fold_offset(tz, naive[i])
                    utc[i] = t
                latest = t if latest is None or t > latest else latest
            self._latest = latest
        else:
            valid = utc[~np.isnat(utc)]
            if len(valid):
                m = valid.max()
                self._latest = m if self._latest is None or m > self._latest else self._latest
        return utc

    @staticmethod
    def _resolve_file_start(utc: np.ndarray, naive: np.ndarray, amb: np.ndarray, tz: str) -> None:
        """A file (a rolled log) that begins inside the repeated hour has no earlier line to
        say which occurrence it is. Read as the first occurrence, its run of ambiguous lines
        would be followed by a jump of about an hour to the next unambiguous time; read as the
        second, by the usual small step. Take the second when the first leaves such a gap
        and the run never goes back in time itself (which would mean both occurrences)."""
        valid = np.flatnonzero(~np.isnat(utc))
        if not len(valid) or not amb[valid[0]]:
            return
        after = valid[~amb[valid]]
        if not len(after):
            return  # the whole chunk is ambiguous: nothing to tell by
        run = valid[valid < after[0]]
        if (np.diff(naive[run]) < -FOLD_BACKSTEP).any():
            return  # the run itself holds both occurrences: the loop resolves them in order
        if utc[after[0]] - utc[run[-1]] >= FOLD_BACKSTEP:
            utc[run] = utc[run] + fold_offset(tz, naive[run[0]])

    # ------------------------------------------------------------------ finish
    def finish(self) -> dict[str, int]:
        if self.writer is None:
            return {}
        self.writer.close()
        # A database file, not memory: its tables can leave memory when the limit is reached.
        con = connect(str(self.dir / "assemble.duckdb"))  # Ctrl-C interrupts it
        limit = self.ctx.memory_limit
        try:
            memory.configure(con, limit, self.dir / "spill")
            return self._assemble(con)
        except duckdb.OutOfMemoryException as e:
            more = f" (and the {self.files - 1:,} other RM logs)" * (self.files > 1)
            raise memory.out_of_memory(
                self.first + more, "assembling jobs from YARN logs", limit, e
            ) from None
        finally:
            con.close()

    def _assemble(self, con: duckdb.DuckDBPyConnection) -> dict[str, int]:
        con.execute("SET TimeZone = 'UTC'")
        facts = sql_literal(str(self.dir / "facts.parquet"))
        con.execute(f"CREATE VIEW raw_facts AS SELECT * FROM read_parquet({facts})")
        con.execute(f"CREATE TABLE fr AS {asm.facts_with_recovery('raw_facts')}")
        con.execute(f"CREATE TABLE apps AS {asm.apps_sql('fr')}")
        con.execute(f"CREATE TABLE conts AS {asm.containers_sql('fr')}")
        con.execute(f"CREATE TABLE atts AS {asm.attempts_sql('fr', 'apps', 'conts')}")
        b = self.batch
        # scheduler_events rows were credited to their sources by feed(); not counted here.
        b.copy_query("scheduler_events", con, asm.scheduler_events_sql("fr"))
        rows = {
            "jobs": b.copy_query("jobs", con, asm.jobs_sql("apps", "atts")),
            "attempts": b.copy_query("attempts", con, "SELECT * FROM atts"),
            "placements": b.copy_query("placements", con, asm.placements_sql("conts", "atts")),
            "machine_observations": b.copy_query(
                "machine_observations", con, asm.machine_observations_sql("fr")
            ),
        }
        self._notes(con)
        return rows

    def _notes(self, con: duckdb.DuckDBPyConnection) -> None:
        row = con.execute(asm.timezone_check_sql("fr")).fetchone()
        if row and row[2] and row[0] is not None and abs(row[0]) > 1800:
            diff_h, when, n = row[0] / 3600, row[1], row[2]
            offset = when.astimezone(ZoneInfo(self.ctx.timezone)).utcoffset()
            zone = offset.total_seconds() / 3600 + diff_h if offset is not None else None
            zone_text = f"UTC{round(zone * 4) / 4:+g}" if zone is not None else "another zone"
            self.ctx.note(
                f"yarn_rm_log: wall-clock times read in {self.ctx.timezone} are {diff_h:+.1f} h "
                f"off the exact finishTime of {n} ApplicationSummary line(s): the log was "
                f"probably written in {zone_text}; re-ingest with --replace --timezone ZONE"
            )
        restarts = self.kinds.get("rm_start", 0)
        if restarts:
            self.ctx.note(
                f"yarn_rm_log: {restarts} ResourceManager start(s) in the logs; applications "
                "recovered across a restart carry the flag rm_recovered"
            )


def _parse_times(times: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    """ISO strings -> naive datetime64[us]; mask of the ones that are not valid times."""
    try:
        return np.array(times, dtype="datetime64[us]"), np.zeros(len(times), dtype=bool)
    except ValueError:
        pass
    out = np.empty(len(times), dtype="datetime64[us]")
    bad = np.zeros(len(times), dtype=bool)
    for i, t in enumerate(times):
        try:
            out[i] = np.datetime64(t, "us")
        except ValueError:
            out[i] = np.datetime64("NaT")
            bad[i] = True
    return out, bad


def _provided(kinds: Counter[str]) -> str:
    """What one RM log provided (ingest_log.provided)."""
    job_cols = []
    if kinds["app"] or kinds["submit_req"] or kinds["summary"]:
        job_cols.append("submit_time")
    if kinds["accepted"] or kinds["summary"] or kinds["activated"] or kinds["submit_req"]:
        job_cols += ["vc", "user_id"]
    if kinds["app"] or kinds["summary"] or kinds["audit_finish"]:
        job_cols.append("status")
    parts = []
    if job_cols:
        parts.append("jobs: " + ", ".join(job_cols))
    if kinds["attempt"] or kinds["attempt_done"] or kinds["am_container"] or kinds["assigned"]:
        parts.append("attempts")
    if kinds["gpu_container"]:
        parts.append("placements")
    events = kinds["app"] + kinds["attempt"] + kinds["container"]
    if events:
        parts.append(f"scheduler_events ({events} transitions)")
    return "; ".join(parts) + (" (assembled with the other RM logs of the group)" if parts else "")
