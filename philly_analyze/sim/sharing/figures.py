"""Figures of the sharing model's experiments (matplotlib): ablation bars and parameter sweeps
(``replay --scenario paper --ablate|--vary ... --figures DIR``). Each function writes one PNG and
returns its path. The figures of a sharing run itself (its day, its slowdowns), which the report
draws from a store too, are in ``report.sharing``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd


def _plt() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


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
