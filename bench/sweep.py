"""``sweep``: runs per minute of a 100-run sweep on this machine, one worker, one worker per
core, and Ray (a private local instance with one CPU per core).

Input: a synthetic store made here (``bench.replay.synth_store``: 8,000 jobs over 10 days on
a quarter of Philly's servers, 80 two-GPU and 58 eight-GPU, so queues form and the locality
wait matters; one replay takes ~0.5 s). The sweep: ``philly`` x 4 locality waits x 20 seeds
+ ``relaxed`` x 20 seeds, arrivals jittered by ±5 min per seed = 100 runs. Each
configuration runs the CLI in a fresh process into a fresh output (no runs to skip) without
figures; "run seconds" is from the first run submitted to the last result (pool or Ray
workers starting included), "process" the whole command, "startup" Ray's start.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pyarrow.parquet as pq

from bench._util import SCRATCH
from bench.replay import synth_store

ROOT = Path(__file__).resolve().parent.parent
SWEEP = [
    "--policy", "philly,relaxed", "--param", "locality_wait_min=0,10,30,120",
    "--seeds", "20", "--jitter", "300", "--no-figures", "--format", "json", "-q",
]  # fmt: skip
CLI = "from philly_analyze.cli import main; main()"


def _run(store: Path, out: Path, *extra: str) -> tuple[float, dict]:
    shutil.rmtree(out, ignore_errors=True)
    env = dict(os.environ)
    env.pop("RAY_ADDRESS", None)
    t0 = time.perf_counter()
    p = subprocess.run(
        [sys.executable, "-c", CLI, "sweep", "--store", str(store), "--out", str(out), *SWEEP, *extra],
        capture_output=True, text=True, cwd=ROOT, env=env,
    )  # fmt: skip
    wall = time.perf_counter() - t0
    if p.returncode != 0:
        raise RuntimeError(p.stderr.strip().splitlines()[-1] if p.stderr else "sweep failed")
    return wall, json.loads(p.stdout)


def _table(out: Path) -> list:
    t = pq.read_table(out / "runs.parquet")
    keep = [
        c
        for c in t.column_names
        if c not in ("sim_seconds", "run_seconds", "worker", "finished_at")
    ]
    return t.select(keep).to_pylist()


def run() -> None:
    cores = os.cpu_count() or 1
    base = SCRATCH / "sweep"
    store = base / "store"
    if not store.exists():
        synth_store(store, n_jobs=8_000, days=10, seed=1, servers={2: 80, 8: 58})
    configs = [("1 local worker", ["--workers", "1"]), (f"{cores} local workers", [])]
    if importlib.util.find_spec("ray") is not None:
        configs.append((f"Ray local instance, {cores} CPUs", ["--ray", "local"]))
    else:
        print("ray: not installed (pip install 'philly-analyze[distributed]'): skipped")
    tables = []
    print(f"{cores} cores, load average before {os.getloadavg()[0]:.1f}")
    for label, extra in configs:
        out = base / label.split()[0].lower().replace(",", "")
        wall, doc = _run(store, out, *extra)
        runs, secs = doc["executed"], doc["seconds"]
        start = f", Ray startup {doc['startup_seconds']:.1f} s" if doc["startup_seconds"] else ""
        print(
            f"{label}: {runs} runs in {secs:.1f} s = {runs / secs * 60:,.0f} runs/min "
            f"(process {wall:.1f} s{start})",
            flush=True,
        )
        tables.append(_table(out))
    same = all(t == tables[0] for t in tables[1:])
    print(f"runs tables identical across configurations (timing columns aside): {same}")
