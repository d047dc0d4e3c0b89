"""What an analysis returns: named tables (pandas frames) plus notes and figure inputs.

Conventions every renderer relies on:

- a column named ``paper_<col>`` holds the paper's value for the computed column ``<col>``
  of the same row (renderers put it beside ``<col>``);
- ``Section.rows()`` is the JSON form: every table's rows as objects, each tagged with
  ``"table": <table name>`` so one flat list can carry several tables;
- ``Section.data`` carries arrays the figures need (CDF points, per-job frames) and is not
  part of the JSON.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from datetime import date, datetime
from typing import Any

import numpy as np
import pandas as pd

PAPER_PREFIX = "paper_"


@dataclass
class ResultTable:
    """One table of a section."""

    name: str
    title: str
    frame: pd.DataFrame
    #: Where the paper has this table ("Table 2"), or None for tables the paper does not print.
    paper: str | None = None
    #: One or two sentences on how to read it (units, what a row is).
    description: str = ""
    #: Columns the compact (terminal) view shows; None = all. Paper columns follow theirs.
    display: tuple[str, ...] | None = None
    #: A table of one metric a row: a column of numbers keeps each one's type, so a count
    #: reads "276" beside "29.86" (a column of other tables is one type: all floats).
    per_row: bool = False

    def __post_init__(self) -> None:
        self.frame = _numeric_columns(self.frame, keep_ints=self.per_row)

    def records(self) -> list[dict[str, Any]]:
        """Rows as JSON-ready objects (NaN -> null, numpy scalars -> Python)."""
        cols = list(self.frame.columns)
        return [
            {"table": self.name, **{c: json_value(v) for c, v in zip(cols, row, strict=True)}}
            for row in self.frame.itertuples(index=False, name=None)
        ]


@dataclass
class Section:
    """The result of one analysis."""

    name: str
    title: str
    tables: list[ResultTable] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    data: dict[str, Any] = field(default_factory=dict)
    seconds: float = 0.0
    #: Key in ``data/citations.json`` of the publication its paper values come from.
    citation: str = "atc19"

    def table(self, name: str) -> ResultTable:
        """The table called ``name`` (KeyError if the section has none)."""
        for t in self.tables:
            if t.name == name:
                return t
        raise KeyError(f"section {self.name} has no table {name!r}")

    def frame(self, name: str) -> pd.DataFrame:
        """Shortcut for ``table(name).frame``."""
        return self.table(name).frame

    def has_table(self, name: str) -> bool:
        """Whether the section computed a table called ``name``."""
        return any(t.name == name for t in self.tables)

    def rows(self) -> list[dict[str, Any]]:
        """All tables' rows, each tagged with its table name (the JSON list)."""
        out: list[dict[str, Any]] = []
        for t in self.tables:
            out.extend(t.records())
        return out


def json_value(v: Any) -> Any:
    """A JSON-serialisable, deterministic form of one cell."""
    if v is None:
        return None
    if isinstance(v, (bool, np.bool_)):
        return bool(v)
    if isinstance(v, (int, np.integer)):
        return int(v)
    if isinstance(v, (float, np.floating)):
        f = float(v)
        return None if math.isnan(f) or math.isinf(f) else round(f, 6)
    if isinstance(v, pd.Timestamp):
        return None if pd.isna(v) else v.isoformat()
    if isinstance(v, (datetime, date)):
        return v.isoformat()
    if isinstance(v, (list, tuple, np.ndarray)):
        return [json_value(x) for x in v]
    try:
        if pd.isna(v):
            return None
    except (TypeError, ValueError):
        pass
    return str(v) if not isinstance(v, str) else v


def _numeric_columns(frame: pd.DataFrame, keep_ints: bool = False) -> pd.DataFrame:
    """Object columns holding only numbers and missing values become Int64 (all integers) or
    float64, so renderers align and format them as numbers; with ``keep_ints``, a column of
    integers and fractional numbers stays as it is (``ResultTable.per_row``)."""
    out = frame.copy()
    for c in out.columns:
        if str(c).startswith(PAPER_PREFIX) and pd.api.types.is_float_dtype(out[c].dtype):
            v = out[c].dropna()
            if len(v) and bool((v == v.round()).all()):  # paper counts stay integers
                out[c] = out[c].astype("Int64")
            continue
        if pd.api.types.is_numeric_dtype(out[c].dtype) or pd.api.types.is_bool_dtype(out[c]):
            continue
        vals = [v for v in out[c].tolist() if v is not None and not _isnan(v)]
        if not vals or not all(
            isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, bool)
            for v in vals
        ):
            continue
        if all(float(v).is_integer() and isinstance(v, (int, np.integer)) for v in vals):
            out[c] = pd.array([None if v is None or _isnan(v) else int(v) for v in out[c]], "Int64")
        elif not keep_ints or not any(isinstance(v, (int, np.integer)) for v in vals):
            out[c] = pd.to_numeric(out[c].astype(object), errors="coerce").astype("float64")
    return out


def _isnan(v: Any) -> bool:
    return isinstance(v, (float, np.floating)) and math.isnan(float(v))
