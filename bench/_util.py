"""Helpers for benchmarks: peak RSS of child processes, timing, a scratch folder."""

from __future__ import annotations

import os
import resource
import subprocess
import sys
from pathlib import Path

SCRATCH = Path(os.environ.get("PHILLY_BENCH_DIR", "bench-out"))


def python_measured(code: str, *args: str) -> tuple[float, float, str]:
    """Run ``python -c code args`` in a fresh process; return (seconds, peak RSS MB, stdout)."""
    wrapper = (
        "import sys, time\n"
        "t0 = time.perf_counter()\n"
        f"exec(compile({code!r}, '<bench>', 'exec'))\n"
        "secs = time.perf_counter() - t0\n"
        # VmHWM, not ru_maxrss: Linux carries ru_maxrss across fork+exec, so a child would
        # report its parent's peak.
        "rss = next(int(l.split()[1]) for l in open('/proc/self/status') if l.startswith('VmHWM')) / 1024.0\n"
        "print(f'__BENCH__ {secs:.3f} {rss:.1f}', file=sys.stderr)\n"
    )
    p = subprocess.run(
        [sys.executable, "-c", wrapper, *args], capture_output=True, text=True, check=True
    )
    line = [ln for ln in p.stderr.splitlines() if ln.startswith("__BENCH__")][-1]
    _, secs, rss = line.split()
    return float(secs), float(rss), p.stdout


def python_measured_cpu(code: str, *args: str) -> tuple[float, float, float, str]:
    """``python_measured`` plus the child's CPU seconds (user + system, all threads): on a
    shared machine CPU time varies less than wall time between runs."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    secs, rss, out = python_measured(code, *args)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return secs, rss, cpu, out
