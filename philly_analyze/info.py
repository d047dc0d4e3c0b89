"""What a store holds: tables, time ranges, sources, machines, VCs, rejects, and which report
sections it can compute (``philly-analyze info``).

``describe`` returns plain data (JSON-ready); ``render_text`` lays it out as aligned text
(``--format table``); ``document`` makes it a document of the output layer (md, html, csv).
Everything is read from the catalog and the Parquet footers, never by scanning the large time
series: row counts come from the file list (merged tables through their view), time ranges of
the monthly-partitioned tables from the footers' statistics.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow.parquet as pq

from philly_analyze import schemas
from philly_analyze.progress import human_bytes
from philly_analyze.store import STORE_VERSION, VIEWS_VERSION, Store

if TYPE_CHECKING:
    from philly_analyze.report.model import Document

#: Column(s) whose minimum and maximum give a table's time range (first, last).
TIME_RANGE: dict[str, tuple[str, str]] = {
    "jobs": ("submit_time", "submit_time"),
    "attempts": ("start_time", "end_time"),
    "gpu_util": ("time", "time"),
    "gpu_metrics": ("time", "time"),
    "cpu_util": ("time", "time"),
    "mem_util": ("time", "time"),
    "host_metrics": ("time", "time"),
    "scheduler_events": ("time", "time"),
    "epochs": ("time", "time"),
}
#: Sources listed one by one up to this many; more are summed per format (json lists each).
SOURCES_LISTED = 20
#: Reject reasons shown in the text layout (json lists each).
REASONS_LISTED = 10


def describe(store: Store) -> dict[str, Any]:
    """Everything ``info`` shows, as JSON-ready data (times as ISO strings, UTC)."""
    return {
        "store": _store(store),
        "tables": _tables(store),
        "sources": _sources(store),
        "machines": _machines(store),
        "vcs": _vcs(store),
        "rejects": _rejects(store),
        "sections": _sections(store),
    }


def _iso(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, dt.datetime):
        return value.astimezone(dt.UTC).isoformat()
    return str(value)


def _store(store: Store) -> dict[str, Any]:
    files = [f for t in schemas.TABLES for f in store.files(t) if schemas.logical_table(t) == t]
    return {
        "path": str(store.path),
        "store_version": STORE_VERSION,
        "views_version": VIEWS_VERSION,
        "repaired": store.repaired,
        "parquet_files": len(files),
        "parquet_bytes": sum(f.stat().st_size for f in files if f.exists()),
    }


def _footer_range(files: Sequence[Path], first: str, last: str) -> tuple[Any, Any]:
    """Min of ``first`` and max of ``last`` over the files' row-group statistics."""
    lo = hi = None
    for f in files:
        meta = pq.ParquetFile(f).metadata
        names = [meta.schema.column(i).name for i in range(meta.num_columns)]
        for g in range(meta.num_row_groups):
            rg = meta.row_group(g)
            for col, pick in ((first, "min"), (last, "max")):
                if col not in names:
                    continue
                st = rg.column(names.index(col)).statistics
                if st is None or not st.has_min_max:
                    continue
                v = getattr(st, pick)
                if pick == "min":
                    lo = v if lo is None else min(lo, v)
                else:
                    hi = v if hi is None else max(hi, v)
    return lo, hi


def _time_range(store: Store, table: str) -> tuple[str | None, str | None]:
    cols = TIME_RANGE.get(table)
    if cols is None:
        return None, None
    if schemas.TABLES[table].partition_by_month:
        lo, hi = _footer_range(store.files(table), *cols)
    else:  # identifiers from the schema, not from input
        row = store.con.execute(f"SELECT min({cols[0]}), max({cols[1]}) FROM {table}").fetchall()
        lo, hi = row[0] if row else (None, None)
    return _iso(lo), _iso(hi)


def _tables(store: Store) -> list[dict[str, Any]]:
    read = store.row_counts()
    merged = store.merged_row_counts()
    out = []
    for name in schemas.public_tables():
        if name == schemas.INGEST_LOG.name:
            n = int(store.scalar("SELECT count(*) FROM ingest_log") or 0)
            out.append({"table": name, "rows": n, "rows_read": n, "files": 0})
            out[-1].update({"first": None, "last": None})
            continue
        first, last = _time_range(store, name) if read.get(name) else (None, None)
        out.append(
            {
                "table": name,
                "rows": merged.get(name, 0),
                "rows_read": read.get(name, 0),
                "files": len(store.files(name)),
                "first": first,
                "last": last,
            }
        )
    return out


def _sources(store: Store) -> list[dict[str, Any]]:
    rows = store.con.execute(
        "SELECT source, format, sha256, rows, rejected, ingested_at FROM ingest_log "
        "ORDER BY ingested_at, source"
    ).fetchall()
    keys = ("source", "format", "sha256", "rows", "rejected", "ingested_at")
    return [
        {k: _iso(v) if k == "ingested_at" else v for k, v in zip(keys, r, strict=True)}
        for r in rows
    ]


def _machines(store: Store) -> dict[str, Any]:
    row = store.con.execute(
        """SELECT count(*), count(listed_num_gpus), coalesce(sum(listed_num_gpus), 0),
                  count(observed_num_gpus), coalesce(sum(observed_num_gpus), 0),
                  coalesce(sum(num_gpus), 0),
                  count(*) FILTER (WHERE listed_num_gpus IS NULL),
                  count(*) FILTER (WHERE listed_num_gpus IS NOT NULL
                                   AND observed_num_gpus IS NULL),
                  count(*) FILTER (WHERE observed_num_gpus > listed_num_gpus)
           FROM machines"""
    ).fetchall()[0]
    keys = (
        "machines",
        "listed",
        "listed_gpus",
        "observed",
        "observed_gpus",
        "gpus",
        "not_listed",
        "listed_never_observed",
        "observed_above_listed",
    )
    out: dict[str, Any] = {k: int(v) for k, v in zip(keys, row, strict=True)}
    shapes = store.con.execute(
        "SELECT num_gpus, count(*) FROM machines GROUP BY num_gpus ORDER BY num_gpus NULLS LAST"
    ).fetchall()
    out["shapes"] = [{"num_gpus": g, "machines": int(n)} for g, n in shapes]
    return out


#: The keys of a VC's row in ``info`` (JSON) and the columns of its table, in order.
VC_KEYS = (
    "vc",
    "jobs",
    "users",
    "gpu_hours",
    "gpu_time_unknown_jobs",
    "first_submit",
    "last_submit",
)


def _vcs(store: Store) -> list[dict[str, Any]]:
    """Per VC: jobs, users (None when no job records one), GPU hours over the jobs whose GPU
    time is known (None when none is: unknown, not 0) and how many jobs that leaves out."""
    rows = store.con.execute(
        """SELECT vc, count(*) AS jobs,
                  CASE WHEN count(user_id) > 0 THEN count(DISTINCT user_id) END,
                  sum(gpu_time_s) / 3600.0, count(*) FILTER (WHERE gpu_time_s IS NULL),
                  min(submit_time), max(submit_time)
           FROM jobs GROUP BY vc ORDER BY jobs DESC, vc NULLS LAST"""
    ).fetchall()
    return [
        {k: _iso(v) if k.endswith("submit") else v for k, v in zip(VC_KEYS, r, strict=True)}
        for r in rows
    ]


def _rejects(store: Store) -> dict[str, Any]:
    rows = store.con.execute(
        "SELECT reason, count(*) AS n, count(DISTINCT source) FROM rejects "
        "GROUP BY reason ORDER BY n DESC, reason"
    ).fetchall()
    return {
        "rows": sum(int(r[1]) for r in rows),
        "by_reason": [{"reason": r, "rows": int(n), "sources": int(s)} for r, n, s in rows],
    }


def _sections(store: Store) -> list[dict[str, Any]]:
    from philly_analyze.analysis import SECTIONS
    from philly_analyze.analysis.inputs import NEEDS, missing, missing_note

    out = []
    for name in SECTIONS:
        lacking = missing(name, store.has_rows, store.path)
        without = {t: what for t, what in NEEDS[name].adds.items() if not store.has_rows(t)}
        if lacking:
            can, note = "no", missing_note(name, store.has_rows, store.path)
        elif without:
            can = "partly"
            note = "; ".join(f"without {t}: no {what}" for t, what in without.items())
        else:
            can, note = "yes", ""
        out.append({"section": name, "can_compute": can, "missing": lacking, "note": note})
    return out


# ---------------------------------------------------------------------- text layout
def _cell(v: Any) -> str:
    if v is None:
        return "–"
    if isinstance(v, bool):
        return str(v)
    if isinstance(v, int):
        return f"{v:,}"
    if isinstance(v, float):
        return f"{v:,.1f}"
    return str(v)


def _when(iso: str | None) -> str:
    """An ISO time as ``YYYY-MM-DD HH:MM`` (UTC)."""
    return "–" if iso is None else iso[:16].replace("T", " ")


def _grid(headers: Sequence[str], rows: Sequence[Sequence[Any]], left: int = 1) -> list[str]:
    """Aligned columns: the first ``left`` columns flush left, the rest right."""
    cells = [list(headers), *([_cell(v) for v in r] for r in rows)]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    lines = []
    for r in cells:
        pairs = enumerate(zip(r, widths, strict=True))
        parts = [c.ljust(w) if i < left else c.rjust(w) for i, (c, w) in pairs]
        lines.append("  ".join(parts).rstrip())
    return lines


def render_text(info: dict[str, Any]) -> str:
    """The ``--format table`` layout: one block per topic, plain aligned text."""
    blocks = [
        _store_block(info["store"]),
        _tables_block(info["tables"]),
        _sources_block(info["sources"]),
        _machines_block(info["machines"]),
        _vcs_block(info["vcs"]),
        _rejects_block(info["rejects"]),
        _sections_block(info["sections"]),
    ]
    return "\n\n".join("\n".join(b) for b in blocks) + "\n"


def _store_block(s: dict[str, Any]) -> list[str]:
    rows = [
        ("store", s["path"]),
        ("layout", f"store version {s['store_version']}, views version {s['views_version']}"),
    ]
    if s["repaired"]:
        rows.append(("repaired", s["repaired"]))
    rows.append(
        ("data", f"{s['parquet_files']:,} Parquet files, {human_bytes(s['parquet_bytes'])}")
    )
    return _grid(("", ""), rows, left=2)[1:]


def _tables_block(tables: list[dict[str, Any]]) -> list[str]:
    rows = [
        (t["table"], t["rows"], t["rows_read"], t["files"], _when(t["first"]), _when(t["last"]))
        for t in tables
    ]
    return [
        "Tables (rows: as the analyses see them, sources merged; read: from every source; "
        "times UTC)",
        *_grid(("table", "rows", "read", "files", "from", "to"), rows),
    ]


def _sources_block(sources: list[dict[str, Any]]) -> list[str]:
    head = f"Sources ({len(sources):,} in ingest_log)"
    if not sources:
        return [head, "none: ingest something with `philly-analyze ingest PATH --store DIR`"]
    if len(sources) <= SOURCES_LISTED:
        rows = [
            (s["source"], s["format"], s["rows"], s["rejected"], (s["sha256"] or "")[:12])
            for s in sources
        ]
        return [head, *_grid(("source", "format", "rows", "rejected", "sha256"), rows, left=2)]
    per: dict[str, list[int]] = {}
    for s in sources:
        acc = per.setdefault(s["format"] or "?", [0, 0, 0])
        acc[0] += 1
        acc[1] += s["rows"] or 0
        acc[2] += s["rejected"] or 0
    per_format = [(f, *v) for f, v in sorted(per.items())]
    return [
        head + ", per format (`--format json` lists each with its sha256)",
        *_grid(("format", "sources", "rows", "rejected"), per_format),
    ]


def _machines_block(m: dict[str, Any]) -> list[str]:
    rows = [
        ("in the machine list", m["listed"], m["listed_gpus"]),
        ("seen in data (placements, utilization)", m["observed"], m["observed_gpus"]),
        ("used by the analyses and replay", m["machines"], m["gpus"]),
    ]
    shapes = ", ".join(
        f"{s['machines']:,} x {'?' if s['num_gpus'] is None else s['num_gpus']} GPUs"
        for s in m["shapes"]
    )
    return [
        "Machines",
        *_grid(("", "machines", "GPUs"), rows),
        f"not in the machine list: {m['not_listed']:,}; listed but never seen in data: "
        f"{m['listed_never_observed']:,}; more GPUs seen than listed: "
        f"{m['observed_above_listed']:,}",
        f"shapes: {shapes or 'none'}",
    ]


def _vcs_block(vcs: list[dict[str, Any]]) -> list[str]:
    rows = [
        (
            "(none)" if v["vc"] is None else v["vc"],
            v["jobs"],
            v["users"],
            None if v["gpu_hours"] is None else float(v["gpu_hours"]),
            _when(v["first_submit"]),
            _when(v["last_submit"]),
        )
        for v in vcs
    ]
    headers = ("vc", "jobs", "users", "GPU hours", "first submit", "last submit")
    out = [f"Virtual clusters ({len(vcs):,})", *_grid(headers, rows)]
    if any(v["users"] is None for v in vcs):
        out.append("users: – where no job of the VC records a user (e.g. a job list without one)")
    unknown = sum(v["gpu_time_unknown_jobs"] for v in vcs)
    if unknown:
        out.append(
            f"GPU hours leave out {unknown:,} jobs whose GPU time is unknown (an attempt "
            "without a recorded end or GPU count); – where no job's is known"
        )
    return out


def _rejects_block(r: dict[str, Any]) -> list[str]:
    head = f"Rejected input rows: {r['rows']:,}"
    if not r["by_reason"]:
        return [head]
    shown = r["by_reason"][:REASONS_LISTED]
    rows = [(_clip(x["reason"]), x["rows"], x["sources"]) for x in shown]
    out = [head + " (the rows are in the rejects table)"]
    out += _grid(("reason", "rows", "sources"), rows)
    if len(r["by_reason"]) > REASONS_LISTED:
        more = len(r["by_reason"]) - REASONS_LISTED
        out.append(f"... {more:,} other reasons (`--format json` lists each)")
    return out


def _clip(text: str, width: int = 70) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"


def _sections_block(sections: list[dict[str, Any]]) -> list[str]:
    rows = [(s["section"], s["can_compute"], s["note"]) for s in sections]
    return ["Report sections", *_grid(("section", "can compute", "what is missing"), rows, 3)]


# ---------------------------------------------------------------------- output layer
def document(info: dict[str, Any]) -> Document:
    """``describe``'s data as a document of the output layer (``--format md|html|csv``; json
    is ``info`` itself): one table per block of the text layout, every row (the text layout
    sums sources per format and shows the top reject reasons; these list each)."""
    import pandas as pd

    from philly_analyze.report.model import Document, Section, Table

    def table(name: str, title: str, rows: list[dict[str, Any]], cols: list[str]) -> Table:
        frame = pd.DataFrame([[r.get(c) for c in cols] for r in rows], columns=cols, dtype=object)
        return Table(name, title, frame, headers={c: c for c in cols}, per_row=True)

    s, m = info["store"], info["machines"]
    store_rows = [{"key": k, "value": s[k]} for k in s if k != "path"]
    machine_rows = [{"key": k, "value": v} for k, v in m.items() if k != "shapes"]
    sections = [
        {**x, "missing": "; ".join(x["missing"])} for x in info["sections"]
    ]  # a list in JSON, one field in CSV
    tables = [
        table("store", "Store", store_rows, ["key", "value"]),
        table(
            "tables",
            "Tables",
            info["tables"],
            ["table", "rows", "rows_read", "files", "first", "last"],
        ),
        table(
            "sources",
            "Sources",
            info["sources"],
            ["source", "format", "sha256", "rows", "rejected", "ingested_at"],
        ),
        table("machines", "Machines and GPUs", machine_rows, ["key", "value"]),
        table("machine_shapes", "Machines by GPUs", m["shapes"], ["num_gpus", "machines"]),
        table(
            "vcs",
            "Virtual clusters",
            info["vcs"],
            list(VC_KEYS),
        ),
        table(
            "rejects",
            "Rejected rows by reason",
            info["rejects"]["by_reason"],
            ["reason", "rows", "sources"],
        ),
        table(
            "sections", "Report sections", sections, ["section", "can_compute", "missing", "note"]
        ),
    ]
    return Document(
        [Section("info", None, tables)], title="philly-analyze info", store=s["path"], data=info
    )
