"""The sweep on a real Ray cluster gives the same runs table as the local pool.

One Ray head per test session, started like an existing cluster would be (``ray start
--head``) on the loopback interface only, with token authentication; the sweeps that use it
run as separate processes (the CLI, as a user would), so Ray's process-wide state stays out
of the test process. Skipped, with the reason, when Ray is not installed (a dev dependency:
``skip_unless_strict``, so CI fails instead)."""

from __future__ import annotations

import contextlib
import importlib.util
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq
import pytest

from philly_analyze.sweep.results import TIMING_COLUMNS
from tests._sweep_data import ROOT, sample_store, sweep
from tests.conftest import skip_unless_strict


@pytest.fixture(scope="session")
def ray_installed() -> None:
    """Skip without Ray (fail under ``PHILLY_STRICT_SKIPS=1``: it is a dev dependency)."""
    if importlib.util.find_spec("ray") is None:
        skip_unless_strict("Ray is not installed (pip install 'philly-analyze[distributed]')")


needs_ray = pytest.mark.usefixtures("ray_installed")
CLI = "from philly_analyze.cli import main; main()"


def _ray_env() -> dict[str, str]:
    """Loopback only; a token of our own (no file in ~/.ray); no usage reporting."""
    return {
        **os.environ,
        "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0",
        "RAY_AUTH_MODE": "token",
        "RAY_AUTH_TOKEN": secrets.token_hex(16),
        "RAY_USAGE_STATS_ENABLED": "0",
    }


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="session")
def ray_head(ray_installed: None) -> Iterator[tuple[str, dict[str, str]]]:
    """``ray start --head`` on 127.0.0.1 with 2 CPUs; yields (address, environment)."""
    env = _ray_env()
    port = _free_port()
    tmp = tempfile.mkdtemp(prefix="ray-", dir="/tmp")  # short: Ray's unix sockets live here
    log = Path(tmp) / "head.log"
    cmd = [
        sys.executable, "-c", "from ray.scripts.scripts import main; main()", "start",
        "--head", "--node-ip-address=127.0.0.1", f"--port={port}", "--num-cpus=2",
        "--include-dashboard=false", "--disable-usage-stats", f"--temp-dir={tmp}",
        "--object-store-memory=100000000", "--block",
    ]  # fmt: skip
    with open(log, "w") as fh:
        # Its own process group: at the end we stop exactly the processes it started.
        head = subprocess.Popen(
            cmd, env=env, stdout=fh, stderr=subprocess.STDOUT, start_new_session=True
        )
    try:
        deadline = time.monotonic() + 120
        while "Ray runtime started" not in log.read_text():
            if head.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"ray start failed:\n{log.read_text()[-3000:]}")
            time.sleep(0.5)
        yield f"127.0.0.1:{port}", env
    finally:
        # `ray start --block` stops the processes it started when it gets SIGTERM; anything
        # of its group still there afterwards is killed.
        head.terminate()
        try:
            head.wait(timeout=30)
        except subprocess.TimeoutExpired:
            head.kill()
            head.wait()
        with contextlib.suppress(ProcessLookupError):
            os.killpg(head.pid, signal.SIGKILL)
        shutil.rmtree(tmp, ignore_errors=True)


def _cli(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", CLI, "sweep", *args],
        env=env, cwd=ROOT, capture_output=True, text=True, timeout=600,
    )  # fmt: skip


def _deterministic(out: Path) -> pd.DataFrame:
    return pq.read_table(out / "runs.parquet").to_pandas().drop(columns=list(TIMING_COLUMNS))


@needs_ray
def test_sweep_on_ray_matches_local(ray_head: tuple[str, dict[str, str]], tmp_path: Path) -> None:
    address, env = ray_head
    store = sample_store(tmp_path / "store")
    # Queue policies with jitter (seeds matter), MuxFlow (its own random draws), and a run
    # that fails (las refuses non-ascending thresholds): 4 + 4 + 2 = 10 runs.
    args = [
        "--store", str(store), "--policy", "philly,las,muxflow",
        "--param", "locality_wait_min=0,120", "--param", "las.thresholds_gpu_h=1,10;10,1",
        "--param", "muxflow.compare_philly=false", "--seeds", "2", "--jitter", "300",
        "--no-figures", "--format", "json",
    ]  # fmt: skip
    local = sweep(*args, "--out", str(tmp_path / "local"), "--workers", "2")
    # Some runs failed, the others are written: exit 3 (ExitStatus.PARTIAL), on Ray too.
    assert local.exit_code == 3 and "2 of 10 runs failed" in local.stderr

    shipped = _cli([*args, "--out", str(tmp_path / "shipped"), "--ray", address], env)
    assert shipped.returncode == 3, shipped.stderr[-3000:]
    assert f"on Ray at {address} (2 CPUs); inputs shipped to workers" in shipped.stderr
    assert "2 of 10 runs failed" in shipped.stderr

    # RAY_ADDRESS instead of --ray, and workers that read the store from its path.
    shared = _cli(
        [*args, "--out", str(tmp_path / "shared"), "--store-mode", "shared"],
        {**env, "RAY_ADDRESS": address},
    )
    assert shared.returncode == 3, shared.stderr[-3000:]
    assert "workers read the store path" in shared.stderr

    expected = _deterministic(tmp_path / "local")
    assert len(expected) == 10 and (expected["status"] == "ok").sum() == 8
    for name in ("shipped", "shared"):
        pd.testing.assert_frame_equal(_deterministic(tmp_path / name), expected)
    # The seed reached every kind of run: seeds differ, locally and on Ray alike.
    ok = expected[expected["status"] == "ok"]
    for _, g in ok.groupby(["policy", "param_locality_wait_min"], dropna=False):
        assert g["seed"].tolist() == [0, 1]
    mux = ok[ok["policy"] == "muxflow"]
    assert mux["gpu_util_online"].nunique() == 2
    assert ok[ok["policy"] == "philly"]["queue_mean_s"].nunique() == 4
    # The Ray runs ran in Ray's worker processes, not in the driver.
    ray_rows = pq.read_table(tmp_path / "shipped" / "runs.parquet").to_pandas()
    assert ray_rows["worker"].str.split(":").str[1].nunique() >= 1


@needs_ray
@pytest.mark.slow
def test_ray_local_starts_a_private_instance(tmp_path: Path) -> None:
    store = sample_store(tmp_path / "store")
    env = {k: v for k, v in _ray_env().items() if k != "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"}
    env.pop("RAY_ADDRESS", None)
    args = ["--store", str(store), "--policy", "philly", "--seeds", "2", "--jitter", "60"]
    args += ["--no-figures", "--format", "json"]
    r = _cli([*args, "--out", str(tmp_path / "ray"), "--ray", "local", "--workers", "2"], env)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "on Ray at local (2 CPUs)" in r.stderr
    local = sweep(*args, "--out", str(tmp_path / "local"), "--workers", "1")
    assert local.exit_code == 0
    pd.testing.assert_frame_equal(
        _deterministic(tmp_path / "ray"), _deterministic(tmp_path / "local")
    )


@needs_ray
def test_an_address_nobody_answers_on_fails_fast(tmp_path: Path) -> None:
    # ray.init would retry for many minutes; the sweep says what is wrong at once.
    store = sample_store(tmp_path / "store")
    r = sweep("--store", str(store), "--ray", f"127.0.0.1:{_free_port()}", "--no-figures", "-q")
    assert r.exit_code == 1
    assert "cannot connect to the Ray cluster" in r.stderr and "nothing answers" in r.stderr
