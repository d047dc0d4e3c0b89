"""The canonical store: Parquet files per table plus a DuckDB catalog of views over them.

Layout of a store directory::

    catalog.duckdb                 in schema main: views named after the tables (jobs,
                                   attempts, ...) and the table ingest_log; in schema internal:
                                   _files (the live Parquet files), _meta, <table>_all views
    parquet/<table>/<batch>-<n>.parquet
    parquet/<table>/month=YYYY-MM/<batch>-<n>.parquet     (time series)
    replay.json, waiting.parquet, ...   other files of some outputs (``schemas.ARTIFACTS``)

Nothing else in the folder is the store's: every other file is declared in the ``schemas`` package
(``ARTIFACTS``, e.g. a replay's settings and true waiting causes), written in a batch with
``Batch.write_artifact`` and read with ``Store.read_artifact``, which conforms it to its
declaration (files written by older versions included).

Writes are batches (one per ingested source, or one per replay/synth output). A batch stages
its files under ``.staging/<batch>/``, moves them into ``parquet/`` and only then, in one
DuckDB transaction, lists them in ``_files``, records the batch in ``ingest_log`` and rebuilds
the views. Views read only files listed in ``_files``, so a batch that fails or is interrupted
at any point leaves the previous state readable; its stray files are removed the next time the
store is opened for writing. A batch's other files are moved into place just before that
transaction and put back as they were if it fails.

The views hold absolute paths (DuckDB resolves a relative path against the working directory
or ``file_search_path``, never against the database file), so a store that was moved or copied
gets its views rebuilt by whatever opens it next, read-only opens included (``Store.repaired``
says so). Plain DuckDB on a moved store fails until then; on a copy, it reads the original's
files until then.

Merging sources (several sources may describe the same job):
- ``jobs``: one row per job_id; each stored column comes from the most preferred source that
  has a value (``schemas.SOURCE_PRIORITY``); derived columns are computed from ``attempts``.
- ``attempts``/``placements``: taken whole from the most preferred source that has attempts
  for that job.
- time series (``gpu_util``...): per machine, rows from the most preferred source reporting it.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import threading
import time
import uuid
from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from philly_analyze import artifacts, querystop, schemas
from philly_analyze.cpus import usable_cpus
from philly_analyze.errors import StoreError, io_failure, one_line, unwritable

STORE_VERSION = 1
#: Bump when the SQL of the views changes: a store whose views were made by another version
#: gets them rebuilt when opened (in the catalog; as temporary views when it cannot be written).
VIEWS_VERSION = "6"
#: Where the bookkeeping lives (``_files``, ``_meta``, ``<table>_all``).
INTERNAL = schemas.INTERNAL_SCHEMA
DEFAULT_STORE = "philly-store"
#: The catalog's file in a store directory: a directory with one is a store.
CATALOG_FILE = "catalog.duckdb"
PARQUET_OPTS: dict[str, Any] = {"compression": "zstd"}
#: Rows per Parquet row group in DuckDB-written files: larger than DuckDB's default (122,880),
#: which writes long time series faster (measured ~7% on cluster_gpu_util) and scans no slower.
ROW_GROUP_ROWS = 1_000_000
#: DuckDB's default ``partitioned_write_flush_threshold`` (rows).
DUCKDB_FLUSH_ROWS = 524_288
#: Where a batch stages its artefacts (inside its staging folder; not a table's name), and
#: keeps the files they replace until its transaction has committed.
ARTIFACT_STAGING = "_artifacts"
ARTIFACT_REPLACED = "_replaced"


def connect(database: str = ":memory:", *, read_only: bool = False) -> duckdb.DuckDBPyConnection:
    """A DuckDB connection configured the project's way: UTC session time zone (all stored
    times are UTC) and no DuckDB progress bar (our own progress goes to stderr, and only when
    wanted). Use this instead of ``duckdb.connect``."""
    con = duckdb.connect(database, read_only=read_only)
    con.execute("SET TimeZone = 'UTC'")
    # In Jupyter DuckDB refuses the setting unless ipywidgets is installed; the bar is then
    # already off.
    with contextlib.suppress(duckdb.InvalidInputException):
        con.execute("SET enable_progress_bar = false")
    return querystop.register(con)  # Ctrl-C interrupts its queries


def default_store_path() -> Path:
    """``$PHILLY_STORE`` or ``./philly-store``."""
    return Path(os.environ.get("PHILLY_STORE", DEFAULT_STORE))


def sql_literal(value: str) -> str:
    """Quote a string as a SQL literal. Only for DDL (view bodies, COPY targets), where DuckDB
    accepts no parameters; every query that takes user values uses ``?`` parameters."""
    return "'" + value.replace("'", "''") + "'"


def priority_case(column: str = "source") -> str:
    """SQL: the priority of the source format in ``column`` (``schemas.SOURCE_PRIORITY``;
    lower is preferred)."""
    whens = " ".join(f"WHEN {sql_literal(k)} THEN {v}" for k, v in schemas.SOURCE_PRIORITY.items())
    return f"(CASE {column} {whens} ELSE {schemas.DEFAULT_SOURCE_PRIORITY} END)"


@dataclass(frozen=True)
class EncodedTable:
    """Rows of a table already encoded as the Parquet file ``Batch.write`` would stage for
    them (``encode_table``): ``Batch.write_many`` stages the bytes as they are. Lets a caller
    encode while it computes something else (the replay encodes its tables while it splits
    the waits). ``data``: the table encoded (conformed), kept to tell which data the bytes
    are of."""

    table: str
    data: pa.Table
    parquet: pa.Buffer

    @property
    def num_rows(self) -> int:
        return self.data.num_rows


def encode_table(table: str, data: pa.Table | dict[str, Any]) -> EncodedTable:
    """Conform ``data`` to ``table`` and encode it in memory, with the writer and options of
    ``Batch.write`` (the bytes are those of the file it would stage). Tables partitioned by
    month are refused (``ValueError``): their rows go to one file per month."""
    if schemas.TABLES[table].partition_by_month:
        raise ValueError(f"{table} is partitioned by month: write it with Batch.write")
    tbl = schemas.conform(table, data)
    sink = pa.BufferOutputStream()
    if tbl.num_rows:
        with pq.ParquetWriter(sink, tbl.schema, **PARQUET_OPTS) as w:
            w.write_table(tbl)
    return EncodedTable(table, tbl, sink.getvalue())


@dataclass
class Batch:
    """Files staged for one write. Use through ``Store.batch()``."""

    store: Store
    batch_id: str
    staging: Path
    rows: dict[str, int] = field(default_factory=dict)
    _writers: dict[tuple[str, str], pq.ParquetWriter] = field(default_factory=dict)
    _rejects: list[dict[str, Any]] = field(default_factory=list)
    _copies: int = 0
    log_entries: list[dict[str, Any]] = field(default_factory=list)
    #: Names of the artefacts staged (``write_artifact``), in order.
    artifacts: list[str] = field(default_factory=list)
    #: Batches this one will replace when committed (set by ingest before a grouped format's
    #: session assembles its rows): rows of theirs are not compared with this batch's.
    replaces: set[str] = field(default_factory=set)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def write(self, table: str, data: pa.Table | dict[str, Any]) -> int:
        """Append rows to ``table`` (conformed to its physical schema). Returns rows written."""
        n = self._write_rows(table, data)
        self._count(table, n)
        return n

    def write_many(
        self,
        tables: Mapping[str, pa.Table | dict[str, Any] | EncodedTable],
        artifacts: Mapping[str, Any] | None = None,
        *,
        threads: int | None = None,
    ) -> dict[str, int]:
        """``write`` each of ``tables`` and ``write_artifact`` each of ``artifacts``, the files
        encoded at the same time in ``threads`` threads (default: the CPUs this process may
        use). pyarrow releases the GIL while it encodes and compresses, so on 2 cores a
        replay's five files take about half the wall time of writing them one after another;
        the files are the same. The bookkeeping (``rows``, ``artifacts``) is done here, in
        the given order, after every file is written. Each table appears once (a table is
        one file written by one thread); a table given as ``EncodedTable`` (of that table) is
        staged as its bytes. Returns rows written per table."""
        artifacts = artifacts or {}
        jobs: list[tuple[Any, str, Any]] = [
            *((self._write_rows, t, d) for t, d in tables.items()),
            *((self._stage_artifact, n, d) for n, d in artifacts.items()),
        ]
        workers = max(1, min(len(jobs), threads or usable_cpus()))
        if workers == 1:
            results = [fn(name, data) for fn, name, data in jobs]
        else:
            with ThreadPoolExecutor(workers, thread_name_prefix="batch-write") as pool:
                futures = [pool.submit(fn, name, data) for fn, name, data in jobs]
                # Every write ends before the first failure (in the given order) is raised.
                results = [f.result() for f in futures]
        written: dict[str, int] = {}
        for table, n in zip(tables, results[: len(tables)], strict=True):
            written[table] = n
            self._count(table, n)
        for name in artifacts:
            self._list_artifact(name)
        return written

    def _write_rows(self, table: str, data: pa.Table | dict[str, Any] | EncodedTable) -> int:
        """Write rows to ``table``'s staged file(s) without the bookkeeping; thread-safe for
        distinct tables (``write_many``)."""
        if isinstance(data, EncodedTable):
            return self._stage_encoded(table, data)
        tbl = schemas.conform(table, data)
        if tbl.num_rows == 0:
            return 0
        if schemas.TABLES[table].partition_by_month:
            for month, part in _split_by_month(tbl):
                self._writer(table, month, tbl.schema).write_table(part)
        else:
            self._writer(table, "", tbl.schema).write_table(tbl)
        return tbl.num_rows

    def copy_query(
        self,
        table: str,
        con: duckdb.DuckDBPyConnection,
        query: str,
        params: Sequence[Any] | None = None,
        *,
        month_column: str | None = None,
    ) -> int:
        """Write the result of a DuckDB query straight to staged Parquet (no Python rows).

        The query must produce the physical columns of ``table``; partitioned tables are split
        by month of ``time`` (UTC), or by ``month_column`` when the query already provides it
        as an INTEGER yyyymm (cheaper). Returns rows written; for a wide table, the rows of
        the long table they hold (also what ``rows`` records, under the long table's name)."""
        t = schemas.TABLES[table]
        cols = ", ".join(
            f"CAST({c.name} AS {schemas.duckdb_type(c.type)}) AS {c.name}"
            for c in t.physical_columns
        )
        self._copies += 1
        target = self.staging / table / f"copy{self._copies}"
        row_group = _row_group_rows(con)
        if t.partition_by_month:
            target.mkdir(parents=True, exist_ok=True)
            month = month_column or (
                "(year(time AT TIME ZONE 'UTC') * 100 + month(time AT TIME ZONE 'UTC'))"
            )
            sql = (
                f"COPY (SELECT {cols}, {month}::INTEGER AS month "
                f"FROM ({query})) TO {sql_literal(str(target))} "
                f"(FORMAT parquet, COMPRESSION zstd, ROW_GROUP_SIZE {row_group}, "
                f"PARTITION_BY (month), "
                f"FILENAME_PATTERN {sql_literal(self.batch_id + '-c' + str(self._copies) + '-{i}')}, "
                f"OVERWRITE_OR_IGNORE true, RETURN_STATS false)"
            )
        else:
            target.mkdir(parents=True, exist_ok=True)
            sql = (
                f"COPY (SELECT {cols} FROM ({query})) TO "
                f"{sql_literal(str(target / f'{self.batch_id}-c{self._copies}.parquet'))} "
                f"(FORMAT parquet, COMPRESSION zstd, ROW_GROUP_SIZE {row_group})"
            )
        rows = con.execute(sql, params or []).fetchall()
        written = int(rows[0][0]) if rows else 0
        if written == 0:
            shutil.rmtree(target, ignore_errors=True)
            return 0
        if schemas.logical_table(table) != table:
            # Count what the wide rows hold, as the file list will (_file_rows).
            written = sum(
                _file_rows(table, pq.ParquetFile(f).metadata) for f in target.rglob("*.parquet")
            )
            table = schemas.logical_table(table)
        self.rows[table] = self.rows.get(table, 0) + written
        return written

    def write_artifact(self, name: str, data: Any) -> None:
        """Stage the store's file ``name`` (``schemas.ARTIFACTS``: a table for Parquet and CSV
        files, a dict of the declared fields for JSON ones), published by ``Store.commit``
        with the batch's tables; it replaces the store's file of that name."""
        self._stage_artifact(name, data)
        self._list_artifact(name)

    def _count(self, table: str, n: int) -> None:
        """``n`` rows of ``table`` were written (the bookkeeping of ``write``)."""
        if n:
            self.rows[table] = self.rows.get(table, 0) + n

    def _list_artifact(self, name: str) -> None:
        """The file ``name`` was staged (the bookkeeping of ``write_artifact``)."""
        if name not in self.artifacts:
            self.artifacts.append(name)

    def _stage_encoded(self, table: str, enc: EncodedTable) -> int:
        """Stage an ``EncodedTable``'s bytes as a file of ``table``."""
        if enc.table != table:
            raise ValueError(f"rows encoded as {enc.table} given as {table}")
        if enc.num_rows == 0:
            return 0
        d = self.staging / table / "arrow"
        d.mkdir(parents=True, exist_ok=True)
        with self._lock:
            self._copies += 1
            n = self._copies
        (d / f"{self.batch_id}-e{n}.parquet").write_bytes(enc.parquet)
        return enc.num_rows

    def _stage_artifact(self, name: str, data: Any) -> None:
        """Write the artefact's staged file, without the bookkeeping (``write_many``)."""
        art = schemas.ARTIFACTS[name]
        target = self.staging / ARTIFACT_STAGING / art.file
        target.parent.mkdir(parents=True, exist_ok=True)
        artifacts.write(art, data, target)

    def reject(self, source: str, line_no: int | None, reason: str, raw: str | None) -> None:
        """Record one bad input row; written to the ``rejects`` table at commit. The reason is
        kept to one short line (it may quote the file)."""
        self._rejects.append(
            {
                "source": source,
                "line_no": line_no,
                "reason": one_line(reason),
                "raw": None if raw is None else raw[:1000],
            }
        )

    @property
    def rejected(self) -> int:
        return len(self._rejects)

    def _writer(self, table: str, month: str, schema: pa.Schema) -> pq.ParquetWriter:
        key = (table, month)
        with self._lock:  # write_many's threads add writers of their tables
            w = self._writers.get(key)
            if w is None:
                d = self.staging / table / "arrow" / (f"month={month}" if month else "")
                d.mkdir(parents=True, exist_ok=True)
                w = pq.ParquetWriter(d / f"{self.batch_id}-a0.parquet", schema, **PARQUET_OPTS)
                self._writers[key] = w
        return w

    def _close(self) -> None:
        if self._rejects:
            rej = pa.Table.from_pylist(self._rejects, schema=schemas.REJECTS.physical_schema)
            self._rejects = []
            self.write("rejects", rej)
        for w in self._writers.values():
            w.close()
        self._writers.clear()

    def staged_files(self) -> list[tuple[str, Path, str]]:
        """(table, staged path, relative final path) of every staged Parquet file."""
        out: list[tuple[str, Path, str]] = []
        for table in schemas.TABLES:
            tdir = self.staging / table
            if not tdir.exists():
                continue
            for f in sorted(tdir.rglob("*.parquet")):
                month = next((p for p in f.parts if p.startswith("month=")), "")
                if month and "-" not in month:  # month=201710 from DuckDB -> month=2017-10
                    month = f"month={month[6:10]}-{month[10:12]}"
                rel = Path("parquet") / table / month / f"{self.batch_id}-{len(out)}.parquet"
                out.append((table, f, str(rel)))
        return out


def _row_group_rows(con: duckdb.DuckDBPyConnection) -> int:
    """Rows per row group of a COPY on ``con``: ``ROW_GROUP_ROWS``, or fewer when the
    connection was given a small memory limit (``ingest/memory.py`` then lowers DuckDB's
    partitioned-write flush threshold below its default): a COPY holds a row group in memory
    before writing it, so it must fit too."""
    row = con.execute("SELECT current_setting('partitioned_write_flush_threshold')").fetchone()
    flush = int(row[0]) if row else DUCKDB_FLUSH_ROWS
    return ROW_GROUP_ROWS if flush >= DUCKDB_FLUSH_ROWS else flush


def _split_by_month(tbl: pa.Table) -> Iterator[tuple[str, pa.Table]]:
    ts = tbl.column("time").cast(pa.int64()).to_numpy(zero_copy_only=False)
    months = ts.astype("datetime64[us]").astype("datetime64[M]")
    uniq = np.unique(months)
    if len(uniq) == 1:
        yield str(uniq[0]), tbl
        return
    for m in uniq:
        yield str(m), tbl.filter(pa.array(months == m))


class Store:
    """A store directory. ``Store(path)`` opens (creating it if needed) for writing;
    ``Store(path, read_only=True)`` opens an existing store for queries."""

    def __init__(self, path: str | os.PathLike[str], *, read_only: bool = False):
        self.path = Path(path).resolve()
        self.read_only = read_only
        self.catalog = self.path / CATALOG_FILE
        if read_only and not self.catalog.exists():
            raise StoreError(
                f"no store at {self.path} (no catalog.duckdb); create one with "
                f"`philly-analyze ingest PATH --store {path}`"
            )
        if not read_only:
            self.path.mkdir(parents=True, exist_ok=True)
        #: Why the views were rebuilt when the store was opened (moved, copied, made by another
        #: version), and whether in the catalog or for this session only; None if they were not.
        self.repaired: str | None = None
        self.con = self._connect(read_only)
        #: Schema of _files/_meta: ``internal``, or ``main`` in a store of the older layout
        #: opened read-only where the catalog could not be upgraded.
        self._internal = INTERNAL
        try:
            if not read_only:
                self._init_catalog()
                self._collect_garbage()
            else:
                self._internal = self._meta_schema() or INTERNAL
            stale = self._stale_reason()
            if stale is not None:
                self._repair(stale)
        except BaseException:
            # Not left open until collected: the caller may remove or reopen the store.
            with contextlib.suppress(duckdb.Error):
                self.con.close()
            raise

    # ------------------------------------------------------------------ lifecycle
    def close(self) -> None:
        self.con.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, exc_type: object, *exc: object) -> None:
        if exc_type is None:
            self.close()
            return
        # Failing already (a full disk): the first error is the one to report.
        with contextlib.suppress(duckdb.Error):
            self.close()

    def _connect(self, read_only: bool) -> duckdb.DuckDBPyConnection:
        try:
            return connect(str(self.catalog), read_only=read_only)
        except duckdb.IOException as e:
            found = io_failure(e)
            if found is not None and not read_only:  # a read-only file system, no permission
                raise unwritable(self.catalog, found[1]) from e
            raise StoreError(
                f"cannot open {self.catalog}: {str(e).splitlines()[0]} "
                "(is another philly-analyze or duckdb process using this store?)"
            ) from e

    def _init_catalog(self) -> None:
        c = self.con
        c.execute(f"CREATE SCHEMA IF NOT EXISTS {INTERNAL}")
        if self._meta_schema() == "main":
            _move_to_internal(c)
        for t in (schemas.META, schemas.FILES):
            c.execute(f"CREATE TABLE IF NOT EXISTS {INTERNAL}.{t.name} ({_ddl_columns(t)})")
        c.execute(f"CREATE TABLE IF NOT EXISTS ingest_log ({_ddl_columns(schemas.INGEST_LOG)})")
        row = _first(
            c.execute(f"SELECT value FROM {INTERNAL}._meta WHERE key = 'version'").fetchall()
        )
        if row is None:
            c.execute(f"INSERT INTO {INTERNAL}._meta VALUES ('version', ?)", [str(STORE_VERSION)])
        elif int(row[0]) != STORE_VERSION:
            raise StoreError(
                f"{self.path} is a version {row[0]} store; this philly-analyze writes version "
                f"{STORE_VERSION}. Re-create it with `philly-analyze ingest ... --store NEW`."
            )

    def _collect_garbage(self) -> None:
        """Remove files of batches that never committed (crash or interrupt)."""
        shutil.rmtree(self.path / ".staging", ignore_errors=True)
        live = {r[0] for r in self.con.execute(f"SELECT path FROM {INTERNAL}._files").fetchall()}
        root = self.path / "parquet"
        if not root.exists():
            return
        for f in root.rglob("*.parquet"):
            if str(f.relative_to(self.path)) not in live:
                f.unlink()

    def _meta_schema(self) -> str | None:
        """Schema holding ``_meta``: ``internal``, ``main`` (older layout) or None (new)."""
        rows = self.con.execute(
            "SELECT schema_name FROM duckdb_tables() WHERE database_name = current_database() "
            "AND table_name = '_meta'"
        ).fetchall()
        schemas_found = {r[0] for r in rows}
        return INTERNAL if INTERNAL in schemas_found else next(iter(schemas_found), None)

    def _stale_reason(self) -> str | None:
        """Why the views must be rebuilt (they hold absolute paths, and their SQL is versioned):
        "" for a store whose views were never built, None when they are current."""
        where = self._meta_schema()
        if where is None:
            return None
        meta = dict(self.con.execute(f"SELECT key, value FROM {where}._meta").fetchall())
        root, views = meta.get("root"), meta.get("views")
        if root is None:
            return ""
        if root != str(self.path):
            return f"the store was moved or copied from {root}"
        if where != INTERNAL or views != VIEWS_VERSION:
            return f"the views were made by another philly-analyze version (views {views})"
        return None

    def _repair(self, reason: str) -> None:
        """Rebuild stale views: in the catalog when it can be written (a read-only open reopens
        it for writing for the moment), else as temporary views for this session."""
        if not self.read_only:
            self.rebuild_views()
            self.repaired = f"{reason}: views rebuilt" if reason else None
            return
        self.con.close()
        try:
            self.con = connect(str(self.catalog))
        except duckdb.Error as e:  # locked by another process, read-only file system...
            self.con = self._connect(read_only=True)
            self.rebuild_views(temporary=True)
            why = str(e).splitlines()[0]
            self.repaired = f"{reason}: views rebuilt for this session only ({why})"
            return
        try:
            self._init_catalog()
            self._internal = INTERNAL
            self.rebuild_views()
        finally:
            self.con.close()
        self.con = self._connect(read_only=True)
        self.repaired = f"{reason}: views rebuilt in the catalog" if reason else None

    # ------------------------------------------------------------------ writing
    @contextmanager
    def batch(self) -> Iterator[Batch]:
        """Stage a batch of files; committed by ``commit`` (or discarded on error)."""
        if self.read_only:
            raise StoreError(f"{self.path} is open read-only")
        batch_id = uuid.uuid4().hex[:12]
        staging = self.path / ".staging" / batch_id
        staging.mkdir(parents=True)
        b = Batch(self, batch_id, staging)
        # A hard exit after Ctrl-C (querystop) skips the finally below: its files go first.
        hard_exit = querystop.at_hard_exit(partial(_remove_staging, staging))
        try:
            with hard_exit:
                yield b
        finally:
            for w in b._writers.values():
                _discard(w)
            _remove_staging(staging)

    @querystop.no_hard_exit()  # Ctrl-C waits for it (the files and the catalog must agree)
    def commit(
        self,
        batch: Batch,
        log_entries: Sequence[dict[str, Any]],
        *,
        replace_batches: Sequence[str] = (),
        source_format: str | None = None,
    ) -> None:
        """Publish ``batch`` atomically, record ``log_entries`` in ingest_log, and drop the files
        of ``replace_batches`` (for ``--replace``)."""
        batch._close()
        staged = batch.staged_files()
        moved: list[tuple[str, str, int]] = []
        for table, src, rel in staged:
            dst = self.path / rel
            dst.parent.mkdir(parents=True, exist_ok=True)
            os.replace(src, dst)
            moved.append((table, rel, _file_rows(table, pq.ParquetFile(dst).metadata)))
        old_files: list[str] = []
        published = self._publish_artifacts(batch)
        c = self.con
        c.execute("BEGIN TRANSACTION")
        try:
            for b in replace_batches:
                old_files += [
                    r[0]
                    for r in c.execute(
                        f"SELECT path FROM {INTERNAL}._files WHERE batch_id = ?", [b]
                    ).fetchall()
                ]
                c.execute(f"DELETE FROM {INTERNAL}._files WHERE batch_id = ?", [b])
                c.execute("DELETE FROM ingest_log WHERE batch_id = ?", [b])
            for table, rel, n in moved:
                c.execute(
                    f"INSERT INTO {INTERNAL}._files VALUES (?, ?, ?, ?, ?)",
                    [table, rel, batch.batch_id, source_format, n],
                )
            names = [col.name for col in schemas.INGEST_LOG.columns]
            values = []
            for entry in log_entries:
                e = {**entry, "batch_id": batch.batch_id}
                e.setdefault("ingested_at", datetime.now(UTC))
                if isinstance(e.get("tables"), dict):
                    e["tables"] = json.dumps(e["tables"], sort_keys=True)
                values.append([e.get(n) for n in names])
            if values:
                # One statement for the whole batch: a grouped format may log 100,000 files
                # (one INSERT each cost ~3 ms).
                log_rows = pa.Table.from_pylist(
                    [dict(zip(names, v, strict=True)) for v in values],
                    schema=schemas.INGEST_LOG.schema,
                )
                c.register("_new_ingest_log", log_rows)
                c.execute(
                    f"INSERT INTO ingest_log ({', '.join(names)}) SELECT * FROM _new_ingest_log"
                )
                c.unregister("_new_ingest_log")
            self._rebuild_views_sql()
            c.execute("COMMIT")
        except BaseException:
            _rollback(c)
            for _, rel, _ in moved:
                (self.path / rel).unlink(missing_ok=True)
            _unpublish(published)
            raise
        for rel in old_files:
            (self.path / rel).unlink(missing_ok=True)

    def _publish_artifacts(self, batch: Batch) -> list[tuple[Path, Path | None]]:
        """Move the batch's staged artefacts into place. Returns (file, the file it replaced,
        kept in the batch's staging folder until the batch ends) for ``_unpublish``."""
        done: list[tuple[Path, Path | None]] = []
        try:
            for name in batch.artifacts:
                rel = schemas.ARTIFACTS[name].file
                dst, kept = self.path / rel, None
                if dst.exists():
                    kept = batch.staging / ARTIFACT_REPLACED / rel
                    kept.parent.mkdir(parents=True, exist_ok=True)
                    os.replace(dst, kept)
                done.append((dst, kept))
                os.replace(batch.staging / ARTIFACT_STAGING / rel, dst)
        except BaseException:
            _unpublish(done)
            raise
        return done

    def find_source(
        self, *, sha256: str | None = None, fingerprint: str | None = None
    ) -> list[dict[str, Any]]:
        """ingest_log rows with this content hash or file fingerprint."""
        q = "SELECT * FROM ingest_log WHERE sha256 = ? OR fingerprint = ?"
        return self.con.execute(q, [sha256, fingerprint]).fetch_df().to_dict("records", into=dict)

    # ------------------------------------------------------------------ views
    def rebuild_views(self, temporary: bool = False) -> None:
        """(Re)create every view from the live file list."""
        if temporary:
            self._rebuild_views_sql(temporary=True)
            return
        self.con.execute("BEGIN TRANSACTION")
        try:
            self._rebuild_views_sql()
            self.con.execute("COMMIT")
        except BaseException:
            _rollback(self.con)
            raise

    def _files_by_table(self) -> dict[str, list[_File]]:
        """Live files per table, by the table whose rows they hold: a wide table's files are
        listed under the long table (and under their own name)."""
        out: dict[str, list[_File]] = {t: [] for t in schemas.TABLES}
        rows = self.con.execute(
            f"SELECT tbl, path, coalesce(source_format, ''), coalesce(batch_id, '') "
            f"FROM {self._internal}._files "
            "ORDER BY path"
        ).fetchall()
        for tbl, rel, fmt, batch in rows:
            f = _File(str(self.path / rel), fmt, tbl, batch)
            out.setdefault(tbl, []).append(f)
            if tbl in schemas.TABLES and schemas.logical_table(tbl) != tbl:
                out[schemas.logical_table(tbl)].append(f)
        return out

    def batch_ranks(self) -> dict[str, int]:
        """Each live batch's place in ingestion order (0 = first): the tie-break of every
        merge between rows of equal source priority (the later batch wins). Ordered by the
        batch's first ``ingest_log`` time, then its id, so the order is total."""
        rows = self.con.execute(
            f"""SELECT f.batch_id FROM (SELECT DISTINCT batch_id FROM {self._internal}._files) f
               LEFT JOIN (SELECT batch_id, min(ingested_at) AS t FROM ingest_log
                          GROUP BY batch_id) l USING (batch_id)
               ORDER BY l.t NULLS FIRST, f.batch_id"""
        ).fetchall()
        return {r[0]: i for i, r in enumerate(rows)}

    def ranked_sql(self, table: str) -> str:
        """SQL of every physical row of a merged table (machines, jobs, attempts, placements)
        with ``_rank`` (``batch_ranks``) and ``_batch`` (the batch id) of the file it is in."""
        return _ranked_sql(schemas.TABLES[table], self._files_by_table()[table], self.batch_ranks())

    def _rebuild_views_sql(self, temporary: bool = False) -> None:
        files = self._files_by_table()
        ranks = self.batch_ranks()
        if temporary:  # DuckDB keeps temporary views in the schema temp.main only
            create, raw, public = "CREATE OR REPLACE TEMP VIEW", "temp.main.", "temp.main."
        else:
            create, raw, public = "CREATE OR REPLACE VIEW", f"{INTERNAL}.", "main."
        for name, table in schemas.TABLES.items():
            self.con.execute(f"{create} {raw}{name}_all AS {_union_sql(table, files[name])}")
        ranked = {t: _ranked_sql(schemas.TABLES[t], files[t], ranks) for t in MERGED_TABLES}
        unmerged = self._nothing_to_merge(files)
        for name, body in _canonical_views(ranked, raw, public, unmerged).items():
            self.con.execute(f"{create} {public}{name} AS {body}")
        if not temporary:
            for key, value in (("root", str(self.path)), ("views", VIEWS_VERSION)):
                self.con.execute(
                    f"INSERT OR REPLACE INTO {INTERNAL}._meta VALUES (?, ?)", [key, value]
                )

    def _nothing_to_merge(self, files: dict[str, list[_File]]) -> dict[str, str] | None:
        """The raw rows of jobs and attempts (``_union_sql``) when their views have nothing
        to merge: no job listed twice, and every attempt of one source in one batch (a store
        of one ingest of one format, a replay's output). Else None. Checked when the views
        are built (files change only then): a scan of the job ids, a fraction of a second at
        a million jobs, where merging took seconds at every read."""
        jobs, attempts = files["jobs"], files["attempts"]
        if len({f.batch for f in attempts}) > 1:
            return None
        sql = {
            "jobs": _union_sql(schemas.JOBS, jobs),
            "attempts": _union_sql(schemas.ATTEMPTS, attempts),
        }
        one_source = self.con.execute(
            "SELECT count(source) = count(*) AND coalesce(min(source) = max(source), true) "
            f"FROM ({sql['attempts']})"
        ).fetchall()[0][0]
        listed_once = self.con.execute(
            f"SELECT count(DISTINCT job_id) = count(*) FROM ({sql['jobs']})"
        ).fetchall()[0][0]
        return sql if one_source and listed_once else None

    # ------------------------------------------------------------------ reading
    def sql(self, query: str, params: Sequence[Any] | None = None) -> duckdb.DuckDBPyRelation:
        """Run a query (``?`` parameters) and return the DuckDB relation."""
        return self.con.sql(query, params=params) if params else self.con.sql(query)

    def df(self, query: str, params: Sequence[Any] | None = None) -> Any:
        """Run a query and return a pandas DataFrame."""
        return self.con.execute(query, params or []).fetch_df()

    def arrow(self, query: str, params: Sequence[Any] | None = None) -> pa.Table:
        """Run a query and return an Arrow table."""
        rel = self.con.sql(query, params=params) if params else self.con.sql(query)
        return rel.to_arrow_table()

    def files(self, table: str) -> list[Path]:
        """The live Parquet files holding ``table``'s rows (for a long table, its wide files
        too)."""
        return [Path(f.path) for f in self._files_by_table().get(table, [])]

    def files_of(
        self, fmt: str, tables: Iterable[str], *, excluding: Collection[str] = ()
    ) -> dict[str, list[Path]]:
        """By table of ``tables``: the live Parquet files that sources of format ``fmt``
        wrote, but those of the batches ``excluding``."""
        by_table = self._files_by_table()
        return {
            t: [
                Path(f.path)
                for f in by_table.get(t, [])
                if f.fmt == fmt and f.table == t and f.batch not in excluding
            ]
            for t in tables
        }

    def has_rows(self, table: str) -> bool:
        """Whether the store holds any Parquet data for a table (cheap: reads the file list)."""
        return bool(self.row_counts().get(table))

    def scalar(self, query: str, params: Sequence[Any] | None = None) -> Any:
        """The first column of the first row (None if no row)."""
        row = _first(self.con.execute(query, params or []).fetchall())
        return None if row is None else row[0]

    def row_counts(self) -> dict[str, int]:
        """Rows per physical table (from the file list, before merging sources)."""
        rows = self.con.execute(
            f"SELECT tbl, sum(rows) FROM {self._internal}._files GROUP BY tbl"
        ).fetchall()
        counts = {t: 0 for t in schemas.TABLES if t == schemas.logical_table(t)}
        for t, n in rows:
            # A wide table's files are counted in rows of the long table they hold (_file_rows).
            name = schemas.logical_table(t) if t in schemas.TABLES else t
            counts[name] = counts.get(name, 0) + int(n)
        return counts

    def merged_row_counts(self) -> dict[str, int]:
        """Rows per table as the analyses see them, after merging sources.

        Only tables fed by more than one source format are counted through their view; for
        the rest the file list already holds the answer, so a large store stays cheap. The
        machines view also holds the hosts that only placements or utilization name, so it
        is counted through its view whenever those tables have rows.
        """
        counts = self.row_counts()
        formats: dict[str, set[str]] = {}
        for tbl, fmt in self.con.execute(
            f"SELECT DISTINCT tbl, source_format FROM {self._internal}._files"
        ).fetchall():
            if tbl in schemas.TABLES:
                formats.setdefault(schemas.logical_table(tbl), set()).add(fmt)
        views = {r[0] for r in self.con.execute("SELECT view_name FROM duckdb_views()").fetchall()}
        merged = {t for t, fmts in formats.items() if len(fmts) > 1}
        if counts.get("placements") or counts.get("machine_observations"):
            merged.add("machines")
        for table in sorted(merged & views):  # identifiers from the schema
            counts[table] = int(self.scalar(f'SELECT count(*) FROM "{table}"'))
        return counts

    def ingest_log(self) -> Any:
        """The ingest_log as a DataFrame."""
        return self.df("SELECT * FROM ingest_log ORDER BY ingested_at, source")

    # ------------------------------------------------------------------ other files
    def artifact_path(self, name: str) -> Path:
        """Where the store keeps its file ``name`` (``schemas.ARTIFACTS``)."""
        return self.path / schemas.ARTIFACTS[name].file

    def has_artifact(self, name: str) -> bool:
        """Whether the store holds its file ``name``."""
        return self.artifact_path(name).exists()

    def read_artifact(self, name: str) -> Any:
        """The store's file ``name`` conformed to its declaration (an Arrow table, or a dict
        of the declared fields: ``artifacts.read``), or None when the store has none."""
        path = self.artifact_path(name)
        return artifacts.read(schemas.ARTIFACTS[name], path) if path.exists() else None


def _ddl_columns(t: schemas.Table) -> str:
    cols = [f"{c.name} {schemas.duckdb_type(c.type)}" for c in t.columns]
    if t.key:
        cols.append(f"PRIMARY KEY ({', '.join(t.key)})")
    return ", ".join(cols)


def _move_to_internal(con: duckdb.DuckDBPyConnection) -> None:
    """Upgrade a catalog of the older layout (bookkeeping in main): move _meta and _files to
    the internal schema and drop main's <table>_all views (rebuilt in internal next)."""
    con.execute("BEGIN TRANSACTION")
    try:
        for t in (schemas.META, schemas.FILES):
            con.execute(f"CREATE TABLE {INTERNAL}.{t.name} ({_ddl_columns(t)})")
            con.execute(f"INSERT INTO {INTERNAL}.{t.name} SELECT * FROM main.{t.name}")
            con.execute(f"DROP TABLE main.{t.name}")
        for name in schemas.TABLES:
            con.execute(f"DROP VIEW IF EXISTS main.{name}_all")
        con.execute("COMMIT")
    except BaseException:
        _rollback(con)
        raise


def is_store(path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` is a store directory (it has a catalog), without opening it."""
    return (Path(path) / CATALOG_FILE).exists()


def has_artifact(store_path: str | os.PathLike[str], name: str) -> bool:
    """Whether the store at ``store_path`` holds its file ``name``, without opening it (e.g.
    to tell a replay's output from another store before replacing it)."""
    return (Path(store_path) / schemas.ARTIFACTS[name].file).exists()


def _unpublish(published: Sequence[tuple[Path, Path | None]]) -> None:
    """Undo ``Store._publish_artifacts``: remove the new files, put the replaced ones back."""
    for dst, kept in reversed(published):
        dst.unlink(missing_ok=True)
        if kept is not None and kept.exists():
            os.replace(kept, dst)


def _rollback(con: duckdb.DuckDBPyConnection) -> None:
    """Roll back the open transaction, if there still is one: a COMMIT that failed (a full
    disk under the WAL) has already ended it, and the error to report is the first one."""
    with contextlib.suppress(duckdb.Error):
        con.execute("ROLLBACK")


def _remove_staging(staging: Path) -> None:
    """Remove a batch's staging folder, and ``.staging`` when no other batch is staging."""
    shutil.rmtree(staging, ignore_errors=True)
    with contextlib.suppress(OSError):  # only when empty
        staging.parent.rmdir()


def _discard(writer: pq.ParquetWriter) -> None:
    """Close a writer whose batch is being thrown away. On a full disk the close fails too;
    pyarrow would then retry it when the writer is collected, printing a second error."""
    try:
        writer.close()
    except OSError:
        writer.is_open = False


def _first(rows: list[tuple[Any, ...]]) -> tuple[Any, ...] | None:
    # fetchall, not fetchone: DuckDB 2 refuses new work on a connection while a result is
    # only partly fetched.
    return rows[0] if rows else None


def _empty_select(columns: Sequence[schemas.Column]) -> str:
    cols = ", ".join(f"CAST(NULL AS {schemas.duckdb_type(c.type)}) AS {c.name}" for c in columns)
    return f"SELECT {cols} WHERE false"


@dataclass(frozen=True)
class _File:
    """One live Parquet file: absolute path, source format, the table it was written to and
    its batch."""

    path: str
    fmt: str
    table: str
    batch: str = ""


def _file_rows(table: str, meta: pq.FileMetaData) -> int:
    """Rows a file adds to its table; for a wide table, the long rows it holds (its non-NULL
    values, from the footer's null counts, so nothing is scanned)."""
    t = schemas.TABLES.get(table)
    if t is None or t.wide_form_of is None:
        return meta.num_rows
    wanted = set(schemas.wide_value_columns(t))
    values = 0
    for g in range(meta.num_row_groups):
        rg = meta.row_group(g)
        for c in range(rg.num_columns):
            col = rg.column(c)
            if col.path_in_schema in wanted:
                stats = col.statistics
                if stats is None or not stats.has_null_count:
                    raise StoreError(f"{table}: Parquet file without null counts")
                values += rg.num_rows - stats.null_count
    return values


def _read(paths: Sequence[str], stored: schemas.Table, target: schemas.Table) -> str:
    """Rows of ``target`` from files written to ``stored``: the same table, or a wide form of
    it, unpivoted (one row per non-NULL value column, with its index)."""
    lst = ", ".join(sql_literal(p) for p in paths)
    src = f"read_parquet([{lst}], union_by_name = true)"
    columns = target.physical_columns
    if stored.name == target.name:
        return f"SELECT {', '.join(c.name for c in columns)} FROM {src}"
    # One SELECT per value column: each reads three columns and its filter reaches the Parquet
    # scan, and a filter on the index drops whole branches. Measured on a 600 MB slice of
    # cluster_gpu_util: 2-6x faster than unnesting a list of the values, and as fast as
    # reading long rows.
    index, value = [c for c in columns if c.name not in schemas.SERIES_KEY]
    index_type = schemas.duckdb_type(index.type)
    return " UNION ALL ".join(
        f"SELECT time, machine_id, {i}::{index_type} AS {index.name}, {col} AS {value.name} "
        f"FROM {src} WHERE {col} IS NOT NULL"
        for i, col in enumerate(schemas.wide_value_columns(stored))
    )


def _read_files(files: Sequence[_File], target: schemas.Table) -> str:
    by_table: dict[str, list[str]] = {}
    for f in files:
        by_table.setdefault(f.table, []).append(f.path)
    return " UNION ALL ".join(
        _read(paths, schemas.TABLES[t], target) for t, paths in sorted(by_table.items())
    )


def _union_sql(table: schemas.Table, files: Sequence[_File]) -> str:
    """Raw union of every physical file of a table (``<table>_all`` views)."""
    cols = table.physical_columns
    if not files:
        return _empty_select(cols)
    by_format: dict[str, list[_File]] = {}
    for f in files:
        by_format.setdefault(f.fmt, []).append(f)
    if "source" in {c.name for c in cols} or len(by_format) == 1 or not table.partition_by_month:
        return _read_files(files, table)
    # Time series from several formats: keep, per machine, only the most preferred format.
    parts = []
    prio = {f: schemas.SOURCE_PRIORITY.get(f, schemas.DEFAULT_SOURCE_PRIORITY) for f in by_format}
    ranked = sorted(by_format, key=lambda f: (prio[f], f))
    for i, fmt in enumerate(ranked):
        body = f"SELECT * FROM ({_read_files(by_format[fmt], table)})"
        better = [f.path for r in ranked[:i] for f in by_format[r]]
        if better:
            lst = ", ".join(sql_literal(p) for p in better)
            body += (
                f" WHERE machine_id NOT IN (SELECT DISTINCT machine_id "
                f"FROM read_parquet([{lst}], union_by_name = true))"
            )
        parts.append(body)
    return " UNION ALL ".join(parts)


#: Tables whose canonical views pick among sources (``_canonical_views``); their rows are read
#: with the rank of their batch, the tie-break between sources of equal priority.
MERGED_TABLES = ("machines", "jobs", "attempts", "placements")


def _ranked_sql(table: schemas.Table, files: Sequence[_File], ranks: dict[str, int]) -> str:
    """Every physical row of ``table`` with ``_rank`` (its batch's place in ingestion order)
    and ``_batch`` (the batch id): one scan, the file name mapped to its batch."""
    cols = table.physical_columns
    if not files:
        return (
            f"SELECT *, NULL::INTEGER AS _rank, NULL::VARCHAR AS _batch "
            f"FROM ({_empty_select(cols)})"
        )
    lst = ", ".join(sql_literal(f.path) for f in files)
    batches = ", ".join(
        f"({sql_literal(f.path)}, {ranks.get(f.batch, -1)}, {sql_literal(f.batch)})" for f in files
    )
    return (
        f"SELECT {', '.join('x.' + c.name for c in cols)}, r._rank, r._batch "
        f"FROM read_parquet([{lst}], union_by_name = true, filename = true) x "
        f"JOIN (VALUES {batches}) r(filename, _rank, _batch) ON x.filename = r.filename"
    )


def _canonical_views(
    ranked: dict[str, str],
    raw: str = f"{INTERNAL}.",
    public: str = "main.",
    unmerged: dict[str, str] | None = None,
) -> dict[str, str]:
    """Bodies of the canonical views that merge sources. ``ranked``: the ``_ranked_sql`` of
    each of ``MERGED_TABLES``; ``raw`` and ``public`` qualify the names of the ``<table>_all``
    views and of the canonical views they read.

    Every pick has a total order, so the same store always gives the same answer: the
    source's priority (``schemas.SOURCE_PRIORITY``), then the later batch (a list ingested
    after another wins), then the source name, then the value itself.

    ``unmerged``: the raw rows (``_union_sql``) of ``jobs`` and ``attempts`` when there is
    nothing to merge (``_nothing_to_merge``): every job listed once, every attempt of one
    source and one batch. The picks then return each row as it is, so the jobs and attempts
    views read the rows directly (the same rows; seconds less per read at a million jobs)."""
    prio = priority_case()
    views: dict[str, str] = {}
    # The batch whose attempts a job takes: its most preferred source, latest batch.
    best = f"""best AS (
            SELECT job_id, arg_min(source, k) AS source, arg_min(_rank, k) AS _rank
            FROM (SELECT job_id, source, _rank, ({prio}, -_rank, source) AS k FROM att_r)
            GROUP BY job_id)"""
    if unmerged is None:
        views["attempts"] = _attempts_view(
            f"att_r AS ({ranked['attempts']}), {best},",
            "(SELECT att_r.* FROM att_r JOIN best USING (job_id, source, _rank))",
            f"""SELECT job_id, arg_min(status, ({prio}, -_rank, source, status)) AS status
                FROM ({ranked["jobs"]}) WHERE status IS NOT NULL GROUP BY job_id""",
        )
    else:  # every job listed once: its status as listed
        views["attempts"] = _attempts_view(
            "",
            f"({unmerged['attempts']})",
            f"SELECT job_id, status FROM ({unmerged['jobs']}) WHERE status IS NOT NULL",
        )
    pl_cols = ", ".join(f"p.{c.name}" for c in schemas.PLACEMENTS.physical_columns)
    views["placements"] = f"""
        WITH att_r AS ({ranked["attempts"]}), {best}
        SELECT {pl_cols} FROM ({ranked["placements"]}) p JOIN best USING (job_id, source, _rank)"""

    def pick(col: str) -> str:
        return (
            f"arg_min({col}, (_p, -_rank, source, {col})) FILTER (WHERE {col} IS NOT NULL) AS {col}"
        )

    if unmerged is None:
        merged = f"""
            SELECT job_id, {pick("vc")}, {pick("user_id")}, {pick("status")},
                   {pick("submit_time")}, {pick("num_gpus")},
                   arg_min(flags, (_p, -_rank, source, flags::VARCHAR)) AS flags,
                   string_agg(DISTINCT source, ',' ORDER BY source) AS source
            FROM (SELECT *, {prio} AS _p FROM ({ranked["jobs"]})) GROUP BY job_id"""
    else:
        merged = (
            "SELECT job_id, vc, user_id, status, submit_time, num_gpus, flags, source "
            f"FROM ({unmerged['jobs']})"
        )
    views["jobs"] = _jobs_view(merged, f"{public}attempts")
    views["machines"] = _machines_view(ranked["machines"], raw, public)
    for name, table in schemas.TABLES.items():
        if name not in views and not table.physical_only:
            views[name] = f"SELECT * FROM {raw}{name}_all"
    return views


def _machines_view(ranked: str, raw: str, public: str) -> str:
    """The machines view: each machine's listed row (``ranked``: its ``_ranked_sql``), with
    the GPUs placements and utilization show."""
    prio = priority_case()
    # One whole row of the machine lists per machine (a total order over rows).
    row_key = f"({prio}, -_rank, source, listed_num_gpus, gpu_mem_gb, rack)"
    return f"""
        WITH listed AS (
            SELECT machine_id, arg_min(listed_num_gpus, k) AS listed_num_gpus,
                   arg_min(gpu_mem_gb, k) AS gpu_mem_gb, arg_min(rack, k) AS rack,
                   arg_min(source, k) AS source
            FROM (SELECT *, {row_key} AS k FROM ({ranked})) GROUP BY machine_id),
        placed AS (SELECT machine_id, max(gpu_idx) + 1 AS n FROM {public}placements
                   WHERE gpu_idx IS NOT NULL GROUP BY machine_id),
        util AS (SELECT machine_id, max(observed_num_gpus) AS n FROM {raw}machine_observations_all
                 GROUP BY machine_id),
        ids AS (SELECT machine_id FROM listed UNION SELECT machine_id FROM placed
                UNION SELECT machine_id FROM util)
        SELECT ids.machine_id,
               coalesce(greatest(l.listed_num_gpus, p.n), u.n)::SMALLINT AS num_gpus,
               l.listed_num_gpus::SMALLINT AS listed_num_gpus,
               greatest(p.n, u.n)::SMALLINT AS observed_num_gpus,
               l.gpu_mem_gb, l.rack, coalesce(l.source, 'observed') AS source
        FROM ids LEFT JOIN listed l USING (machine_id) LEFT JOIN placed p USING (machine_id)
                 LEFT JOIN util u USING (machine_id)"""


def _attempts_view(ctes: str, rows: str, status: str) -> str:
    """The attempts view: ``rows`` (a FROM item, after the CTEs ``ctes``): each job's attempts
    of its chosen source; ``status``: each job's merged status where known (job_id, status).

    An attempt's timing (docs/analyses.md, "Attempts without an end"): only the last attempt
    of a job without a final status can still be running; any other attempt without an end
    ended at a time the data does not give."""
    att_cols = ", ".join(f"a.{c.name}" for c in schemas.ATTEMPTS.physical_columns)
    return f"""
        WITH {ctes} status AS ({status}),
        a AS (SELECT a.*, max(a.attempt_idx) OVER (PARTITION BY a.job_id) AS _last
              FROM {rows} a)
        SELECT {att_cols},
               CASE WHEN a.start_time IS NULL THEN 'start_unknown'
                    WHEN a.end_time IS NOT NULL THEN 'ended'
                    WHEN a.attempt_idx = a._last AND s.status IS NULL THEN 'running'
                    ELSE 'end_unknown' END AS timing
        FROM a LEFT JOIN status s USING (job_id)"""


def _jobs_view(merged: str, attempts: str) -> str:
    """The jobs view: ``merged`` one row per job (job_id, vc, user_id, status, submit_time,
    num_gpus, flags, source), with what its attempts (``attempts``: the attempts view, a FROM
    item) add."""
    return f"""
        WITH merged AS ({merged}),
        a AS (SELECT *, attempt_idx = max(attempt_idx) OVER (PARTITION BY job_id) AS is_last
              FROM {attempts}),
        agg AS (
            SELECT job_id, count(*)::INTEGER AS num_attempts,
                   min(start_time) AS first_start,
                   max(end_time) FILTER (WHERE is_last) AS last_end,
                   -- A total order: one source may list an attempt twice (a job twice).
                   arg_min(num_gpus, (attempt_idx, start_time, num_gpus)) AS first_gpus,
                   -- Unknown (NULL), not a partial sum, when one attempt's share is unknown.
                   CASE WHEN bool_and(duration_s IS NOT NULL AND num_gpus IS NOT NULL)
                        THEN sum(duration_s * num_gpus) END AS gpu_time_s
            FROM a GROUP BY job_id)
        SELECT m.job_id, m.vc, m.user_id, m.status, m.submit_time,
               coalesce(agg.first_gpus, m.num_gpus)::INTEGER AS num_gpus,
               coalesce(agg.num_attempts, 0)::INTEGER AS num_attempts,
               agg.first_start, agg.last_end,
               epoch(agg.first_start) - epoch(m.submit_time) AS queue_delay_s,
               epoch(agg.last_end) - epoch(agg.first_start) AS run_time_s,
               CASE WHEN agg.job_id IS NULL THEN 0.0 ELSE agg.gpu_time_s END AS gpu_time_s,
               m.flags, m.source
        FROM merged m LEFT JOIN agg USING (job_id)"""


#: What a store directory holds (``Store``): removed by ``created_or_nothing`` when empty.
_STORE_ENTRIES = (
    CATALOG_FILE,
    f"{CATALOG_FILE}.wal",
    "parquet",
    ".staging",
    *(a.file for a in schemas.ARTIFACTS.values()),
)


@contextmanager
def created_or_nothing(path: str | os.PathLike[str]) -> Iterator[None]:
    """For a command that may create the store at ``path``: when the block fails and the
    store it created holds no source, remove the store and every folder made for it, so a
    failed first ingest leaves nothing behind. An existing store is never touched. (After
    Ctrl-C, when the process is ended without unwinding, ``querystop``: removed if nothing
    was committed to it.)"""
    p = Path(path).absolute()
    if is_store(p):
        yield
        return
    # The top-most folder that does not exist yet (folders above it are the user's).
    made = next((a for a in [p, *p.parents] if a.parent.exists()), p)
    existed = made.exists()
    commits = querystop.commits_done()

    def if_nothing_committed() -> None:
        if querystop.commits_done() == commits:
            _remove_store(p, made, existed)

    try:
        with querystop.at_hard_exit(if_nothing_committed):
            yield
    except BaseException:
        if _holds_nothing(p):
            _remove_store(p, made, existed)
        raise


def _remove_store(p: Path, made: Path, existed: bool) -> None:
    """Remove what a store at ``p`` holds, and the folders up to ``made`` when empty (and
    made for it: ``existed`` is False)."""
    for name in _STORE_ENTRIES:
        entry = p / name
        if entry.is_dir():
            shutil.rmtree(entry, ignore_errors=True)
        else:
            entry.unlink(missing_ok=True)
    if not existed:
        for d in [p, *p.parents]:
            with contextlib.suppress(OSError):
                d.rmdir()  # only empty folders: anything else stays
            if d == made:
                break


def _holds_nothing(store: Path) -> bool:
    """Whether ``store`` has no catalog, or one that lists no file and no source."""
    if not is_store(store):
        return True
    try:
        con = connect(str(store / CATALOG_FILE), read_only=True)
    except duckdb.Error:
        return False  # unreadable (locked, damaged): not ours to remove
    try:
        # A catalog whose set-up failed (a full disk) may lack the tables: it holds nothing.
        tables = {
            r[0]
            for r in con.execute(
                "SELECT schema_name || '.' || table_name FROM duckdb_tables() "
                "WHERE database_name = current_database()"
            ).fetchall()
        }
        counts = [
            con.execute(f"SELECT count(*) FROM {t}").fetchall()[0][0]
            for t in (f"{INTERNAL}._files", "main.ingest_log")
            if t in tables
        ]
    except duckdb.Error:
        return False
    finally:
        con.close()
    return not any(counts)


def open_store(path: str | os.PathLike[str] | None, *, read_only: bool = True) -> Store:
    """Open the store at ``path`` (default ``$PHILLY_STORE`` or ``./philly-store``)."""
    return Store(path if path is not None else default_store_path(), read_only=read_only)


def elapsed(t0: float) -> float:
    """Seconds since ``t0`` (``time.perf_counter``)."""
    return time.perf_counter() - t0
