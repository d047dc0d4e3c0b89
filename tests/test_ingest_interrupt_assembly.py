"""Ctrl-C reaches the DuckDB work that YARN assembly and Ganglia resampling do at the end of
a group (their own database files in the staging folder), as it reaches the Philly CSV copies
(``tests/test_ingest_interrupt.py``).

The CLI's watcher (``querystop``) answers a SIGINT by calling ``interrupt()`` on every
connection ``store.connect`` made; a connection opened with ``duckdb.connect`` directly is not
among them, so a query of it that does not look at Python's signals ran on to its end."""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import duckdb
import pytest

from philly_analyze import querystop
from philly_analyze.ingest import memory
from philly_analyze.ingest.formats import IngestContext
from philly_analyze.ingest.pipeline import ingest_paths
from philly_analyze.store import Store
from tests.test_ganglia_ingest import T0
from tests.test_yarn_ingest import gpu_app_lines

#: A query that takes hours unless interrupted (a join of 10^12 pairs matching none).
ENDLESS = "SELECT count(*) FROM range(1000000) a, range(1000000) b WHERE a.range + b.range < 0"


def _yarn_log(tmp_path: Path) -> Path:
    log = tmp_path / "in" / "yarn-yarn-resourcemanager-rm1.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    log.write_text("\n".join(gpu_app_lines()) + "\n")
    return log


def _ganglia_csv(tmp_path: Path) -> Path:
    host = tmp_path / "in" / "m47"
    host.mkdir(parents=True, exist_ok=True)
    (host / "gpu0_util.csv").write_text(
        "Timestamp,gpu0_util\n" + "".join(f"{T0 + 60 * i},{i}\n" for i in range(5))
    )
    return tmp_path / "in"


@pytest.mark.parametrize("fmt", ["yarn", "ganglia"])
def test_the_watchers_interrupt_stops_the_group_query(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fmt: str
) -> None:
    """At the point where the group's connection is set up (``memory.configure``), a query
    that would run for hours starts; half a second later the watcher's call
    (``querystop.interrupt_all``) must stop it. Before, the connection was not registered:
    the query went on (this test then stops it itself after 10 s and fails)."""
    inputs = _yarn_log(tmp_path) if fmt == "yarn" else _ganglia_csv(tmp_path)
    configure = memory.configure
    stopped_by_test: list[bool] = []

    def configure_then_block(con: duckdb.DuckDBPyConnection, limit: int, spill: Path) -> None:
        configure(con, limit, spill)

        def ctrl_c() -> None:
            time.sleep(0.5)
            querystop.interrupt_all()
            done.wait(10)
            if not done.is_set():  # not reached by the watcher: end it for the test's sake
                stopped_by_test.append(True)
                con.interrupt()

        done = threading.Event()
        t = threading.Thread(target=ctrl_c, daemon=True)
        t.start()
        try:
            con.execute(ENDLESS).fetchall()
        finally:
            done.set()
            t.join()

    monkeypatch.setattr(memory, "configure", configure_then_block)
    with (
        Store(tmp_path / "store") as store,
        pytest.raises((duckdb.InterruptException, RuntimeError)),
    ):
        ingest_paths(store, [inputs], ctx=IngestContext(timezone="America/Los_Angeles"))
    assert not stopped_by_test, "the group's connection did not answer querystop.interrupt_all"


CHILD = """
import sys, time
from pathlib import Path
from philly_analyze.ingest import memory
configure = memory.configure
def slow(con, limit, spill):
    configure(con, limit, spill)
    Path(sys.argv[1]).write_text("in the group query")
    con.execute(sys.argv[2]).fetchall()
memory.configure = slow
from philly_analyze.cli import main
main(sys.argv[3:])
"""


def test_ctrl_c_during_yarn_assembly_exits_130_and_keeps_the_store(tmp_path: Path) -> None:
    """The whole CLI: Ctrl-C while YARN assembly runs ends the process with status 130 and
    "interrupted", no traceback, within a few seconds; the store keeps its earlier state and
    the batch's staged files are gone (the verb unwound; it was not cut short)."""
    store = tmp_path / "store"
    earlier = _ganglia_csv(tmp_path)
    from click.testing import CliRunner

    from philly_analyze.cli import main

    r = CliRunner().invoke(main, ["ingest", str(earlier), "--store", str(store), "-q"])
    assert r.exit_code == 0, r.output
    log = _yarn_log(tmp_path / "later")
    marker = tmp_path / "marker"
    args = ["ingest", str(log), "--store", str(store), "--timezone", "America/Los_Angeles"]
    p = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(marker), ENDLESS, *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    deadline = time.monotonic() + 120
    while not marker.exists():
        assert p.poll() is None, p.stderr.read() if p.stderr else ""
        assert time.monotonic() < deadline, "never reached the assembly"
        time.sleep(0.02)
    time.sleep(0.5)  # into the query
    t0 = time.monotonic()
    p.send_signal(signal.SIGINT)
    _, err = p.communicate(timeout=120)
    assert p.returncode == 130 and "interrupted" in err, (p.returncode, err)
    assert "Traceback" not in err
    assert time.monotonic() - t0 < 30  # not a speed target: uninterrupted it runs for hours
    con = duckdb.connect(str(store / "catalog.duckdb"), read_only=True)
    try:
        assert con.execute("SELECT count(*) FROM jobs").fetchall() == [(0,)]
        assert con.execute("SELECT count(*) FROM gpu_util").fetchall() == [(5,)]
    finally:
        con.close()
    staging = store / ".staging"
    assert not staging.exists() or not any(staging.iterdir())
