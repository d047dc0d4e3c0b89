"""Figures of a sweep (matplotlib, Agg): each metric against each swept parameter.

One figure per swept parameter, one panel per metric: the mean over seeds with its
confidence interval (error bars), one line per policy (and per combination of the other
swept parameters). A policy that does not take the parameter is drawn as a dashed
horizontal line with its interval as a band: the baseline the curve is compared with
(``relaxed`` or ``las`` against ``philly``'s locality wait). Without a swept parameter, one
figure of bars per policy. Each figure is written as PNG and SVG.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from philly_analyze.sweep.spec import PARAM_PREFIX

NCOLS = 4


def _plt() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def unit(metric: str, values: np.ndarray) -> tuple[float, str]:
    """Divisor and label that make ``metric``'s values readable (seconds to min/h/d;
    fractions as %: ``units``)."""
    from philly_analyze.units import FRACTION_METRICS

    if metric in FRACTION_METRICS:
        return 0.01, "%"
    if metric.endswith("_s"):
        big = float(np.nanmax(np.abs(values))) if np.isfinite(values).any() else 0.0
        for lim, div, name in ((120, 1, "s"), (7200, 60, "min"), (172800, 3600, "h")):
            if big < lim:
                return div, name
        return 86400, "d"
    if metric.endswith("_pct"):
        return 1, "%"
    if metric.endswith("_min"):
        return 1, "min"
    return 1, ""


def varying(summary: pd.DataFrame) -> list[str]:
    """Metrics whose mean differs between cells (the others make flat, empty panels)."""
    out = []
    for m, g in summary.groupby("metric", sort=False):
        means = g["mean"].dropna().to_numpy(float)
        if len(means) and np.ptp(means) > 1e-12 * max(1.0, float(np.abs(means).max())):
            out.append(str(m))
    return out


def plot_sweep(
    summary: pd.DataFrame,
    swept: list[str],
    out_dir: Path,
    metrics: list[str] | None = None,
    confidence: float = 0.95,
) -> list[Path]:
    """Write the sweep's figures under ``out_dir``; returns the PNG paths."""
    metrics = metrics or varying(summary) or list(dict.fromkeys(summary["metric"]))
    summary = summary[summary["metric"].isin(metrics)]
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = []
    if not swept:
        paths.append(_bars(summary, metrics, out_dir / "policies", confidence))
    for p in swept:
        paths.append(_against(summary, p, swept, metrics, out_dir / p, confidence))
    return paths


#: Figure layout in inches: panel size, margins, room for the title and the legend. Fixed
#: margins instead of ``tight_layout``, which measured every tick label of every panel and
#: took longer than drawing the figure.
PANEL_W, PANEL_H = 3.7, 2.9
LEFT, RIGHT, TOP, LEGEND_ROW = 0.65, 0.2, 0.7, 0.25


def _grid(n: int, legend_rows: int) -> tuple[Any, Any, np.ndarray]:
    plt = _plt()
    ncols = min(NCOLS, n)
    nrows = math.ceil(n / ncols)
    bottom = 0.55 + LEGEND_ROW * legend_rows
    w, h = PANEL_W * ncols, PANEL_H * nrows + TOP + bottom
    fig, axes = plt.subplots(nrows, ncols, figsize=(w, h), squeeze=False)
    fig.subplots_adjust(
        left=LEFT / w, right=1 - RIGHT / w, top=1 - TOP / h, bottom=bottom / h,
        wspace=0.38, hspace=0.55,
    )  # fmt: skip
    for ax in axes.flat[n:]:
        ax.set_visible(False)
    return plt, fig, axes.flat[:n]


def _save(plt: Any, fig: Any, stem: Path, title: str, handles: list, labels: list) -> Path:
    fig.suptitle(title, fontsize=11, y=1 - 0.25 / fig.get_figheight())
    if handles:
        fig.legend(handles, labels, loc="lower center", ncol=min(len(labels), 4), fontsize=8)
    png = stem.with_suffix(".png")
    fig.savefig(png, dpi=110)
    fig.savefig(stem.with_suffix(".svg"))
    plt.close(fig)
    return png


def _label(row: pd.Series, others: list[str]) -> str:
    bits = [f"{p}={_fmt(row[PARAM_PREFIX + p])}" for p in others if pd.notna(row[PARAM_PREFIX + p])]
    return str(row["policy"]) + (f" ({', '.join(bits)})" if bits else "")


def _category_order(v: Any) -> tuple[int, float, str]:
    """Text values of a parameter in a readable order: numbers (``"3"`` of a column made text
    by a ``none``) by value, then the rest (``none``) alphabetically."""
    try:
        return (0, float(v), "")
    except (TypeError, ValueError):
        return (1, 0.0, str(v))


def _fmt(v: Any) -> str:
    if isinstance(v, float) and v.is_integer():
        return str(int(v))
    return str(v)


def _against(
    summary: pd.DataFrame, p: str, swept: list[str], metrics: list[str], stem: Path, conf: float
) -> Path:
    col = PARAM_PREFIX + p
    others = [q for q in swept if q != p]
    xs_all = summary[col].dropna().unique().tolist()
    numeric = all(isinstance(x, int | float) and not isinstance(x, bool) for x in xs_all)
    xs_sorted = sorted(xs_all, key=float) if numeric else sorted(xs_all, key=_category_order)
    pos = {x: (float(x) if numeric else i) for i, x in enumerate(xs_sorted)}
    series_keys = ["policy", *(PARAM_PREFIX + q for q in others)]
    keys = summary[series_keys].astype(object).where(summary[series_keys].notna(), None)
    summary = summary.assign(
        _series=[_label(r, others) for _, r in keys.assign(**{col: 0}).iterrows()]
    )
    n_seeds = int(summary["n"].max()) if len(summary) else 0
    series = list(dict.fromkeys(summary["_series"]))
    plt, fig, axes = _grid(len(metrics), math.ceil(len(series) / 4))
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    handles: dict[str, Any] = {}
    for ax, m in zip(axes, metrics, strict=True):
        g = summary[summary["metric"] == m]
        div, uname = unit(m, g["mean"].to_numpy(float))
        for i, s in enumerate(series):
            h = g[g["_series"] == s]
            color = colors[i % len(colors)]
            if h.empty:
                continue
            if h[col].isna().all():  # the policy does not take p: a baseline
                y0, e0 = float(h["mean"].iloc[0]) / div, float(h["half_width"].iloc[0]) / div
                line = ax.axhline(y0, color=color, ls="--", lw=1.2)
                if np.isfinite(e0) and e0 > 0:
                    ax.axhspan(y0 - e0, y0 + e0, color=color, alpha=0.12, lw=0)
                handles.setdefault(s + " (no " + p + ")", line)
                continue
            h = h[h[col].notna()]
            x = np.array([pos[v] for v in h[col]])
            y = h["mean"].to_numpy(float) / div
            err = h["half_width"].to_numpy(float) / div
            o = np.argsort(x)
            e = np.where(np.isfinite(err), err, 0)[o]
            line = ax.errorbar(x[o], y[o], yerr=e, color=color, marker="o", ms=4, capsize=3, lw=1.4)
            handles.setdefault(s, line)
        ax.set_title(m + (f" ({uname})" if uname else ""), fontsize=9)
        ax.tick_params(labelsize=8)
        ax.grid(alpha=0.3)
        if numeric:
            vals = [float(x) for x in xs_sorted]
            pos_vals = [v for v in vals if v > 0]
            if pos_vals and max(vals) / min(pos_vals) > 20 and min(vals) >= 0:
                # Values like 0, 5, 30, 120 minutes: log-spaced, with 0 on a linear stretch.
                ax.set_xscale("symlog", linthresh=min(pos_vals))
                ax.set_xlim(min(vals) - 0.2 * min(pos_vals), max(vals) * 1.25)
            ax.set_xticks(vals, [_fmt(x) for x in xs_sorted])
        else:
            ax.set_xticks(list(pos.values()), [str(x) for x in xs_sorted])
        ax.ticklabel_format(axis="y", useOffset=False, style="plain")
        ax.set_xlabel(p, fontsize=8)
    title = f"sweep: metrics against {p} (mean over {n_seeds} seed{'s' if n_seeds != 1 else ''}"
    title += f", {conf:.0%} t-interval)" if n_seeds > 1 else ")"
    return _save(plt, fig, stem, title, list(handles.values()), list(handles))


def _bars(summary: pd.DataFrame, metrics: list[str], stem: Path, conf: float) -> Path:
    plt, fig, axes = _grid(len(metrics), 0)
    cells = list(dict.fromkeys(summary["policy"]))
    n_seeds = int(summary["n"].max()) if len(summary) else 0
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for ax, m in zip(axes, metrics, strict=True):
        g = summary[summary["metric"] == m].set_index("policy").reindex(cells)
        div, uname = unit(m, g["mean"].to_numpy(float))
        y = g["mean"].to_numpy(float) / div
        err = np.nan_to_num(g["half_width"].to_numpy(float) / div)
        ax.bar(range(len(cells)), y, yerr=err, capsize=3, color=colors[: len(cells)])
        ax.set_xticks(range(len(cells)), cells, fontsize=8, rotation=20)
        ax.set_title(m + (f" ({uname})" if uname else ""), fontsize=9)
        ax.tick_params(labelsize=8)
        ax.grid(alpha=0.3, axis="y")
        ax.ticklabel_format(axis="y", useOffset=False, style="plain")
    title = f"sweep: metrics by policy (mean over {n_seeds} seed{'s' if n_seeds != 1 else ''}"
    title += f", {conf:.0%} t-interval)" if n_seeds > 1 else ")"
    return _save(plt, fig, stem, title, [], [])
