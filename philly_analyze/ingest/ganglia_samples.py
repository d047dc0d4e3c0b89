"""What every Ganglia reader shares: the sample sink, per-source statistics, number parsing,
and how hosts and metric names are found when the data does not carry them.

Host and metric come from the data where it has them (gmond/gmetad ``HOST NAME`` and ``METRIC
NAME``, ganglia-web JSON ``host_name``/``metric_name``). CSV and rrdtool exports carry no host:
it comes from the file name or its folder (``ganglia_hosts``). Their metric is the
column/legend/data-source name, or the file name without extensions when that name is generic
(gmetad RRDs have a single data source called ``sum``).
"""

from __future__ import annotations

import json
import math
import re
from collections import Counter
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from pathlib import Path, PurePosixPath
from typing import Any, Protocol

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from philly_analyze.bounds import GPU_INDEX, TIME

US = 1_000_000
CHUNK_SAMPLES = 250_000
_EXTENSIONS = {".gz", ".bz2", ".xz", ".csv", ".json", ".xml", ".output", ".dump", ".txt", ".rrd"}

SAMPLE_SCHEMA = pa.schema(
    [
        pa.field("machine_id", pa.string()),
        pa.field("metric", pa.string()),
        pa.field("t0", pa.int64()),
        pa.field("t1", pa.int64()),
        pa.field("value", pa.float64()),
        # Index of the source that gave the sample (``SampleSink.source_id``): conflicts
        # between sources are reported per source (``ganglia_conflicts``).
        pa.field("src", pa.int32()),
    ]
)


@cache
def metric_rules() -> dict[str, Any]:
    """``data/ganglia_metrics.json``: how metric names map to tables."""
    text = resources.files("philly_analyze").joinpath("data/ganglia_metrics.json").read_text()
    return json.loads(text)


class Sink(Protocol):
    """Where readers put samples: a value covering ``[t0, t1)`` (epoch µs; t0 == t1 for an
    instantaneous reading), see ``resample``."""

    def add(self, host: str, metric: str, t0_us: int, t1_us: int, value: float) -> None: ...

    def add_many(
        self, host: str, metric: str, t0_us: np.ndarray, t1_us: np.ndarray, values: np.ndarray
    ) -> int: ...

    def refuse(self, host: str, metric: str, reason: str, n: int = 1) -> None: ...


class SampleSink:
    """Samples buffered in columns and appended to one Parquet file (bounded memory).
    ``add`` takes one sample; ``add_many`` a whole series chunk as arrays (vectorised readers).

    Samples outside the bounds (``bounds.TIME``; a ``gpu<i>_`` metric with ``i`` beyond
    ``bounds.GPU_INDEX``) are refused, counted by series and reason in ``refused`` (the session
    turns them into ``rejects``), never written: a TN of 10^23 s would overflow the int64
    times, a GPU index of 10^5 the store's SMALLINT."""

    def __init__(self, path: Path):
        self.path = path
        self.count = 0
        #: (host, metric, reason) -> samples refused, since the last ``take_refused``.
        self.refused: Counter[tuple[str, str, str]] = Counter()
        self._metric_ok: dict[str, bool] = {}
        self._lo, self._hi = TIME.lo_us, TIME.hi_us
        #: Set by the session before each source is read.
        self.source_id = 0
        self._writer: pq.ParquetWriter | None = None
        self._cols: tuple[list[str], list[str], list[int], list[int], list[float], list[int]] = (
            [],
            [],
            [],
            [],
            [],
            [],
        )
        self._tables: list[pa.Table] = []
        self._pending = 0

    def refuse(self, host: str, metric: str, reason: str, n: int = 1) -> None:
        """Count ``n`` samples of a series not taken, and why."""
        if n:
            self.refused[(host, metric, reason)] += n

    def take_refused(self) -> Counter[tuple[str, str, str]]:
        """The refused samples counted since the last call (one source's)."""
        out, self.refused = self.refused, Counter()
        return out

    def metric_ok(self, host: str, metric: str, n: int = 1) -> bool:
        """Whether a metric's name is within bounds (refusing its ``n`` samples if not)."""
        ok = self._metric_ok.get(metric)
        if ok is None:
            m = re.match(metric_rules()["gpu_metric_regex"], metric)
            ok = self._metric_ok[metric] = m is None or GPU_INDEX.ok(float(m[1]))
        if not ok:
            self.refuse(host, metric, f"GPU index of the metric name out of range ({GPU_RANGE})", n)
        return bool(ok)

    def add(self, host: str, metric: str, t0_us: int, t1_us: int, value: float) -> bool:
        """Add one sample; False (refused, counted) when out of bounds."""
        if not self._lo <= t0_us <= t1_us < self._hi:
            self.refuse(host, metric, f"time out of range ({TIME_RANGE})")
            return False
        if not self.metric_ok(host, metric):
            return False
        h, m, a, b, v, src = self._cols
        h.append(host)
        m.append(metric)
        a.append(t0_us)
        b.append(t1_us)
        v.append(value)
        src.append(self.source_id)
        if len(v) >= CHUNK_SAMPLES:
            self.flush()
        return True

    def add_many(
        self, host: str, metric: str, t0_us: np.ndarray, t1_us: np.ndarray, values: np.ndarray
    ) -> int:
        """Add the finite values of one series; returns how many were added (samples out of
        bounds are refused and counted)."""
        keep = np.isfinite(values)
        inside = TIME.mask_us(t0_us) & TIME.mask_us(t1_us) & (t0_us <= t1_us)
        self.refuse(host, metric, f"time out of range ({TIME_RANGE})", int((keep & ~inside).sum()))
        keep &= inside
        if not self.metric_ok(host, metric, int(keep.sum())):
            return 0
        n = int(keep.sum())
        if n:
            self._tables.append(
                pa.Table.from_arrays(
                    [
                        pa.array([host] * n, pa.string()),
                        pa.array([metric] * n, pa.string()),
                        pa.array(t0_us[keep], pa.int64()),
                        pa.array(t1_us[keep], pa.int64()),
                        pa.array(values[keep], pa.float64()),
                        pa.array(np.full(n, self.source_id, np.int32)),
                    ],
                    schema=SAMPLE_SCHEMA,
                )
            )
            self._pending += n
            if self._pending >= CHUNK_SAMPLES:
                self.flush()
        return n

    def flush(self) -> None:
        if self._cols[4]:
            self._tables.append(
                pa.Table.from_arrays(
                    [
                        pa.array(c, type=f.type)
                        for c, f in zip(self._cols, SAMPLE_SCHEMA, strict=True)
                    ],
                    schema=SAMPLE_SCHEMA,
                )
            )
            for c in self._cols:
                c.clear()
        if not self._tables:
            return
        table = pa.concat_tables(self._tables)
        self._tables, self._pending = [], 0
        if self._writer is None:
            self._writer = pq.ParquetWriter(self.path, SAMPLE_SCHEMA)
        self._writer.write_table(table)
        self.count += table.num_rows

    def close(self) -> bool:
        """Flush and close; whether any sample was written."""
        self.flush()
        if self._writer is None:
            return False
        self._writer.close()
        return True


GPU_RANGE = f"0 to {int(GPU_INDEX.hi):,}"
TIME_RANGE = f"{TIME.lo:%Y-%m-%d} to {TIME.hi:%Y-%m-%d}"


@dataclass
class ReadStats:
    """What one source gave."""

    samples: int = 0
    hosts: set[str] = field(default_factory=set)
    series: set[tuple[str, str]] = field(default_factory=set)
    strings: int = 0
    rejected: int = 0
    #: Steps (seconds) of consolidated rows; 0 for instantaneous readings.
    steps: set[int] = field(default_factory=set)
    notes: list[str] = field(default_factory=list)
    #: Host-less exports: where the host came from ("file name" or "folder", ganglia_hosts).
    host_from: str = ""

    def took(self, host: str, metric: str, n: int = 1) -> None:
        if n:
            self.samples += n
            self.hosts.add(host)
            self.series.add((host, metric))


def parse_number(text: str | None) -> float | None:
    """A finite float, or None for NaN/unknown/empty/non-numbers."""
    if text is None:
        return None
    try:
        v = float(text.strip())
    except ValueError:
        return None
    return v if math.isfinite(v) else None


def path_host_stem(name: str) -> tuple[str, str]:
    """(folder name, file name without extensions) of a source name (archive members: the
    member's path)."""
    member = name.rsplit("!", 1)[-1]
    p = PurePosixPath(member.replace("\\", "/"))
    stem = p.name
    while True:
        suffix = PurePosixPath(stem).suffix
        if suffix.lower() not in _EXTENSIONS or suffix == stem:
            break
        stem = stem[: -len(suffix)]
    return p.parent.name, stem
