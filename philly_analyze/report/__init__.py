"""Presenting a ``Report``: terminal tables, markdown, self-contained HTML, JSON, figures.

``render(report, fmt, figures_dir=..., output=...)`` is what the CLI calls; each format lives
in its own module (``terminal``, ``markdown``, ``html``, ``jsonout``) and ``figures`` draws
the figures.
"""

from __future__ import annotations

import os
from pathlib import Path

from philly_analyze.analysis import Report

FORMATS: tuple[str, ...] = ("table", "md", "html", "json")
#: -o PATH suffix -> format, when --format is not given.
SUFFIX_FORMATS: dict[str, str] = {
    ".html": "html",
    ".htm": "html",
    ".json": "json",
    ".md": "md",
    ".markdown": "md",
    ".txt": "table",
}


def render(
    report: Report,
    fmt: str,
    *,
    figures_dir: str | Path | None = None,
    output: str | Path | None = None,
    width: int | None = None,
) -> str:
    """The report in ``fmt``; with ``figures_dir`` also writes every figure there as PNG and
    SVG (markdown then links them, relative to ``output``'s folder)."""
    from philly_analyze.report import figures

    if fmt not in FORMATS:
        raise ValueError(f"unknown format {fmt!r}; choose from {', '.join(FORMATS)}")
    formats = (("png",) if fmt == "html" else ()) + (("png", "svg") if figures_dir else ())
    rendered = figures.render_all(report, tuple(dict.fromkeys(formats))) if formats else []
    written: dict[str, list[Path]] = {}
    if figures_dir is not None:
        for r in rendered:
            written.setdefault(r.spec.section, []).extend(
                figures.write(report, figures_dir, rendered=[r])
            )
    if fmt == "json":
        from philly_analyze.report import jsonout

        return jsonout.render(report)
    if fmt == "table":
        from philly_analyze.report import terminal

        return terminal.render(report, width=width)
    if fmt == "md":
        from philly_analyze.report import markdown

        base = Path(output).resolve().parent if output is not None else Path.cwd()
        links = {
            sec: [
                f"![{p.stem}]({Path(os.path.relpath(p.resolve(), base)).as_posix()})"
                for p in paths
                if p.suffix == ".png"
            ]
            for sec, paths in written.items()
        }
        return markdown.render(report, links)
    from philly_analyze.report import html

    figs: dict[str, list[tuple[str, bytes]]] = {}
    for r in rendered:
        figs.setdefault(r.spec.section, []).append((r.caption, r.data["png"]))
    return html.render(report, figs)
