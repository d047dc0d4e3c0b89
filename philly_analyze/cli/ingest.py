"""``philly-analyze ingest``: thin wrapper over ``philly_analyze.ingest.pipeline``."""

from __future__ import annotations

import csv
import functools
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

import click

from philly_analyze.cli.ingest_output import OutcomePrinter
from philly_analyze.cli.options import PathType, quiet_option, store_option
from philly_analyze.errors import UserError, check_writable, writing
from philly_analyze.ingest import memory
from philly_analyze.ingest.formats import IngestContext, get_format, load_formats
from philly_analyze.ingest.framework_ids import JOB_KEYS
from philly_analyze.ingest.ganglia_hosts import parse_host_pattern
from philly_analyze.ingest.pipeline import IngestReport, check_report, ingest_paths
from philly_analyze.ingest.reject_limit import check_rejects, parse_max_rejects
from philly_analyze.progress import human_bytes, stderr_console, track
from philly_analyze.report import FORMATS
from philly_analyze.store import Store, created_or_nothing
from philly_analyze.timeutil import (
    DEFAULT_ORIGIN,
    DEFAULT_TIMEZONE,
    check_timezone,
    parse_origin,
)

#: What a failed write leaves unharmed (each source is committed on its own).
KEEPS = "the store keeps every source ingested before"
#: ``--format``: how the summary is printed (the output layer's formats).
SUMMARY_FORMATS = FORMATS


def _format_names() -> list[str]:
    return [f.name for f in load_formats()]


def _origin(ctx: click.Context, param: click.Parameter, value: str) -> datetime:
    try:
        return parse_origin(value)
    except ValueError as e:
        raise click.BadParameter(f"{value!r}: {e} (an ISO time or 'epoch')") from None


def _memory_limit(ctx: click.Context, param: click.Parameter, value: str | None) -> int:
    try:
        limit, _ = memory.resolve(value)
    except ValueError as e:
        raise click.BadParameter(str(e)) from None
    return limit


def _max_rejects(ctx: click.Context, param: click.Parameter, value: str) -> int | None:
    try:
        return parse_max_rejects(value)
    except ValueError as e:
        raise click.BadParameter(str(e)) from None


def _host_pattern(ctx: click.Context, param: click.Parameter, value: str) -> str:
    try:
        parse_host_pattern(value)
    except ValueError as e:
        raise click.BadParameter(f"{value!r}: {e}") from None
    return value


def _guarded(f: Callable[..., None]) -> Callable[..., None]:
    """Checks ``--store`` can be written before any work; a failed first ingest leaves no
    store behind; a full disk is one line naming the file (``errors.writing``)."""

    @functools.wraps(f)
    def run(*args: Any, store_path: str, **kwargs: Any) -> None:
        check_writable(store_path, "--store")
        with created_or_nothing(store_path), writing(store_path, keeps=KEEPS):
            f(*args, store_path=store_path, **kwargs)

    return run


@click.command(
    "ingest",
    epilog="""\b
Examples:
  philly-analyze ingest trace-data.tar.gz --store philly-store
  philly-analyze ingest sample_data/ --store demo-store
  philly-analyze ingest rm.log rm.log.1.gz logs/ --timezone UTC
  philly-analyze ingest ganglia/ --ganglia-host-pattern '(?P<host>[^_]+)_(?P<metric>.+)'
  philly-analyze ingest traces/*.trace --gavel-throughputs throughputs.json --gavel-gpu v100 \\
      --store gavel-store
  philly-analyze ingest rfold_philly_arrivals.csv --origin 2017-08-07T00:00:00-07:00 \\
      --store rfold-store
  philly-analyze ingest slurm-logs/ --framework-job-key filename --store slurm-store
  philly-analyze ingest logs/ --memory-limit 1GB
  philly-analyze ingest rm.log --max-rejects 100 --store rm-store
  philly-analyze ingest sample_data/ --store demo-store --format json | jq .rows_in_store
  philly-analyze ingest sample_data/ --store demo-store --format csv > rows.csv

\b
Another cluster's jobs (Gavel's, RFold's, a Slurm cluster's logs) go to a store of their own:
ingested into the Philly trace's store they would mix with its jobs (and stretch its span).

\b
Rows that cannot be read (or hold a value out of its bound, or a Ganglia value that conflicts
with another) go to the store's rejects table and the good rows are ingested; then, if the
sources named (those skipped as already ingested included) have more rejected rows than
--max-rejects, ingest exits 1 with one line naming the first (FILE:LINE: REASON).

\b
--format json prints the summary on stdout (it was --json, still accepted). --format with an
input format's name is the former spelling of --input-format, still accepted.
""",
)
@click.argument("paths", nargs=-1, required=True, type=PathType(path_type=Path))
@store_option("Store directory to create or add to.")
@click.option(
    "--replace",
    is_flag=True,
    help="Re-read sources already ingested, dropping what they gave before.",
)
@click.option(
    "--timezone",
    default=DEFAULT_TIMEZONE,
    show_default=True,
    help="IANA zone the logs' wall-clock times were written in (stored as UTC).",
)
@click.option(
    "--format",
    "fmt",
    default=None,
    metavar="|".join(FORMATS),
    help="Summary: a table on stderr (default), or md, html, json or csv (rows per table) "
    "on stdout.",
)
@click.option(
    "--input-format",
    "format_name",
    default=None,
    metavar="NAME",
    help="Skip detection: read every file as this format.",
)
@click.option(
    "--framework-mapping",
    type=PathType(exists=True, dir_okay=False, path_type=Path),
    help="CSV (path,job_id,attempt_idx) naming the job attempt of each framework log.",
)
@click.option(
    "--framework-job-key",
    type=click.Choice(JOB_KEYS),
    default="ids",
    show_default=True,
    help="Framework logs that no mapping or YARN id names: skip them (ids), or key each job by "
    "the file's name without extensions (filename) or its folder's name (folder).",
)
@click.option(
    "--ganglia-host-pattern",
    default="auto",
    show_default=True,
    metavar="auto|folder|REGEX",
    callback=_host_pattern,
    help="Host of Ganglia CSV/rrdtool exports: auto (HOST_METRIC.csv file names, else the "
    "folder), folder, or a regex with (?P<host>...) [and (?P<metric>...)] matched against "
    "the file name without extensions.",
)
@click.option(
    "--origin",
    default=DEFAULT_ORIGIN.isoformat(),
    show_default=True,
    callback=_origin,
    help="Where relative times count from (job lists with submit seconds, Gavel arrival "
    "seconds): an ISO time (UTC unless it has an offset) or 'epoch' for Unix times.",
)
@click.option(
    "--gavel-throughputs",
    type=PathType(exists=True, dir_okay=False, path_type=Path),
    help="Gavel throughputs JSON (gavel_simulation_throughputs.json) for Gavel trace durations.",
)
@click.option(
    "--gavel-gpu",
    default="v100",
    show_default=True,
    help="GPU type of the throughputs column used for Gavel trace durations.",
)
@click.option(
    "--memory-limit",
    metavar="SIZE",
    callback=_memory_limit,
    help="Memory DuckDB may use for sorting, assembling and resampling (e.g. 500MB, 4GB); beyond "
    f"it, it spills to the store's staging folder and splits the work. Default: ${memory.ENV}, "
    f"else a quarter of this machine's memory between {human_bytes(memory.DEFAULT_MIN)} and "
    f"{human_bytes(memory.DEFAULT_MAX)} (here {human_bytes(memory.default_limit())}).",
)
@click.option(
    "--max-rejects",
    default="0",
    show_default=True,
    metavar="N|all",
    callback=_max_rejects,
    help="Rejected rows (in the store's rejects table, Ganglia conflicts included) the sources "
    "named may have before ingest exits 1; the good rows are kept either way. 'all': no limit.",
)
@click.option("--json", "as_json", is_flag=True, help="Deprecated: --format json.")
@click.option(
    "-v", "--verbose", is_flag=True, help="A line for every file (grouped formats are folded)."
)
@quiet_option()
@_guarded
def command(
    paths: tuple[Path, ...],
    store_path: str,
    replace: bool,
    timezone: str,
    fmt: str | None,
    format_name: str | None,
    framework_mapping: Path | None,
    framework_job_key: str,
    ganglia_host_pattern: str,
    origin: datetime,
    gavel_throughputs: Path | None,
    gavel_gpu: str,
    memory_limit: int,
    max_rejects: int | None,
    as_json: bool,
    verbose: bool,
    quiet: bool,
) -> None:
    """Read traces and logs into a store (Parquet + DuckDB catalog).

    PATHS are files, folders (walked recursively), .gz/.bz2/.xz files or tar archives such as
    the published trace-data.tar.gz (streamed, never extracted). Formats are detected from the
    content and printed (files of grouped formats, such as a folder of framework logs, are
    folded into one line per format unless --verbose). Re-running on the same files changes
    nothing; --replace re-reads them. Rows that cannot be read are kept apart (rejects); more
    of them than --max-rejects (default 0) make the exit status 1, the good rows kept.
    """
    check_timezone(timezone)
    console = stderr_console()
    summary, force, deprecated = _formats(fmt, format_name, as_json)
    if not quiet:
        for d in deprecated:
            console.print(f"note: deprecated {d}", highlight=False)
    mapping = _read_mapping(framework_mapping) if framework_mapping else {}

    printer = OutcomePrinter(console, verbose=verbose, quiet=quiet)

    with Store(store_path) as store, track("reading", None, quiet=quiet) as tracker:
        ctx = IngestContext(
            timezone=timezone,
            tracker=tracker,
            framework_mapping=mapping,
            framework_job_key=framework_job_key,
            ganglia_host_pattern=ganglia_host_pattern,
            origin=origin,
            gavel_throughputs=gavel_throughputs,
            gavel_gpu=gavel_gpu,
            memory_limit=memory_limit,
        )
        report = ingest_paths(
            store, paths, ctx=ctx, replace=replace, force_format=force, on_outcome=printer
        )
        counts = store.merged_row_counts()
    printer.flush()
    _summary(report, counts, summary, console, quiet)
    check_report(report)
    check_rejects(report.source_rejects, max_rejects)


def _summary(
    report: IngestReport, counts: dict[str, int], fmt: str, console: Any, quiet: bool
) -> None:
    """The summary: a table and the notes on stderr (not with --quiet), or ``fmt`` on
    stdout (json and csv: the notes on stderr, or in the JSON object)."""
    from philly_analyze.ingest.summary import summary_document
    from philly_analyze.report import emit

    if fmt == "table":
        if not quiet:
            emit(summary_document(report, counts, notes=False), fmt, console=console)
            for note in report.notes:
                console.print(f"note: {note}", highlight=False)
        return
    emit(summary_document(report, counts, notes=fmt in ("md", "html")), fmt)
    if fmt == "csv" and not quiet:
        for note in report.notes:
            console.print(f"note: {note}", highlight=False)


def _formats(fmt: str | None, format_name: str | None, as_json: bool) -> tuple[str, Any, list[str]]:
    """(the summary's format, the forced input format or None, deprecated spellings used)
    from ``--format``, ``--input-format`` and ``--json``."""
    deprecated: list[str] = []
    former = fmt is not None and fmt not in SUMMARY_FORMATS
    if former:
        if format_name is not None:
            raise click.BadParameter(
                f"choose from {', '.join(SUMMARY_FORMATS)} (an input format goes to "
                "--input-format)",
                param_hint="--format",
            )
        format_name, fmt = fmt, None  # the former spelling of --input-format
        deprecated.append(f"--format {format_name}: use --input-format {format_name}")
    if as_json:
        deprecated.append("--json: use --format json")
        fmt = fmt or "json"
    if format_name is None:
        return fmt or "table", None, deprecated
    try:
        return fmt or "table", get_format(format_name), deprecated
    except KeyError:
        known = ", ".join(_format_names())
        if former:
            raise click.BadParameter(
                f"{format_name!r} is neither a summary format ({', '.join(SUMMARY_FORMATS)}) "
                f"nor an input format ({known})",
                param_hint="--format",
            ) from None
        raise click.BadParameter(
            f"unknown input format {format_name!r}; choose from {known}",
            param_hint="--input-format",
        ) from None


def _read_mapping(path: Path) -> dict[str, tuple[str, int]]:
    out: dict[str, tuple[str, int]] = {}
    with open(path, newline="") as f:
        for i, row in enumerate(csv.reader(f), 1):
            if i == 1 and row and row[0].strip().lower() == "path":
                continue
            if len(row) != 3:
                raise UserError(
                    "expected 3 fields: path,job_id,attempt_idx", source=str(path), line=i
                )
            try:
                out[row[0].strip()] = (row[1].strip(), int(row[2]))
            except ValueError:
                raise UserError(
                    f"attempt_idx {row[2]!r} is not an integer", source=str(path), line=i
                ) from None
    return out
