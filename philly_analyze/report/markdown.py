"""``--format md``: GitHub-flavoured markdown, one section per analysis, the paper's value in a
``(paper)`` column right after each computed one. Text from the data is escaped for markdown
tables (``|``, newlines) and for inline HTML (``<`` and ``&``: no tag or entity can open), so a
log line cannot inject markup when the markdown is rendered; ``>8`` stays readable. Renders any
``Document`` (every verb's output), or an analysis ``Report``."""

from __future__ import annotations

from philly_analyze.analysis import Report
from philly_analyze.report import text
from philly_analyze.report.model import Document, Table, as_document


def _esc(s: str) -> str:
    return (
        s.replace("&", "&amp;")
        .replace("<", "&lt;")
        .replace("|", "\\|")
        .replace("\r", " ")
        .replace("\n", " ")
    )


def render(doc: Document | Report, figures: dict[str, list[str]] | None = None) -> str:
    """The document as markdown; ``figures`` maps section name -> markdown image lines."""
    doc = as_document(doc)
    out: list[str] = []
    if doc.title:
        out += [f"# {_esc(doc.title)}", ""]
        if doc.store is not None:
            scope = f", scope: {_esc(doc.scope)}" if doc.scope is not None else ""
            out += [f"Store `{_esc(doc.store)}`{scope}.", ""]
        if doc.footer:  # the citations, before the values they are for
            out += [*(f"{_esc(line)}  " for line in doc.footer), ""]
    for sec in doc.sections:
        if sec.title:
            out += [f"## {_esc(sec.title)}", ""]
        for note in sec.notes:
            out += [f"> note: {_esc(note)}", ""]
        for t in sec.tables:
            if t.shown_in("md"):  # a bare table (a verb's output) pastes without a heading
                out += table(t, heading=bool(doc.title))
        for line in (figures or {}).get(sec.name, []):
            out += [line, ""]
    if not doc.title and doc.footer:
        out += [*(f"{_esc(line)}  " for line in doc.footer), ""]
    return "\n".join(out).rstrip() + "\n"


def table(t: Table, heading: bool = True) -> list[str]:
    """One table's lines: its title (with ``heading``), description, rows and notes
    (footnotes)."""
    out: list[str] = []
    if t.title and heading:
        where = f" (paper: {_esc(t.paper)})" if t.paper else ""
        out += [f"### {_esc(t.title)}{where}", ""]
    if t.description:
        out += [f"_{_esc(t.description)}_", ""]
    cols = text.columns(t)
    out.append("| " + " | ".join(_esc(text.heading(t, c)) for c in cols) + " |")
    out.append("|" + "|".join("--:" if text.is_numeric(t, c) else ":--" for c in cols) + "|")
    for r in text.rows(t, cols):
        out.append("| " + " | ".join(_esc(v) for v in r) + " |")
    out.append("")
    if t.notes:
        out += [*(f"{_esc(line)}  " for line in t.notes), ""]
    return out
