"""``philly-analyze synth``: thin wrapper over ``philly_analyze.synth.run``."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import click

from philly_analyze.cli.options import FiniteFloat, PathType, quiet_option, writes
from philly_analyze.errors import UserError
from philly_analyze.progress import stderr_console
from philly_analyze.timeutil import DEFAULT_TIMEZONE, check_timezone

if TYPE_CHECKING:  # the synthesizer is imported when the command runs, not with the CLI
    from philly_analyze.synth.run import SynthResult


def _formats(value: str) -> tuple[str, ...]:
    """The comma-separated --formats, each once, in the order given (usage error if unknown)."""
    from philly_analyze.synth.run import FORMATS

    names = tuple(dict.fromkeys(v.strip() for v in value.split(",") if v.strip()))
    bad = [n for n in names if n not in FORMATS]
    if bad or not names:
        raise click.BadParameter(
            f"unknown format {', '.join(bad) or '(none)'}; choose from {','.join(FORMATS)}",
            param_hint="--formats",
        )
    return names


#: The window synth can write: times in every format (epoch milliseconds in YARN ids,
#: pandas nanoseconds, wall clocks localized to --timezone) stay in range inside it.
FIRST_START = "1970-01-02"
LAST_END = "2200-01-01"
#: Beyond these the synthesizer runs out of memory (a traceback before): a usage error.
MAX_JOBS = 10_000_000
MAX_MACHINES = 100_000


def _date(value: str) -> str:
    """--start as an ISO date inside the window every format can write."""
    import datetime as dt

    try:
        d = dt.date.fromisoformat(value)
    except ValueError:
        raise click.BadParameter(
            f"{value!r} is not a date like 2017-10-03", param_hint="--start"
        ) from None
    if not FIRST_START <= d.isoformat() < LAST_END:
        raise click.BadParameter(
            f"{value}: synth writes dates from {FIRST_START} to {LAST_END}", param_hint="--start"
        )
    return d.isoformat()


def _check_window(start: str, days: float) -> None:
    import datetime as dt

    end = dt.date.fromisoformat(start) + dt.timedelta(days=min(days, 1e6))
    if end.isoformat() > LAST_END:
        raise click.BadParameter(
            f"{days:g} days from {start} end after {LAST_END}, the last date synth writes",
            param_hint="--days",
        )


@click.command(
    "synth",
    epilog="""\b
Examples:
  philly-analyze synth --out synth-out --jobs 500 --machines 16 --days 3
  philly-analyze synth --out big --jobs 117325 --machines 552 --days 75 --formats philly  # needs: 9 GB of disk
  philly-analyze synth --out s --jobs 300 --machines 8 --days 2 --start 2017-11-04 --seed 1
  philly-analyze synth --out jobs --jobs 20000 --machines 150 --days 14 --formats philly-jobs
  philly-analyze ingest synth-out --store synth-store
""",
)
@click.option(
    "--out",
    "out",
    required=True,
    type=PathType(file_okay=False, path_type=Path),
    help="Folder to write (created if missing).",
)
@click.option(
    "--jobs",
    default=2000,
    show_default=True,
    type=click.IntRange(1, MAX_JOBS),
    help="Jobs submitted.",
)
@click.option(
    "--machines",
    default=552,
    show_default=True,
    type=click.IntRange(1, MAX_MACHINES),
    help="Servers, in Philly's 2-GPU / 8-GPU proportion (552 = Philly's 321 + 231).",
)
@click.option(
    "--days",
    default=7.0,
    show_default=True,
    type=FiniteFloat(min=0.05),
    help="Length of the simulated window.",
)
@click.option(
    "--seed", default=0, show_default=True, type=click.IntRange(0), help="Same seed, same bytes."
)
@click.option(
    "--formats",
    "formats",
    default="philly,yarn,framework,ganglia",
    show_default=True,
    help="Comma-separated outputs: philly (the five published-trace files), yarn (RM logs), "
    "framework (per-attempt logs), ganglia (metric exports), philly-jobs (only the published "
    "job log and machine list, without the per-minute files). Ground truth is always written.",
)
@click.option(
    "--start",
    callback=lambda _ctx, _param, v: _date(v),
    default="2017-10-03",
    show_default=True,
    help=f"First day (local midnight in --timezone), {FIRST_START} to {LAST_END}.",
)
@click.option(
    "--timezone",
    default=DEFAULT_TIMEZONE,
    show_default=True,
    help="IANA zone of the cluster's wall-clock times.",
)
@click.option(
    "--ganglia-step",
    type=click.IntRange(60),
    default=None,
    help="Seconds per Ganglia row (multiple of 60); default: the finest of Ganglia's RRA "
    "steps (60, 360, 2520, 10080) that keeps the export small.",
)
@click.option(
    "--scheduler",
    type=click.Choice(["philly", "builtin"]),
    default="philly",
    show_default=True,
    help="philly: the replay engine's philly policy (philly_analyze.sim), the only scheduler. "
    "builtin: deprecated spelling of philly (the synthesizer's own scheduler, with users "
    "giving up on queued jobs, was removed).",
)
@click.option(
    "--workers",
    default=2,
    show_default=True,
    type=click.IntRange(1),
    help="Processes formatting the per-minute files (output is identical for any value).",
)
@click.option("--force", is_flag=True, help="Replace earlier synthesizer outputs in --out.")
@quiet_option()
@writes(out="--out")
def command(
    out: Path,
    jobs: int,
    machines: int,
    days: float,
    seed: int,
    formats: str,
    start: str,
    timezone: str,
    ganglia_step: int | None,
    scheduler: str,
    workers: int,
    force: bool,
    quiet: bool,
) -> None:
    """Write a synthetic cluster history in every input format, with its ground truth.

    One consistent history (jobs, attempts, placements, utilization, losses) scheduled on a
    Philly-shaped cluster and calibrated to the ATC'19 paper's tables, written as the published
    trace's five files, YARN ResourceManager logs, per-attempt framework logs and Ganglia
    exports, plus OUT/ground_truth/ (true statuses, failure reasons, waiting causes, losses).
    A summary goes to stdout.
    """
    from philly_analyze.synth.run import SynthConfig, prepare_out, synthesize

    names = _checked_options(timezone, start, days, formats, ganglia_step)
    try:
        prepare_out(out, force)
    except FileExistsError as e:
        raise UserError(str(e)) from None
    console = stderr_console()
    if scheduler == "builtin":  # kept so that scripts still run; says what changed
        if not quiet:
            console.print(_BUILTIN_NOTE, highlight=False)
        scheduler = "philly"

    def say(msg: str) -> None:
        """A progress line on stderr (none with --quiet)."""
        if not quiet:
            console.print(f"[dim]synth:[/] {msg}", highlight=False)

    config = SynthConfig(
        jobs=jobs,
        machines=machines,
        days=days,
        seed=seed,
        formats=names,
        start=start,
        timezone=timezone,
        workers=workers,
        ganglia_step=ganglia_step,
        scheduler=scheduler,
    )
    try:
        res = synthesize(out, config, say)
    except ValueError as e:
        raise UserError(str(e)) from None
    _print_summary(out, res, days, start)


def _checked_options(
    timezone: str, start: str, days: float, formats: str, ganglia_step: int | None
) -> tuple[str, ...]:
    """Usage errors (exit 2) before anything is written; returns the formats asked for."""
    check_timezone(timezone)
    _check_window(start, days)
    names = _formats(formats)
    if ganglia_step is not None and ganglia_step % 60:
        raise click.BadParameter("must be a multiple of 60", param_hint="--ganglia-step")
    return names


#: What ``--scheduler builtin`` (deprecated) prints on stderr.
_BUILTIN_NOTE = (
    "note: deprecated --scheduler builtin: the built-in scheduler was removed; the "
    "jobs are scheduled by the replay engine's philly policy (users no longer give "
    "up on queued jobs)"
)


def _print_summary(out: Path, res: SynthResult, days: float, start: str) -> None:
    """The run's summary on stdout: totals, then files and megabytes per format."""
    s = res.summary
    click.echo(
        f"wrote {out}: {s['jobs']:,} jobs, {s['attempts_started']:,} attempts on "
        f"{s['cluster']['machines']} machines ({s['cluster']['gpus']:,} GPUs), "
        f"{days:g} days from {start}; {res.bytes_written / 1e6:,.1f} MB in "
        f"{sum(len(v) for v in res.files.values()):,} files, {res.seconds:.1f} s"
    )
    for fmt, files in res.files.items():
        size = sum(p.stat().st_size for p in files)
        click.echo(f"  {fmt:<13} {len(files):>7,} files {size / 1e6:>10,.1f} MB")
