"""How many rows the sources of an ``ingest`` run had rejected, and whether that fails the run.

Good rows are always kept; a run whose sources hold more ``rejects`` rows than
``--max-rejects`` allows (0 by default, ``all`` for no limit) ends with exit 1 and one line
naming the first reject (like BigQuery's ``max_bad_records`` or Redshift's ``MAXERROR``, but
nothing is rolled back). The rejects counted are those the store holds for the sources of the
run, read from the ``rejects`` table, not only those this run wrote: a source skipped as
already ingested still has its rejects from the run that read it, so running the same command
twice gives the same exit status.

Ganglia conflicts (``rejects`` rows whose reason starts with ``conflict``) count: a value of
the input was not kept, as for any other reject. The message says how many of them there are.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict, dataclass
from typing import Any

import pyarrow as pa

from philly_analyze.errors import UserError
from philly_analyze.store import Store

#: ``--max-rejects all``: no limit.
NO_LIMIT = "all"
#: Reasons of the ``rejects`` rows of Ganglia conflicts start with this (``ganglia_conflicts.py``
#: and ``ganglia_stored.py`` write it, as a query parameter; the count of conflicts reads it).
CONFLICT_PREFIX = "conflict"


def parse_max_rejects(value: str) -> int | None:
    """``--max-rejects``: a whole number >= 0, or ``all`` (None: never fail for rejects).
    Raises ValueError otherwise."""
    text = value.strip().lower()
    if text == NO_LIMIT:
        return None
    try:
        n = int(text.replace(",", "").replace("_", ""))
    except ValueError:
        raise ValueError(f"{value!r} is neither a whole number nor {NO_LIMIT!r}") from None
    if n < 0:
        raise ValueError(f"{value!r} is negative")
    return n


@dataclass(frozen=True)
class FirstReject:
    """The first ``rejects`` row of the run's sources, by source name then line (rows without
    a line, such as conflicts and samples of XML, after those with one)."""

    source: str
    line_no: int | None
    reason: str

    def where(self) -> str:
        """``FILE:LINE`` or ``FILE``."""
        return self.source if self.line_no is None else f"{self.source}:{self.line_no}"


@dataclass(frozen=True)
class SourceRejects:
    """The ``rejects`` rows of a run's sources: how many, how many are Ganglia conflicts,
    and the first."""

    rows: int = 0
    conflicts: int = 0
    first: FirstReject | None = None

    def as_json(self) -> dict[str, Any]:
        """The ``source_rejects`` object of ``ingest --format json``."""
        return {
            "rows": self.rows,
            "conflicts": self.conflicts,
            "first": None if self.first is None else asdict(self.first),
        }


def source_rejects(store: Store, sources: Iterable[str]) -> SourceRejects:
    """The ``rejects`` rows the store holds for ``sources`` (names as ``ingest_log`` records
    them). One query, the names joined as a table (a folder may give 100,000 of them)."""
    names = sorted(set(sources))
    if not names or not store.has_rows("rejects"):
        return SourceRejects()
    store.con.register("_run_sources", pa.table({"source": pa.array(names, pa.string())}))
    try:
        rows, conflicts = store.con.execute(
            "SELECT count(*), count(*) FILTER (WHERE starts_with(r.reason, ?)) "
            "FROM rejects r JOIN _run_sources s USING (source)",
            [CONFLICT_PREFIX],
        ).fetchall()[0]
        first = store.con.execute(
            "SELECT r.source, r.line_no, r.reason FROM rejects r JOIN _run_sources s "
            "USING (source) ORDER BY r.source, r.line_no NULLS LAST, r.reason LIMIT 1"
        ).fetchall()
    finally:
        store.con.unregister("_run_sources")
    if not rows:
        return SourceRejects()
    source, line_no, reason = first[0]
    return SourceRejects(
        int(rows), int(conflicts), FirstReject(source, line_no, reason or "rejected")
    )


def check_rejects(found: SourceRejects, max_rejects: int | None) -> None:
    """Raise the ``UserError`` (exit 1) of a run whose sources hold more rejected rows than
    ``max_rejects`` allows (None: no limit). Its one line names the first reject."""
    if max_rejects is None or found.rows <= max_rejects or found.first is None:
        return
    rows = f"{found.rows:,} row{'s' * (found.rows != 1)} rejected in all"
    if found.conflicts:
        rows += f" ({found.conflicts:,} of them Ganglia conflicts: values not kept)"
    raise UserError(
        f"{found.first.reason} ({rows}, kept in the store's rejects table; the good rows were "
        f"ingested; --max-rejects {found.rows} accepts them)",
        source=found.first.source,
        line=found.first.line_no,
    )
