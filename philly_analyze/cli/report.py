"""``philly-analyze report``: thin wrapper over ``philly_analyze.analysis.run`` and
``philly_analyze.report.render``."""

from __future__ import annotations

import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import click

from philly_analyze.cli.options import (
    PathType,
    SuggestingChoice,
    quiet_option,
    store_option,
    writes,
)

#: analysis.SECTIONS and analysis.ALIASES, spelled out so `--help` does not import DuckDB
#: (tests/test_report_cli.py checks they agree).
SECTION_NAMES = (
    "summary",
    "status",
    "queueing",
    "gpu_utilization",
    "locality",
    "host_resources",
    "failures",
    "retries",
    "convergence",
    "gpu_sharing",
)
SECTION_ALIASES = ("utilization", "host", "sharing", "muxflow")


def _parse_time(ctx: click.Context, param: click.Parameter, value: str | None) -> datetime | None:
    if value is None:
        return None
    try:
        t = datetime.fromisoformat(value)
    except ValueError:
        raise click.BadParameter(
            f"{value!r} is not an ISO date or time (e.g. 2017-10-01 or 2017-10-01T08:00)"
        ) from None
    return t.replace(tzinfo=UTC) if t.tzinfo is None else t


@click.command(
    "report",
    epilog="""\b
Formats: table (rich tables; the default on a terminal), md (the default when stdout is
not a terminal: plain text that pipes into files, less and grep), html (one self-contained
file, figures inlined), json (one object with the contract keys, for scripts and jq), csv
(one file per table, DIR/<section>_<table>.csv: -o DIR). With -o PATH and no --format, the
format follows the suffix (.html, .json, .md, .txt); a suffix that names another format
than --format, or none, is refused.

\b
Sections: summary, status, queueing, gpu_utilization, locality, host_resources,
failures, retries, convergence, and gpu_sharing on the output of a sharing replay
(`replay --policy muxflow --out DIR`; shown by default when the store has it).

\b
Examples:
  philly-analyze report --store philly-store
  philly-analyze report --format html -o report.html --figures figures/
  philly-analyze report --format json --section queueing --vc-quotas quotas.csv | jq .queueing
  philly-analyze report --vc ee9e8c --since 2017-10-01 --until 2017-11-01
  philly-analyze report --format csv -o report-csv     # report-csv/queueing_<table>.csv ...
""",
)
@store_option("Store to report on.")
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["table", "md", "html", "json", "csv"]),
    default=None,
    help="Output format (default: table on a terminal, md otherwise, or from -o's suffix).",
)
@click.option(
    "-o",
    "--output",
    type=PathType(path_type=Path),
    help="Write the report to PATH instead of stdout (--format csv: a folder).",
)
@click.option(
    "--figures",
    "figures_dir",
    type=PathType(file_okay=False, path_type=Path),
    help="Also write every figure as PNG and SVG into DIR.",
)
@click.option(
    "--section",
    "sections",
    multiple=True,
    type=SuggestingChoice([*SECTION_NAMES, *SECTION_ALIASES], "section"),
    help="Compute only this section (repeatable).",
)
@click.option("--vc", "vcs", multiple=True, help="Only jobs of this virtual cluster (repeatable).")
@click.option(
    "--since",
    callback=_parse_time,
    help="Only jobs submitted at or after this time (ISO; UTC unless an offset is given).",
)
@click.option("--until", callback=_parse_time, help="Only jobs submitted before this time.")
@click.option(
    "--vc-quotas",
    "--quotas",
    "vc_quotas",
    type=PathType(exists=True, dir_okay=False, path_type=Path),
    help="CSV (vc,gpus) or JSON {vc: gpus} of VC quotas; default: inferred from GPU-time shares.",
)
@quiet_option()
@writes(output="-o", figures_dir="--figures")
def command(
    store_path: str,
    fmt: str | None,
    output: Path | None,
    figures_dir: Path | None,
    sections: tuple[str, ...],
    vcs: tuple[str, ...],
    since: datetime | None,
    until: datetime | None,
    vc_quotas: Path | None,
    quiet: bool,
) -> None:
    """Compute the ATC'19 paper's analyses on a store and print them beside the paper's
    numbers: final status (Table 6), queueing delay and its causes (Table 2, Figure 3), GPU
    utilization (Table 3, Figures 5-6), locality (Table 5, Figure 4), host resources
    (Figure 7), failures (Table 7), retries (Figure 9) and convergence (Figure 8).

    Works on any store: ingested traces and logs, or a replay's output. Sections whose inputs
    are missing say so instead of failing.
    """
    from philly_analyze.analysis import Scope, run
    from philly_analyze.progress import stderr_console, wants_progress
    from philly_analyze.report import output_format
    from philly_analyze.store import open_store

    try:
        fmt = output_format(fmt, output, "table" if sys.stdout.isatty() else "md")
    except ValueError as e:
        raise click.UsageError(str(e)) from None
    if output is not None and output.is_dir() and fmt != "csv":
        raise click.UsageError(f"-o {output} is a folder: --format {fmt} writes a file")
    if fmt == "csv" and output is None:
        raise click.UsageError("--format csv writes one file per table: add -o DIR")
    if since is not None and until is not None and since >= until:
        raise click.BadParameter("--since must be before --until", param_hint="--since")
    console = stderr_console()
    scope = Scope(tuple(vcs), since, until)
    with open_store(store_path, read_only=True) as store:
        if wants_progress(quiet):
            with console.status("computing") as status:
                report = run(
                    store,
                    sections or None,
                    scope,
                    vc_quotas,
                    on_section=lambda s: status.update(f"computing {s}"),
                )
        else:
            report = run(store, sections or None, scope, vc_quotas)
        if fmt == "table" and output is None and sys.stdout.isatty():
            from rich.console import Console

            from philly_analyze.report import terminal

            if figures_dir is not None:
                from philly_analyze.report import figures

                figures.write(report, figures_dir)
            terminal.print_report(report, Console())
        else:
            doc = _render(report, fmt, figures_dir, output)
            if output is not None and fmt != "csv":
                output.parent.mkdir(parents=True, exist_ok=True)
                output.write_text(doc, encoding="utf-8")
            else:
                click.echo(doc, nl=False)
    if not quiet:
        for note in report.scope_notes:  # also here: stdout may be going to a file
            console.print(f"note: {note}", highlight=False)
        secs = sum(s.seconds for s in report.sections.values())
        where = f" -> {output}" if output is not None else ""
        figs = f", figures in {figures_dir}" if figures_dir is not None else ""
        console.print(f"report ({fmt}) in {secs:.1f} s{where}{figs}", highlight=False)


def _render(report: Any, fmt: str, figures_dir: Path | None, output: Path | None) -> str:
    """The report as text (``fmt``), or with --format csv its tables written into the
    folder ``output`` (one file each; returns "")."""
    from philly_analyze.report import csvout, render
    from philly_analyze.report.model import report_document

    if fmt != "csv":
        return render(report, fmt, figures_dir=figures_dir, output=output)
    assert output is not None
    doc = report_document(report)
    if output.suffix.lower() == ".csv":  # one file: only when there is one table
        if len(doc.tables("csv")) != 1:
            raise click.UsageError(
                f"-o {output}: the report has {len(doc.tables('csv'))} tables and --format csv "
                f"writes one file per table: give a folder (-o {output.with_suffix('')})"
            )
        output.write_text(render(doc, "csv"), encoding="utf-8")
        return ""
    if figures_dir is not None:
        render(report, "json", figures_dir=figures_dir)  # the figures, as every format draws
    csvout.write(doc, output)
    return ""
