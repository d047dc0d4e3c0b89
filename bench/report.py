"""Benchmark: the full report on a public-trace-sized store.

The store (bench-out/report-store, outside git) has 117,325 jobs on 552 machines (321 with 2
GPUs, 231 with 8), 75 days of per-minute GPU utilization for every GPU (~269M rows) plus CPU
and memory per server (~60M rows each), failures and loss curves; it is built once by
``bench/_reportstore.py`` (DuckDB SQL straight to Parquet through the Store API, a few minutes)
and reused while its version matches. Target (ARCHITECTURE.md): under 60 s, peak RSS under
3 GB, on 2 cores. Prints seconds, peak RSS and the core count; asserts nothing.

    python -m bench report                   # or: make bench
    PHILLY_BENCH_REBUILD=1 python -m bench report
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time

from bench._util import SCRATCH

#: Bump when bench/_reportstore.py changes what it writes.
STORE_VERSION = "2"

#: Runs the CLI in a fresh process and reports wall time, peak RSS and CPU time (all threads):
#: CPU seconds tell what a busy shared machine hides in the wall time.
REPORT_CODE = """
import resource, sys, time
t0 = time.perf_counter()
from philly_analyze.cli import main
main(sys.argv[1:], standalone_mode=False)
secs = time.perf_counter() - t0
ru = resource.getrusage(resource.RUSAGE_SELF)
print(f"__BENCH__ {secs:.3f} {ru.ru_maxrss / 1024.0:.1f} {ru.ru_utime + ru.ru_stime:.1f}",
      file=sys.stderr)
"""


def measured(*args: str) -> tuple[float, float, float]:
    """(wall seconds, peak RSS MB, CPU seconds) of the report CLI with ``args``."""
    p = subprocess.run([sys.executable, "-c", REPORT_CODE, *args], capture_output=True, text=True)
    if p.returncode != 0:
        raise RuntimeError(f"report failed ({p.returncode}): {p.stderr.strip()[-2000:]}")
    line = [ln for ln in p.stderr.splitlines() if ln.startswith("__BENCH__")][-1]
    _, secs, rss, cpu = line.split()
    return float(secs), float(rss), float(cpu)


def ensure_store() -> str:
    """Build the benchmark store unless an up-to-date one exists; return its path."""
    path = SCRATCH / "report-store"
    marker = path / ".bench-version"
    fresh = marker.exists() and marker.read_text().strip() == STORE_VERSION
    if fresh and not os.environ.get("PHILLY_BENCH_REBUILD"):
        return str(path)
    from bench._reportstore import build_store

    shutil.rmtree(path, ignore_errors=True)
    t0 = time.perf_counter()
    build_store(path)
    marker.write_text(STORE_VERSION + "\n")
    print(f"built {path} in {time.perf_counter() - t0:.0f} s", flush=True)
    return str(path)


def run() -> None:
    store = ensure_store()
    for fmt in ("json", "html"):
        load = os.getloadavg()[0]
        secs, rss, cpu = measured(
            "report", "--store", store, "--format", fmt, "-o", str(SCRATCH / f"report.{fmt}"), "-q"
        )
        print(
            f"report --format {fmt}: {secs:.1f} s, peak RSS {rss:.0f} MB, CPU {cpu:.1f} s, "
            f"{os.cpu_count()} cores, load average {load:.1f} before the run "
            f"(target: < 60 s, < 3,000 MB)",
            flush=True,
        )
