"""The registry of input formats. Each format is a small class in its own module:

    @register
    class MyFormat(Format):
        name = "my_format"                 # recorded in ingest_log.format and as rows' source
        description = "what a user calls it"
        grouped = False                    # True: every source of this format in one call to
                                           # ingest goes through one session (one batch)

        def sniff(self, name: str, head: bytes) -> bool: ...   # by content first, name second
        def session(self, batch: Batch, ctx: IngestContext) -> Session: ...

A ``Session`` parses sources into the batch (``feed``) and writes what it accumulated at the
end (``finish``). A source the format recognises but cannot use raises ``SkipSource`` (listed as
skipped, not recorded). Bad rows go to ``batch.reject``; a source that cannot be read at all raises
``InputFormatError`` naming file and line (rows already written by that source are kept).
Detection order is registration order, so specific formats register before generic ones.
"""

from __future__ import annotations

import csv
import importlib
import importlib.util
import re
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, ClassVar, Protocol

from philly_analyze.ingest.memory import default_limit
from philly_analyze.ingest.source import Source
from philly_analyze.progress import NullTracker, Tracker
from philly_analyze.store import Batch
from philly_analyze.timeutil import DEFAULT_ORIGIN, DEFAULT_TIMEZONE


@dataclass
class IngestContext:
    """Options every parser may use."""

    timezone: str = DEFAULT_TIMEZONE
    tracker: Tracker = field(default_factory=NullTracker)
    #: Framework logs: CSV mapping file path -> (job_id, attempt_idx); see framework.py.
    framework_mapping: dict[str, tuple[str, int]] = field(default_factory=dict)
    #: Framework logs no id names: skipped (ids), or keyed by file or folder name.
    framework_job_key: str = "ids"
    #: Messages for the user (printed on stderr by the CLI).
    notes: list[str] = field(default_factory=list)
    options: dict[str, Any] = field(default_factory=dict)
    #: Host of host-less Ganglia exports: auto, folder or a regex (ganglia_hosts.py).
    ganglia_host_pattern: str = "auto"
    #: Origin of relative times (Gavel arrival seconds, job lists with submit seconds).
    origin: datetime = DEFAULT_ORIGIN
    #: Gavel throughputs JSON for trace durations, and its GPU column (gavel.py).
    gavel_throughputs: Path | None = None
    gavel_gpu: str = "v100"
    #: DuckDB memory limit, bytes (``memory.py``: --memory-limit, PHILLY_MEMORY_LIMIT).
    memory_limit: int = field(default_factory=default_limit)

    def note(self, message: str) -> None:
        self.notes.append(message)


@dataclass
class SourceResult:
    """What one source provided."""

    rows: dict[str, int] = field(default_factory=dict)
    rejected: int = 0
    #: For merged tables, which columns this source filled (recorded in ingest_log.provided).
    provided: str = ""


class SkipSource(Exception):
    """Raised by ``Session.feed`` before writing anything: this source cannot be used as given
    (the message says why and how to fix it, e.g. a framework log whose job is unknown). The
    pipeline lists it as ``skipped`` and records nothing, so a later run can still ingest it."""


class Session(Protocol):
    """Parses the sources of one format into one batch."""

    def feed(self, source: Source) -> SourceResult: ...
    def finish(self) -> dict[str, int]: ...


class Format:
    """Base class of an input format (see module docstring)."""

    name: ClassVar[str]
    description: ClassVar[str]
    grouped: ClassVar[bool] = False

    def sniff(self, name: str, head: bytes) -> bool:
        raise NotImplementedError

    def session(self, batch: Batch, ctx: IngestContext) -> Session:
        raise NotImplementedError


#: A line ending: CRLF, LF, or CR alone (old Mac files; ``Source.text_lines`` splits the same).
LINE_END = re.compile(r"\r\n|\r|\n")


def head_lines(head: bytes) -> list[str]:
    """The lines of a head (decoded, bad bytes replaced), split at any line ending as
    ``Source.text_lines`` reads them; the last one may be cut."""
    return LINE_END.split(head.decode("utf-8", "replace"))


def first_line(head: bytes) -> str:
    """The first line of a head, stripped."""
    return LINE_END.split(head.decode("utf-8", "replace"), maxsplit=1)[0].strip()


def csv_fields(line: str, **options: object) -> list[str]:
    """The fields of one CSV line; ``ValueError`` (a rejected row, not a traceback) for what
    Python's csv module refuses: a field over its 128 KB limit, a NUL or a stray line end."""
    try:
        # typeshed names each csv keyword with its own type; callers pass csv's own keywords.
        return next(csv.reader([line], **options), [])  # type: ignore[arg-type]
    except csv.Error as e:
        raise ValueError(f"unreadable CSV line: {e}") from None


FORMATS: list[Format] = []
#: Whether load_formats has imported every module (detect() runs once per file).
_LOADED = False

#: Modules that register formats, in detection order (specific before generic).
FORMAT_MODULES = (
    "philly_analyze.ingest.philly",
    "philly_analyze.ingest.joblist",
    "philly_analyze.ingest.gavel",
    "philly_analyze.ingest.yarn",
    "philly_analyze.ingest.ganglia",
    "philly_analyze.ingest.framework",
)


def register(cls: type[Format]) -> type[Format]:
    """Class decorator adding a format to the registry."""
    if not any(type(f) is cls for f in FORMATS):
        FORMATS.append(cls())
    return cls


def load_formats() -> list[Format]:
    """Import every format module (each registers itself); a missing one is a bug, which
    fails loudly."""
    global _LOADED
    if _LOADED:
        return FORMATS
    for mod in FORMAT_MODULES:
        importlib.import_module(mod)
    # Detection order is FORMAT_MODULES order, whatever order the modules were imported in
    # (a test or a library user may import a generic format's module first).
    order = {m: i for i, m in enumerate(FORMAT_MODULES)}
    FORMATS.sort(key=lambda f: order.get(type(f).__module__, len(order)))
    _LOADED = True
    return FORMATS


def detect(name: str, head: bytes) -> Format | None:
    """The first registered format whose sniffer accepts this content."""
    for fmt in load_formats():
        if fmt.sniff(name, head):
            return fmt
    return None


def get_format(name: str) -> Format:
    """A format by name (for ``ingest --format``)."""
    for fmt in load_formats():
        if fmt.name == name:
            return fmt
    raise KeyError(name)
