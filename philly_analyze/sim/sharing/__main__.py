"""``python -m philly_analyze.sim.sharing``: the MuxFlow model's experiments without a store.

  paper      the paper scenario: the paper's before/after numbers beside the simulated ones
  ablate     MuxFlow with each mechanism switched off, plus mps-naive and dedicated
  sweep      one parameter over several values
  predictor  the interference predictor's error on Gavel (held out) and, if given, Lucid

(``philly-analyze replay --policy muxflow`` runs the same model on a store's jobs.)"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click
import pandas as pd

if TYPE_CHECKING:
    from philly_analyze.sim.sharing.config import SharingConfig

FORMATS = ("table", "md", "json")


def _emit(df: pd.DataFrame, fmt: str, extra: dict[str, Any] | None = None) -> None:
    if fmt == "json":
        click.echo(json.dumps({**(extra or {}), "rows": df.to_dict(orient="records")}, indent=1))
    elif fmt == "md":
        click.echo(_markdown(df))
    else:
        with pd.option_context("display.width", 200, "display.max_columns", 40):
            click.echo(df.to_string(index=False))


def _cell(v: Any) -> str:
    if v is None or (isinstance(v, float) and v != v):
        return "-"
    if isinstance(v, bool):
        return str(v)
    if isinstance(v, int) or (isinstance(v, float) and v.is_integer() and abs(v) >= 1):
        return f"{int(v):,}"
    if isinstance(v, float):
        return f"{v:,.0f}" if abs(v) >= 1000 else f"{v:.4g}"
    return str(v)


def _markdown(df: pd.DataFrame) -> str:
    """A GitHub markdown table (no extra dependency)."""
    lines = ["| " + " | ".join(map(str, df.columns)) + " |", "|" + "---|" * len(df.columns)]
    lines += ["| " + " | ".join(_cell(v) for v in row) + " |" for row in df.itertuples(index=False)]
    return "\n".join(lines)


def _cfg(model: Path | None, gpus: int | None) -> SharingConfig:
    from philly_analyze.sim.sharing.config import SharingConfig
    from philly_analyze.sim.sharing.scenario import paper_config

    return paper_config(SharingConfig.load(model), gpus)


model_opt = click.option(
    "--model", type=click.Path(exists=True, dir_okay=False, path_type=Path), help="TOML overrides."
)
gpus_opt = click.option("--gpus", type=click.IntRange(1), help="Online GPUs (default 20,000).")
seed_opt = click.option("--seed", type=int, default=0, show_default=True)
fmt_opt = click.option("--format", "fmt", type=click.Choice(FORMATS), default="table")
fig_opt = click.option(
    "--figures", type=click.Path(file_okay=False, path_type=Path), help="Write PNGs here."
)


def common(f: Callable[..., Any]) -> Callable[..., Any]:
    """The options every experiment takes: --gpus, --seed, --model, --format, --figures."""
    for opt in (fig_opt, fmt_opt, model_opt, seed_opt, gpus_opt):
        f = opt(f)
    return f


@click.group()
def main() -> None:
    """Experiments on the MuxFlow GPU-sharing model (see docs/muxflow.md)."""


@main.command()
@common
def paper(gpus: int | None, seed: int, model: Path | None, fmt: str, figures: Path | None) -> None:
    """MuxFlow's deployment for one day: dedicated (before) vs muxflow (after) vs mps-naive."""
    from philly_analyze.sim.sharing.scenario import run_paper

    cfg = _cfg(model, gpus)
    comp = run_paper(cfg, seed=seed, policies=("dedicated", "muxflow", "mps-naive"))
    if fmt == "json":
        click.echo(json.dumps(comp.to_dict(), indent=1))
    else:
        _emit(comp.table, fmt)
        click.echo("")
        keys = [k for k in comp.results["muxflow"].metrics if k != "policy"]
        rows = pd.DataFrame(
            {
                "metric": keys,
                **{p: [r.metrics.get(k) for k in keys] for p, r in comp.results.items()},
            }
        )
        _emit(rows, fmt)
    if figures:
        from philly_analyze.sim.sharing.figures import plot_day, plot_slowdown

        figures.mkdir(parents=True, exist_ok=True)
        p = cfg.paper.published()
        plot_day(comp.results, figures / "muxflow_paper_day.png", paper=p)
        plot_slowdown(comp.results, figures / "muxflow_paper_slowdown.png")
        click.echo(f"figures in {figures}", err=True)


@main.command()
@common
def ablate(gpus: int | None, seed: int, model: Path | None, fmt: str, figures: Path | None) -> None:
    """Each mechanism's contribution: MuxFlow with it switched off, on the same jobs."""
    from philly_analyze.sim.sharing.scenario import ablations, paper_jobs

    cfg = _cfg(model, gpus)
    table = ablations(paper_jobs(cfg, seed), cfg, seed=seed, minutes=cfg.paper.minutes)
    _emit(table, fmt, {"online_gpus": cfg.cluster.online_gpus, "seed": seed})
    if figures:
        from philly_analyze.sim.sharing.figures import plot_ablation

        figures.mkdir(parents=True, exist_ok=True)
        plot_ablation(table, figures / "muxflow_ablation.png", cfg.online.slo_violation_budget)


@main.command()
@click.argument("param")
@click.argument("values")
@common
@click.option("--policy", default="muxflow", show_default=True)
def sweep(
    param: str,
    values: str,
    gpus: int | None,
    seed: int,
    model: Path | None,
    fmt: str,
    figures: Path | None,
    policy: str,
) -> None:
    """Run PARAM (dotted, e.g. sm.threshold) over VALUES (comma-separated)."""
    from philly_analyze.sim.sharing.scenario import paper_jobs
    from philly_analyze.sim.sharing.scenario import sweep as run_sweep

    cfg = _cfg(model, gpus)
    parsed = [_parse(v) for v in values.split(",")]
    table = run_sweep(paper_jobs(cfg, seed), cfg, param, parsed, seed, cfg.paper.minutes, policy)
    _emit(table, fmt, {"param": param, "online_gpus": cfg.cluster.online_gpus})
    if figures:
        from philly_analyze.sim.sharing.figures import plot_sweep

        figures.mkdir(parents=True, exist_ok=True)
        name = "muxflow_sweep_" + param.replace(".", "_") + ".png"
        plot_sweep(table, param, figures / name, cfg.online.slo_violation_budget)


def _parse(v: str) -> Any:
    low = v.strip().lower()
    if low in ("true", "false"):
        return low == "true"
    for kind in (int, float):
        try:
            return kind(v)
        except ValueError:
            pass
    return v.strip()


@main.command()
@click.option(
    "--gavel", type=click.Path(exists=True, dir_okay=False, path_type=Path), required=True
)
@click.option(
    "--lucid",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="Lucid's lucid_colocate_info.csv: validation only, nothing is fitted on it.",
)
@fmt_opt
def predictor(gavel: Path, lucid: Path | None, fmt: str) -> None:
    """The interference predictor's error (|normalized throughput - predicted|)."""
    import numpy as np

    from philly_analyze.sim.sharing.interference import (
        GPU_TYPES,
        error_summary,
        heldout_errors,
        leave_type_out_errors,
        load_gavel_pairs,
        load_interference,
        load_lucid_pairs,
        predictor_errors,
        probe_triples,
    )

    rows = []
    for gpu in GPU_TYPES:
        pairs = load_gavel_pairs(gavel, gpu)
        off = pairs.r[pairs.j != pairs.k]
        const = float(np.abs(off - np.median(off)).mean())
        for what, err in (
            ("held-out pairs (5-fold)", heldout_errors(pairs)),
            ("leave-one-type-out", leave_type_out_errors(pairs)),
        ):
            rows.append(
                {"data": f"Gavel {gpu}", "test": what, **error_summary(err), "const_mae": const}
            )
    if lucid is not None:
        lp = load_lucid_pairs(lucid)
        off = lp.r[lp.j != lp.k]
        const = float(np.abs(off - np.median(off)).mean())
        for gpu in GPU_TYPES:
            theta = load_interference(gpu).theta
            err = predictor_errors(theta, lp, probe_triples(lp))
            rows.append(
                {
                    "data": "Lucid",
                    "test": f"Gavel {gpu} theta, all pairs",
                    **error_summary(err),
                    "const_mae": const,
                }
            )
    _emit(pd.DataFrame(rows), fmt)


if __name__ == "__main__":
    sys.exit(main())
