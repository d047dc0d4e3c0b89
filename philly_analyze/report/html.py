"""``--format html``: one self-contained file (inline CSS, figures as base64 PNG ``data:``
URIs, no scripts, no external references). Every piece of text that comes from the data --
job ids, VC names, failure reasons, log lines, notes -- goes through ``html.escape``."""

from __future__ import annotations

import base64
from html import escape

from philly_analyze.analysis import Report
from philly_analyze.report import text

CSS = """
body{font:14px/1.45 system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:2em auto;
max-width:1200px;padding:0 1em;color:#222}
h1{font-size:1.6em}h2{border-bottom:1px solid #ccc;padding-bottom:.2em;margin-top:2em}
h3{font-size:1.05em;margin:1.4em 0 .3em}
div.scroll{overflow-x:auto;max-width:100%;margin:.4em 0 1em}
table{border-collapse:collapse;font-size:13px}
th,td{border:1px solid #ddd;padding:3px 7px}th{background:#f4f4f4}
td.num{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
div.scroll tr>:first-child{position:sticky;left:0;background:#fff}
div.scroll thead tr>:first-child{background:#f4f4f4}
div.scroll tbody td:first-child{white-space:nowrap}
td.paper,th.paper{color:#777;background:#fafafa;font-style:italic}
p.note{background:#fff8e1;border-left:3px solid #f0ad4e;padding:.3em .6em}
p.desc{color:#555;margin:.1em 0}
figure{margin:1em 0}figure img{max-width:100%;height:auto}figcaption{color:#555}
footer{margin-top:3em;color:#777;font-size:12px}
"""


def render(report: Report, figures: dict[str, list[tuple[str, bytes]]] | None = None) -> str:
    """The report as an HTML document; ``figures`` maps section -> [(caption, png bytes)]."""
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        "<title>philly-analyze report</title>",
        f"<style>{CSS}</style></head><body>",
        "<h1>philly-analyze report</h1>",
        f"<p>Store <code>{escape(report.store_path)}</code>; scope: "
        f"{escape(report.scope.describe())}.</p>",
        "<nav><ul>",
    ]
    for name, sec in report.sections.items():
        parts.append(f'<li><a href="#{escape(name)}">{escape(sec.title)}</a></li>')
    parts.append("</ul></nav>")
    for name, sec in report.sections.items():
        parts.append(f'<section id="{escape(name)}"><h2>{escape(sec.title)}</h2>')
        for note in sec.notes:
            parts.append(f'<p class="note">note: {escape(note)}</p>')
        for t in sec.tables:
            where = f" <small>(paper: {escape(t.paper)})</small>" if t.paper else ""
            parts.append(f"<h3>{escape(t.title)}{where}</h3>")
            if t.description:
                parts.append(f'<p class="desc">{escape(t.description)}</p>')
            cols = text.columns(t)
            head = "".join(
                f'<th class="paper">{escape(text.header(c))}</th>'
                if text.is_paper(c)
                else f"<th>{escape(text.header(c))}</th>"
                for c in cols
            )
            # A wide table (Table 7 has 26 columns) scrolls inside its own box, its first
            # column pinned, instead of widening the page past the window.
            parts.append(f'<div class="scroll"><table><thead><tr>{head}</tr></thead><tbody>')
            kinds = [
                "paper num" if text.is_paper(c) else ("num" if text.is_numeric(t, c) else "")
                for c in cols
            ]
            for r in text.rows(t, cols):
                cells = "".join(
                    f'<td class="{k}">{escape(v)}</td>' if k else f"<td>{escape(v)}</td>"
                    for k, v in zip(kinds, r, strict=True)
                )
                parts.append(f"<tr>{cells}</tr>")
            parts.append("</tbody></table></div>")
        for caption, png in (figures or {}).get(name, []):
            b64 = base64.b64encode(png).decode("ascii")
            parts.append(
                f'<figure><img alt="{escape(caption)}" src="data:image/png;base64,{b64}">'
                f"<figcaption>{escape(caption)}</figcaption></figure>"
            )
        parts.append("</section>")
    cites = "".join(f"<p>{escape(line)}</p>" for line in text.citations(report))
    parts.append(f"<footer>{cites}</footer></body></html>")
    return "\n".join(parts) + "\n"
