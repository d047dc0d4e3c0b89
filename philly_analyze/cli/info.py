"""``philly-analyze info``: thin wrapper over ``philly_analyze.info``."""

from __future__ import annotations

from pathlib import Path

import click

from philly_analyze.cli.options import PathType, store_option, writes
from philly_analyze.report import FORMATS


@click.command(
    "info",
    epilog="""\b
Shows: the store's tables with their row counts and time ranges, the sources ingested
(format, rows, rejected rows, SHA-256, from ingest_log), machines and GPUs (listed in a
machine list vs seen in the data), virtual clusters, rejected rows by reason, and which
report sections the store can compute (and what the others lack). A store that was moved
or copied gets its views rebuilt on opening; info says so on the `repaired` line.

\b
Examples:
  philly-analyze info --store demo-store
  philly-analyze info --store demo-store --format json | jq '.tables[] | {table, rows}'
  philly-analyze info --store demo-store --format md > info.md
  philly-analyze info --store demo-store --format csv -o info-csv   # info-csv/info_tables.csv ...
""",
)
@store_option("Store to describe.")
@click.option(
    "--format",
    "fmt",
    type=click.Choice(FORMATS),
    default=None,
    help="table (default): aligned text; json: one object (keys store, tables, sources, "
    "machines, vcs, rejects, sections); md, html: a table per block, every row; csv: a file "
    "per table (-o DIR). With -o and no --format, the format follows the suffix.",
)
@click.option(
    "-o",
    "--output",
    type=PathType(path_type=Path),
    help="Write to PATH instead of stdout (--format csv: a folder).",
)
@writes(output="-o")
def command(store_path: str, fmt: str | None, output: Path | None) -> None:
    """What a store holds, and what the report can compute from it."""
    from philly_analyze.info import describe, document, render_text
    from philly_analyze.report import csvout, output_format, render
    from philly_analyze.store import open_store

    try:
        fmt = output_format(fmt, output, "table")
    except ValueError as e:
        raise click.UsageError(str(e)) from None
    if fmt == "csv" and (output is None or output.suffix.lower() == ".csv"):
        raise click.UsageError("--format csv writes one file per table: add -o DIR")
    with open_store(store_path, read_only=True) as store:
        info = describe(store)
    if fmt == "table":
        from philly_analyze.cli.ingest_output import short

        for s in info["sources"]:  # relative to the working directory when below it, as ingest
            s["source"] = short(s["source"])
        text = render_text(info)
    elif fmt == "csv":
        assert output is not None
        csvout.write(document(info), output)
        return
    else:
        text = render(document(info), fmt)
    if output is None:
        click.echo(text, nl=False)
    else:
        output.write_text(text, encoding="utf-8")
