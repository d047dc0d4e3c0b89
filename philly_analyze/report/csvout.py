"""``--format csv``: each table as CSV, its columns the table's keys (the JSON keys of its
rows), values in their plain form (``model.plain``: no unit, no thousands separator, 6
decimals at most; an absent value is an empty field). One table goes to stdout; a document
of several is written as one file per table, ``DIR/<section>_<table>.csv``."""

from __future__ import annotations

import csv
import io
from pathlib import Path

from philly_analyze.report.model import Document, Section, Table, plain


def table_csv(t: Table) -> str:
    """One table as CSV text (a header line, then a line per row)."""
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow([str(c) for c in t.frame.columns])
    for row in t.frame.itertuples(index=False, name=None):
        w.writerow(["" if (v := plain(x)) is None else v for x in row])
    return buf.getvalue()


def file_name(sec: Section, t: Table) -> str:
    """``<section>_<table>.csv`` (``<table>.csv`` in a section without a name)."""
    return f"{sec.name}_{t.name}.csv" if sec.name else f"{t.name}.csv"


def files(doc: Document) -> dict[str, str]:
    """File name -> CSV text of every table the document shows in csv."""
    out: dict[str, str] = {}
    for sec, t in doc.tables("csv"):
        name = file_name(sec, t)
        if name in out:  # two tables of one name: never overwrite one with the other
            raise ValueError(f"two tables would be written to {name}")
        out[name] = table_csv(t)
    return out


def write(doc: Document, out_dir: str | Path) -> list[Path]:
    """Write every table as ``out_dir/<section>_<table>.csv``; returns the paths."""
    d = Path(out_dir)
    d.mkdir(parents=True, exist_ok=True)
    paths = []
    for name, body in files(doc).items():
        p = d / name
        p.write_text(body, encoding="utf-8")
        paths.append(p)
    return paths
