"""The store's tables and artefacts as Markdown (``docs/store.md``)."""

from __future__ import annotations

from philly_analyze.schemas.artifacts import ARTIFACTS
from philly_analyze.schemas.model import Table, duckdb_type
from philly_analyze.schemas.tables import (
    FILES,
    INGEST_LOG,
    INTERNAL_SCHEMA,
    META,
    TABLES,
    public_tables,
)


def _markdown_table(t: Table, name: str | None = None) -> list[str]:
    """One table's section: heading, meaning, storage and a row per column."""
    out = [f"## `{name or t.name}`", "", t.doc, ""]
    if t.partition_by_month:
        out += [f"Stored as monthly Parquet partitions (`parquet/{t.name}/month=YYYY-MM/`).", ""]
    out += ["| column | type | meaning |", "|---|---|---|"]
    for c in t.columns:
        kind = duckdb_type(c.type) + (" (derived)" if c.derived else "")
        out.append(f"| `{c.name}` | {kind} | {c.doc} |")
    out.append("")
    return out


def markdown() -> str:
    """The store's tables as Markdown (docs/store.md is this, kept in sync by a test)."""
    out = [
        "# Store tables",
        "",
        "Generated from `philly_analyze/schemas/` (`python -m philly_analyze.schemas > docs/store.md`).",
        "All times are UTC (`TIMESTAMPTZ`). *Derived* columns are computed by the catalog's views.",
        "",
        "The catalog's `main` schema holds exactly these names: "
        + ", ".join(f"`{n}`" for n in public_tables())
        + ". Bookkeeping lives in the schema `internal` (last section).",
        "",
    ]
    for t in (*(t for t in TABLES.values() if not t.physical_only), INGEST_LOG):
        out += _markdown_table(t)
    out += [
        f"# Internal tables (schema `{INTERNAL_SCHEMA}`)",
        "",
        "What the public views are built from. Do not count with them: "
        f"`{INTERNAL_SCHEMA}.<table>_all` is the union of every source's rows before merging, "
        f"so `{INTERNAL_SCHEMA}.jobs_all` holds a job once per source that describes it (the "
        "sample has 600 rows there for 300 jobs). Their names and columns may change between "
        "versions.",
        "",
        f"- `{INTERNAL_SCHEMA}.<table>_all`, for every table above but ingest_log, and the two below: a view "
        "over the table's live Parquet files, unmerged.",
        "",
    ]
    for t in (t for t in TABLES.values() if t.physical_only):
        out += _markdown_table(t, f"{INTERNAL_SCHEMA}.{t.name}_all")
    for t in (FILES, META):
        out += _markdown_table(t, f"{INTERNAL_SCHEMA}.{t.name}")
    out += _markdown_artifacts()
    return "\n".join(out)


def _markdown_artifacts() -> list[str]:
    out = [
        "# Other files of a store",
        "",
        "Beside `catalog.duckdb` and `parquet/`, a store's folder holds these files when the "
        "command that wrote the store makes them, and nothing else. They are written with the "
        "store's tables in one batch (`Batch.write_artifact`, published by `Store.commit`) and "
        "read through `Store.read_artifact`, which conforms them to the columns and fields below "
        "(an optional field that older files lack is absent from what it returns).",
        "",
    ]
    for a in ARTIFACTS.values():
        out += [f"## `{a.file}`", "", f"{a.doc} Written by {a.written_by}.", ""]
        if a.table is not None:
            out += _markdown_table(a.table)[2:]
            continue
        out += ["| field | type | meaning |", "|---|---|---|"]
        for f in a.fields:
            kind = f.type + (" or null" if f.nullable else "")
            kind += "" if f.required else " (optional)"
            out.append(f"| `{f.name}` | {kind} | {f.doc} |")
        out.append("")
    return out
