"""Synthesizer at the public trace's size: ``--jobs 117325 --machines 552 --days 75`` in the
published format (about 60M machine-minute rows per utilization file), and every format at a
tenth of the jobs. Prints wall seconds, CPU seconds (all processes), MB written, peak RSS of the
main process and of a worker, and the machine's core count. Outputs are deleted afterwards.
Set ``PHILLY_BENCH_SYNTH=small`` to run only the smaller case."""

from __future__ import annotations

import os
import shutil

from bench._util import SCRATCH, python_measured

CODE = """
import resource, sys
from pathlib import Path
from philly_analyze.synth.run import SynthConfig, synthesize
out, jobs, machines, days, formats = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4]), sys.argv[5]
res = synthesize(Path(out), SynthConfig(jobs=jobs, machines=machines, days=days, seed=1,
                 formats=tuple(formats.split(","))))
me = resource.getrusage(resource.RUSAGE_SELF)
kids = resource.getrusage(resource.RUSAGE_CHILDREN)
cpu = me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime
print(f"{res.bytes_written} {cpu:.1f} {kids.ru_maxrss / 1024:.0f}")
for fmt, files in res.files.items():
    print(fmt, len(files), sum(p.stat().st_size for p in files))
"""

CASES = (
    ("public-trace size, published format", 117325, 552, 75, "philly"),
    ("a tenth of the jobs, every format", 11733, 552, 7.5, "philly,yarn,framework,ganglia"),
)


def run() -> None:
    cases = CASES[1:] if os.environ.get("PHILLY_BENCH_SYNTH") == "small" else CASES
    print(f"cores: {os.cpu_count()}")
    for name, jobs, machines, days, formats in cases:
        out = SCRATCH / "synth"
        shutil.rmtree(out, ignore_errors=True)
        secs, rss, stdout = python_measured(
            CODE, str(out), str(jobs), str(machines), str(days), formats
        )
        lines = stdout.split("\n")
        written, cpu, worker_rss = lines[0].split()
        print(
            f"{name}: --jobs {jobs} --machines {machines} --days {days:g} --formats {formats}\n"
            f"  {secs:.1f} s wall, {float(cpu):.0f} s CPU, {int(written) / 1e6:,.0f} MB written "
            f"({int(written) / 1e6 / secs:,.0f} MB/s), peak RSS {rss:.0f} MB main / "
            f"{float(worker_rss):.0f} MB worker"
        )
        for ln in lines[1:]:
            if ln.strip():
                fmt, n, size = ln.split()
                print(f"    {fmt:<13} {int(n):>8,} files {int(size) / 1e6:>10,.1f} MB")
        shutil.rmtree(out, ignore_errors=True)
