"""``ingest``: paths -> sources -> formats -> batches -> store.

One batch per source for ungrouped formats (the five Philly files, job lists); one batch per
format for grouped ones (YARN logs, framework logs, Ganglia exports), so a folder of thousands
of small files commits once. Every source is recorded in ``ingest_log``.

Idempotence: a source whose fingerprint (path, size, mtime) or content hash is already in
``ingest_log`` is skipped; ``replace=True`` re-reads it and drops what it produced before. A
source whose *name* was ingested before with different content is a new version of that file:
it replaces the old one.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import duckdb

from philly_analyze.errors import InputFormatError, UserError, one_line
from philly_analyze.ingest import memory
from philly_analyze.ingest.formats import (
    Format,
    IngestContext,
    Session,
    SkipSource,
    SourceResult,
    detect,
    load_formats,
)
from philly_analyze.ingest.listing import listed, sources
from philly_analyze.ingest.reject_limit import SourceRejects, source_rejects
from philly_analyze.ingest.run_progress import RunProgress
from philly_analyze.ingest.source import Source, file_source
from philly_analyze.ingest.textbytes import (
    BINARY_SAMPLE,
    BINARY_SHARE,
    TextDamage,
    looks_binary,
)
from philly_analyze.store import Batch, Store
from philly_analyze.store_notes import store_notes


@dataclass
class SourceOutcome:
    """What happened to one source."""

    name: str
    format: str | None
    status: str  # ingested, skipped, unknown, error
    message: str = ""
    rows: dict[str, int] = field(default_factory=dict)
    rejected: int = 0
    seconds: float = 0.0
    #: Bytes that were not text (NUL, control, not UTF-8: read with replacement), the lines
    #: holding them, and the first of those lines.
    not_text_bytes: int = 0
    not_text_lines: int = 0
    first_not_text_line: int | None = None
    #: Read again because its group's batch was rebuilt, not named in this call: its rejects
    #: do not count against ``--max-rejects`` (``reject_limit``).
    reread: bool = False

    def damage(self) -> str:
        """'3 bytes not text on 2 lines (first: line 17)', or ''."""
        if not self.not_text_bytes:
            return ""
        d = TextDamage(self.not_text_bytes, self.not_text_lines, self.first_not_text_line)
        return d.describe()


@dataclass
class IngestReport:
    """Outcome of one ``ingest`` call."""

    outcomes: list[SourceOutcome] = field(default_factory=list)
    seconds: float = 0.0
    notes: list[str] = field(default_factory=list)
    #: The store's ``rejects`` rows of the sources named in this call, this call's and those
    #: of earlier calls that read the sources skipped now (``reject_limit``).
    source_rejects: SourceRejects = field(default_factory=SourceRejects)

    @property
    def errors(self) -> list[SourceOutcome]:
        return [o for o in self.outcomes if o.status == "error"]

    @property
    def rejected(self) -> int:
        return sum(o.rejected for o in self.outcomes)

    @property
    def not_text_bytes(self) -> int:
        """Bytes that were not text, over every source."""
        return sum(o.not_text_bytes for o in self.outcomes)

    def rows_by_table(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for o in self.outcomes:
            for t, n in o.rows.items():
                out[t] = out.get(t, 0) + n
        return out


#: Called with each source's outcome as soon as it is known (the CLI prints it).
OutcomeCallback = Callable[[SourceOutcome], None]


def _binary(head: bytes) -> str:
    """Why a source is skipped as binary ("" when it is text). One wording for every such file,
    so that a folder of them folds into one line of the summary."""
    if not looks_binary(head):
        return ""
    return (
        f"binary file (more than {BINARY_SHARE:.0%} of its first {BINARY_SAMPLE // 1024} KB "
        "is not text), not a text log or trace"
    )


def _note_damage(outcome: SourceOutcome, src: Source) -> SourceOutcome:
    """Put the bytes of ``src`` that are not text (read with replacement) in its outcome."""
    if src.damage is not None and src.damage.bytes:
        outcome.not_text_bytes = src.damage.bytes
        outcome.not_text_lines = src.damage.lines
        outcome.first_not_text_line = src.damage.first_line
    return outcome


def ingest_paths(
    store: Store,
    paths: Sequence[str | Path],
    *,
    ctx: IngestContext | None = None,
    replace: bool = False,
    force_format: Format | None = None,
    on_outcome: OutcomeCallback | None = None,
) -> IngestReport:
    """Ingest files, folders and archives into ``store``. Never raises for one bad source: its
    outcome says ``error`` and the others go on; the caller decides the exit code."""
    ctx = ctx or IngestContext()
    report = IngestReport()
    t0 = time.perf_counter()
    sessions: dict[str, _GroupedRun] = {}
    known = _KnownSources(store)
    files, total = listed([Path(p).absolute() for p in paths])
    progress = RunProgress(ctx.tracker)
    progress.set_total(total)
    bar = ctx.tracker
    if progress.shown:  # readers report the current file's bytes; the run's bar adds them up
        ctx.tracker = progress

    def emit(o: SourceOutcome) -> None:
        report.outcomes.append(o)
        if on_outcome:
            on_outcome(o)

    try:
        for src, explicit, name, problem in sources(files, progress):
            if src is None:
                emit(SourceOutcome(name, None, "error" if explicit else "unknown", problem))
                continue
            binary = "" if force_format is not None else _binary(src.head)
            if binary:
                emit(SourceOutcome(name, None, "error" if explicit else "unknown", binary))
                continue
            fmt = force_format or detect(name, src.head)
            if fmt is None:
                status = "error" if explicit else "unknown"
                names = ", ".join(f.name for f in load_formats())
                emit(
                    SourceOutcome(
                        name,
                        None,
                        status,
                        f"unrecognised format (known: {names}; see --input-format)",
                    )
                )
                continue
            unchanged = src.fingerprint is not None and src.fingerprint in known.by_fingerprint
            previous = known.previous(src)
            if fmt.grouped:
                run = sessions.get(fmt.name)
                if run is None:
                    run = sessions[fmt.name] = _GroupedRun(store, fmt, ctx, known, progress)
                    run.forced = force_format is not None
                if unchanged and not replace:
                    run.hold(src, previous)
                elif run.forced:  # told at finish(): whether anything was read at all
                    known.add(src)
                    run.pending.append(run.feed(src, previous))
                else:
                    known.add(src)
                    emit(run.feed(src, previous))
            elif unchanged and not replace:
                emit(SourceOutcome(name, fmt.name, "skipped", "already ingested"))
            else:
                known.add(src)
                forced = force_format is not None
                emit(
                    _note_damage(_ingest_one(store, fmt, src, ctx, previous, replace, forced), src)
                )
        progress.finish()
        for run in sessions.values():
            for o in run.finish():
                emit(o)
        progress.finish()  # files read again for a rebuilt batch were added to the total
    finally:
        ctx.tracker = bar
        for run in sessions.values():
            run.abandon()
    report.notes = ctx.notes + store_notes(store)
    report.source_rejects = source_rejects(store, (o.name for o in report.outcomes if not o.reread))
    report.seconds = time.perf_counter() - t0
    return report


class _KnownSources:
    """What ``ingest_log`` knew at the start of this call, read once (two DuckDB queries per
    source cost ~10 ms each: minutes for a folder of 100,000 small logs), plus the sources
    met since, so a file listed twice in one call is read once."""

    def __init__(self, store: Store):
        rows = store.df("SELECT * FROM ingest_log").to_dict("records")
        self.by_fingerprint: dict[str | None, list[dict]] = {}
        self.by_name: dict[str, list[dict]] = {}
        for r in rows:
            self.by_fingerprint.setdefault(r["fingerprint"], []).append(r)
            self.by_name.setdefault(r["source"], []).append(r)

    def previous(self, src: Source) -> list[dict]:
        """Earlier ingest_log rows for this file (same fingerprint or same name): what a new
        version of it replaces."""
        rows = self.by_fingerprint.get(src.fingerprint, []) + self.by_name.get(src.name, [])
        return list({id(r): r for r in rows}.values())

    def add(self, src: Source) -> None:
        if src.fingerprint is not None:
            self.by_fingerprint.setdefault(src.fingerprint, [])


def _log_entry(src: Source, fmt: Format, res: SourceResult, seconds: float) -> dict:
    return {
        "source": src.name,
        "sha256": src.sha256,
        "format": fmt.name,
        "rows": sum(res.rows.values()),
        "rejected": res.rejected,
        "tables": res.rows,
        "provided": res.provided,
        "fingerprint": src.fingerprint,
        "seconds": seconds,
    }


def _same_content(store: Store, src: Source) -> list[dict]:
    """After reading: earlier ingest_log rows holding exactly these bytes (a copy, or the same
    file touched without changes)."""
    if src.sha256 is None:
        return []
    return store.df("SELECT * FROM ingest_log WHERE sha256 = ?", [src.sha256]).to_dict("records")


def _ingest_one(
    store: Store,
    fmt: Format,
    src: Source,
    ctx: IngestContext,
    previous: list[dict],
    replace: bool,
    forced: bool = False,
) -> SourceOutcome:
    t0 = time.perf_counter()
    ctx.tracker.describe(f"{fmt.name}: {Path(src.name).name}")
    with store.batch() as batch:
        error: InputFormatError | None = None
        try:
            session = fmt.session(batch, ctx)
            res = session.feed(src)
            extra = session.finish()
            for t, n in extra.items():
                res.rows[t] = res.rows.get(t, 0) + n
        except SkipSource as e:
            return SourceOutcome(src.name, fmt.name, "skipped", str(e))
        except duckdb.OutOfMemoryException as e:  # nothing of it is kept: the batch is dropped
            oom = memory.out_of_memory(src.name, f"reading it as {fmt.name}", ctx.memory_limit, e)
            return SourceOutcome(src.name, fmt.name, "error", oom.format())
        except InputFormatError as e:
            error = e
            res = SourceResult(rows=dict(batch.rows), rejected=batch.rejected)
        res.rejected = max(res.rejected, batch.rejected)
        if forced and error is None and not any(res.rows.values()):
            return SourceOutcome(src.name, fmt.name, "error", nothing_read(fmt, res.rejected))
        seconds = time.perf_counter() - t0
        same = [] if replace else _same_content(store, src)
        if error is None and same:
            return SourceOutcome(
                src.name,
                fmt.name,
                "skipped",
                f"same content already ingested as {same[0]['source']}",
            )
        if error is not None:
            batch.reject(src.name, error.line, f"source stopped here: {error.message}", None)
            res.rejected += 1
        store.commit(
            batch,
            [_log_entry(src, fmt, res, seconds)],
            replace_batches=sorted({p["batch_id"] for p in previous}),
            source_format=fmt.name,
        )
    if error is not None:
        kept = sum(res.rows.values())
        return SourceOutcome(
            src.name,
            fmt.name,
            "error",
            f"{error.format()} (kept the {kept} rows read before it)",
            res.rows,
            res.rejected,
            seconds,
        )
    return SourceOutcome(src.name, fmt.name, "ingested", "", res.rows, res.rejected, seconds)


class _GroupedRun:
    """One batch shared by all sources of a grouped format in this ingest call.

    A new batch replaces the earlier batches of the files it re-reads. Those batches may also
    hold files that did not change; to lose none of their rows, every other file of a replaced
    batch is read again into the new batch (files of this call that were unchanged are held
    back until the end for that reason, and files not named in this call are re-read from
    their recorded path when it still exists; otherwise a note says their rows were dropped).
    """

    def __init__(
        self,
        store: Store,
        fmt: Format,
        ctx: IngestContext,
        known: _KnownSources,
        progress: RunProgress,
    ):
        self.store = store
        self.fmt = fmt
        self.ctx = ctx
        self.known = known
        self.progress = progress
        #: Unchanged sources of this call: name -> earlier ingest_log rows.
        self.held: dict[str, list[dict]] = {}
        self._cm = store.batch()
        self.batch: Batch = self._cm.__enter__()
        self.session: Session = fmt.session(self.batch, ctx)
        self.entries: list[dict] = []
        self.replaced: set[str] = set()
        #: Under --input-format, the outcomes of the sources fed, given out by finish().
        self.pending: list[SourceOutcome] = []
        #: Every source's outcome from feed(), to correct if the group cannot be finished.
        self.fed: list[SourceOutcome] = []
        self.forced = False
        self._open = True

    def feed(self, src: Source, previous: list[dict]) -> SourceOutcome:
        t0 = time.perf_counter()
        self.ctx.tracker.describe(f"{self.fmt.name}: {Path(src.name).name}")
        try:
            res = self.session.feed(src)
        except SkipSource as e:
            # Nothing recorded: a later run (e.g. with the missing mapping) can ingest it.
            return SourceOutcome(src.name, self.fmt.name, "skipped", str(e))
        except InputFormatError as e:
            self.batch.reject(src.name, e.line, f"source stopped here: {e.message}", None)
            res = SourceResult(rejected=1)
            outcome = SourceOutcome(src.name, self.fmt.name, "error", e.format(), {}, 1)
        else:
            # Sources whose rows are only assembled at finish() say what they gave instead.
            # ``provided`` may quote the file (host names): one short line.
            message = "" if sum(res.rows.values()) else one_line(res.provided)
            outcome = SourceOutcome(
                src.name, self.fmt.name, "ingested", message, res.rows, res.rejected
            )
        outcome.seconds = time.perf_counter() - t0
        _note_damage(outcome, src)
        self.entries.append(_log_entry(src, self.fmt, res, outcome.seconds))
        self.replaced |= {p["batch_id"] for p in previous}
        self.fed.append(outcome)
        return outcome

    def hold(self, src: Source, previous: list[dict]) -> None:
        """An unchanged source: skipped unless its batch gets rebuilt."""
        self.held[src.name] = previous

    def _reread_members_of_replaced_batches(self) -> list[SourceOutcome]:
        out: list[SourceOutcome] = []
        fed = {e["source"] for e in self.entries}
        while True:
            todo = {
                name: prev
                for name, prev in self.held.items()
                if {p["batch_id"] for p in prev} & self.replaced
            }
            for rows in self.known.by_name.values():
                for r in rows:
                    name = r["source"]
                    if r["batch_id"] in self.replaced and name not in fed and name not in todo:
                        todo[name] = rows
            todo = {n: p for n, p in todo.items() if n not in fed}
            if not todo:
                return out
            for name, prev in todo.items():
                self.held.pop(name, None)
                fed.add(name)
                path = Path(name)
                if not path.is_file():
                    self.ctx.note(
                        f"{name}: its rows were dropped when its batch was rebuilt "
                        "(no longer on disk, or an archive member: ingest it again)"
                    )
                    continue
                src = file_source(path)
                self.progress.extra(src.size or 0)
                o = self.feed(src, prev)
                again = "read again: its batch was rebuilt"
                o.message = f"{again}; {o.message}" if o.message else again
                o.reread = True
                out.append(o)

    def finish(self) -> list[SourceOutcome]:
        reread = self._reread_members_of_replaced_batches()
        skipped = [
            SourceOutcome(name, self.fmt.name, "skipped", "already ingested") for name in self.held
        ]
        self.batch.replaces = set(self.replaced)
        self.ctx.tracker.describe(f"{self.fmt.name}: assembling {len(self.entries):,} files")
        try:
            extra = self.session.finish()
        except InputFormatError as e:
            # The group cannot be assembled (out of memory, Gavel traces without throughputs):
            # nothing of it is recorded, so a later run can ingest it; the other groups go on.
            self.abandon()
            for o in self.fed:
                if o.status == "ingested":
                    o.status, o.rows, o.rejected = "skipped", {}, 0
                    o.message = "not kept: its group could not be assembled (the error below)"
            n = len(self.entries)
            files = f"the {n:,} {self.fmt.name} files" if n > 1 else f"the {self.fmt.name} file"
            failed = SourceOutcome(
                e.source or f"({self.fmt.name}: assembled)",
                self.fmt.name,
                "error",
                f"{e.format()} (nothing kept of {files} of this run)",
            )
            return [*self.pending, *reread, *skipped, failed]
        # Rows a session rejected while assembling (written by the session itself).
        rejected = extra.pop("rejects", 0)
        if self.pending and not (any(extra.values()) or any(e["rows"] for e in self.entries)):
            # Forced on files that are not of the format: an error, and nothing recorded.
            for o in self.pending:
                if o.status == "ingested":
                    o.status, o.message = "error", nothing_read(self.fmt, o.rejected)
            self.abandon()
            return self.pending + reread + skipped
        if self.entries:
            # Rows assembled at the end (jobs, attempts...) are credited to the first source.
            self.entries[0]["rejected"] += rejected
            tables = dict(self.entries[0]["tables"])
            for t, n in extra.items():
                tables[t] = tables.get(t, 0) + n
            self.entries[0]["tables"] = tables
            self.entries[0]["rows"] = sum(tables.values())
            self.store.commit(
                self.batch,
                self.entries,
                replace_batches=sorted(self.replaced),
                source_format=self.fmt.name,
            )
        self.abandon()
        out = self.pending + reread + skipped
        if extra or rejected:
            out.append(
                SourceOutcome(
                    f"({self.fmt.name}: assembled)", self.fmt.name, "ingested", "", extra, rejected
                )
            )
        return out

    def abandon(self) -> None:
        if self._open:
            self._open = False
            self._cm.__exit__(None, None, None)


def nothing_read(fmt: Format, rejected: int) -> str:
    """Why a source forced to ``fmt`` (``--input-format``) that gave no row is an error (its
    rejected lines are not recorded either: the file is not taken)."""
    bad = f"{rejected:,} lines rejected" if rejected else "no line of the format"
    return (
        f"nothing read as {fmt.name} ({bad}): not a {fmt.description}? Without "
        "--input-format the format is detected"
    )


def check_report(report: IngestReport) -> None:
    """Raise a ``UserError`` summarising the sources that failed (for the CLI's exit code)."""
    errs = report.errors
    if errs:
        first = errs[0]
        more = f" (and {len(errs) - 1} more)" if len(errs) > 1 else ""
        # Messages of InputFormatError already start with the file (and line).
        where = "" if first.message.startswith(first.name) else f"{first.name}: "
        raise UserError(f"{where}{first.message}{more}")
