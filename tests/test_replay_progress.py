"""Progress of long replays: a bar on stderr when stderr is a terminal (a real pseudo-terminal
here), never on stdout, silent with --quiet or when stderr is not a terminal."""

from __future__ import annotations

import json
import os
import pty
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from philly_analyze import progress
from tests._sim_data import observed_store

ROOT = Path(__file__).resolve().parent.parent
POLICIES = "philly,las,muxflow"  # the queue engine, the preemptive engine, the sharing model


def _replay(store: Path, *extra: str, tty: bool = True) -> tuple[int, str, str]:
    """Run the CLI in a fresh process, stderr on a pseudo-terminal (or a pipe): exit code,
    stdout, and everything written to stderr."""
    args = [sys.executable, "-c", "from philly_analyze.cli import main; main()", "replay"]
    args += ["--store", str(store), "--policy", POLICIES, "--format", "json", *extra]
    env = {**os.environ, "COLUMNS": "120", "TERM": "xterm"}
    if not tty:
        done = subprocess.run(args, capture_output=True, text=True, cwd=ROOT, env=env)
        return done.returncode, done.stdout, done.stderr
    master, slave = pty.openpty()
    chunks: list[bytes] = []

    def read() -> None:
        while True:
            try:
                data = os.read(master, 65536)
            except OSError:  # the terminal closed
                return
            if not data:
                return
            chunks.append(data)

    reader = threading.Thread(target=read)
    reader.start()
    p = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=slave, cwd=ROOT, env=env)
    os.close(slave)
    out, _ = p.communicate(timeout=300)
    reader.join(timeout=30)
    os.close(master)
    return p.returncode, out.decode(), b"".join(chunks).decode(errors="replace")


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return observed_store(tmp_path_factory.mktemp("progress") / "s")


def test_progress_goes_to_a_terminal_stderr_only(store: Path) -> None:
    code, out, err = _replay(store)
    assert code == 0, err
    for name in POLICIES.split(","):
        assert f"{name}: replaying" in err, err
    # stdout is the JSON document and nothing else: no bar, no control sequences.
    doc = json.loads(out)
    assert [r["policy"] for r in doc["results"]] == POLICIES.split(",")
    assert "replaying" not in out and "\x1b" not in out


def test_quiet_and_piped_stderr_show_no_progress(store: Path) -> None:
    code, out, err = _replay(store, "--quiet")
    assert code == 0
    assert err == ""  # nothing at all on the terminal
    json.loads(out)
    code, out, err = _replay(store, tty=False)
    assert code == 0
    assert "philly: replaying" not in err and "\x1b" not in err  # the summary lines only
    assert "philly: 3 jobs in" in err
    json.loads(out)


def test_engines_report_attempt_ends_to_the_current_tracker() -> None:
    """Library code reports to ``progress.current()``: the total is the attempts to run and
    the last report says all of them ended."""
    from philly_analyze.sim import Cluster, Workload, simulate

    class Recorder:
        def __init__(self) -> None:
            self.calls: list[tuple[float | None, float | None]] = []

        def advance(self, amount: float = 1) -> None:
            raise AssertionError("engines report with update")

        def update(self, *, completed: float | None = None, total: float | None = None) -> None:
            self.calls.append((completed, total))

        def describe(self, text: str) -> None:
            pass

    # 3 jobs, 4 attempts (b fails once), one 8-GPU server.
    wl = Workload.from_columns(
        ["a", "b", "c"], [0, 1, 2], ["v", "v", "v"], [8, 4, 4], [[10], [5, 5], [3]]
    )
    for policy in ("philly", "srtf"):
        rec = Recorder()
        with progress.reporting(rec):
            simulate(wl, Cluster.build(["m0"], [8]), policy)
        assert rec.calls[0] == (0, 4) and rec.calls[-1][0] == 4, (policy, rec.calls)
    assert isinstance(progress.current(), progress.NullTracker)  # restored after the block


def test_status_while_reading_building_and_writing(store: Path, tmp_path: Path) -> None:
    """Before the bar, a status line while the store is read; after it, labels while the
    result is built and the output store written (before: nothing was shown while a
    million-job store was read, about 13 s, nor while the result was built and written)."""
    code, out, err = _replay(store, "--out", str(tmp_path / "out"))
    assert code == 0, err
    assert "reading the store" in err, err
    for name in POLICIES.split(","):
        assert f"{name}: building the result" in err, err
        assert f"{name}: writing {tmp_path / 'out' / name}" in err, err
    assert "reading the store" not in out and "\x1b" not in out
    json.loads(out)


def test_library_phases_are_described_to_the_current_tracker(store: Path) -> None:
    """``load_inputs`` and the engines' result say which phase runs (``describe``)."""
    from philly_analyze.sim import simulate
    from philly_analyze.sim.replay import load_inputs

    class Recorder(progress.NullTracker):
        def __init__(self) -> None:
            self.texts: list[str] = []

        def describe(self, text: str) -> None:
            self.texts.append(text)

    rec = Recorder()
    with progress.reporting(rec):
        wl, cluster, quotas = load_inputs(store)
        simulate(wl, cluster, "philly", quotas)
    assert rec.texts == [
        "reading the store: jobs and attempts",
        "reading the store: machines and quotas",
        "philly: building the result (waiting causes, metrics)",
    ]
