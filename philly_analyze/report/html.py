"""``--format html``: one self-contained file (inline CSS, figures as base64 PNG ``data:``
URIs, no scripts, no external references). Every piece of text that comes from the data --
job ids, VC names, failure reasons, log lines, notes -- goes through ``html.escape``. Renders
any ``Document`` (every verb's output), or an analysis ``Report``."""

from __future__ import annotations

import base64
from html import escape

from philly_analyze.analysis import Report
from philly_analyze.report import text
from philly_analyze.report.model import Document, as_document
from philly_analyze.report.model import Table as ResultTable

# Borders are separate, not collapsed: a pinned (sticky) first column keeps its own frame.
CSS = """
body{font:14px/1.45 system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:2em auto;
max-width:1200px;padding:0 1em;color:#222}
h1{font-size:1.6em}h2{border-bottom:1px solid #ccc;padding-bottom:.2em;margin-top:2em}
h3{font-size:1.05em;margin:1.4em 0 .3em}
div.scroll{overflow-x:auto;max-width:100%;margin:.4em 0 1em}
table{border-collapse:separate;border-spacing:0;font-size:13px}
th,td{border:solid #ddd;border-width:0 1px 1px 0;padding:3px 7px}th{background:#f4f4f4}
thead th{border-top-width:1px}tr>:first-child{border-left-width:1px}
td.num{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
div.scroll tr>:first-child{position:sticky;left:0;background:#fff}
div.wide tr>:first-child{border-right-color:#999}
div.scroll thead tr>:first-child{background:#f4f4f4}
div.scroll tbody td:first-child{white-space:nowrap}
td.paper,th.paper{color:#777;background:#fafafa;font-style:italic}
td.clip div{max-width:28em;overflow:hidden;text-overflow:ellipsis;white-space:nowrap}
p.hint{color:#555;font-size:13px;margin:.2em 0}p.hint b{color:#222}
p.note{background:#fff8e1;border-left:3px solid #f0ad4e;padding:.3em .6em}
p.desc{color:#555;margin:.1em 0}
figure{margin:1em 0}figure img{max-width:100%;height:auto}figcaption{color:#555}
footer{margin-top:3em;color:#777;font-size:12px}
"""
#: Width a table has before it scrolls: the page's content box (body max-width).
BOX_PX = 1200
#: Text longer than this (a log line) is cut to one line, whole in its tooltip.
CLIP_CHARS = 60


def render(
    doc: Document | Report, figures: dict[str, list[tuple[str, bytes]]] | None = None
) -> str:
    """The document as HTML; ``figures`` maps section -> [(caption, png bytes)]."""
    doc = as_document(doc)
    title = doc.title or next((t.title for _, t in doc.tables("html") if t.title), "")
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f"<title>{escape(title or 'philly-analyze')}</title>",
        f"<style>{CSS}</style></head><body>",
    ]
    if doc.title:
        parts.append(f"<h1>{escape(doc.title)}</h1>")
    if doc.store is not None:
        scope = f"; scope: {escape(doc.scope)}" if doc.scope is not None else ""
        parts.append(f"<p>Store <code>{escape(doc.store)}</code>{scope}.</p>")
    titled = [sec for sec in doc.sections if sec.title]
    if len(titled) > 1 or doc.title:
        parts.append("<nav><ul>")
        for sec in titled:
            parts.append(f'<li><a href="#{escape(sec.name)}">{escape(sec.title or "")}</a></li>')
        parts.append("</ul></nav>")
    for sec in doc.sections:
        head = f"<h2>{escape(sec.title)}</h2>" if sec.title else ""
        parts.append(f'<section id="{escape(sec.name)}">{head}')
        for note in sec.notes:
            parts.append(f'<p class="note">note: {escape(note)}</p>')
        for t in sec.tables:
            if t.shown_in("html"):
                parts += _table(t)
        for caption, png in (figures or {}).get(sec.name, []):
            b64 = base64.b64encode(png).decode("ascii")
            parts.append(
                f'<figure><img alt="{escape(caption)}" src="data:image/png;base64,{b64}">'
                f"<figcaption>{escape(caption)}</figcaption></figure>"
            )
        parts.append("</section>")
    cites = "".join(f"<p>{escape(line)}</p>" for line in doc.footer)
    parts.append(f"<footer>{cites}</footer></body></html>")
    return "\n".join(parts) + "\n"


def _table(t: ResultTable) -> list[str]:
    """One table: title, description, a hint when it is wider than the page, and the table
    in a box that scrolls sideways with its first column pinned."""
    where = f" <small>(paper: {escape(t.paper)})</small>" if t.paper else ""
    out = [f"<h3>{escape(t.title)}{where}</h3>"] if t.title else []
    if t.description:
        out.append(f'<p class="desc">{escape(t.description)}</p>')
    cols = text.columns(t)
    body = text.rows(t, cols)
    clip = [
        not text.is_numeric(t, c) and any(len(r[i]) > CLIP_CHARS for r in body)
        for i, c in enumerate(cols)
    ]
    wide = _min_width_px(t, cols, body, clip) > BOX_PX
    if wide:
        cut = " Long log lines are cut: hover over one to read it whole." if any(clip) else ""
        out.append(
            f'<p class="hint"><b>{len(cols)} columns, wider than the page: scroll sideways '
            f"&rarr;</b> (the first column stays in place).{cut}</p>"
        )
    head = "".join(
        f'<th class="paper">{escape(text.heading(t, c))}</th>'
        if text.is_paper(c)
        else f"<th>{escape(text.heading(t, c))}</th>"
        for c in cols
    )
    # A wide table (Table 7 has 26 columns) scrolls inside its own box, its first column
    # pinned, instead of widening the page past the window.
    box = "scroll wide" if wide else "scroll"
    out.append(f'<div class="{box}"><table><thead><tr>{head}</tr></thead><tbody>')
    kinds = [
        "paper num" if text.is_paper(c) else ("num" if text.is_numeric(t, c) else "") for c in cols
    ]
    for r in body:
        cells = "".join(_cell(v, k, c) for k, v, c in zip(kinds, r, clip, strict=True))
        out.append(f"<tr>{cells}</tr>")
    out.append("</tbody></table></div>")
    out += [f'<p class="desc">{escape(line)}</p>' for line in t.notes]
    return out


def _cell(value: str, kind: str, clip: bool) -> str:
    v = escape(value)
    if clip:  # one line, cut with an ellipsis; the whole text in the tooltip
        return f'<td class="clip"><div title="{v}">{v}</div></td>'
    return f'<td class="{kind}">{v}</td>' if kind else f"<td>{v}</td>"


#: Average advance of a character at the tables' 13 px (headers bold), px: the widths of
#: DejaVu Sans, the widest of the usual system-ui fonts; 15 px of padding and border a cell.
_CHAR_PX, _BOLD_PX, _CELL_PX = 7.6, 8.6, 15


def _min_width_px(
    t: ResultTable, cols: list[str], body: list[list[str]], clip: list[bool]
) -> float:
    """About how narrow the browser can make the table: each column as wide as its longest
    header word, its longest unbreakable value (numbers and the first column never wrap;
    text wraps at spaces; cut text takes at most 28 em)."""
    total = 0.0
    for i, c in enumerate(cols):
        head = max((len(w) for w in text.heading(t, c).split()), default=0) * _BOLD_PX
        cell: float
        if clip[i]:
            cell = 28 * 13
        elif i == 0 or text.is_numeric(t, c):
            cell = max((len(r[i]) for r in body), default=0) * _CHAR_PX
        else:
            cell = max((len(w) for r in body for w in r[i].split()), default=0) * _CHAR_PX
        total += max(head, cell) + _CELL_PX
    return total
