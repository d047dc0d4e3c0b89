"""A Ganglia run's per-minute rows against the rows the store already holds (across runs).

Within one run, samples that disagree are set aside (``ganglia_conflicts``). Rows of earlier
``ingest`` calls are already in the store, and rows of one format from two calls are simply
added together: without this check a second export of a host's series (``m5/gpu0_util.csv``,
then ``m5/gpu0_util_copy.csv`` in a later run) gave the ``gpu_util`` view two rows for each of
its GPU minutes, counted twice by every analysis, and nothing said so. So each new per-minute
row is compared with the store's rows of the same format and key (host, GPU or metric, minute;
the rows of batches this run replaces, e.g. a file's earlier version, do not count):

- **the same value**: a duplicate (the same export read again under another name): not added,
  counted in a note;
- **a different value**: a conflict. The store's row stays (one run never rewrites another's
  committed rows, and the store keeps giving one answer: the first ingested), the new row goes
  to ``rejects`` with its source and both values, and a note says how many and what to do.

A store without rows of the format (the usual first ingest) costs nothing: rows are written as
they come.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import duckdb

from philly_analyze import schemas
from philly_analyze.ingest.reject_limit import CONFLICT_PREFIX
from philly_analyze.store import Batch, sql_literal

if TYPE_CHECKING:
    from philly_analyze.ingest.ganglia_route import Part

#: Key columns of each per-minute table a Ganglia run writes (the other columns are values).
KEYS: dict[str, tuple[str, ...]] = {
    "gpu_util": ("time", "machine_id", "gpu_idx"),
    "gpu_metrics": ("time", "machine_id", "gpu_idx", "metric"),
    "cpu_util": ("time", "machine_id"),
    "mem_util": ("time", "machine_id"),
    "host_metrics": ("time", "machine_id", "metric"),
}


@dataclass
class Stored:
    """The store's files of one Ganglia format, and what the comparisons found."""

    #: table -> the format's live Parquet files (none: the table is written as it comes).
    files: dict[str, list[str]]
    duplicates: Counter[str] = field(default_factory=Counter)
    conflicting: Counter[str] = field(default_factory=Counter)
    #: The first conflicting row, for the note.
    example: str = ""

    @classmethod
    def of(cls, batch: Batch, fmt: str) -> Stored:
        """The store's rows of ``fmt``, but those of the batches ``batch`` replaces."""
        found = batch.store.files_of(fmt, KEYS, excluding=batch.replaces)
        return cls({t: [str(p) for p in ps] for t, ps in found.items() if ps})

    @property
    def conflicts(self) -> int:
        return sum(self.conflicting.values())

    def write(
        self,
        con: duckdb.DuckDBPyConnection,
        batch: Batch,
        table: str,
        query: str,
        params: list[Any],
        part: Part,
    ) -> int:
        """Write the rows of ``query`` (the table's columns, plus ``_series``: the Ganglia
        metric a row comes from, and ``__month``: its month partition, ``Batch.copy_query``)
        to ``table`` but those the store holds already; returns rows written. ``part_hosts``
        holds the hosts of ``part``; ``series`` and ``run_sources`` name each series' first
        source."""
        files = self.files.get(table)
        if not files:
            return batch.copy_query(table, con, query, params, month_column="__month")
        t = schemas.TABLES[table]
        keys = KEYS[table]
        k = ", ".join(keys)
        values = [c.name for c in t.physical_columns if c.name not in keys]
        casts = ", ".join(
            f"CAST({c.name} AS {schemas.duckdb_type(c.type)}) AS {c.name}"
            for c in t.physical_columns
        )
        con.execute(
            f"CREATE OR REPLACE TEMP TABLE new_rows AS SELECT {casts}, _series, __month "
            f"FROM ({query})",
            params,
        )
        where = "machine_id IN (SELECT machine_id FROM part_hosts)"
        if part.minutes:
            lo, hi = part.minutes
            where += f" AND time >= to_timestamp({lo * 60}) AND time < to_timestamp({hi * 60})"
        paths = ", ".join(sql_literal(p) for p in files)
        con.execute(
            f"""CREATE OR REPLACE TEMP TABLE old_rows AS SELECT {k}, {", ".join(values)}
                FROM read_parquet([{paths}], union_by_name = true, hive_partitioning = false)
                WHERE {where}"""
        )
        written = batch.copy_query(
            table,
            con,
            f"SELECT * FROM new_rows ANTI JOIN old_rows USING ({k})",
            month_column="__month",
        )
        same = " AND ".join(f"n.{v} IS NOT DISTINCT FROM o.{v}" for v in values)
        con.execute(
            f"""CREATE OR REPLACE TEMP TABLE met AS
                SELECT n.*, {", ".join(f"o.{v} AS _old_{v}" for v in values)}, ({same}) AS _same
                FROM new_rows n JOIN old_rows o USING ({k})"""
        )
        dup, differ = con.execute(
            "SELECT count(*) FILTER (WHERE _same), count(*) FILTER (WHERE NOT _same) FROM met"
        ).fetchone() or (0, 0)
        self.duplicates[table] += dup
        if differ:
            self._reject(con, batch, table, keys, values)
        for temp in ("new_rows", "old_rows", "met"):
            con.execute(f"DROP TABLE {temp}")
        return written

    def _reject(
        self,
        con: duckdb.DuckDBPyConnection,
        batch: Batch,
        table: str,
        keys: tuple[str, ...],
        values: list[str],
    ) -> None:
        here = "concat_ws(' ', " + ", ".join(f"m.{v}" for v in values) + ")"
        there = "concat_ws(' ', " + ", ".join(f"m._old_{v}" for v in values) + ")"
        src = """coalesce(
            (SELECT r.source FROM series s JOIN run_sources r USING (src)
             WHERE s.machine_id = m.machine_id AND s.metric = m._series),
            (SELECT min(r.source) FROM series s JOIN run_sources r USING (src)
             WHERE s.machine_id = m.machine_id))"""
        rows = f"""SELECT {src} AS source, NULL AS line_no,
                   format(? || ' with the store: host {{}}, {{}} ({{}}) at {{}} UTC is {{}} here '
                          || 'and {{}} in the store (an earlier ingest): the stored row kept',
                          m.machine_id, m._series, ?, strftime(m.time, '%Y-%m-%d %H:%M'),
                          {here}, {there}) AS reason,
                   concat_ws(',', {", ".join(f"m.{c}" for c in (*keys, *values))}) AS raw,
                   m.machine_id, m._series, m.time, {here} AS here, {there} AS there
            FROM met m WHERE NOT m._same"""
        n = batch.copy_query(
            "rejects",
            con,
            f"SELECT * FROM ({rows}) ORDER BY machine_id, _series, time",
            [CONFLICT_PREFIX, table],
        )
        self.conflicting[table] += n
        if not self.example:
            first = con.execute(
                f"""SELECT source, machine_id, _series, strftime(time, '%Y-%m-%d %H:%M'),
                           here, there
                    FROM ({rows}) ORDER BY machine_id, _series, time LIMIT 1""",
                [CONFLICT_PREFIX, table],
            ).fetchall()
            if first:
                source, host, series, when, new, old = first[0]
                name = Path(str(source).rsplit("!", 1)[-1]).name
                self.example = (
                    f"host {host}, {series} at {when} UTC: {new} in {name}, {old} in the store"
                )

    def notes(self, fmt: str) -> list[str]:
        """What the comparisons found, for the user."""
        out = []
        if self.duplicates.total():
            out.append(
                f"{fmt}: {self.duplicates.total():,} per-minute rows ({_by_table(self.duplicates)}) "
                "equal rows the store already holds from an earlier ingest (the same series read "
                "again, e.g. a copy under another name): not added again"
            )
        if self.conflicting.total():
            out.append(
                f"{fmt}: {self.conflicts:,} per-minute rows ({_by_table(self.conflicting)}) differ "
                "from the store's rows of the same host, metric and minute from an earlier ingest "
                f"(first: {self.example}): the stored rows kept, these in rejects. If the files "
                "are another host's, name their host (--ganglia-host-pattern, "
                "docs/raw-sources.md); to keep these values instead, ingest them into a store "
                "without the earlier files"
            )
        return out


def _by_table(counts: Counter[str]) -> str:
    return ", ".join(f"{t} {n:,}" for t, n in counts.items() if n)
