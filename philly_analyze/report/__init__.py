"""The output layer: every verb's result as a ``Document`` of ``Table``s (``model``),
rendered by ``render`` to table (rich), md, html, json or csv.

Each format lives in its own module (``terminal``, ``markdown``, ``html``, ``jsonout`` for the
analyses' contract keys, ``csvout``) and ``figures`` draws the analyses' figures. The verbs
build a document (``model.report_document`` for the analyses; ``sim.tables``,
``sweep.report``, ``ingest.summary`` and ``info`` for theirs) and call ``render`` or
``emit``.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rich.console import Console

    from philly_analyze.analysis import Report
    from philly_analyze.report.model import Document

__all__ = ["FORMATS", "SUFFIX_FORMATS", "emit", "output_format", "render"]

#: Every output format of the output layer (this module stays light: `--help` imports it).
FORMATS: tuple[str, ...] = ("table", "md", "html", "json", "csv")

#: -o PATH suffix -> format (the format a file of that suffix must hold).
SUFFIX_FORMATS: dict[str, str] = {
    ".html": "html",
    ".htm": "html",
    ".json": "json",
    ".md": "md",
    ".markdown": "md",
    ".txt": "table",
    ".csv": "csv",
}


class SeveralTables(ValueError):
    """CSV of a document of several tables asked for as one text: it needs a folder."""


def output_format(fmt: str | None, output: Path | None, default: str) -> str:
    """The format to write: ``fmt``, else the one ``output``'s suffix names, else
    ``default``. ValueError (a usage error, saying how to fix it) when ``fmt`` and the suffix
    disagree, or when a file's suffix names no format and ``fmt`` is not given: a report is
    never written into a file whose name says it holds something else."""
    suffix = output.suffix.lower() if output is not None else ""
    named = SUFFIX_FORMATS.get(suffix)
    if output is not None and fmt == "csv":
        if suffix in SUFFIX_FORMATS and named != "csv":
            raise ValueError(
                f"-o {output}: --format csv writes a folder of CSV files (one per table), "
                f"not a {suffix} file: give a folder (-o {output.with_suffix('')}) or a .csv "
                "file when the output has one table"
            )
        return fmt
    if fmt is not None:
        if output is not None and named is not None and named != fmt:
            raise ValueError(
                f"-o {output} names a {named} file but --format is {fmt}: use "
                f"--format {named}, or a file ending in {_suffix_of(fmt)}"
            )
        return fmt
    if output is None:
        return default
    if named is None:
        raise ValueError(
            f"-o {output}: cannot tell the format from the suffix {suffix or '(none)'!r}: "
            f"add --format ({', '.join(FORMATS)}) or use a suffix "
            f"({', '.join(sorted(SUFFIX_FORMATS))})"
        )
    return named


def _suffix_of(fmt: str) -> str:
    return next(s for s, f in SUFFIX_FORMATS.items() if f == fmt)


def render(
    doc: Document | Report,
    fmt: str,
    *,
    figures_dir: str | Path | None = None,
    output: str | Path | None = None,
    width: int | None = None,
) -> str:
    """The document (or an analysis ``Report``) in ``fmt``. For a report, ``figures_dir``
    also writes every figure there as PNG and SVG (markdown then links them, relative to
    ``output``'s folder) and html inlines them. CSV of several tables raises
    ``SeveralTables`` (write them with ``csvout.write``)."""
    from philly_analyze.report.model import Document, as_document

    if fmt not in FORMATS:
        raise ValueError(f"unknown format {fmt!r}; choose from {', '.join(FORMATS)}")
    report = None if isinstance(doc, Document) else doc
    document = as_document(doc)
    figs: tuple[list[Any], dict[str, list[Path]]] = ([], {})
    if report is not None and (figures_dir is not None or fmt == "html"):
        figs = _figures(report, fmt, figures_dir)
    if fmt == "json":
        obj = document.json_object()
        return json.dumps(obj, indent=2, ensure_ascii=False, allow_nan=False) + "\n"
    if fmt == "csv":
        from philly_analyze.report import csvout

        tables = document.tables("csv")
        if len(tables) != 1:
            raise SeveralTables(
                f"--format csv of {len(tables)} tables writes one file per table: add -o DIR"
            )
        return csvout.table_csv(tables[0][1])
    if fmt == "table":
        from philly_analyze.report import terminal

        return terminal.render(document, width=width)
    if fmt == "md":
        from philly_analyze.report import markdown

        base = Path(output).resolve().parent if output is not None else Path.cwd()
        links = {
            sec: [
                f"![{p.stem}]({Path(os.path.relpath(p.resolve(), base)).as_posix()})"
                for p in paths
                if p.suffix == ".png"
            ]
            for sec, paths in figs[1].items()
        }
        return markdown.render(document, links)
    from philly_analyze.report import html

    inline: dict[str, list[tuple[str, bytes]]] = {}
    for r in figs[0]:
        inline.setdefault(r.spec.section, []).append((r.caption, r.data["png"]))
    return html.render(document, inline)


def _figures(
    report: Report, fmt: str, figures_dir: str | Path | None
) -> tuple[list[Any], dict[str, list[Path]]]:
    """The report's figures drawn for ``fmt`` (PNG inlined by html) and, with
    ``figures_dir``, written there as PNG and SVG: (rendered, section -> paths)."""
    from philly_analyze.report import figures

    formats = (("png",) if fmt == "html" else ()) + (("png", "svg") if figures_dir else ())
    rendered = figures.render_all(report, tuple(dict.fromkeys(formats))) if formats else []
    written: dict[str, list[Path]] = {}
    if figures_dir is not None:
        for r in rendered:
            written.setdefault(r.spec.section, []).extend(
                figures.write(report, figures_dir, rendered=[r])
            )
    return rendered, written


def emit(doc: Document, fmt: str, *, console: Console | None = None) -> None:
    """Print ``doc`` in ``fmt`` on stdout, or with ``console`` (stderr: ingest's summary
    table) on that console. A terminal gets the table with colours at its own width; a file
    or pipe gets it 250 characters wide, as ``report``."""
    import click

    if fmt == "table" and (console is not None or sys.stdout.isatty()):
        from rich.console import Console

        from philly_analyze.report import terminal

        terminal.print_report(doc, console or Console())
        return
    click.echo(render(doc, fmt), nl=False)
