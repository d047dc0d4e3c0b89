"""The report's figures: which exist, drawing them with a fixed style, and their bytes.

The builders live in ``plots`` (one function per figure). Bytes are deterministic for the same
data: PNG without the Software chunk, SVG without date/creator and with a fixed
``svg.hashsalt``, and a fixed style (no dependence on the user's matplotlibrc).
"""

from __future__ import annotations

import io
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from philly_analyze.report import plots

if TYPE_CHECKING:
    from matplotlib.figure import Figure
    from matplotlib.typing import RcKeyType

    from philly_analyze.analysis import Report

#: Fixed style: every figure looks (and hashes) the same whatever the user's matplotlibrc.
STYLE: dict[RcKeyType, Any] = {
    "font.size": 10,
    "axes.titlesize": 10.5,
    "axes.labelsize": 10,
    "legend.fontsize": 8.5,
    "xtick.labelsize": 9,
    "ytick.labelsize": 9,
    "axes.grid": True,
    "grid.alpha": 0.3,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "figure.dpi": 100,
    "savefig.dpi": 110,
    "svg.hashsalt": "philly-analyze",
    "svg.fonttype": "path",
    "path.simplify": True,
}


@dataclass(frozen=True)
class FigureSpec:
    """A figure: file stem, caption, the section it needs, and its builder."""

    name: str
    caption: str
    section: str
    build: Callable[[Report], Figure | None]
    #: The caption for a report, when it depends on what the figure could draw.
    caption_of: Callable[[Report], str] | None = None

    def caption_for(self, report: Report) -> str:
        """This figure's caption in ``report``."""
        return self.caption_of(report) if self.caption_of else self.caption


FIGURES: tuple[FigureSpec, ...] = (
    FigureSpec(
        "table6_status",
        "Jobs and GPU time by final status (Table 6)",
        "status",
        plots.table6_status,
    ),
    FigureSpec(
        "fig3_queueing_delay",
        "Queueing delay CDFs by GPU demand (Figure 3)",
        "queueing",
        plots.fig3_queueing,
    ),
    FigureSpec(
        "table2_wait_causes",
        "Main cause of waiting jobs (Table 2)",
        "queueing",
        plots.table2_causes,
    ),
    FigureSpec(
        "fig4_locality",
        "Utilization and delay by servers spanned (Table 5, Figure 4)",
        "locality",
        plots.fig4_locality,
        plots.fig4_caption,
    ),
    FigureSpec(
        "fig5_util_by_status",
        "GPU utilization CDF by status (Figure 5)",
        "gpu_utilization",
        plots.fig5_util_status,
    ),
    FigureSpec(
        "fig6_util_by_size",
        "GPU utilization CDF by job size (Figure 6)",
        "gpu_utilization",
        plots.fig6_util_size,
    ),
    FigureSpec(
        "fig7_host_resources", "Host CPU and memory (Figure 7)", "host_resources", plots.fig7_host
    ),
    FigureSpec(
        "fig8_convergence",
        "Epochs to the lowest loss (Figure 8)",
        "convergence",
        plots.fig8_convergence,
    ),
    FigureSpec(
        "fig9_retries", "Retries and unsuccessful rate (Figure 9)", "retries", plots.fig9_retries
    ),
    FigureSpec(
        "sharing_day",
        "GPU sharing: online GPUs over the simulated period (MuxFlow)",
        "gpu_sharing",
        plots.sharing_day,
    ),
    FigureSpec(
        "sharing_slowdown",
        "GPU sharing: online latency slowdown (MuxFlow)",
        "gpu_sharing",
        plots.sharing_slowdown,
    ),
)


# ---------------------------------------------------------------------- output
def build(report: Report) -> list[tuple[FigureSpec, Figure]]:
    """Every figure the report's sections can feed, in report order."""
    import matplotlib

    out = []
    with matplotlib.rc_context(STYLE):
        for spec in FIGURES:
            if spec.section in report.sections:
                fig = spec.build(report)
                if fig is not None:
                    out.append((spec, fig))
    return out


def to_bytes(fig: Figure, fmt: str) -> bytes:
    """PNG or SVG bytes, without dates, versions or random ids."""
    import matplotlib

    buf = io.BytesIO()
    with matplotlib.rc_context(STYLE):
        if fmt == "png":
            fig.savefig(buf, format="png", metadata={"Software": None})
        elif fmt == "svg":
            fig.savefig(buf, format="svg", metadata={"Date": None, "Creator": None})
        else:
            raise ValueError(f"unsupported figure format {fmt!r}")
    return buf.getvalue()


@dataclass(frozen=True)
class Rendered:
    """A figure drawn once: its spec, its caption and its bytes per format."""

    spec: FigureSpec
    data: dict[str, bytes]
    caption: str = ""


def render_all(report: Report, formats: tuple[str, ...] = ("png", "svg")) -> list[Rendered]:
    """Every figure of the report, drawn once per format."""
    return [
        Rendered(spec, {fmt: to_bytes(fig, fmt) for fmt in formats}, spec.caption_for(report))
        for spec, fig in build(report)
    ]


def write(
    report: Report,
    out_dir: str | Path,
    formats: tuple[str, ...] = ("png", "svg"),
    rendered: list[Rendered] | None = None,
) -> list[Path]:
    """Write every figure as ``<name>.<fmt>`` under ``out_dir`` (reusing ``rendered`` bytes if
    given); returns the paths."""
    d = Path(out_dir)
    d.mkdir(parents=True, exist_ok=True)
    paths = []
    for r in rendered if rendered is not None else render_all(report, formats):
        for fmt in formats:
            p = d / f"{r.spec.name}.{fmt}"
            p.write_bytes(r.data[fmt])
            paths.append(p)
    return paths
