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
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from pathlib import Path, PurePosixPath
from typing import Any, Protocol

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

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


class SampleSink:
    """Samples buffered in columns and appended to one Parquet file (bounded memory).
    ``add`` takes one sample; ``add_many`` a whole series chunk as arrays (vectorised readers)."""

    def __init__(self, path: Path):
        self.path = path
        self.count = 0
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

    def add(self, host: str, metric: str, t0_us: int, t1_us: int, value: float) -> None:
        h, m, a, b, v, src = self._cols
        h.append(host)
        m.append(metric)
        a.append(t0_us)
        b.append(t1_us)
        v.append(value)
        src.append(self.source_id)
        if len(v) >= CHUNK_SAMPLES:
            self.flush()

    def add_many(
        self, host: str, metric: str, t0_us: np.ndarray, t1_us: np.ndarray, values: np.ndarray
    ) -> int:
        """Add the finite values of one series; returns how many were added."""
        keep = np.isfinite(values)
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
