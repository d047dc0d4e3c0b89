"""The compiled replay engine (``sim.native``): which build runs, and that it schedules exactly
as the pure-Python source does.

The rule for which runs is tested on a folder made here (fake extension files, a stamp, a
source changed after the build). The equality is tested on a saturated workload replayed in
two processes, one with ``PHILLY_PURE_PYTHON=1``: every output table of ``philly``, ``las``
and ``muxflow`` must be equal. Where the compiled build is missing (no C compiler) the
equality test skips, except under ``PHILLY_STRICT_SKIPS=1`` (CI), where it fails.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from bench.replay import synth_store
from philly_analyze.sim import native
from tests.conftest import skip_unless_strict


def fake_build(folder: Path) -> None:
    """Sources of the compiled modules and an extension file per module, no stamp."""
    for m in native.COMPILED:
        (folder / f"{m}.py").write_text(f"# {m}\n")
        (folder / f"{m}.cpython-311-x86_64-linux-gnu.so").write_bytes(b"\x7fELF")


def write_stamp(folder: Path) -> None:
    hashes = native.source_hashes(folder)
    (folder / native.STAMP.name).write_text(json.dumps({"sources": hashes}))


def test_not_built_means_pure_python(tmp_path: Path) -> None:
    for m in native.COMPILED:
        (tmp_path / f"{m}.py").write_text("")
    reason = native.compiled_state(tmp_path, env={})
    assert reason is not None and reason.startswith("not built")


def test_a_build_without_its_stamp_is_not_used(tmp_path: Path) -> None:
    fake_build(tmp_path)
    reason = native.compiled_state(tmp_path, env={})
    assert reason is not None and "native.json missing" in reason


def test_a_current_build_is_used_and_a_changed_source_disables_it(tmp_path: Path) -> None:
    fake_build(tmp_path)
    write_stamp(tmp_path)
    assert native.compiled_state(tmp_path, env={}) is None
    (tmp_path / "engine.py").write_text("# engine, edited after the build\n")
    reason = native.compiled_state(tmp_path, env={})
    assert reason is not None and reason.startswith("out of date")


def test_the_environment_variable_forces_pure_python(tmp_path: Path) -> None:
    fake_build(tmp_path)
    write_stamp(tmp_path)
    assert native.compiled_state(tmp_path, env={native.PURE_ENV: "1"}) == "PHILLY_PURE_PYTHON=1"
    assert native.compiled_state(tmp_path, env={native.PURE_ENV: "0"}) is None


def run(code: str, pure: bool) -> str:
    """stdout of ``python -c code`` with or without ``PHILLY_PURE_PYTHON=1``."""
    env = {k: v for k, v in os.environ.items() if k != native.PURE_ENV}
    if pure:
        env[native.PURE_ENV] = "1"
    p = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=False
    )
    assert p.returncode == 0, p.stderr[-2000:]
    return p.stdout


WHICH = (
    "from philly_analyze.sim import native; import philly_analyze.sim.engine as e; "
    "print(native.engine_kind()); print(e.__file__)"
)


def test_pure_python_loads_the_sources() -> None:
    kind, path = run(WHICH, pure=True).split("\n")[:2]
    assert kind == "pure Python (PHILLY_PURE_PYTHON=1)"
    assert path.endswith("engine.py")


def replay(store: Path, out: Path, policy: str, pure: bool) -> None:
    code = (
        "from philly_analyze.cli import main; "
        f"main(['replay', '--store', {str(store)!r}, '--policy', {policy!r}, "
        f"'--out', {str(out)!r}, '-q', '--format', 'json'], standalone_mode=False)"
    )
    run(code, pure)


@pytest.mark.parametrize("policy", ["philly", "las", "muxflow"])
def test_compiled_and_pure_python_schedule_alike(tmp_path: Path, policy: str) -> None:
    kind, path = run(WHICH, pure=False).split("\n")[:2]
    if kind != "compiled":
        skip_unless_strict(f"the compiled engine is not in use: {kind}")
    assert path.endswith(".so")
    # Saturated (offered load 95%): queues, relaxed placements, borrowing and retries.
    store, _ = synth_store(
        tmp_path / "s", n_jobs=3_000, servers={2: 20, 8: 12}, offered_load=0.95, seed=4
    )
    replay(store, tmp_path / "compiled", policy, pure=False)
    replay(store, tmp_path / "pure", policy, pure=True)
    tables = outputs(tmp_path / "pure")
    assert "attempts" in tables and tables.keys() == outputs(tmp_path / "compiled").keys()
    compiled = outputs(tmp_path / "compiled")
    for name, t in tables.items():
        assert t.equals(compiled[name]), name


def outputs(out: Path) -> dict[str, pa.Table]:
    """Every table of a replay's output: the store's (one folder of Parquet files each,
    named by content) and the files beside it."""
    found = {d.name: pq.read_table(d) for d in (out / "parquet").iterdir() if d.is_dir()}
    found.update({f.stem: pq.read_table(f) for f in out.glob("*.parquet")})
    return found
