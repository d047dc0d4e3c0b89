"""CLI misuse (issue 14): every verb given an empty string, nan, inf, a huge or negative
number, a far-future date or a format that does not fit ends with the right exit code (1 bad
input or a failed run, 2 a usage error) and one line, never a traceback, and creates nothing.

Before the fix: ``ingest --format yarn_rm_log README.md`` read "0 rows" and exited 0;
``ingest missing.log`` left an empty store; ``ingest ""`` read the current folder, and
``replay --out ""``, ``synth --out ""``, ``report --figures ""`` wrote into it; ``report -o ""``
and ``synth --start 9999-12-31`` ended in tracebacks; ``synth --days nan`` ran and failed;
``sweep --metric nosuchmetric`` exited 0; a tar of unknown files printed one error line each.
"""

from __future__ import annotations

import io
import os
import tarfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from philly_analyze.cli import main
from tests import small_store
from tests.conftest import ROOT, SAMPLE_DATA

README = ROOT / "README.md"
MACHINES = SAMPLE_DATA / "cluster_machine_list"


def _cli(*args: object) -> Result:
    return CliRunner().invoke(main, [str(a) for a in args])


def _one_error(r: Result, code: int, *words: str) -> str:
    """Exit ``code``, no traceback, and the message (click's usage error or our one line)."""
    assert r.exit_code == code, r.output
    assert isinstance(r.exception, SystemExit), repr(r.exception)
    lines = [ln for ln in r.stderr.splitlines() if ln.lower().startswith("error")]
    assert len(lines) == 1, r.stderr
    for w in words:
        assert w in lines[0], lines[0]
    return lines[0]


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("misuse")
    small_store.make(tmp, tmp / "store")
    return tmp / "store"


@pytest.fixture
def in_empty_folder(tmp_path: Path) -> Iterator[Path]:
    """Run in an empty folder, to see that nothing is written into the current folder."""
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    old = Path.cwd()
    os.chdir(cwd)
    try:
        yield cwd
    finally:
        os.chdir(old)


# ---------------------------------------------------------------- ingest


@pytest.mark.parametrize("option", ["--input-format", "--format"])  # --format: former spelling
def test_a_forced_format_that_reads_nothing_is_an_error(tmp_path: Path, option: str) -> None:
    store = tmp_path / "store"
    for _ in range(2):  # and again: nothing was recorded, so it is not "already ingested"
        r = _cli("ingest", option, "yarn_rm_log", README, "--store", store)
        _one_error(r, 1, str(README), "nothing read as yarn_rm_log")
    assert not store.exists()  # a failed first ingest creates nothing
    r = _cli("ingest", "--input-format", "philly_machine_list", README, "--store", store)
    _one_error(r, 1, "nothing read as philly_machine_list")


def test_a_forced_format_on_files_that_fit_still_works(tmp_path: Path) -> None:
    store = tmp_path / "store"
    r = _cli("ingest", "--input-format", "yarn_rm_log", SAMPLE_DATA / "yarn", "--store", store)
    assert r.exit_code == 0, r.output
    r = _cli("ingest", "--input-format", "philly_machine_list", MACHINES, README, "--store", store)
    _one_error(r, 1, str(README), "nothing read as philly_machine_list")
    r = _cli("info", "--store", store, "--format", "json")
    assert '"philly_machine_list"' in r.stdout  # the list that fits was ingested


def test_a_failed_first_ingest_creates_nothing(tmp_path: Path) -> None:
    _one_error(_cli("ingest", tmp_path / "missing.log", "--store", tmp_path / "a" / "b"), 1)
    assert list(tmp_path.iterdir()) == []
    (tmp_path / "mine").mkdir()  # the user's folder stays, empty
    _one_error(_cli("ingest", README, "--store", tmp_path / "mine"), 1, "unrecognised format")
    assert list((tmp_path / "mine").iterdir()) == []


def test_a_failed_ingest_into_a_store_keeps_it(tmp_path: Path) -> None:
    store = tmp_path / "store"
    assert _cli("ingest", MACHINES, "--store", store, "-q").exit_code == 0
    _one_error(_cli("ingest", tmp_path / "missing.log", "--store", store), 1)
    r = _cli("info", "--store", store, "--format", "json")
    assert r.exit_code == 0 and '"philly_machine_list"' in r.stdout


def _tar(path: Path, members: dict[str, bytes]) -> Path:
    with tarfile.open(path, "w:gz") as tf:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))
    return path


def test_unknown_members_of_a_tar_are_folded_as_a_folders_files(tmp_path: Path) -> None:
    members = {f"notes/n{i:03}.txt": f"note {i}\nnothing to see\n".encode() for i in range(60)}
    members["trace/cluster_machine_list"] = MACHINES.read_bytes()
    archive = _tar(tmp_path / "trace.tar.gz", members)
    folder = tmp_path / "folder"
    for name, data in members.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_bytes(data)
    lines = {}
    for what in (archive, folder):
        r = _cli("ingest", what, "--store", tmp_path / f"s-{what.name}")
        assert r.exit_code == 0, r.output
        lines[what] = [ln for ln in r.stderr.splitlines() if "unrecognised format" in ln]
        verbose = _cli("ingest", what, "--store", tmp_path / f"v-{what.name}", "-v")
        assert verbose.exit_code == 0
        assert sum("unrecognised format" in ln for ln in verbose.stderr.splitlines()) == 60
    # One line for the 60 (before: 60 "error" lines for the archive, and exit 1).
    assert len(lines[archive]) == len(lines[folder]) == 1, lines
    assert "60 files" in lines[archive][0] and "unrecognised format" in lines[archive][0]


# ---------------------------------------------------------------- empty strings

EMPTY = [
    ["ingest", ""],
    ["ingest", MACHINES, "--store", ""],
    ["report", "--store", ""],
    ["report", "-o", ""],
    ["report", "--figures", ""],
    ["info", "--store", ""],
    ["replay", "--out", ""],
    ["replay", "--store", ""],
    ["synth", "--out", "", "--jobs", "5", "--machines", "2", "--days", "1"],
    ["sweep", "--out", ""],
    ["fetch", "--to", "", "gavel"],
]


@pytest.mark.parametrize("args", EMPTY, ids=lambda a: " ".join(map(str, a)))
def test_an_empty_path_is_a_usage_error(args: list, store: Path, in_empty_folder: Path) -> None:
    if args[0] in ("report", "replay", "sweep") and "--store" not in args:
        args = [*args, "--store", store]
    _one_error(_cli(*args), 2, "an empty path")
    assert list(in_empty_folder.iterdir()) == []  # nothing read from or written to "."


# ---------------------------------------------------------------- numbers and dates


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["--start", "9999-12-31"], ["--start", "2200-01-01"]),
        (["--start", "0001-01-01"], ["--start", "1970-01-02"]),
        (["--start", "2199-12-01", "--days", "60"], ["--days", "2200-01-01"]),
        (["--days", "nan"], ["--days", "not a finite number"]),
        (["--days", "inf"], ["--days", "not a finite number"]),
        (["--days", "1e9"], ["--days", "2200-01-01"]),
        (["--jobs", "100000000000000000000"], ["--jobs"]),
        (["--machines", "100000000000000"], ["--machines"]),
        (["--seed", "-1"], ["--seed"]),
    ],
)
def test_synth_out_of_range_is_a_usage_error(tmp_path: Path, args: list, words: list) -> None:
    base = ["--jobs", "5", "--machines", "2", "--days", "1"]
    for a in args[::2]:  # the case's own value of the option replaces the base's
        if a in base:
            i = base.index(a)
            del base[i : i + 2]
    r = _cli("synth", "--out", tmp_path / "out", *base, *args, "-q")
    _one_error(r, 2, *words)
    assert not (tmp_path / "out").exists()


def test_synth_at_the_edges_of_its_window(tmp_path: Path) -> None:
    for start in ("1970-01-02", "2199-12-30"):
        r = _cli("synth", "--out", tmp_path / start, "--jobs", "5", "--machines", "2",
                 "--days", "1", "--start", start, "--formats", "philly-jobs", "-q")  # fmt: skip
        assert r.exit_code == 0, r.output


@pytest.mark.parametrize(
    ("args", "code", "words"),
    [
        (["--jitter", "nan"], 2, ["--jitter", "not a finite number"]),
        (["--jitter", "inf"], 2, ["--jitter", "is not in the range"]),
        (["--confidence", "nan"], 2, ["--confidence", "not a finite number"]),
        (["--ship-limit-mb", "nan"], 2, ["--ship-limit-mb", "not a finite number"]),
        (["--metric", "nosuchmetric"], 2, ["no metric 'nosuchmetric'"]),
        (["--metric", "queue_mean"], 2, ["did you mean queue_mean_s?"]),
        (["--import", ""], 1, ["cannot import ''"]),
        (["--param", "max_retries=100000000000000000000"], 1, ["max_retries", "an integer"]),
        (["--seeds", "100000000000000000000"], 2, ["--seeds"]),
        (["--jitter", "1e308"], 2, ["--jitter"]),
    ],
)
def test_sweep_misuse(store: Path, tmp_path: Path, args: list, code: int, words: list) -> None:
    out = tmp_path / "out"
    r = _cli("sweep", "--store", store, "--workers", "1", "--out", out, *args, "-q")
    _one_error(r, code, *words)
    assert not (out / "runs.parquet").exists()  # refused before any run


def test_an_unknown_metric_of_a_policy_with_its_own_metrics_is_found_after_the_runs() -> None:
    """Sharing and imported policies report metrics of their own, known only from runs."""
    from philly_analyze.errors import UsageError
    from philly_analyze.sweep.run import resolve_metrics

    present = ["jobs", "gpu_util_online_pct"]
    assert resolve_metrics(["gpu_util_online_pct"], present) == (["gpu_util_online_pct"], [])
    with pytest.raises(UsageError, match=r"no metric 'util'.*; the metrics: jobs, gpu_util"):
        resolve_metrics(["util"], present)
    # No run done (all failed): nothing says the name is wrong, a note only.
    assert resolve_metrics(["util"], [])[1] == ["no metric 'util'"]


@pytest.mark.parametrize(
    ("param", "words"),
    [  # each was an OverflowError traceback
        ("max_retries=100000000000000000000", ["max_retries", "an integer up to 1e+15"]),
        ("locality_wait_min=1e308", ["locality_wait_min", "a finite float up to 1e+15"]),
        ("retry_delay_s=1e308", ["retry_delay_s", "a finite float up to 1e+15"]),
    ],
)
def test_replay_misuse(store: Path, param: str, words: list) -> None:
    _one_error(_cli("replay", "--store", store, "--param", param, "-q"), 1, *words)
