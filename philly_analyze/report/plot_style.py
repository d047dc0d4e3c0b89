"""What the report's figures share: colours and line styles, a figure with its axes, label
text from the data, CDF steps and the computed-beside-paper bar panels."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from philly_analyze.analysis import paper
from philly_analyze.analysis.common import STATUSES

if TYPE_CHECKING:
    from matplotlib.figure import Figure

    from philly_analyze.analysis import Report

COLORS = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#7f7f7f")
#: Ten colours (matplotlib's tab10) and the line styles that tell a colour's later uses apart:
#: ``line_style(k)`` is distinct for k < 40 (Table 5 can list a dozen server counts).
CYCLE_COLORS = (
    "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd",
    "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf",
)  # fmt: skip
CYCLE_STYLES = ("-", "--", ":", "-.")
STATUS_COLORS = dict(
    zip((*STATUSES, "all"), ("#2ca02c", "#ff7f0e", "#d62728", "#333333"), strict=True)
)
BUCKET_STYLE = {
    "1": ("#2ca02c", "-"),
    "2-4": ("#1f77b4", "-."),
    "5-8": ("#d62728", "--"),
    ">8": ("#9467bd", ":"),
}


def new_figure(w: float, h: float, ncols: int = 1, nrows: int = 1) -> tuple[Figure, Any]:
    """A constrained-layout figure of ``nrows`` x ``ncols`` axes (always a 2-D array)."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(w, h), layout="constrained")
    axes = fig.subplots(nrows, ncols, squeeze=False)
    return fig, axes


def safe_text(text: object, limit: int = 28) -> str:
    """Data text for a label: no mathtext, bounded length."""
    s = str(text)
    if len(s) > limit:
        s = s[: limit - 1] + "…"
    return s.replace("$", r"\$")


def section_or_none(report: Report, name: str) -> Any:
    """The report's section ``name`` if it has tables, else None (nothing to draw)."""
    sec = report.sections.get(name)
    return sec if sec is not None and sec.tables else None


def no_reference(key: str) -> str:
    """Says on a figure that the paper's curves are not drawn, for figures whose values the
    data file does not hold (``paper.rows(key)`` empty: Figures 3 and 7)."""
    if paper.rows(key):  # values transcribed later must be drawn, not announced as absent
        raise ValueError(f"{key}: the paper's values exist; draw them")
    return f"(the paper's {paper.where(key)}: no values transcribed, so none drawn)"


def line_style(k: int) -> tuple[str, str]:
    """(colour, line style) of the k-th line of a panel: all colours solid, then dashed..."""
    n = len(CYCLE_COLORS)
    return CYCLE_COLORS[k % n], CYCLE_STYLES[(k // n) % len(CYCLE_STYLES)]


def fmt_value(v: Any, digits: int = 1) -> str:
    """A number for a label; a dash for a value the data cannot give."""
    return "–" if v is None or (isinstance(v, float) and np.isnan(v)) else f"{v:.{digits}f}"


def cdf_steps(x: np.ndarray, y: np.ndarray, right: float) -> tuple[np.ndarray, np.ndarray]:
    """A CDF for ``ax.step(where="post")``: up from 0 at the first value, flat to ``right``
    (one value alone, e.g. all minutes in one 1% bin, is a line, not a lone point)."""
    return np.concatenate(([x[0]], x, [right])), np.concatenate(([0.0], y, [y[-1]]))


def headroom(ax: Any, *values: np.ndarray) -> None:
    """Room above the bars for a one-line legend."""
    top = max((float(np.nanmax(v)) for v in values if len(v) and np.isfinite(v).any()), default=1.0)
    ax.set_ylim(0, (top or 1.0) * 1.25)


def paired_bars(
    df: Any,
    ticks: list[str],
    panels: tuple[tuple[str, str], ...],
    xlabel: str,
    paper_label: str,
    title: str,
) -> Figure:
    """One panel per (column, y label): the computed value beside the paper's (hatched)."""
    fig, axes = new_figure(3.6 * len(panels) + 0.8, 3.3, len(panels), 1)
    x = np.arange(len(df))
    for ax, (col, label) in zip(axes[0], panels, strict=True):
        ours = df[col].astype(float).to_numpy()
        pap = df[f"paper_{col}"].astype(float).to_numpy()
        ax.bar(x - 0.2, ours, 0.38, color="#1f77b4", label="computed")
        for xi in x[np.isnan(ours)]:  # absent, not 0: say so where the bar would be
            ax.text(xi - 0.2, 0, "no data", rotation=90, ha="center", va="bottom", fontsize=8)
        ax.bar(
            x + 0.2,
            np.nan_to_num(pap),
            0.38,
            color="#bbbbbb",
            hatch="//",
            edgecolor="white",
            label=paper_label,
        )
        ax.set_xticks(x, ticks)
        ax.set_xlim(-0.6, len(df) - 0.4)
        ax.set_xlabel(xlabel)
        ax.set_ylabel(label)
        headroom(ax, ours, pap)
        ax.legend(loc="upper left", ncols=2)
    fig.suptitle(title)
    return fig
