"""Cell formatting and column layout shared by the terminal, markdown and HTML renderers."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import pandas as pd

from philly_analyze.analysis import paper
from philly_analyze.analysis.result import PAPER_PREFIX, ResultTable

if TYPE_CHECKING:
    from philly_analyze.analysis import Report

MISSING = "–"
#: Display names where ``_`` -> space reads badly.
HEADERS = {"gpus_1": "1 GPU", "gpus_2_4": "2-4 GPUs", "gpus_5_8": "5-8 GPUs", "gpus_gt8": ">8 GPUs"}


def is_paper(col: str) -> bool:
    """Whether a column holds the paper's value for the column before it."""
    return col.startswith(PAPER_PREFIX)


def header(col: str) -> str:
    """Display name of a column: ``paper_x`` -> ``(paper)``, underscores -> spaces."""
    if is_paper(col):
        return "(paper)"
    return HEADERS.get(col, col.replace("_", " "))


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


def is_numeric(table: ResultTable, col: str) -> bool:
    """Whether a column is right-aligned (numbers and the paper's values)."""
    return is_paper(col) or pd.api.types.is_numeric_dtype(table.frame[col].dtype)


def columns(table: ResultTable, compact: bool = False) -> list[str]:
    """Columns to show (``table.display`` when compact and set), paper columns kept beside
    their computed column."""
    cols = list(table.frame.columns)
    if compact and table.display:
        keep = set(table.display) | {PAPER_PREFIX + c for c in table.display}
        cols = [c for c in cols if c in keep]
    return cols


def rows(table: ResultTable, cols: list[str]) -> list[list[str]]:
    """The frame's rows as formatted text."""
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
