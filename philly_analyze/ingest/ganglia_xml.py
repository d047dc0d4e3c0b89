"""Streaming readers of the XML Ganglia sources: gmond/gmetad dumps, ``rrdtool xport`` and
``rrdtool dump`` (formats.md §3). Each yields samples to a ``SampleSink`` (``ganglia.py``).

- **gmond/gmetad** (``<GANGLIA_XML>``): ``GRID > CLUSTER > HOST > METRIC``; a metric's value
  was measured ``TN`` seconds before the enclosing ``LOCALTIME`` (CLUSTER, else GRID; a HOST
  without either uses ``REPORTED + TN`` of the host): an instantaneous sample. Host = ``HOST
  NAME``. String metrics (os_name...) carry no number and are counted, not kept.
- **rrdtool xport** (``<xport>``): rows ``<t>`` with one value per legend entry; a row is the
  average of the step ending at ``t``.
- **rrdtool dump** (``<rrd>``): the timestamps are only in comments, so they are computed the
  way rrdtool lays the archive out: the newest row of an RRA of ``pdp_per_row`` x ``step``
  seconds ends at ``lastupdate`` rounded down to that period, older rows one period apart.
  Only AVERAGE archives are read, finest first; a coarser archive only fills the time before
  the finer ones begin (a row straddling that point keeps only its earlier part).

Files may hold several documents one after another (repeated captures) and junk around them
(a ``telnet host 8649`` capture's ``Trying ...`` lines): documents are split at ``<?xml`` and
anything outside a document's root element is ignored.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, cast

from philly_analyze.bounds import excerpt
from philly_analyze.errors import InputFormatError
from philly_analyze.ingest.ganglia_samples import US, ReadStats, Sink, parse_number
from philly_analyze.ingest.source import Source
from philly_analyze.progress import Tracker

CHUNK = 1 << 20
#: Maps legend entries / data-source names to (host, metric) (``series_names``).
Namer = Callable[[list[str]], list[tuple[str, str]]]


def _documents(source: Source, tracker: Tracker) -> Iterator[tuple[int, bytes | None]]:
    """(line, bytes) pieces of the decompressed stream; a ``None`` piece comes before every
    ``<?xml`` declaration (the start of a new document)."""
    decl = b"<?xml"
    with source.open(tracker) as raw:
        buf = b""
        line = 1
        eof = False
        while not eof:
            chunk = raw.read(CHUNK)
            eof = not chunk
            buf += chunk
            # A declaration starting in the last 4 bytes may be cut: keep them for next time.
            limit = len(buf) if eof else max(0, len(buf) - len(decl) + 1)
            pos = 0
            while True:
                i = buf.find(decl, pos, limit + len(decl) - 1)
                if i < 0 or i >= limit:
                    break
                if i > pos:
                    yield line, buf[pos:i]
                    line += buf.count(b"\n", pos, i)
                yield line, None
                yield line, decl
                pos = i + len(decl)
            if limit > pos:
                yield line, buf[pos:limit]
                line += buf.count(b"\n", pos, limit)
            buf = buf[max(limit, pos) :]


def iter_xml(source: Source, tracker: Tracker) -> Iterator[tuple[str, Any]]:
    """(event, element) over every XML document in a source ("start", "end", "comment").

    Malformed XML inside a document raises ``InputFormatError`` with the line; bytes before a
    document's first ``<`` and after its root element are ignored."""
    parser: ET.XMLPullParser | None = None
    depth = 0
    done = False
    doc_line = 1
    fed_any = False

    def new() -> None:
        nonlocal parser, depth, done, fed_any
        parser = ET.XMLPullParser(events=("start", "end", "comment"))
        depth = 0
        done = False
        fed_any = False

    new()
    for line, piece in _documents(source, tracker):
        if piece is None:
            yield from _close(parser, done, fed_any, source, doc_line)
            new()
            doc_line = line
            continue
        if done:
            continue
        if not fed_any:
            lt = piece.find(b"<")
            if lt < 0:
                continue
            doc_line = line + piece.count(b"\n", 0, lt)
            piece = piece[lt:]
            fed_any = True
        assert parser is not None
        _feed(parser, piece, source, doc_line)
        events = _events(parser)
        while True:
            try:
                ev, el = next(events)
            except StopIteration:
                break
            except ET.ParseError as e:
                if done:
                    break
                raise _xml_error(source, e, doc_line) from None
            if ev == "start":
                depth += 1
            elif ev == "end":
                depth -= 1
                if depth == 0:
                    done = True
            yield ev, el
    yield from _close(parser, done, fed_any, source, doc_line)


def _events(parser: ET.XMLPullParser) -> Iterator[tuple[str, Any]]:
    # Only start, end and comment events are asked for: all (event, element or text) pairs.
    # typeshed's type also has the 1-tuples of events never asked for.
    return cast(Iterator[tuple[str, Any]], parser.read_events())


def _close(
    parser: ET.XMLPullParser | None, done: bool, fed: bool, source: Source, doc_line: int
) -> Iterator[tuple[str, Any]]:
    if parser is None or not fed or done:
        return
    try:
        parser.close()
        yield from _events(parser)
    except ET.ParseError as e:
        raise _xml_error(source, e, doc_line, truncated=True) from None
    except (LookupError, ValueError) as e:
        raise _encoding_error(source, e, doc_line) from None


def _feed(parser: ET.XMLPullParser, piece: bytes, source: Source, doc_line: int) -> None:
    """Feed a piece of a document. Its XML declaration may name an encoding Python does not
    know (``LookupError`` from the parser): the document cannot be decoded, one clear error."""
    try:
        parser.feed(piece)
    except (LookupError, ValueError) as e:
        raise _encoding_error(source, e, doc_line) from None


def _encoding_error(source: Source, e: Exception, doc_line: int) -> InputFormatError:
    return InputFormatError(
        f"cannot decode the XML document: {excerpt(str(e))} (its declaration names an encoding "
        "Python does not know: save it as UTF-8)",
        source=source.name,
        line=doc_line,
    )


def _xml_error(
    source: Source, e: ET.ParseError, doc_line: int, truncated: bool = False
) -> Exception:
    line = doc_line + (e.position[0] - 1 if e.position else 0)
    what = "truncated XML" if truncated else "malformed XML"
    return InputFormatError(f"{what}: {e.msg}", source=source.name, line=line)


# --------------------------------------------------------------------------- gmond / gmetad
def read_gmond(source: Source, sink: Sink, tracker: Tracker) -> ReadStats:
    """Samples of a gmond/gmetad XML dump (instantaneous, at LOCALTIME - TN)."""
    st = ReadStats()
    localtime: list[int | None] = []
    host: str | None = None
    host_ref: int | None = None
    summaries = 0
    for ev, el in iter_xml(source, tracker):
        tag = el.tag if ev != "comment" else None
        if ev == "start":
            if tag in ("GRID", "CLUSTER"):
                lt = _int(el.get("LOCALTIME"))
                localtime.append(lt if lt is not None else (localtime[-1] if localtime else None))
            elif tag == "HOST":
                host = el.get("NAME")
                rep, tn = _int(el.get("REPORTED")), _int(el.get("TN")) or 0
                ref = localtime[-1] if localtime else None
                host_ref = ref if ref is not None else (rep + tn if rep is not None else None)
            elif tag == "METRIC" and host is not None:
                _gmond_metric(el, host, host_ref, sink, st)
            elif tag == "METRICS":
                summaries += 1
        elif ev == "end":
            if tag in ("GRID", "CLUSTER"):
                localtime.pop()
                el.clear()
            elif tag == "HOST":
                host = None
                el.clear()
            elif tag in ("METRIC", "EXTRA_DATA", "METRICS"):
                el.clear()
    if summaries:
        st.notes.append(f"{summaries} summary METRICS elements (cluster sums, no host) ignored")
    return st


def _gmond_metric(el: Any, host: str, ref: int | None, sink: Sink, st: ReadStats) -> None:
    name = el.get("NAME")
    if not name or ref is None:
        st.rejected += 1
        return
    raw = el.get("VAL")
    value = parse_number(raw)
    if value is None:
        # Text metrics (os_name, machine_type...) are not time series; NaN is a missing value.
        if el.get("TYPE") == "string" or (raw or "").strip().lower() != "nan":
            st.strings += 1
        return
    # TN: seconds since the reading, a whole number >= 0 (absent: just read). Read as 0, an
    # `inf`, `nan` or negative TN would place the sample at a wrong time without a word.
    tn_text = el.get("TN")
    tn = _int(tn_text) if tn_text is not None else 0
    if tn is None or tn < 0:
        sink.refuse(host, name, f"TN {excerpt(tn_text)} is not a whole number of seconds >= 0")
        return
    t = (ref - tn) * US
    if sink.add(host, name, t, t, value):
        st.took(host, name)


def _int(v: str | None) -> int | None:
    try:
        return int(v) if v is not None else None
    except ValueError:
        return None


# --------------------------------------------------------------------------- rrdtool xport
def read_xport_xml(source: Source, sink: Sink, tracker: Tracker, names: Namer) -> ReadStats:
    """Samples of ``rrdtool xport`` XML; ``names`` maps the legend entries to series."""
    st = ReadStats()
    legend: list[str] = []
    series: list[tuple[str, str]] | None = None
    step: int | None = None
    row_step = 0  # the step the rows are read with: `step` when the first row came
    for ev, el in iter_xml(source, tracker):
        if ev != "end":
            continue
        tag = el.tag
        if tag == "step" and series is not None:
            # rrdtool puts <step> in <meta>, before the rows. One among the rows is not taken
            # (it would change, or unset, the step of the rows already read): counted.
            st.rejected += 1
        elif tag == "step":
            step = _int(el.text)
        elif tag == "entry":
            legend.append((el.text or "").strip())
        elif tag == "row":
            if series is None:
                if not step or step <= 0:
                    raise InputFormatError("rrdtool xport without a <step>", source=source.name)
                series = names(legend)
                st.steps.add(step)
                row_step = step
            children = list(el)
            t = _int(children[0].text) if children and children[0].tag == "t" else None
            values = children[1:] if t is not None else []
            if t is None or len(values) != len(series):
                st.rejected += 1
            else:
                for (h, m), v in zip(series, values, strict=True):
                    x = parse_number(v.text)
                    t0 = (t - row_step) * US
                    if x is not None and sink.add(h, m, t0, t * US, x):
                        st.took(h, m)
            el.clear()
    return st


# --------------------------------------------------------------------------- rrdtool dump
@dataclass
class _Rra:
    cf: str = ""
    pdp_per_row: int = 1
    rows: list[list[float | None]] = field(default_factory=list)


def read_dump(source: Source, sink: Sink, tracker: Tracker, names: Namer) -> ReadStats:
    """Samples of ``rrdtool dump`` XML (AVERAGE archives, finest first)."""
    st = ReadStats()
    step = lastupdate = None
    ds_names: list[str] = []
    rras: list[_Rra] = []
    path: list[str] = []
    for ev, el in iter_xml(source, tracker):
        if ev == "start":
            path.append(el.tag)
            if el.tag == "rra":
                rras.append(_Rra())
            continue
        if ev != "end":
            continue
        tag = path.pop()
        parent = path[-1] if path else ""
        text = (el.text or "").strip()
        if parent == "rrd" and tag == "step":
            step = _int(text)
        elif parent == "rrd" and tag == "lastupdate":
            lastupdate = _int(text)
        elif parent == "ds" and tag == "name" and len(path) == 2:
            ds_names.append(text)
        elif parent == "rra" and tag == "cf":
            rras[-1].cf = text
        elif parent == "rra" and tag == "pdp_per_row":
            rras[-1].pdp_per_row = _int(text) or 1
        elif tag == "row" and parent == "database" and rras:
            rras[-1].rows.append([parse_number(v.text) for v in el])
            el.clear()
    if step is None or lastupdate is None or step <= 0:
        raise InputFormatError(
            "rrdtool dump without <step> (> 0) or <lastupdate>", source=source.name
        )
    series = names(ds_names)
    covered_from: int | None = None
    for rra in sorted((r for r in rras if r.cf == "AVERAGE"), key=lambda r: r.pdp_per_row):
        if rra.pdp_per_row < 1:
            st.rejected += len(rra.rows)
            st.notes.append(f"an AVERAGE archive with pdp_per_row {rra.pdp_per_row}: not read")
            continue
        period = step * rra.pdp_per_row
        last_end = lastupdate - lastupdate % period
        n = len(rra.rows)
        st.steps.add(period)
        for i, row in enumerate(rra.rows):
            t1 = last_end - (n - 1 - i) * period
            t0 = t1 - period
            if covered_from is not None:
                if t0 >= covered_from:
                    continue
                t1 = min(t1, covered_from)  # the finer archive has the rest of this row's span
            for (h, m), x in zip(series, row, strict=False):
                if x is not None and sink.add(h, m, t0 * US, t1 * US, x):
                    st.took(h, m)
        first = last_end - n * period
        covered_from = first if covered_from is None else min(covered_from, first)
    return st
