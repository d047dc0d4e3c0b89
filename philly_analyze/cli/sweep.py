"""``philly-analyze sweep``: thin wrapper over ``philly_analyze.sweep.run_sweep``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from philly_analyze.cli.options import (
    FiniteFloat,
    PathType,
    machines_option,
    quiet_option,
    store_option,
    writes,
)
from philly_analyze.errors import PartialFailure, UserError
from philly_analyze.report import FORMATS

#: Bounds of a sane sweep: 1e20 seeds crashed building the grid, a jitter of 1e308 s every run.
MAX_SEEDS = 100_000
MAX_JITTER_S = 1e9


@click.command(
    "sweep",
    epilog="""\b
Examples:
  philly-analyze sweep --store philly-store --policy philly,relaxed,las \\
      --param locality_wait_min=0,5,30,120 --seeds 5 --jitter 60 --out sweep-out
  philly-analyze sweep --policy philly --param max_retries=0,1,3,none --out retries
  philly-analyze sweep --policy las --param 'thresholds_gpu_h=1,10;0.5,5;2,20' --out las
  philly-analyze sweep --policy muxflow --param online_ratio=0.5,1,2 --seeds 3 --out mux
  philly-analyze sweep --policy philly,relaxed --seeds 3 --jitter 60 --format csv > summary.csv
  philly-analyze sweep --policy philly,fifo --format md > summary.md
  philly-analyze sweep --policy philly --seeds 8 --jitter 60 --ray 10.0.0.5:6379  # needs: a Ray cluster
  philly-analyze sweep --policy philly --seeds 8 --jitter 60 --ray local  # needs: Ray installed

\b
--ray ADDRESS runs on an existing Ray cluster (or RAY_ADDRESS); --ray local starts a private
Ray instance on this machine (pip install 'philly-analyze[distributed]').

\b
Re-running the same command into the same --out skips the runs already there (failed runs
are retried). Values: comma-separated, or ';'-separated for text parameters (their values
are comma lists), or a JSON list. Outputs in --out: runs.parquet (one row per run),
summary.parquet, figures/*.png|svg, report.md.

\b
Exit status: 0 when every run succeeded; 3 when some runs failed (each is listed on stderr,
the others are written: re-run to retry the failed ones); 1 when every run failed or the
input is bad; 2 for a usage error; 130 when interrupted.
""",
)
@store_option("Store whose jobs and machines to replay.")
@click.option(
    "--policy",
    "policy",
    default="philly",
    show_default=True,
    help="Policies, separated by commas (see `replay --list-policies`).",
)
@click.option(
    "--param",
    "params",
    multiple=True,
    metavar="KEY=V1,V2,...",
    help="Values of a policy parameter, for every chosen policy that takes it; "
    "POLICY.KEY=... for one policy. Repeatable.",
)
@click.option(
    "--seeds",
    type=click.IntRange(min=1, max=MAX_SEEDS),
    default=1,
    show_default=True,
    help="Seeds 0..N-1 per (policy, parameter values).",
)
@click.option(
    "--jitter",
    "jitter_s",
    type=FiniteFloat(min=0, max=MAX_JITTER_S),
    default=0.0,
    show_default=True,
    metavar="SECONDS",
    help="Move each job's submission by a uniform draw within ±SECONDS, from the seed "
    "(the queue policies use no randomness: without jitter their seeds are identical).",
)
@click.option(
    "--out",
    type=PathType(file_okay=False, path_type=Path),
    help="Directory for the runs table, summary, figures and report (resumable). "
    "Without it nothing is written.",
)
@click.option(
    "--ray",
    "ray_address",
    envvar="RAY_ADDRESS",
    metavar="ADDRESS",
    help="Run on a Ray cluster: host:port, ray://host:port, auto, or 'local' for a private "
    "instance on this machine. Env: RAY_ADDRESS. Needs philly-analyze[distributed].",
)
@click.option(
    "--workers",
    type=click.IntRange(min=1),
    help="Local worker processes (default: one per core); CPUs of a --ray local instance.",
)
@click.option(
    "--store-mode",
    type=click.Choice(["auto", "ship", "shared"]),
    default="auto",
    show_default=True,
    help="ship: send the loaded jobs to workers; shared: workers read --store themselves "
    "(same path on every node); auto: ship unless larger than --ship-limit-mb.",
)
@click.option(
    "--ship-limit-mb",
    type=FiniteFloat(min=0),
    default=512.0,
    show_default=True,
    help="Largest inputs (pickled) that auto mode ships.",
)
@click.option("--racks", type=click.IntRange(min=1), help="Split the servers into N racks.")
@machines_option()
@click.option(
    "--quotas",
    type=PathType(exists=True, dir_okay=False, path_type=Path),
    help="VC quota file (CSV vc,gpus or JSON); default: as replay infers them.",
)
@click.option(
    "--metric",
    "metrics",
    multiple=True,
    help="Metric(s) to show and plot (repeatable or comma-separated); default: the table "
    "shows JCT, queueing, utilization and makespan, the figures every metric that varies. "
    "Former names (fidelity_queue_mae_s) are accepted, with a note.",
)
@click.option("--no-figures", is_flag=True, help="Do not draw the figures (faster for big grids).")
@click.option(
    "--confidence",
    type=FiniteFloat(min=0, max=1, min_open=True, max_open=True),
    default=0.95,
    show_default=True,
    help="Level of the t-intervals across seeds.",
)
@click.option(
    "--import",
    "imports",
    multiple=True,
    metavar="MODULE",
    help="Import MODULE first, in every worker too (registers custom policies).",
)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(FORMATS),
    default="table",
    show_default=True,
    help="Summary on stdout (the output layer's formats): a table, md or html of mean ± "
    "half-width, or json/csv (every metric, its mean, half-width, ...).",
)
@quiet_option()
@writes(out="--out")
def command(
    store_path: str,
    policy: str,
    params: tuple[str, ...],
    seeds: int,
    jitter_s: float,
    out: Path | None,
    ray_address: str | None,
    workers: int | None,
    store_mode: str,
    ship_limit_mb: float,
    racks: int | None,
    machines: str | None,
    quotas: Path | None,
    metrics: tuple[str, ...],
    no_figures: bool,
    confidence: float,
    imports: tuple[str, ...],
    fmt: str,
    quiet: bool,
) -> None:
    """Run many replays of a store: the cross product of policies, parameter values and
    seeds, in parallel on this machine or on a Ray cluster. Prints the mean of each metric
    over seeds with its confidence interval; with --out, also writes every run's metrics
    (Parquet), the summary, a figure of each metric against each parameter, and a report."""
    from philly_analyze.hugepages import disable_transparent_hugepages
    from philly_analyze.progress import stderr_console, track
    from philly_analyze.sweep.run import run_sweep
    from philly_analyze.sweep.spec import parse_param_args

    disable_transparent_hugepages()  # as replay does; its worker processes inherit it
    console = stderr_console()

    def log(msg: str) -> None:
        if not quiet:
            console.print(msg, highlight=False, markup=False, soft_wrap=True)

    chosen = [m.strip() for ms in metrics for m in ms.split(",") if m.strip()]
    with track("sweep", None, unit="runs", quiet=quiet) as tracker:
        res = run_sweep(
            store_path,
            policy,
            parse_param_args(params),
            seeds,
            out=out,
            ray=ray_address or None,
            workers=workers,
            racks=racks,
            machines=machines,
            quotas=quotas,
            jitter_s=jitter_s,
            store_mode=store_mode,
            ship_limit_mb=ship_limit_mb,
            confidence=confidence,
            metrics=chosen or None,
            figures=not no_figures,
            imports=imports,
            progress=tracker,
            log=log,
        )
    rate = (
        f" ({res.executed / res.seconds * 60:,.0f} runs/min)"
        if res.executed and res.seconds
        else ""
    )
    log(f"{res.executed} runs in {res.seconds:.1f} s{rate} on {res.executor}")
    for _, r in res.failed.iterrows():
        log(f"failed: {r['policy']} seed {r['seed']} {_given(r)}: {r['error']}")
    for note in res.notes:
        log(f"note: {note}")
    if res.out is not None:
        log(f"wrote {res.out}/runs.parquet, summary.parquet, report.md")
        for f in res.figures:
            log(f"figure: {f}")
    _print(res, fmt, res.metrics, store_path)
    if len(res.failed):
        # Some runs failed: exit 3 (ExitStatus.PARTIAL), results written but incomplete;
        # every run failed: exit 1, as one failed replay.
        error = PartialFailure if len(res.failed) < len(res.runs) else UserError
        raise error(
            f"{len(res.failed)} of {len(res.runs)} runs failed (listed above"
            + ("; details in runs.parquet" if res.out else "")
            + "); run the same command again to retry them"
        )


def _given(row: Any) -> str:
    from philly_analyze.sweep.spec import PARAM_PREFIX

    bits = [
        f"{k[len(PARAM_PREFIX) :]}={row[k]}"
        for k in row.index
        if k.startswith(PARAM_PREFIX) and not _missing(row[k])
    ]
    return " ".join(bits) or "(defaults)"


def _missing(v: Any) -> bool:
    """None, NaN or pandas' NA (a null in a nullable column)."""
    import pandas as pd

    return v is None or (not isinstance(v, str | bool) and bool(pd.isna(v)))


def _print(res: Any, fmt: str, chosen: list[str], store_path: str) -> None:
    """The sweep's summary in ``fmt`` (the output layer renders it)."""
    from philly_analyze.report import emit
    from philly_analyze.sweep.report import summary_document

    emit(summary_document(res, store_path, chosen), fmt)
