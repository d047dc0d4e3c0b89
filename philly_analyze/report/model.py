"""The output layer's model: what every verb prints is a ``Document`` of ``Section``s of
``Table``s, rendered by ``report.render`` to table (rich), md, json, csv or html.

A ``Table`` holds raw values (a pandas frame whose columns are the JSON keys and CSV
columns) and, optionally, the text each cell shows in the text formats (``texts``: a value
in its unit, ``45.0 min``). ``plain`` is the one function that turns a value into its JSON /
CSV form (NaN and NA -> null, numpy scalars -> Python, floats rounded to 6 decimals); ``cell``
(``report.text``) the one that formats a value for reading when a table brings no text.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pandas as pd

# The analyses' JSON form of a cell is the package's plain value: one definition (the
# analysis layer may not import report/, so the function lives there and is named here).
from philly_analyze.analysis.result import json_value as plain

if TYPE_CHECKING:
    from philly_analyze.analysis import Report
    from philly_analyze.analysis.result import ResultTable

#: Formats that print text tables (``Table.formats`` picks among all of ``report.FORMATS``).
TEXT_FORMATS = frozenset({"table", "md", "html"})


@dataclass
class Table:
    """One result table: raw values in ``frame`` (its columns are the JSON keys and CSV
    columns), with how to show them."""

    name: str
    title: str
    frame: pd.DataFrame
    #: Where a paper has this table ("Table 2"), or None.
    paper: str | None = None
    #: One or two sentences on how to read it (units, what a row is).
    description: str = ""
    #: Columns the compact (terminal) view shows; None = all.
    display: tuple[str, ...] | None = None
    #: A table of one quantity a row: a column of numbers is right-aligned even when mixed.
    per_row: bool = False
    #: The text each cell shows in table/md/html (same shape as ``frame``); None: ``cell``.
    texts: pd.DataFrame | None = None
    #: Display name of columns; a column not named here gets ``text.header``'s name.
    headers: Mapping[str, str] | None = None
    #: Right-aligned columns; None: decided from the values (``text.is_numeric``).
    numeric: frozenset[str] | None = None
    #: Lines printed under the table (footnotes).
    notes: list[str] = field(default_factory=list)
    #: Whether a number column's header may wrap at spaces to its values' width (the
    #: analyses' wide tables); False keeps each header on one line.
    fold_headers: bool = True
    #: The formats that show this table (None: every one). A CSV of every metric and the
    #: terminal's transposed view of the same rows are two tables of one document.
    formats: frozenset[str] | None = None

    def shown_in(self, fmt: str) -> bool:
        """Whether ``fmt`` renders this table."""
        return self.formats is None or fmt in self.formats

    def records(self) -> list[dict[str, Any]]:
        """Rows as JSON-ready objects (``plain`` values)."""
        cols = [str(c) for c in self.frame.columns]
        return [
            {c: plain(v) for c, v in zip(cols, row, strict=True)}
            for row in self.frame.itertuples(index=False, name=None)
        ]

    @classmethod
    def of(cls, t: ResultTable) -> Table:
        """An analysis's result table."""
        return cls(t.name, t.title, t.frame, t.paper, t.description, t.display, t.per_row)


@dataclass
class Section:
    """A titled group of tables with its notes (an analysis, or a verb's one result)."""

    name: str
    title: str | None
    tables: list[Table] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


@dataclass
class Document:
    """Everything one command prints."""

    sections: list[Section]
    #: Heading of the whole document (None: the tables speak for themselves).
    title: str | None = None
    #: The store and scope it describes (shown under the title).
    store: str | None = None
    scope: str | None = None
    #: Lines at the end (citations), or at the top of markdown.
    footer: list[str] = field(default_factory=list)
    #: The JSON object (its contract keys); None: ``{table name: rows}``.
    data: Mapping[str, Any] | None = None

    def tables(self, fmt: str) -> list[tuple[Section, Table]]:
        """Every (section, table) that ``fmt`` shows, in order."""
        return [(s, t) for s in self.sections for t in s.tables if t.shown_in(fmt)]

    def json_object(self) -> Any:
        """The JSON form: ``data`` with every value made plain, or the tables' rows."""
        if self.data is not None:
            return plain_tree(self.data)
        return {t.name: t.records() for _, t in self.tables("json")}


def plain_tree(value: Any) -> Any:
    """``plain`` applied through dicts and lists (the JSON object of a document)."""
    if isinstance(value, Mapping):
        return {str(k): plain_tree(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [plain_tree(v) for v in value]
    return plain(value)


def report_document(report: Report) -> Document:
    """The analyses' report as a document (its JSON keeps the report's contract keys)."""
    from philly_analyze.report import jsonout, text

    return Document(
        [
            Section(name, sec.title, [Table.of(t) for t in sec.tables], list(sec.notes))
            for name, sec in report.sections.items()
        ],
        title="philly-analyze report",
        store=report.store_path,
        scope=report.scope.describe(),
        footer=text.citations(report),
        data=jsonout.to_dict(report),
    )


def as_document(doc: Document | Report) -> Document:
    """``doc`` itself, or a report made into one."""
    return doc if isinstance(doc, Document) else report_document(doc)
