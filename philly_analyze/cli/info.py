"""``philly-analyze info``: thin wrapper over ``philly_analyze.info``."""

from __future__ import annotations

import json

import click

from philly_analyze.cli.options import store_option


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
""",
)
@store_option("Store to describe.")
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["table", "json"]),
    default="table",
    show_default=True,
    help="table: aligned text; json: one object (keys store, tables, sources, machines, vcs, "
    "rejects, sections).",
)
def command(store_path: str, fmt: str) -> None:
    """What a store holds, and what the report can compute from it."""
    from philly_analyze.info import describe, render_text
    from philly_analyze.store import open_store

    with open_store(store_path, read_only=True) as store:
        info = describe(store)
    if fmt == "json":
        click.echo(json.dumps(info, indent=2))
        return
    from philly_analyze.cli.ingest_output import short

    for s in info["sources"]:  # relative to the working directory when below it, as ingest
        s["source"] = short(s["source"])
    click.echo(render_text(info), nl=False)
