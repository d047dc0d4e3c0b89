"""What ``ingest`` prints when it is done, as a document of the output layer
(``philly_analyze.report``): rows read and rows in the store per table, and in json the
summary object of docs (seconds, rejected, sources[], rows_added, rows_in_store, notes,
source_rejects)."""

from __future__ import annotations

from typing import Any

import pandas as pd

from philly_analyze.ingest.pipeline import IngestReport
from philly_analyze.report.model import Document, Section, Table

#: The rows table's columns (its CSV header and JSON keys) and how the text formats name them.
HEADERS = {"table": "table", "rows_read": "rows read", "rows_in_store": "in store"}


def title(report: IngestReport) -> str:
    """``ingest: 1.2 s, 0 rows rejected`` (``1 row``; and the bytes that were not text, if
    any)."""
    rows = "row" if report.rejected == 1 else "rows"
    out = f"ingest: {report.seconds:.1f} s, {report.rejected:,} {rows} rejected"
    if report.not_text_bytes:
        damaged = sum(1 for o in report.outcomes if o.not_text_bytes)
        out += (
            f", {report.not_text_bytes:,} bytes not text in {damaged:,} file{'s' * (damaged != 1)}"
        )
    return out


def summary_document(
    report: IngestReport, counts: dict[str, int], *, notes: bool = True
) -> Document:
    """The summary of an ingest: a row per table that rows were read into or that holds
    rows (``counts``: rows in the store per table); ``notes``: the report's notes go in the
    document (md, html), else the caller prints them."""
    added = report.rows_by_table()
    rows = [[name, added.get(name, 0), n] for name, n in counts.items() if n or added.get(name)]
    frame = pd.DataFrame(rows, columns=list(HEADERS), dtype=object)
    table = Table(
        "rows",
        title(report),
        frame,
        headers=HEADERS,
        numeric=frozenset({"rows_read", "rows_in_store"}),
        fold_headers=False,
    )
    section = Section("ingest", None, [table], list(report.notes) if notes else [])
    return Document([section], data=summary_json(report, counts))


def summary_json(report: IngestReport, counts: dict[str, int]) -> dict[str, Any]:
    """The JSON object of ``ingest --format json`` (docs: the keys are a contract)."""
    return {
        "seconds": round(report.seconds, 3),
        "rejected": report.rejected,
        "not_text_bytes": report.not_text_bytes,
        "sources": [
            {
                "source": o.name,
                "format": o.format,
                "status": o.status,
                "message": o.message,
                "rows": o.rows,
                "rejected": o.rejected,
                "not_text_bytes": o.not_text_bytes,
                "not_text_lines": o.not_text_lines,
                "first_not_text_line": o.first_not_text_line,
            }
            for o in report.outcomes
        ],
        "rows_added": report.rows_by_table(),
        "rows_in_store": counts,
        "notes": report.notes,
        "source_rejects": report.source_rejects.as_json(),
    }
