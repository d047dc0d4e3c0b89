"""Ganglia metrics -> gpu_util, gpu_metrics, cpu_util, mem_util, host_metrics (formats.md §3).

Five formats, each grouped (all files of a format in one ``ingest`` call form one batch):

==================  ==========================================================================
``ganglia_xml``     gmond / gmetad XML dumps (``telnet host 8649``, ``nc gmetad 8651``)
``ganglia_csv``     ganglia-web ``graph.php?...&csv=1``
``ganglia_json``    ganglia-web ``graph.php?...&json=1``
``rrdtool_xport``   ``rrdtool xport`` output, XML or ``--json``
``rrdtool_dump``    ``rrdtool dump`` of a gmetad RRD
==================  ==========================================================================

Readers (``ganglia_xml``, ``ganglia_text``) stream samples to Parquet (host-less exports get
their host from the file name or folder, ``ganglia_hosts``); ``finish()`` sets aside samples
that sources disagree on (``ganglia_conflicts``), resamples every series to one row per minute
with the one rule of ``resample.py``, leaves out rows the store holds from earlier runs
(``ganglia_stored``) and routes metrics (``data/ganglia_metrics.json``), in parts of hosts and
time that fit the memory limit (``ganglia_route``, ``memory``):

- ``gpu{i}_util`` -> ``gpu_util`` (gpu_idx i); other ``gpu{i}_<m>`` -> ``gpu_metrics`` (metric m);
- ``cpu_util`` = 100 - ``cpu_idle`` (``cpu_user + cpu_system`` for hosts without cpu_idle),
  clamped to 0-100;
- ``mem_total``, ``mem_free`` (KB) -> ``mem_util``: one row per minute with mem_free, with the
  latest mem_total (> 0) at or before it (gmond sends mem_total rarely);
- every other numeric metric, including the raw ``cpu_*`` -> ``host_metrics``;
- ``machine_observations``: per host, GPUs reporting utilization (max index + 1, 0 if none),
  first and last minute with data.
"""

from __future__ import annotations

import tempfile
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import duckdb

from philly_analyze.ingest import ganglia_text as text
from philly_analyze.ingest import ganglia_xml as xml
from philly_analyze.ingest import memory
from philly_analyze.ingest.formats import Format, IngestContext, SkipSource, SourceResult, register
from philly_analyze.ingest.ganglia_hosts import AUTO, FOLDER, HostNamer
from philly_analyze.ingest.ganglia_route import Router
from philly_analyze.ingest.ganglia_samples import (
    ReadStats,
    SampleSink,
    metric_rules,
    path_host_stem,
)
from philly_analyze.ingest.ganglia_stored import Stored
from philly_analyze.ingest.source import Source
from philly_analyze.store import Batch, connect, sql_literal

Reader = Callable[[Source, SampleSink, IngestContext, Batch], ReadStats]


def _text_head(head: bytes, n: int = 4096) -> str:
    """The head as text for sniffing, without a BOM or leading blank space."""
    return head[:n].decode("utf-8", "replace").lstrip("\ufeff \t\r\n")


def _xml_document(text: str, max_junk_lines: int = 5) -> bool:
    """Whether ``text`` is an XML document, allowing a few lines before it (a ``telnet host
    8649`` capture starts with ``Trying ...``), but not prose that mentions a tag."""
    i = text.find("<")
    if i < 0 or (i > 0 and text[i - 1] != "\n") or text.count("\n", 0, i) > max_junk_lines:
        return False
    return text.startswith(("<?xml", "<!DOCTYPE", "<GANGLIA_XML"), i)


class _GangliaFormat(Format):
    """A Ganglia export: ``read`` turns one file into samples, the session routes them."""

    # Grouped: all files of a format in one ingest call share a session and a batch, so that
    # finish() sees every source's samples: it sets aside those the sources disagree on and
    # resamples each series once.
    grouped = True

    def read(self, source: Source, sink: SampleSink, ctx: IngestContext, batch: Batch) -> ReadStats:
        """Feed one file's samples to ``sink``."""
        raise NotImplementedError

    def session(self, batch: Batch, ctx: IngestContext) -> _GangliaSession:
        """A session gathering the run's samples and resampling them per minute."""
        return _GangliaSession(batch, ctx, self)


def _names_for(source: Source, ctx: IngestContext) -> HostNamer:
    """Series namer of a host-less export; skips gmetad's cluster summary folder."""
    folder, _ = path_host_stem(source.name)
    if folder in metric_rules()["summary_host_names"]:
        raise SkipSource(f"{folder}: a gmetad cluster summary (sum over hosts), not one host")
    return HostNamer(source.name, ctx.ganglia_host_pattern)


def _named(stats: ReadStats, names: HostNamer) -> ReadStats:
    """The stats with where the host name came from (for the run's notes)."""
    stats.host_from = names.host_from
    return stats


@register
class GangliaXml(_GangliaFormat):
    name = "ganglia_xml"
    description = "Ganglia gmond/gmetad XML dump (<GANGLIA_XML>)"

    def sniff(self, name: str, head: bytes) -> bool:
        """A gmond/gmetad XML document (a few lines of telnet chatter may come first)."""
        return b"<GANGLIA_XML" in head and _xml_document(_text_head(head))

    def read(self, source: Source, sink: SampleSink, ctx: IngestContext, batch: Batch) -> ReadStats:
        """Samples of every host and metric in the dump."""
        return xml.read_gmond(source, sink, ctx.tracker)


@register
class RrdtoolXport(_GangliaFormat):
    name = "rrdtool_xport"
    description = "rrdtool xport output (XML, or --json), one host per file"

    def sniff(self, name: str, head: bytes) -> bool:
        """``rrdtool xport`` XML (``<xport>``) or its ``--json`` form."""
        t = _text_head(head)
        if t.startswith("<") and "<xport>" in t:
            return True
        return t.startswith("{") and "RRDtool" in t and "meta" in t and "legend" in t

    def read(self, source: Source, sink: SampleSink, ctx: IngestContext, batch: Batch) -> ReadStats:
        """The export's series, named by the host its path gives."""
        names = _names_for(source, ctx)
        if _text_head(source.head).startswith("{"):
            return _named(text.read_xport_json(source, sink, ctx, names), names)
        return _named(xml.read_xport_xml(source, sink, ctx.tracker, names), names)


@register
class RrdtoolDump(_GangliaFormat):
    name = "rrdtool_dump"
    description = "rrdtool dump output of a gmetad RRD (<cluster>/<host>/<metric>.xml)"

    def sniff(self, name: str, head: bytes) -> bool:
        """An ``rrdtool dump`` XML (``<rrd>`` with its header)."""
        t = _text_head(head)
        return t.startswith("<") and "<rrd>" in t and ("<lastupdate>" in t or "<version>" in t)

    def read(self, source: Source, sink: SampleSink, ctx: IngestContext, batch: Batch) -> ReadStats:
        """The RRD's archived series, named by the host its path gives."""
        names = _names_for(source, ctx)
        return _named(xml.read_dump(source, sink, ctx.tracker, names), names)


@register
class GangliaCsv(_GangliaFormat):
    name = "ganglia_csv"
    description = "ganglia-web graph CSV export (Timestamp,<metric>...), one host per file"

    def sniff(self, name: str, head: bytes) -> bool:
        """A ganglia-web CSV: a ``Timestamp,`` header and a time in the first field below it."""
        lines = _text_head(head).splitlines()
        if len(lines) < 2 or not lines[0].lower().startswith("timestamp,"):
            return False
        return text.looks_like_time(lines[1].split(",", 1)[0])

    def read(self, source: Source, sink: SampleSink, ctx: IngestContext, batch: Batch) -> ReadStats:
        """The export's metric columns, named by the host its path gives."""
        names = _names_for(source, ctx)
        return _named(text.read_csv(source, sink, ctx, batch, names), names)


@register
class GangliaJson(_GangliaFormat):
    name = "ganglia_json"
    description = "ganglia-web graph JSON export ([{host_name, metric_name, datapoints}])"

    def sniff(self, name: str, head: bytes) -> bool:
        """A JSON array of ganglia-web series (``"datapoints"``)."""
        t = _text_head(head)
        return t.startswith("[") and '"datapoints"' in t

    def read(self, source: Source, sink: SampleSink, ctx: IngestContext, batch: Batch) -> ReadStats:
        """Each series under its own host and metric name."""
        return text.read_ganglia_json(source, sink, ctx, batch)


class _GangliaSession:
    def __init__(self, batch: Batch, ctx: IngestContext, fmt: _GangliaFormat):
        self.batch = batch
        self.ctx = ctx
        self.fmt = fmt
        self.dir = Path(tempfile.mkdtemp(prefix="ganglia-", dir=batch.staging))
        self.sink = SampleSink(self.dir / "samples.parquet")
        self.strings = 0
        self.coarse: set[int] = set()
        #: Source names, indexed by the samples' ``src``.
        self.sources: list[str] = []
        self.host_from: Counter[str] = Counter()

    def feed(self, source: Source) -> SourceResult:
        self.sink.source_id = len(self.sources)
        self.sources.append(source.name)
        st = self.fmt.read(source, self.sink, self.ctx, self.batch)
        for (host, metric, why), n in sorted(self.sink.take_refused().items()):
            # One row per series and reason (no line: XML and JSON samples have none).
            self.batch.reject(source.name, None, f"{n:,} samples of {host}/{metric}: {why}", None)
            st.rejected += n
        if st.host_from:
            self.host_from[st.host_from] += 1
        self.strings += st.strings
        self.coarse |= {s for s in st.steps if s > 60}
        for note in st.notes:
            self.ctx.note(f"{self.fmt.name}: {Path(source.name).name}: {note}")
        if st.samples == 0:
            self.ctx.note(f"{self.fmt.name}: {source.name}: no numeric samples")
        metrics = sorted({m for _, m in st.series})
        shown = ", ".join(metrics[:6]) + (", ..." if len(metrics) > 6 else "")
        hosts = sorted(st.hosts)
        on = f"host {', '.join(hosts)}" if len(hosts) <= 3 else f"{len(hosts)} hosts"
        if st.host_from:
            on += f" (from its {st.host_from})"
        provided = (
            f"{st.samples:,} samples, {len(st.series):,} series ({shown}) on {on}; "
            "per-minute rows written with the group"
        )
        return SourceResult({}, st.rejected, provided)

    def finish(self) -> dict[str, int]:
        if not self.sink.close():
            return {}
        if self.strings:
            self.ctx.note(
                f"{self.fmt.name}: {self.strings} text metric values (os_name...) not kept"
            )
        self._note_hosts()
        if self.coarse:
            steps = ", ".join(f"{s} s" for s in sorted(self.coarse))
            self.ctx.note(
                f"{self.fmt.name}: rows of {steps} steps: each minute a row covers gets its "
                "average (docs/raw-sources.md, resampling)"
            )
        # A database file, not memory: its tables can leave memory when the limit is reached.
        con = connect(str(self.dir / "resample.duckdb"))  # Ctrl-C interrupts it
        try:
            return self._route(con)
        finally:
            con.close()

    def _note_hosts(self) -> None:
        by_name = self.host_from["file name"]
        if not by_name and self.ctx.ganglia_host_pattern in (AUTO, FOLDER):
            return
        from_folder = self.host_from["folder"]
        self.ctx.note(
            f"{self.fmt.name}: host of {by_name:,} files from their file name, {from_folder:,} "
            f"from their folder (--ganglia-host-pattern {self.ctx.ganglia_host_pattern})"
        )

    def _route(self, con: duckdb.DuckDBPyConnection) -> dict[str, int]:
        limit = self.ctx.memory_limit
        memory.configure(con, limit, self.dir / "spill")
        router = Router(
            con,
            self.batch,
            self.fmt.name,
            self.sources,
            Stored.of(self.batch, self.fmt.name),
            self.ctx.note,
        )
        samples = f"read_parquet({sql_literal(str(self.sink.path))})"
        try:
            return router.run(samples, limit)
        except duckdb.OutOfMemoryException as e:
            raise memory.out_of_memory(
                self._group_name(), "resampling Ganglia samples", limit, e
            ) from None

    def _group_name(self) -> str:
        """The sources of this run, for a message: the first and how many others."""
        more = len(self.sources) - 1
        return self.sources[0] + (
            f" (and the {more:,} other {self.fmt.name} files)" if more else ""
        )
