"""Figures of sharing simulations (matplotlib, Agg backend): the day's utilization, SM activity
and memory per policy, the online slowdown distribution, ablation bars and parameter sweeps.
Each function writes one PNG and returns its path; ``plot_saved`` draws the first two from
outputs saved next to replay stores (for the report)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

from philly_analyze.sim.sharing.results import SAVED_JSON, SharingOutput

if TYPE_CHECKING:
    from matplotlib.figure import Figure


def color_of(label: str) -> str | None:
    """The line colour of a result labelled by a sharing policy's name (its ``color``), else
    None (matplotlib's cycle)."""
    from philly_analyze.sim.policies import POLICIES, policy_names

    policy_names()  # loads the registry
    return getattr(POLICIES.get(label), "color", None)


def _plt() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def day_figure(
    results: Mapping[str, SharingOutput],
    paper: Mapping[str, Mapping[str, float]] | None = None,
) -> Figure:
    """Hourly means over online GPUs of utilization, SM activity and memory, one line per
    policy; the paper's before/after values as dotted/dashed lines when ``paper`` is given."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(13, 3.6), layout="constrained")
    axes = fig.subplots(1, 3, sharex=True)
    panels = (
        ("util_online", "GPU utilization", "gpu_util"),
        ("sm_online", "SM activity", "sm_activity"),
        ("mem_online", "GPU memory used", "gpu_memory"),
    )
    for ax, (col, title, pkey) in zip(axes, panels, strict=True):
        for name, res in results.items():
            ts = res.timeseries
            hourly = ts.groupby((ts["minute"] // 60).astype(int))[col].mean()
            ax.plot(hourly.index, 100 * hourly.to_numpy(), label=name, color=color_of(name))
        if paper:
            for when, style in (("before", ":"), ("after", "--")):
                v = paper.get(when, {}).get(pkey)
                if v is not None:
                    ax.axhline(100 * v, ls=style, color="k", lw=0.8, label=f"paper {when}")
        ax.set_title(title)
        ax.set_xlabel("hours since the start of the simulation")
        ax.set_ylim(0, 100)
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("% (mean over online GPUs)")
    axes[0].legend(fontsize=8, loc="center right")
    fig.suptitle(
        f"GPU sharing ({', '.join(results)}): hourly means over the online GPUs"
        + ("; dotted/dashed: MuxFlow's published before/after sharing" if paper else "")
    )
    return fig


def slowdown_figure(results: Mapping[str, SharingOutput], slo: float = 1.2) -> Figure | None:
    """CDF of the online latency slowdown over shared GPU-minutes, per sharing policy (None
    when no policy shared a GPU)."""
    from matplotlib.figure import Figure

    shared = {k: r for k, r in results.items() if r.slowdown_hist.sum() > 0}
    if not shared:
        return None
    fig = Figure(figsize=(6, 3.6), layout="constrained")
    ax = fig.subplots()
    for name, res in shared.items():
        x, y = res.slowdown_cdf()
        ax.plot(x, y, label=name, color=color_of(name))
    ax.axvline(slo, color="k", ls="--", lw=0.8, label=f"SLO {slo:g}x")
    # Fitted to the data (and the SLO line): the largest slowdown is often near 1.2x.
    right = max([float(r.slowdown_cdf()[0][-1]) for r in shared.values()] + [slo])
    ax.set_xlim(1.0, 1.0 + (right - 1.0) * 1.05)
    ax.set_title(f"Online latency slowdown on shared GPUs ({', '.join(shared)})")
    ax.set_ylim(0, 1.02)
    ax.set_xlabel("online latency / solo latency")
    ax.set_ylabel("fraction of shared GPU-minutes")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    return fig


def plot_day(
    results: Mapping[str, SharingOutput],
    path: Path,
    paper: Mapping[str, Mapping[str, float]] | None = None,
) -> Path:
    """``day_figure`` written as a PNG at ``path``."""
    day_figure(results, paper).savefig(path, dpi=110)
    return path


def plot_slowdown(results: Mapping[str, SharingOutput], path: Path, slo: float = 1.2) -> Path:
    """``slowdown_figure`` written as a PNG at ``path`` (an empty plot if nothing was shared)."""
    fig = slowdown_figure(results, slo)
    if fig is None:
        from matplotlib.figure import Figure

        fig = Figure(figsize=(6, 3.6))
        fig.text(0.5, 0.5, "no GPU was shared", ha="center")
    fig.savefig(path, dpi=110)
    return path


def plot_ablation(table: pd.DataFrame, path: Path, budget: float) -> Path:
    """Per variant: utilization, SLO-violating fraction (vs the budget), online outage minutes
    and offline work done."""
    plt = _plt()
    t = table.set_index("variant")
    fig, axes = plt.subplots(1, 4, figsize=(16, 4.2), sharey=True)
    y = range(len(t))
    axes[0].barh(y, 100 * t["gpu_util_online"], color="#1f77b4")
    axes[0].set_xlabel("GPU utilization of online GPUs, %")
    axes[1].barh(y, 100 * t["slo_violation_fraction"], color="#d62728")
    axes[1].axvline(100 * budget, color="k", ls="--", lw=0.8, label="budget")
    axes[1].set_xscale("symlog", linthresh=1.0)
    axes[1].set_xlabel("SLO-violating GPU-minutes, % (symlog)")
    axes[1].legend(fontsize=8)
    axes[2].barh(y, t["outage_minutes"], color="#9467bd")
    axes[2].set_xscale("symlog", linthresh=10.0)
    axes[2].set_xlabel("online outage, GPU-minutes (symlog)")
    axes[3].barh(y, t["offline_work_gpu_hours"], color="#2ca02c")
    axes[3].set_xlabel("offline work done, GPU-hours")
    axes[0].set_yticks(list(y), list(t.index), fontsize=8)
    axes[0].invert_yaxis()
    for ax in axes:
        ax.grid(alpha=0.3, axis="x")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def plot_sweep(table: pd.DataFrame, param: str, path: Path, budget: float) -> Path:
    """Utilization, violations and offline work against one swept parameter."""
    plt = _plt()
    fig, axes = plt.subplots(1, 3, figsize=(13, 3.4))
    x = table[param]
    axes[0].plot(x, 100 * table["gpu_util_online"], "o-")
    axes[0].set_ylabel("GPU util. online, %")
    axes[1].plot(x, 100 * table["slo_violation_fraction"], "o-", color="#d62728")
    axes[1].axhline(100 * budget, color="k", ls="--", lw=0.8)
    axes[1].set_ylabel("SLO-violating minutes, %")
    axes[2].plot(x, table["offline_work_gpu_hours"], "o-", color="#2ca02c")
    axes[2].set_ylabel("offline work, GPU-hours")
    for ax in axes:
        ax.set_xlabel(param)
        ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def plot_outputs(
    outputs: Mapping[str, SharingOutput],
    out_dir: Path,
    stem: str = "muxflow",
    paper: Mapping[str, Mapping[str, float]] | None = None,
) -> list[Path]:
    """The day figure and, when some GPU was shared, the slowdown figure of ``outputs``
    (label -> run) as ``STEM_day.png`` and ``STEM_slowdown.png`` in ``out_dir``; ``paper``:
    MuxFlow's before/after numbers drawn beside the day."""
    if not outputs:
        return []
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = [plot_day(outputs, out_dir / f"{stem}_day.png", paper=paper)]
    if any(o.slowdown_hist.sum() for o in outputs.values()):
        paths.append(plot_slowdown(outputs, out_dir / f"{stem}_slowdown.png"))
    return paths


def plot_saved(dirs: Mapping[str, Path], out_dir: Path) -> list[Path]:
    """The day and slowdown figures from sharing outputs saved by ``SharingOutput.save`` (the
    replay writes one into each sharing policy's output store). ``dirs`` maps a label (e.g. the
    policy) to such a directory; those without ``sharing.json`` are skipped."""
    outputs = {k: SharingOutput.load(d) for k, d in dirs.items() if (d / SAVED_JSON).exists()}
    return plot_outputs(outputs, out_dir)
