"""The synthesizer's load calibration at the public trace's size: ``synth --jobs 117325
--machines 552 --days 75 --formats philly-jobs`` (seed 0, the CLI's default), the job log
ingested with the real parser, queueing delay by GPU bucket through the report's queueing
section beside the targets, run time, and the per-minute active-server share beside the real
Philly node sequence (when ``../shared/reference`` is present). Prints wall and CPU seconds of
the round trip. Outputs are deleted afterwards."""

from __future__ import annotations

import os
import resource
import shutil
import time
from pathlib import Path

from bench._util import SCRATCH

REFERENCE = Path(__file__).resolve().parent.parent.parent / "shared" / "reference" / "philly"


def run() -> None:
    from philly_analyze.synth.calcheck import format_round_trip, round_trip
    from philly_analyze.synth.realfit import node_share

    out = SCRATCH / "synth_queueing"
    shutil.rmtree(out, ignore_errors=True)
    print(f"cores: {os.cpu_count()}")
    print("--jobs 117325 --machines 552 --days 75 --seed 0 --formats philly-jobs, ingest, report")
    t0 = time.perf_counter()
    r0 = resource.getrusage(resource.RUSAGE_SELF)
    rt = round_trip(out, 117325, 552, 75, seed=0)
    r1 = resource.getrusage(resource.RUSAGE_SELF)
    secs = time.perf_counter() - t0
    cpu = (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)
    real = None
    if REFERENCE.exists():
        real = node_share(REFERENCE).set_index("time")["share"]
    else:
        print("(../shared/reference/philly absent: no real active share to compare)")
    print(format_round_trip(rt, real))
    print(f"round trip: {secs:.1f} s wall, {cpu:.0f} s CPU")
    shutil.rmtree(out, ignore_errors=True)
