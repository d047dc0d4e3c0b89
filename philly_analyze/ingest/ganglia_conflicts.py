"""Samples that sources of one Ganglia batch agree or disagree on.

A sample is a value of one host's metric over ``[t0, t1)`` (``resample.py``). Several samples
with the same host, metric, ``t0`` and ``t1``:

- **the same value**: duplicates (the same file under two names, a dump captured twice). They
  are kept once (the resampling counts a sample once) and counted in a note;
- **different values**: a **conflict**. No source is more right than another, so none of them
  is kept: each goes to ``rejects`` with its source, and a note says how many there are and how
  to name hosts. The usual cause is exports of several hosts given one host (files named
  ``m0_gpu0_util.csv``, ``m1_gpu0_util.csv`` in one folder read with ``--ganglia-host-pattern
  folder``); another is a zone-less CSV whose fall-back hour gives two rows the same time.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import duckdb
import pyarrow as pa

from philly_analyze.ingest.reject_limit import CONFLICT_PREFIX
from philly_analyze.store import Batch

KEY = "machine_id, metric, t0, t1"
#: Sources named in the note.
SHOWN_SOURCES = 3


@dataclass
class Clashes:
    """What ``find_conflicts`` found (summed over the parts of a run with ``add``)."""

    duplicates: int = 0
    conflicts: int = 0
    series: int = 0
    #: The first conflicting series and its sources, for the note.
    example: str = ""

    def add(self, other: Clashes) -> None:
        """Count ``other`` (a later part: its example comes after this one's) in this."""
        self.duplicates += other.duplicates
        self.conflicts += other.conflicts
        self.series += other.series
        self.example = self.example or other.example

    def notes(self, fmt: str) -> list[str]:
        out = []
        if self.duplicates:
            out.append(
                f"{fmt}: {self.duplicates:,} samples repeated with the same value (a file given "
                "twice, a dump captured twice) counted once"
            )
        if self.conflicts:
            out.append(
                f"{fmt}: {self.conflicts:,} samples of {self.series:,} series conflict (different "
                f"values for the same host, metric and time; first: {self.example}): none of them "
                "kept, each in rejects. If the files are different hosts, name each one's host: "
                "<host>_<metric>.csv, a folder per host, or --ganglia-host-pattern "
                "(docs/raw-sources.md)"
            )
        return out


#: The table of conflicting sample keys that ``find_conflicts`` fills; resample without them.
CLASH_KEYS = "clash_keys"


def find_conflicts(
    con: duckdb.DuckDBPyConnection, samples: str, sources: list[str], batch: Batch
) -> Clashes:
    """Find duplicates and conflicts among ``samples`` (a relation with ``SAMPLE_SCHEMA``
    columns; ``src`` indexes ``sources``), write the conflicting samples to ``rejects`` and add
    their keys to the table ``CLASH_KEYS`` (``ANTI JOIN clash_keys USING (KEY)`` leaves the
    samples to keep). Samples of one key must all be in one call's ``samples``."""
    con.execute(
        f"CREATE TEMP TABLE IF NOT EXISTS {CLASH_KEYS} AS SELECT {KEY} FROM {samples} LIMIT 0"
    )
    con.execute(
        f"""CREATE OR REPLACE TEMP TABLE clash AS
            SELECT {KEY}, count(*) AS n, min(value) AS lo, max(value) AS hi FROM {samples}
            WHERE value IS NOT NULL AND isfinite(value) AND t0 <= t1
            GROUP BY ALL HAVING count(*) > 1"""
    )
    dup, groups = con.execute(
        "SELECT coalesce(sum(n - 1) FILTER (WHERE lo = hi), 0), count(*) FILTER (WHERE lo <> hi) "
        "FROM clash"
    ).fetchone() or (0, 0)
    found = Clashes(duplicates=int(dup))
    if not groups:
        con.execute("DROP TABLE clash")
        return found
    con.execute("DELETE FROM clash WHERE lo = hi")
    con.execute(f"INSERT INTO {CLASH_KEYS} SELECT {KEY} FROM clash")
    _reject(con, samples, sources, batch, found)
    return found


def _reject(
    con: duckdb.DuckDBPyConnection,
    samples: str,
    sources: list[str],
    batch: Batch,
    found: Clashes,
) -> None:
    """The samples of the keys in ``clash`` to ``rejects``; counts and example in ``found``."""
    # The conflicting samples, once (few), with their sources' names.
    con.register("clash_sources", pa.table({"src": range(len(sources)), "source": sources}))
    con.execute(
        f"""CREATE OR REPLACE TEMP TABLE bad AS
            SELECT s.*, c.lo, c.hi, n.source FROM {samples} s JOIN clash c USING ({KEY})
            JOIN clash_sources n USING (src)
            WHERE s.value IS NOT NULL AND isfinite(s.value)"""
    )
    con.unregister("clash_sources")
    con.execute("DROP TABLE clash")
    found.conflicts = batch.copy_query(
        "rejects",
        con,
        """SELECT source, NULL AS line_no,
                  format(? || ': samples of host {}, metric {} for [{}, {}) UTC '
                         || 'differ ({} to {}): none kept', machine_id, metric,
                         make_timestamp(t0), make_timestamp(t1), lo, hi) AS reason,
                  concat_ws(',', machine_id, metric, make_timestamp(t0),
                            make_timestamp(t1), value) AS raw
           FROM bad ORDER BY machine_id, metric, t0, t1, src""",
        [CONFLICT_PREFIX],
    )
    found.series = con.execute(
        "SELECT count(*) FROM (SELECT DISTINCT machine_id, metric FROM bad)"
    ).fetchall()[0][0]
    host, metric = con.execute(
        "SELECT machine_id, metric FROM bad ORDER BY machine_id, metric LIMIT 1"
    ).fetchall()[0]
    srcs = [
        r[0]
        for r in con.execute(
            "SELECT DISTINCT source FROM bad WHERE machine_id = ? AND metric = ? ORDER BY 1",
            [host, metric],
        ).fetchall()
    ]
    con.execute("DROP TABLE bad")
    names = [Path(s.rsplit("!", 1)[-1]).name for s in srcs]
    more = ", ..." if len(names) > SHOWN_SOURCES else ""
    found.example = f"host {host}, metric {metric} from {', '.join(names[:SHOWN_SOURCES])}{more}"
