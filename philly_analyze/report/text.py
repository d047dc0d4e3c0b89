"""Cell formatting and column layout shared by the terminal, markdown and HTML renderers."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from philly_analyze.analysis import paper
from philly_analyze.analysis.result import PAPER_PREFIX

if TYPE_CHECKING:
    from philly_analyze.analysis import Report
    from philly_analyze.report.model import Table

MISSING = "–"
#: Display names where the general rule (``header``) reads badly.
HEADERS = {
    "gpus_1": "1 GPU",
    "gpus_2_4": "2-4 GPUs",
    "gpus_5_8": "5-8 GPUs",
    "gpus_gt8": ">8 GPUs",
    # Table 7: trials by the failed attempt's GPU demand (the paper's "GPU demand" columns).
    "gpu_demand_1": "1 GPU",
    "gpu_demand_2_4": "2-4 GPUs",
    "gpu_demand_gt4": ">4 GPUs",
    "rtf_total_pct": "RTF share (%)",
    "rtf_x_demand": "RTF x demand (GPU-min)",
    "rtf_x_demand_pct": "RTF x demand share (%)",
    # Figure 8's summary: fractions of a job's epochs.
    "median_frac_lowest": "median fraction to lowest",
    "median_frac_within": "median fraction to within 0.1%",
    "within_by_40pct": "jobs within 0.1% by 40%",
}
#: Words of column names written as a reader expects them.
WORDS = {"gpu": "GPU", "gpus": "GPUs", "cpu": "CPU", "rtf": "RTF", "vc": "VC", "jct": "JCT"}
#: A column name's last word that is its unit: shown in parentheses (``p50_min`` would read
#: as "p50 min", a minimum, and ``jobs_pct`` as "jobs pct").
UNITS = {"pct": "%", "min": "min", "s": "s"}


def is_paper(col: str) -> bool:
    """Whether a column holds the paper's value for the column before it."""
    return col.startswith(PAPER_PREFIX)


def header(col: str) -> str:
    """Display name of a column: ``paper_x`` -> ``(paper)``; else ``HEADERS``, or the words
    of the name (``WORDS`` in their usual case) with a unit suffix in parentheses:
    ``rtf_p50_min`` -> ``RTF p50 (min)``, ``gpu_time_pct`` -> ``GPU time (%)``."""
    if is_paper(col):
        return "(paper)"
    if col in HEADERS:
        return HEADERS[col]
    words = col.split("_")
    unit = UNITS.get(words[-1]) if len(words) > 1 else None
    name = " ".join(WORDS.get(w, w) for w in (words[:-1] if unit else words))
    return f"{name} ({unit})" if unit else name


def heading(table: Table, col: str) -> str:
    """Display name of a column of ``table``: its own name for it (``Table.headers``), else
    ``header``'s."""
    if table.headers is not None and col in table.headers:
        return table.headers[col]
    return header(col)


def cell(value: Any) -> str:
    """One value as text: thousands separators for counts, 2 decimals (3 below 1) for the
    rest, ``–`` for missing."""
    if value is None:
        return MISSING
    if isinstance(value, pd.Timestamp):
        return MISSING if pd.isna(value) else value.strftime("%Y-%m-%d %H:%M UTC")
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, int) or (hasattr(value, "dtype") and "int" in str(value.dtype)):
        return f"{int(value):,}"
    if isinstance(value, float) or (hasattr(value, "dtype") and "float" in str(value.dtype)):
        f = float(value)
        if math.isnan(f):
            return MISSING
        if f == int(f) and abs(f) >= 1000:
            return f"{int(f):,}"
        if f != 0 and abs(f) < 1:
            return f"{f:.3f}"
        return f"{f:,.2f}"
    try:
        if pd.isna(value):
            return MISSING
    except (TypeError, ValueError):
        pass
    return str(value)


def label(value: Any) -> str:
    """A value that names something (a parameter's value in a sweep's row) as it was given:
    ``30.0`` -> ``30``, ``0.5`` -> ``0.5``; missing -> empty."""
    from philly_analyze.report.model import plain

    v = plain(value)
    if v is None:
        return ""
    if isinstance(v, float) and v.is_integer():
        return str(int(v))
    return str(v)


def is_numeric(table: Table, col: str) -> bool:
    """Whether a column is right-aligned (numbers and the paper's values; in a table of one
    metric a row, a column of ints and floats; or the table's own ``numeric`` set)."""
    if table.numeric is not None:
        return col in table.numeric
    if is_paper(col) or pd.api.types.is_numeric_dtype(table.frame[col].dtype):
        return True
    vals = table.frame[col].dropna().tolist()
    return table.per_row and bool(vals) and all(_is_number(v) for v in vals)


def _is_number(v: Any) -> bool:
    return isinstance(v, int | float | np.integer | np.floating) and not isinstance(v, bool)


def columns(table: Table, compact: bool = False) -> list[str]:
    """Columns to show (``table.display`` when compact and set), paper columns kept beside
    their computed column."""
    cols = list(table.frame.columns)
    if compact and table.display:
        keep = set(table.display) | {PAPER_PREFIX + c for c in table.display}
        cols = [c for c in cols if c in keep]
    return cols


def rows(table: Table, cols: list[str]) -> list[list[str]]:
    """The frame's rows as text: the table's own ``texts`` (values in their units), else
    each value through ``cell``."""
    if table.texts is not None:
        return [list(map(str, r)) for r in table.texts[cols].itertuples(index=False, name=None)]
    frame = table.frame[cols]
    return [[cell(v) for v in r] for r in frame.itertuples(index=False, name=None)]


def citations(report: Report) -> list[str]:
    """One line per publication whose values the report's sections print: the ATC'19 paper
    for its analyses, MuxFlow for the GPU sharing section (``data/citations.json``)."""
    keys = [sec.citation for sec in report.sections.values()] or ["atc19"]
    lines = [f"{label}: {full}" for label, full in paper.citations(keys)]
    if any(s in report.sections for s in ("convergence", "retries")):
        lines.append("Figures 8-9 of the ATC'19 paper: values read off the plots (±0.03).")
    return lines
