"""A full disk and unwritable paths (issue 14): one line naming the path and the cause, exit
1, no traceback, and the store keeps what it held.

Real file systems, no mocks: a small tmpfs filled up to a few KB free (the failure lands in a
different place at each level: a Parquet write, DuckDB's COPY, DuckDB's temporary database,
the commit of the catalog's WAL and its rollback), and a tmpfs remounted read-only (root
ignores chmod). Before the fix each of these ended in a traceback, near-full in two.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from philly_analyze.cli import main
from philly_analyze.store import Store
from tests import small_store
from tests.conftest import SAMPLE_DATA
from tests.mounts import fill, remount_read_only, tmpfs, unprivileged

CLI = [sys.executable, "-c", "from philly_analyze.cli import main; main()"]
#: Published-trace job log, a utilization CSV (DuckDB's COPY) and Ganglia exports (DuckDB
#: resampling in a temporary database): ~4 MB of staged files and catalog writes.
INPUTS = [SAMPLE_DATA / n for n in ("cluster_job_log", "cluster_gpu_util", "ganglia")]
MACHINES = SAMPLE_DATA / "cluster_machine_list"


def _cli(*args: object) -> Result:
    return CliRunner().invoke(main, [str(a) for a in args])


def _contents(store: Path) -> tuple[list[str], dict[str, int], list[tuple]]:
    """Sources recorded, rows per table and the listed machines of a store (opened
    read-only: it must be readable)."""
    with Store(store, read_only=True) as s:
        sources = sorted(s.df("SELECT source FROM ingest_log")["source"])
        machines = s.con.execute(
            "SELECT machine_id, listed_num_gpus, gpu_mem_gb, rack, source FROM machines "
            "WHERE source != 'observed' ORDER BY machine_id"
        ).fetchall()
        return sources, s.row_counts(), machines


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> tuple:
    """What the machine list then INPUTS give on a disk with room."""
    store = tmp_path_factory.mktemp("ref") / "store"
    assert _cli("ingest", MACHINES, "--store", store, "-q").exit_code == 0
    assert _cli("ingest", *INPUTS, "--store", store, "-q").exit_code == 0
    return _contents(store)


# Measured with the sample: 0 KB free fails in a Parquet write (pyarrow), 32 KB in the commit
# of the catalog's WAL (then the rollback), 128 KB in DuckDB's COPY, 1 MB in DuckDB's
# temporary database of the Ganglia resampling.
@pytest.mark.parametrize("free_kb", [0, 32, 128, 1024])
def test_full_disk_during_ingest(tmp_path: Path, reference: tuple, free_kb: int) -> None:
    with tmpfs(tmp_path / "disk", "16m") as disk:
        store = disk / "store"
        assert _cli("ingest", MACHINES, "--store", store, "-q").exit_code == 0
        before = _contents(store)
        filler = fill(disk, free_kb * 1024)
        p = subprocess.run(
            [*CLI, "ingest", *map(str, INPUTS), "--store", str(store), "-q"],
            capture_output=True,
            text=True,
            check=False,
        )
        assert p.returncode == 1, p.stderr
        assert "Traceback" not in p.stderr and "Exception ignored" not in p.stderr, p.stderr
        (line,) = p.stderr.splitlines()
        assert line.startswith(f"error: cannot write {store}"), line
        assert "No space left on device" in line, line
        # Readable, and everything it held is still there (sources committed before the disk
        # filled are kept, as after any failed source).
        sources, counts, machines = _contents(store)
        assert set(before[0]) <= set(sources)
        assert machines == before[2]
        assert all(counts[t] >= n for t, n in before[1].items())
        # With room again, the same command completes: nothing half-recorded is skipped.
        filler.unlink()
        r = _cli("ingest", *INPUTS, "--store", store, "-q")
        assert r.exit_code == 0, r.output
        assert _contents(store) == reference


def test_full_disk_on_a_first_ingest_leaves_no_store(tmp_path: Path) -> None:
    with tmpfs(tmp_path / "disk", "2m") as disk:
        fill(disk, 64 * 1024)
        r = _cli("ingest", *INPUTS, "--store", disk / "store", "-q")
        assert r.exit_code == 1 and isinstance(r.exception, SystemExit), r.output
        assert "No space left on device" in r.stderr
        assert not (disk / "store").exists()


@pytest.fixture
def read_only(tmp_path: Path) -> Iterator[Path]:
    """A read-only file system holding a store (``store``), an empty folder (``empty``) and a
    file (``file``)."""
    with tmpfs(tmp_path / "ro", "8m") as ro:
        small_store.make(tmp_path, ro / "store")
        (ro / "empty").mkdir()
        (ro / "file").write_text("x\n")
        remount_read_only(ro)
        yield ro


def _unwritable(r: Result, path: Path) -> None:
    """Exit 1 with one line naming ``path`` (or the file below it that failed) and why."""
    assert r.exit_code == 1, r.output
    assert isinstance(r.exception, SystemExit), repr(r.exception)
    errors = [ln for ln in r.stderr.splitlines() if ln.startswith("error:")]
    assert len(errors) == 1, r.stderr
    assert f"cannot write {path}" in errors[0], errors[0]
    assert "Read-only file system (choose a writable location)" in errors[0], errors[0]


def test_outputs_on_a_read_only_file_system(read_only: Path, tmp_path: Path) -> None:
    ro, store = read_only, read_only / "store"
    before = _contents(store)
    cases = [
        (["ingest", MACHINES, "--store", ro / "new"], ro / "new"),
        (["ingest", MACHINES, "--store", ro / "empty"], ro / "empty"),
        (["ingest", MACHINES, "--store", ro / "a" / "b"], ro / "a" / "b"),
        (["ingest", MACHINES, "--store", store, "--replace"], store),
        (["report", "--store", store, "-q", "-o", ro / "r.md"], ro / "r.md"),
        (
            ["report", "--store", store, "-q", "-o", ro / "empty" / "r.json"],
            ro / "empty" / "r.json",
        ),
        (["report", "--store", store, "-q", "-o", ro / "sub" / "r.md"], ro / "sub" / "r.md"),
        (["report", "--store", store, "-q", "--figures", ro / "figs"], ro / "figs"),
        (
            ["report", "--store", store, "-q", "--figures", ro / "empty", "-o", tmp_path / "r.md"],
            ro / "empty",
        ),
        (["replay", "--store", store, "-q", "--out", ro / "rep"], ro / "rep"),
        (["replay", "--store", store, "-q", "--policy", "philly,fifo", "--out", ro], ro),
        (
            ["synth", "--out", ro / "syn", "--jobs", "5", "--machines", "2", "--days", "1"],
            ro / "syn",
        ),
        (["sweep", "--store", store, "-q", "--out", ro / "sw"], ro / "sw"),
        (["sweep", "--store", store, "-q", "--out", ro / "empty"], ro / "empty"),
        (["fetch", "--to", ro / "data", "gavel"], ro / "data"),  # refused before downloading
    ]
    for args, path in cases:
        _unwritable(_cli(*args), path)
    assert not (tmp_path / "r.md").exists()  # refused before the work, nothing half-written
    assert _contents(store) == before


def test_a_store_on_a_read_only_file_system_can_be_read(read_only: Path) -> None:
    r = _cli("report", "--store", read_only / "store", "--format", "json", "-q")
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["summary"]
    assert _cli("info", "--store", read_only / "store").exit_code == 0


def test_unreadable_files_and_unwritable_folders_of_an_unprivileged_user(tmp_path: Path) -> None:
    """A folder with a file and a subfolder its user may not read: the rest is ingested, the
    two are listed as not taken (before: a PermissionError traceback and nothing ingested;
    the subfolder was skipped silently). An output folder without write permission: one
    line. Run as root without CAP_DAC_OVERRIDE, as a user is."""
    logs = tmp_path / "logs"
    (logs / "sub").mkdir(parents=True)
    (logs / "cluster_machine_list").write_bytes(MACHINES.read_bytes())
    (logs / "sub" / "a.log").write_text("x\n")
    secret = logs / "b.log"
    secret.write_text("y\n")
    secret.chmod(0)
    (logs / "sub").chmod(0)
    closed = tmp_path / "closed"
    closed.mkdir(mode=0o555)
    store = tmp_path / "store"
    try:
        p = unprivileged([*CLI, "ingest", str(logs), "--store", str(store)], secret)
        assert p.returncode == 0, p.stderr
        assert "Traceback" not in p.stderr
        assert f"{secret} (?) cannot read: permission denied" in p.stderr
        assert f"{logs / 'sub'} (?) cannot list this folder: permission denied" in p.stderr
        assert _contents(store)[2]  # the machine list is in
        p = unprivileged([*CLI, "synth", "--out", str(closed / "s"), "--jobs", "5"], secret)
        assert p.returncode == 1 and "Traceback" not in p.stderr, p.stderr
        assert p.stderr.strip() == (
            f"error: cannot write {closed / 's'} (--out): Permission denied "
            "(check its permissions or choose another location)"
        )
    finally:
        (logs / "sub").chmod(0o755)
        closed.chmod(0o755)
