"""Readers of the text Ganglia exports (formats.md §3): ganglia-web ``graph.php?...&csv=1`` and
``&json=1``, and ``rrdtool xport --json``. Each yields samples to a ``Sink``.

ganglia-web runs ``rrdtool xport`` and reprints its rows, so every row is the average of the
step that ends at its timestamp. The step is not printed: it is the most common gap between a
series' timestamps (of the first ``STEP_PROBE`` rows).

- CSV: header ``Timestamp,<metric>[,<metric>...]`` (ganglia-web prints metric names only);
  times are ISO 8601 with an offset (``date('c')``: exact), epoch seconds (exact) or, rarely,
  zone-less (read in ``--timezone``). Empty cells and ``NaN`` are missing values.
- ganglia-web JSON: ``[{ds_name, cluster_name, graph_type, host_name, metric_name,
  datapoints: [[value, unix_ts], ...]}, ...]`` (host and metric inside the data), streamed one
  series at a time.
- ``rrdtool xport --json``: ``{"about", "meta": {start, end, step, legend}, "data": [[v, ...]]}``;
  row ``i`` ends at ``start + i * step`` (``--showtime`` rows carry their time first). The
  pre-1.5 output with bare keys and single quotes is accepted.
"""

from __future__ import annotations

import io
import json
import re
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pandas as pd
from pandas.api.typing import NaTType

from philly_analyze.bounds import TIME, excerpt, json_int
from philly_analyze.errors import InputFormatError
from philly_analyze.ingest.formats import IngestContext, csv_fields
from philly_analyze.ingest.ganglia_samples import TIME_RANGE, US, ReadStats, Sink, parse_number
from philly_analyze.ingest.philly import iter_json_array
from philly_analyze.ingest.source import Source
from philly_analyze.store import Batch
from philly_analyze.timeutil import localize_naive

STEP_PROBE = 200
CHUNK_ROWS = 50_000
_OFFSET_RE = re.compile(r"(?:Z|[+-]\d{2}:?\d{2})$")
_EPOCH_RE = re.compile(r"^\d{9,11}(?:\.\d+)?$")
_ISO_RE = re.compile(r"^\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?")
#: Maps a list of column names to (host, metric) per column (``ganglia.series_names``).
Namer = Callable[[list[str]], list[tuple[str, str]]]


def looks_like_time(text: str) -> bool:
    """Whether a CSV cell is a timestamp this reader understands."""
    text = text.strip()
    return bool(_EPOCH_RE.match(text) or _ISO_RE.match(text))


def to_epoch_us(texts: list[str], tz: str) -> tuple[np.ndarray, np.ndarray]:
    """Timestamps -> UTC epoch microseconds (int64) and a mask of unparsable ones.

    Epoch seconds and ISO times with an offset are exact; zone-less ISO times are wall-clock
    in ``tz`` (``timeutil.localize_naive``)."""
    n = len(texts)
    out = np.zeros(n, dtype=np.int64)
    bad = np.zeros(n, dtype=bool)
    kinds = np.fromiter((_time_kind(t) for t in texts), dtype=np.int8, count=n)
    bad |= kinds == 3
    ep = np.flatnonzero(kinds == 0)
    if len(ep):
        out[ep] = np.round(np.array([float(texts[i]) for i in ep]) * US).astype(np.int64)
    for kind in (1, 2):
        idx = np.flatnonzero(kinds == kind)
        if not len(idx):
            continue
        parsed = _iso_times([texts[i] for i in idx], utc=kind == 1)
        if kind == 1:
            us = parsed.dt.tz_convert(None).to_numpy(dtype="datetime64[us]")
        else:
            us, _ = localize_naive(parsed.to_numpy(dtype="datetime64[us]"), tz)
        nat = np.isnat(us)
        bad[idx[nat]] = True
        out[idx[~nat]] = us[~nat].astype(np.int64)
    return out, bad


def _iso_times(texts: list[str], utc: bool) -> pd.Series:
    """ISO 8601 texts -> datetimes (NaT where unparsable). pandas refuses a whole list for
    one odd value (mixed offsets, a year it cannot hold): then each is read on its own."""
    try:
        return pd.to_datetime(pd.Series(texts), errors="coerce", utc=utc, format="ISO8601")
    except (ValueError, OverflowError):
        return pd.Series(
            [_iso_time(t, utc) for t in texts],
            dtype="datetime64[us, UTC]" if utc else "datetime64[us]",
        )


def _iso_time(text: str, utc: bool) -> pd.Timestamp | NaTType:
    try:
        t = pd.to_datetime(text, errors="coerce", utc=utc, format="ISO8601")
    except (ValueError, OverflowError):
        return pd.NaT
    return pd.NaT if (not utc and isinstance(t, pd.Timestamp) and t.tzinfo is not None) else t


def _time_kind(t: str) -> int:
    """0 epoch seconds, 1 ISO with offset, 2 zone-less ISO, 3 neither. Character tests first:
    a regex per row costs more than the rest of the row's parsing."""
    if len(t) >= 19 and t[4] == "-" and t[10] in "T ":
        if t[-1] == "Z" or (t[-6] in "+-" and t[-3] == ":") or _OFFSET_RE.search(t):
            return 1
        return 2 if _ISO_RE.fullmatch(t) else 3
    return 0 if _EPOCH_RE.match(t) else 3


def infer_step(times_us: np.ndarray) -> int | None:
    """The most common positive gap between consecutive times (µs), None if no gap."""
    gaps = np.diff(np.sort(times_us[:STEP_PROBE]))
    gaps = gaps[gaps > 0]
    if not len(gaps):
        return None
    values, counts = np.unique(gaps, return_counts=True)
    return int(values[np.argmax(counts)])


# --------------------------------------------------------------------------- CSV
def read_csv(
    source: Source, sink: Sink, ctx: IngestContext, batch: Batch, names: Namer
) -> ReadStats:
    """Samples of a ganglia-web CSV export (one host per file: host from the path)."""
    st = ReadStats()
    lines = source.text_lines(ctx.tracker)
    header: list[str] | None = None
    series: list[tuple[str, str]] = []
    rows: list[tuple[int, str, list[str]]] = []
    step: int | None = None
    for line_no, line in lines:
        if not line.strip():
            continue
        # ganglia-web prints numbers and ISO times, never quotes: split unless quoted.
        try:
            fields = line.split(",") if '"' not in line else csv_fields(line)
        except ValueError as e:
            batch.reject(source.name, line_no, str(e), line)
            st.rejected += 1
            continue
        if header is None:
            header = [f.strip() for f in fields]
            if len(header) < 2 or header[0].lower() != "timestamp":
                raise InputFormatError(
                    "expected a header 'Timestamp,<metric>,...'", source=source.name, line=line_no
                )
            series = names(header[1:])
            dup = [k for k, n in Counter(series).items() if n > 1]
            if dup:
                raise InputFormatError(
                    f"column {dup[0][1]!r} appears more than once: an aggregate graph of "
                    "several hosts cannot be told apart in CSV (export it as JSON, which names "
                    "each host)",
                    source=source.name,
                    line=line_no,
                )
            continue
        if len(fields) != len(header):
            batch.reject(
                source.name, line_no, f"expected {len(header)} fields, found {len(fields)}", line
            )
            st.rejected += 1
            continue
        rows.append((line_no, fields[0].strip(), fields[1:]))
        if len(rows) >= CHUNK_ROWS:
            step = _csv_flush(rows, series, step, source, sink, ctx, batch, st)
            rows = []
    if header is None:
        raise InputFormatError("no header line", source=source.name, line=1)
    _csv_flush(rows, series, step, source, sink, ctx, batch, st)
    return st


def _csv_flush(
    rows: list[tuple[int, str, list[str]]],
    series: list[tuple[str, str]],
    step: int | None,
    source: Source,
    sink: Sink,
    ctx: IngestContext,
    batch: Batch,
    st: ReadStats,
) -> int | None:
    if not rows:
        return step
    t_us, bad = to_epoch_us([r[1] for r in rows], ctx.timezone)
    far = ~bad & ~TIME.mask_us(t_us)
    for i in np.flatnonzero(bad | far):
        line_no, t, cells = rows[i]
        why = TIME.reason(t) if far[i] else f"unparsable time {excerpt(t)}"
        batch.reject(source.name, line_no, why, ",".join([t, *cells]))
        st.rejected += 1
    bad |= far
    good = np.flatnonzero(~bad)
    if step is None:
        step = infer_step(t_us[good]) or 0
        st.steps.add(step // US)
    t1 = t_us[good]
    t0 = t1 - step
    for j, (h, m) in enumerate(series):
        column = pd.Series([rows[i][2][j] for i in good], dtype=object)
        values = pd.to_numeric(column, errors="coerce").to_numpy(dtype=np.float64)
        st.took(h, m, sink.add_many(h, m, t0, t1, values))
    return step


# --------------------------------------------------------------------------- ganglia-web JSON
def read_ganglia_json(source: Source, sink: Sink, ctx: IngestContext, batch: Batch) -> ReadStats:
    """Samples of a ganglia-web JSON export (host and metric inside each series)."""
    st = ReadStats()
    for line_no, obj in iter_json_array(source, ctx):
        if not isinstance(obj, dict) or not isinstance(obj.get("datapoints"), list):
            batch.reject(source.name, line_no, "series without datapoints", json.dumps(obj)[:1000])
            st.rejected += 1
            continue
        host, metric = obj.get("host_name"), obj.get("metric_name")
        if not host or not metric:
            batch.reject(
                source.name, line_no, "series without host_name or metric_name", str(obj)[:200]
            )
            st.rejected += 1
            continue
        h, m = str(host), str(metric)
        points = [p for p in obj["datapoints"] if isinstance(p, list) and len(p) == 2]
        # Refused samples become rejects rows (one per series and reason) and are counted
        # there; they were once only counted, with no row saying which.
        sink.refuse(
            h, m, "datapoint that is not [value, time]", len(obj["datapoints"]) - len(points)
        )
        ts = np.array([_num_or_nan(p[1]) for p in points], dtype=np.float64)
        values = np.array([_num_or_nan(p[0]) for p in points], dtype=np.float64)
        ok = np.isfinite(ts)
        sink.refuse(h, m, "datapoint without a finite time", int((~ok).sum()))
        far = ok & ~TIME.mask_us(ts * US)
        sink.refuse(
            h, m, f"time out of range ({TIME_RANGE})", int((far & np.isfinite(values)).sum())
        )
        ok &= ~far
        t1 = np.round(ts[ok] * US).astype(np.int64)
        step = infer_step(t1) or 0
        st.steps.add(step // US)
        st.took(h, m, sink.add_many(h, m, t1 - step, t1, values[ok]))
    return st


def _num_or_nan(v: Any) -> float:
    if isinstance(v, bool) or v is None:
        return float("nan")
    if isinstance(v, int | float):
        try:
            return float(v)
        except OverflowError:  # an int of hundreds of digits: beyond every bound
            return float("inf")
    x = parse_number(str(v))
    return float("nan") if x is None else x


# --------------------------------------------------------------------------- xport --json
_BARE_KEY = re.compile(r"([{,]\s*)([A-Za-z_]\w*)\s*:")
_SINGLE_QUOTED = re.compile(r"'([^'\\]*)'")


def load_lenient_json(text: str) -> Any:
    """JSON, or the pre-1.5 ``rrdtool xport --json`` dialect (bare keys, single quotes)."""
    try:
        return json.loads(text, parse_int=json_int)
    except json.JSONDecodeError:
        fixed = _SINGLE_QUOTED.sub(lambda m: json.dumps(m.group(1)), text)
        fixed = _BARE_KEY.sub(lambda m: f'{m.group(1)}"{m.group(2)}":', fixed)
        return json.loads(fixed, parse_int=json_int)


def read_xport_json(source: Source, sink: Sink, ctx: IngestContext, names: Namer) -> ReadStats:
    """Samples of ``rrdtool xport --json`` (small: read whole)."""
    st = ReadStats()
    with source.open(ctx.tracker) as raw:
        text = io.TextIOWrapper(raw, encoding="utf-8", errors="replace").read()
    try:
        doc = load_lenient_json(text)
    except json.JSONDecodeError as e:
        raise InputFormatError(
            f"invalid JSON: {e.msg}", source=source.name, line=e.lineno
        ) from None
    except RecursionError:
        raise InputFormatError("JSON nested too deeply", source=source.name) from None
    meta = doc.get("meta") if isinstance(doc, dict) else None
    data = doc.get("data") if isinstance(doc, dict) else None
    if not isinstance(meta, dict) or not isinstance(data, list):
        raise InputFormatError("rrdtool xport JSON without meta and data", source=source.name)
    start, step = meta.get("start"), meta.get("step")
    legend = [str(x) for x in meta.get("legend") or []]
    if not isinstance(start, int) or not isinstance(step, int) or step <= 0:
        raise InputFormatError(
            "rrdtool xport JSON without integer meta.start/step", source=source.name
        )
    series = names(legend)
    st.steps.add(step)
    for i, row in enumerate(_rows(data)):
        if len(row) == len(series) + 1:  # --showtime
            shown = _num_or_nan(row[0])
            if not np.isfinite(shown):
                st.rejected += 1
                continue
            t, values = int(shown), row[1:]
        elif len(row) == len(series):
            t, values = start + i * step, row
        else:
            st.rejected += 1
            continue
        for (h, m), v in zip(series, values, strict=True):
            x = _num_or_nan(v)
            if np.isfinite(x) and sink.add(h, m, (t - step) * US, t * US, x):
                st.took(h, m)
    return st


def _rows(data: list[Any]) -> Iterator[list[Any]]:
    for row in data:
        yield row if isinstance(row, list) else [row]
