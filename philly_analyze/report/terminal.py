"""``--format table``: rich tables for a terminal, the paper's value (dim) beside each computed
one. Wide tables use their compact column set (``ResultTable.display``). Data text is printed
as plain text (``rich.text.Text``), never parsed as rich markup."""

from __future__ import annotations

from rich.console import Console, Group
from rich.rule import Rule
from rich.table import Table
from rich.text import Text

from philly_analyze.analysis import Report, paper
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
        for t in sec.tables:
            cols = text.columns(t, compact=True)
            title = t.title + (f"  [{t.paper}]" if t.paper else "")
            tbl = Table(
                title=Text(title),
                title_justify="left",
                caption=t.description or None,
                caption_justify="left",
            )
            for c in cols:
                numeric = text.is_numeric(t, c)
                tbl.add_column(
                    Text(text.header(c)),
                    justify="right" if numeric else "left",
                    style="dim" if text.is_paper(c) else None,
                    overflow="fold",
                )
            for r in text.rows(t, cols):
                tbl.add_row(*(Text(v) for v in r))
            parts.append(tbl)
    parts.append(Text(f"(paper) = {paper.citation()}", style="dim"))
    return Group(*parts)


def render(report: Report, width: int | None = None) -> str:
    """The report as terminal text (ANSI styles only when ``Console`` detects a terminal)."""
    console = Console(width=width or 120, record=True, file=_Null(), force_terminal=False)
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
