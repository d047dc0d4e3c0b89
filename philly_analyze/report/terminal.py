"""``--format table``: rich tables for a terminal, the paper's value (dim) beside each computed
one. Wide tables use their compact column set (``ResultTable.display``). Data text is printed
as plain text (``rich.text.Text``), never parsed as rich markup."""

from __future__ import annotations

import textwrap

from rich.console import Console, Group
from rich.rule import Rule
from rich.table import Table
from rich.text import Text

from philly_analyze.analysis import Report, ResultTable
from philly_analyze.report import text


def renderables(report: Report) -> Group:
    """Everything to print, as one rich renderable."""
    parts: list[object] = [
        Text.assemble(
            ("philly-analyze report", "bold"),
            f"  store {report.store_path}  scope: {report.scope.describe()}",
        )
    ]
    for sec in report.sections.values():
        parts.append(Rule(Text(sec.title, style="bold"), align="left"))
        for note in sec.notes:
            parts.append(Text(f"note: {note}", style="yellow"))
        parts.extend(_table(t) for t in sec.tables)
    parts.extend(Text(line, style="dim") for line in text.citations(report))
    return Group(*parts)


def _table(t: ResultTable) -> Table:
    cols = text.columns(t, compact=True)
    body = text.rows(t, cols)
    tbl = Table(
        title=Text(t.title + (f"  [{t.paper}]" if t.paper else "")),
        title_justify="left",
        caption=t.description or None,
        caption_justify="left",
    )
    for i, c in enumerate(cols):
        if text.is_numeric(t, c):
            # A number never wraps (split over two lines it misreads); its header wraps at
            # spaces instead. Text columns (reasons, VC names) fold when space is short.
            w = max((len(r[i]) for r in body), default=1)
            tbl.add_column(
                Text(_wrap(text.header(c), w)),
                justify="right",
                style="dim" if text.is_paper(c) else None,
                min_width=w,
                no_wrap=True,
            )
        else:
            h = text.header(c)
            w = max([len(r[i]) for r in body] + [len(x) for x in h.split()], default=1)
            tbl.add_column(Text(h), overflow="fold", min_width=min(w, 14))
    for r in body:
        tbl.add_row(*(Text(v) for v in r))
    return tbl


def _wrap(header: str, width: int) -> str:
    """A header broken at spaces to its column's value width (never inside a word)."""
    return "\n".join(textwrap.wrap(header, max(width, 1), break_long_words=False)) or header


def render(report: Report, width: int | None = None) -> str:
    """The report as plain text for a file or pipe: wide enough that no table is cut."""
    console = Console(width=width or 250, record=True, file=_Null(), force_terminal=False)
    console.print(renderables(report))
    return console.export_text(styles=False)


def print_report(report: Report, console: Console) -> None:
    """Print straight to a console (keeps colours on a terminal)."""
    console.print(renderables(report))


class _Null:
    def write(self, s: str) -> int:
        return len(s)

    def flush(self) -> None:
        pass
