"""``--format table``: rich tables for a terminal, the paper's value (dim) beside each computed
one. A table too wide for the console shows its compact column set (``Table.display``)
and says under it which columns it left out and how to see them. Data text is printed as plain
text (``rich.text.Text``), never parsed as rich markup. Renders any ``Document`` (every verb's
output), or an analysis ``Report``."""

from __future__ import annotations

import io
import textwrap

from rich.console import Console, Group, RenderableType
from rich.measure import Measurement
from rich.rule import Rule
from rich.table import Table
from rich.text import Text

from philly_analyze.analysis import Report
from philly_analyze.report import text
from philly_analyze.report.model import Document, as_document
from philly_analyze.report.model import Table as ResultTable


def renderables(doc: Document | Report, width: int = 250) -> Group:
    """Everything to print on a console ``width`` characters wide, as one rich renderable."""
    doc = as_document(doc)
    parts: list[RenderableType] = []
    if doc.title:
        where = f"  store {doc.store}" if doc.store is not None else ""
        where += f"  scope: {doc.scope}" if doc.scope is not None else ""
        parts.append(Text.assemble((doc.title, "bold"), where))
    for sec in doc.sections:
        tables = [t for t in sec.tables if t.shown_in("table")]
        if sec.title:
            parts.append(Rule(Text(sec.title, style="bold"), align="left"))
        for note in sec.notes:
            parts.append(Text(f"note: {note}", style="yellow"))
        parts.extend(_fitted(t, width) for t in tables)
    parts.extend(Text(line, style="dim") for line in doc.footer)
    return Group(*parts)


def _fitted(t: ResultTable, width: int) -> Table:
    """The whole table when it fits ``width``, else its compact columns with a caption naming
    the columns left out (Table 7 shows 8 of its 26 on a normal terminal)."""
    full = _table(t, text.columns(t))
    need = _width(full)
    compact = text.columns(t, compact=True)
    if need <= width or len(compact) == len(full.columns):
        return full
    compact = _filled(t, compact, width)
    left_out = [
        text.heading(t, c) for c in text.columns(t) if c not in compact and not text.is_paper(c)
    ]
    hint = (
        f"Not shown, for want of width: {', '.join(left_out)} (and their paper values). All "
        f"{len(full.columns)} columns: --format md, html or json, or a terminal {need} "
        "characters wide."
    )
    return _table(t, compact, hint)


def _width(tbl: Table, natural: bool = False) -> int:
    """The narrowest a table can be printed (text columns folded), or with ``natural`` its
    width with no cell folded."""
    m = Measurement.get(_MEASURE, _MEASURE.options, tbl)
    return m.maximum if natural else m.minimum


def _filled(t: ResultTable, compact: list[str], width: int) -> list[str]:
    """The compact columns plus the left-out ones (each with its paper value) in the table's
    order, as long as they fit ``width`` with no cell folded: a wider terminal shows more,
    and what it leaves out is the table's tail, not columns picked here and there."""
    cols = list(compact)
    for c in text.columns(t):
        if c in cols or text.is_paper(c):
            continue
        paper = [text.PAPER_PREFIX + c] if text.PAPER_PREFIX + c in t.frame.columns else []
        trial = [x for x in text.columns(t) if x in {*cols, c, *paper}]
        if _width(_table(t, trial), natural=True) > width:
            break
        cols = trial
    return cols


def _table(t: ResultTable, cols: list[str], hint: str | None = None) -> Table:
    body = text.rows(t, cols)
    caption = "\n".join(x for x in (t.description, *t.notes, hint) if x)
    tbl = Table(
        title=Text(t.title + (f"  [{t.paper}]" if t.paper else "")),
        title_justify="left",
        caption=caption or None,
        caption_justify="left",
    )
    for i, c in enumerate(cols):
        if text.is_numeric(t, c):
            # A number never wraps (split over two lines it misreads); its header wraps at
            # spaces instead. Text columns (reasons, VC names) fold when space is short.
            w = max((len(r[i]) for r in body), default=1)
            if not t.fold_headers:
                w = max(w, len(text.heading(t, c)))
            tbl.add_column(
                Text(_wrap(text.heading(t, c), w)),
                justify="right",
                style="dim" if text.is_paper(c) else None,
                min_width=w,
                no_wrap=True,
            )
        else:
            h = text.heading(t, c)
            w = max([len(r[i]) for r in body] + [len(x) for x in h.split()], default=1)
            tbl.add_column(Text(h), overflow="fold", min_width=min(w, 14))
    for r in body:
        tbl.add_row(*(Text(v) for v in r))
    return tbl


def _wrap(header: str, width: int) -> str:
    """A header broken at spaces to its column's value width (never inside a word)."""
    return "\n".join(textwrap.wrap(header, max(width, 1), break_long_words=False)) or header


def render(doc: Document | Report, width: int | None = None) -> str:
    """The document as plain text for a file or pipe (250 characters wide unless ``width``)."""
    console = Console(width=width or 250, record=True, file=_Null(), force_terminal=False)
    console.print(renderables(doc, console.width))
    return console.export_text(styles=False)


def print_report(doc: Document | Report, console: Console) -> None:
    """Print straight to a console (keeps colours on a terminal)."""
    console.print(renderables(doc, console.width))


class _Null(io.StringIO):
    """A file that discards what is written (the console only records or measures); a
    StringIO only to be a text file to rich's types, it keeps nothing."""

    def write(self, s: str) -> int:
        return len(s)

    def flush(self) -> None:
        pass


#: Measures tables (never prints): the widths rich would need, whatever the real console.
_MEASURE = Console(width=100_000, file=_Null(), force_terminal=False)
