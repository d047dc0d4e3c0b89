"""Helpers for benchmarks: peak RSS of child processes, timing, a scratch folder."""

from __future__ import annotations

import os
import resource
import subprocess
import sys
import time
from pathlib import Path

SCRATCH = Path(os.environ.get("PHILLY_BENCH_DIR", "bench-out"))


def run_measured(args: list[str], **kw: object) -> tuple[float, float]:
    """Run a command; return (wall seconds, peak RSS of the child in MB)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    t0 = time.perf_counter()
    subprocess.run(args, check=True, **kw)  # type: ignore[call-overload]
    secs = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    # ru_maxrss of children is the max over all children so far; measure each in a fresh
    # process tree via /usr/bin/time-like wrapper when a precise per-run value is needed.
    return secs, max(after, before) / 1024.0


def python_measured(code: str, *args: str) -> tuple[float, float, str]:
    """Run ``python -c code args`` in a fresh process; return (seconds, peak RSS MB, stdout)."""
    wrapper = (
        "import resource, runpy, sys, time\n"
        "t0 = time.perf_counter()\n"
        f"exec(compile({code!r}, '<bench>', 'exec'))\n"
        "secs = time.perf_counter() - t0\n"
        "rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0\n"
        "print(f'__BENCH__ {secs:.3f} {rss:.1f}', file=sys.stderr)\n"
    )
    p = subprocess.run(
        [sys.executable, "-c", wrapper, *args], capture_output=True, text=True, check=True
    )
    line = [ln for ln in p.stderr.splitlines() if ln.startswith("__BENCH__")][-1]
    _, secs, rss = line.split()
    return float(secs), float(rss), p.stdout
