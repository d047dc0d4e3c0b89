"""Figures of a GPU-sharing run (matplotlib, Agg backend): the day's utilization, SM activity
and memory of the online GPUs per policy, and the online slowdown distribution. They draw
``SharingOutput``s: read from a store (the report's GPU sharing section, ``plot_saved``) or
straight from a run (``replay --figures``). Each line has its policy's colour, recorded with
the output (``SharingOutput.color``)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from philly_analyze.sharingout import SharingOutput

if TYPE_CHECKING:
    from matplotlib.figure import Figure


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
            ax.plot(hourly.index, 100 * hourly.to_numpy(), label=name, color=res.color)
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
        ax.plot(x, y, label=name, color=res.color)
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
    """The day and slowdown figures of the sharing outputs in replay stores (``replay --policy
    muxflow --out DIR`` keeps one in each sharing policy's store). ``dirs`` maps a label (e.g.
    the policy) to such a store; stores without a sharing output are skipped."""
    from philly_analyze.store import Store, has_artifact

    outputs = {}
    for label, d in dirs.items():
        if has_artifact(d, "sharing"):
            with Store(d, read_only=True) as store:
                out = SharingOutput.from_store(store)
            if out is not None:
                outputs[label] = out
    return plot_outputs(outputs, out_dir)
