"""Stores that were moved or copied, and the public catalog: what plain DuckDB sees before and
after, and every command that opens a store repairs the views."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest

from philly_analyze import schemas
from philly_analyze.store import Store
from tests import small_store
from tests.small_store import cli
from tests.store_query import q  # plain duckdb, read-only, as any user would

#: The contract's tables (ARCHITECTURE.md) and the documented extras (docs/store.md).
CONTRACT = {
    "machines",
    "jobs",
    "attempts",
    "placements",
    "gpu_util",
    "cpu_util",
    "mem_util",
    "scheduler_events",
    "epochs",
    "failures",
    "ingest_log",
    "rejects",
}
EXTRAS = {"gpu_metrics", "host_metrics"}


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(source folder, store) made once; tests work on copies of the store."""
    tmp = tmp_path_factory.mktemp("moved")
    store = tmp / "store"
    src = small_store.make(tmp, store)
    return src, store


def _moved(built: tuple[Path, Path], tmp_path: Path) -> Path:
    """A copy of the built store, then moved (`mv`) to another folder: its views point at a
    directory that no longer exists."""
    first = tmp_path / "first"
    shutil.copytree(built[1], first)
    Store(first).close()  # views now point into `first`
    new = tmp_path / "elsewhere" / "store"
    new.parent.mkdir()
    shutil.move(first, new)
    return new


def test_plain_duckdb_fails_on_a_moved_store_until_a_command_opens_it(
    built: tuple[Path, Path], tmp_path: Path
) -> None:
    new = _moved(built, tmp_path)
    with pytest.raises(duckdb.IOException, match="No files found"):
        q(new, "SELECT count(*) FROM jobs")
    r = cli("info", "--store", new)
    assert r.exit_code == 0, r.output
    assert f"the store was moved or copied from {tmp_path / 'first'}" in r.output
    assert "views rebuilt in the catalog" in r.output
    assert q(new, "SELECT count(*) FROM jobs") == [(3,)]
    # Repaired once: the next open has nothing to say.
    assert "repaired" not in cli("info", "--store", new).output


@pytest.mark.parametrize(
    "command",
    [
        ["info"],
        ["report", "--format", "json", "--section", "status"],
        ["replay", "--policy", "fifo", "--out", "{tmp}/replayed", "--format", "json"],
        # The store's one reject is its source's (small_store): accepted, as when made.
        ["ingest", "{src}", "--quiet", *small_store.ACCEPT_REJECT],
        ["sweep", "--policy", "fifo", "--workers", "1", "--format", "json", "--quiet"],
    ],
    ids=["info", "report", "replay", "ingest", "sweep"],
)
def test_every_command_that_opens_a_store_repairs_a_moved_one(
    built: tuple[Path, Path], tmp_path: Path, command: list[str]
) -> None:
    new = _moved(built, tmp_path)
    args = [a.format(tmp=tmp_path, src=built[0]) for a in command]
    r = cli(*args, "--store", new)
    assert r.exit_code == 0, r.output
    assert q(new, "SELECT count(*) FROM jobs") == [(3,)]
    assert q(new, "SELECT value FROM internal._meta WHERE key = 'root'") == [(str(new),)]


def test_a_copy_reads_the_original_until_opened(built: tuple[Path, Path], tmp_path: Path) -> None:
    """`cp -r`: plain DuckDB on the copy silently reads the original's files until a command
    opens the copy (documented in docs/data.md)."""
    orig = tmp_path / "orig"
    shutil.copytree(built[1], orig)
    Store(orig).close()
    copy = tmp_path / "copy"
    shutil.copytree(orig, copy)
    assert q(copy, "SELECT count(*) FROM jobs") == [(3,)]  # works, but...
    orig.rename(tmp_path / "away")
    with pytest.raises(duckdb.IOException, match="No files found"):
        q(copy, "SELECT count(*) FROM jobs")  # ...it was reading the original's files
    (tmp_path / "away").rename(orig)
    r = cli("info", "--store", copy, "--format", "json")
    assert json.loads(r.stdout)["store"]["repaired"] == (
        f"the store was moved or copied from {orig}: views rebuilt in the catalog"
    )
    shutil.rmtree(orig)
    assert q(copy, "SELECT count(*) FROM jobs") == [(3,)]  # independent now


def test_a_catalog_held_by_another_process_is_repaired_for_the_session_only(
    built: tuple[Path, Path], tmp_path: Path
) -> None:
    new = _moved(built, tmp_path)
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import duckdb, sys, time\n"
            f"c = duckdb.connect({str(new / 'catalog.duckdb')!r}, read_only=True)\n"
            "print('ready', flush=True)\n"
            "sys.stdin.read()\n",
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "ready"
        r = cli("info", "--store", new, "--format", "json")
        assert r.exit_code == 0, r.output
        got = json.loads(r.stdout)
        assert "views rebuilt for this session only" in got["store"]["repaired"]
        assert {t["table"]: t["rows"] for t in got["tables"]}["jobs"] == 3
    finally:
        holder.communicate(input="", timeout=30)
    with pytest.raises(duckdb.IOException, match="No files found"):
        q(new, "SELECT count(*) FROM jobs")  # the catalog was left as it was


def test_public_catalog_lists_only_the_contract_tables(built: tuple[Path, Path]) -> None:
    store = built[1]
    public = {
        r[0]
        for r in q(
            store, "SELECT table_name FROM information_schema.tables WHERE table_schema = 'main'"
        )
    }
    assert public == CONTRACT | EXTRAS == set(schemas.public_tables())
    internal = {
        r[0]
        for r in q(
            store,
            "SELECT table_name FROM information_schema.tables WHERE table_schema = 'internal'",
        )
    }
    assert internal == {"_files", "_meta"} | {f"{t}_all" for t in schemas.TABLES}
    with pytest.raises(duckdb.CatalogException, match=r"internal\.jobs_all"):
        q(store, "SELECT count(*) FROM jobs_all")  # DuckDB points at the internal name
    # Every public name binds for a plain DuckDB user, also under another alias.
    con = duckdb.connect()
    try:
        con.execute(f"ATTACH '{store / 'catalog.duckdb'}' AS s (READ_ONLY)")
        for name in sorted(public):
            con.execute(f"SELECT * FROM s.{name} LIMIT 1").fetchall()
        assert con.execute("SELECT count(*) FROM s.jobs").fetchall() == [(3,)]
    finally:
        con.close()


def test_a_store_of_the_older_layout_is_upgraded(built: tuple[Path, Path], tmp_path: Path) -> None:
    """Stores written before the internal schema kept _files, _meta and <table>_all in main."""
    old = tmp_path / "old"
    shutil.copytree(built[1], old)
    con = duckdb.connect(str(old / "catalog.duckdb"))
    for t in ("_meta", "_files"):
        con.execute(f"CREATE TABLE main.{t} AS SELECT * FROM internal.{t}")
    con.execute("UPDATE main._meta SET value = '2' WHERE key = 'views'")
    con.execute("CREATE VIEW main.jobs_all AS SELECT * FROM internal.jobs_all")
    con.execute("DROP SCHEMA internal CASCADE")
    con.close()
    r = cli("report", "--store", old, "--format", "json", "--section", "status")
    assert r.exit_code == 0, r.output
    names = {
        (s, t) for s, t in q(old, "SELECT table_schema, table_name FROM information_schema.tables")
    }
    assert ("main", "jobs_all") not in names and ("main", "_files") not in names
    assert ("internal", "_files") in names
    assert q(old, "SELECT count(*) FROM internal._files") == q(
        built[1], "SELECT count(*) FROM internal._files"
    )
    assert q(old, "SELECT count(*) FROM jobs") == [(3,)]
