"""The figure builders of the report: one function per figure, ``Report -> Figure | None``
(None when the section is missing or empty). Pure matplotlib object API on an Agg canvas, no
pyplot state; ``figures`` applies the fixed style, encodes and writes them. Every axis has a
label with its unit; text from the data (VC names) is escaped for mathtext.

The builders live in ``plots_jobs`` (queueing, status, retries, convergence) and
``plots_resources`` (locality, utilization, host resources, sharing), their shared style in
``plot_style``; ``figures`` takes them from here."""

from __future__ import annotations

from philly_analyze.report.plot_style import (
    BUCKET_STYLE,
    COLORS,
    CYCLE_COLORS,
    CYCLE_STYLES,
    STATUS_COLORS,
    line_style,
)
from philly_analyze.report.plots_jobs import (
    fig3_queueing,
    fig8_convergence,
    fig9_retries,
    table2_causes,
    table6_status,
)
from philly_analyze.report.plots_resources import (
    fig4_caption,
    fig4_locality,
    fig5_util_status,
    fig6_util_size,
    fig7_host,
    sharing_day,
    sharing_slowdown,
)

__all__ = [
    "BUCKET_STYLE",
    "COLORS",
    "CYCLE_COLORS",
    "CYCLE_STYLES",
    "STATUS_COLORS",
    "fig3_queueing",
    "fig4_caption",
    "fig4_locality",
    "fig5_util_status",
    "fig6_util_size",
    "fig7_host",
    "fig8_convergence",
    "fig9_retries",
    "line_style",
    "sharing_day",
    "sharing_slowdown",
    "table2_causes",
    "table6_status",
]
