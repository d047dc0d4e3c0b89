"""The MuxFlow model's paper scenario: 20,000 online GPUs, one simulated day at one-minute
resolution, ~130k synthetic offline jobs (target: under 60 s on 2 cores). Each policy runs in a
fresh process; printed: wall and CPU seconds, peak RSS, cores and the load average when it
started (other work on the machine inflates wall time, not CPU time).
Set PHILLY_BENCH_MUXFLOW_GPUS for a smaller run."""

from __future__ import annotations

import os

from bench._util import python_measured

GPUS = int(os.environ.get("PHILLY_BENCH_MUXFLOW_GPUS", "20000"))

CODE = """
import sys, time
from philly_analyze.sim.sharing.scenario import paper_config, paper_jobs
from philly_analyze.sim.sharing.simulate import simulate_sharing
cfg = paper_config(gpus=int(sys.argv[1]))
jobs = paper_jobs(cfg, seed=0)
c0 = time.process_time()
r = simulate_sharing(jobs, cfg, sys.argv[2], seed=0, minutes=cfg.paper.minutes)
m = r.metrics
print(f"{len(jobs)} {time.process_time() - c0:.2f} {r.timing['solver_seconds']:.2f} "
      f"{m['gpu_util_online']:.4f} {m['sm_activity_online']:.4f} {m['gpu_memory_online']:.4f} "
      f"{m['slo_violation_fraction']:.4f}")
"""


CLI = """
import io, contextlib, time
from philly_analyze.cli import main
with contextlib.redirect_stdout(io.StringIO()):
    main(["replay", "--policy", "muxflow", "--scenario", "paper", "--format", "json", "-q"],
         standalone_mode=False)
print(f"{time.process_time():.2f}")
"""


def run() -> None:
    print(f"paper scenario: {GPUS:,} online GPUs, 1,440 one-minute steps")
    for policy in ("muxflow", "mps-naive", "dedicated"):
        load = os.getloadavg()[0]
        secs, rss, out = python_measured(CODE, str(GPUS), policy)
        jobs, cpu, solver, util, sm, mem, viol = out.split()
        print(
            f"{policy:10s} {secs:6.1f} s wall, {float(cpu):6.1f} s CPU (simulation; matching "
            f"solver {float(solver):.1f} s), peak RSS {rss:.0f} MB, {os.cpu_count()} cores, "
            f"load {load:.1f} | {int(jobs):,} jobs, util {float(util):.1%}, SM {float(sm):.1%}, "
            f"memory {float(mem):.1%}, SLO-violating minutes {float(viol):.2%}",
            flush=True,
        )
    if GPUS == 20000:  # the paper scenario's size: the CLI runs the full one
        load = os.getloadavg()[0]
        secs, rss, out = python_measured(CLI)
        print(
            f"whole process `philly-analyze replay --policy muxflow --scenario paper`: "
            f"{secs:.1f} s wall, {float(out.split()[-1]):.1f} s CPU, peak RSS {rss:.0f} MB, "
            f"{os.cpu_count()} cores, load {load:.1f}",
            flush=True,
        )
    else:
        print(
            f"(whole-process `replay --scenario paper` not measured: it runs 20,000 GPUs, not {GPUS:,})"
        )
