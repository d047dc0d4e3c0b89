"""``--format md``: GitHub-flavoured markdown, one section per analysis, the paper's value in a
``(paper)`` column right after each computed one. Text from the data is escaped for markdown
tables (``|``, newlines) and for inline HTML (``<`` and ``&``: no tag or entity can open), so a
log line cannot inject markup when the markdown is rendered; ``>8`` stays readable."""

from __future__ import annotations

from philly_analyze.analysis import Report
from philly_analyze.report import text


def _esc(s: str) -> str:
    return (
        s.replace("&", "&amp;")
        .replace("<", "&lt;")
        .replace("|", "\\|")
        .replace("\r", " ")
        .replace("\n", " ")
    )


def render(report: Report, figures: dict[str, list[str]] | None = None) -> str:
    """The report as markdown; ``figures`` maps section name -> markdown image lines."""
    out = [
        "# philly-analyze report",
        "",
        f"Store `{_esc(report.store_path)}`, scope: {_esc(report.scope.describe())}.",
        "",
        *(f"{_esc(line)}  " for line in text.citations(report)),
        "",
    ]
    for name, sec in report.sections.items():
        out += [f"## {_esc(sec.title)}", ""]
        for note in sec.notes:
            out += [f"> note: {_esc(note)}", ""]
        for t in sec.tables:
            where = f" (paper: {_esc(t.paper)})" if t.paper else ""
            out += [f"### {_esc(t.title)}{where}", ""]
            if t.description:
                out += [f"_{_esc(t.description)}_", ""]
            cols = text.columns(t)
            out.append("| " + " | ".join(_esc(text.header(c)) for c in cols) + " |")
            out.append(
                "|" + "|".join("--:" if text.is_numeric(t, c) else ":--" for c in cols) + "|"
            )
            for r in text.rows(t, cols):
                out.append("| " + " | ".join(_esc(v) for v in r) + " |")
            out.append("")
        for line in (figures or {}).get(name, []):
            out += [line, ""]
    return "\n".join(out).rstrip() + "\n"
