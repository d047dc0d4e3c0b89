"""The published trace's scale in every raw format, ingested from a cold store.

Input: one ``synth`` history of 117,325 jobs on 552 machines over 75 days, written in every raw
format (the published trace's five files, YARN ResourceManager logs, a framework log per
attempt, ganglia-web CSV exports: 552 hosts x 75 days, at the step synth picks for that
volume), cached in ``bench-out/full-<jobs>j-<machines>m-<days>d-s<seed>/`` (generating it takes
a few minutes; it is reused while its parameters are the same).

Each format is ingested in its own process (so its peak RSS is its own), one after the other
into one store that is empty at the start; then the whole folder in one process into another
empty store, as a user would (``ingest OUT``). Printed per step: wall and CPU seconds, peak
RSS, rows written and rows/s, MB read and MB/s; then the whole run's peak RSS against the goal
(< 4 GB) and the machine's core count. Compare the YARN and Ganglia steps' CPU ms per MB
with ``bench/rawlogs.py`` (1 GB of YARN log, 300 MB of 15 s Ganglia): for YARN per
decompressed MB (the synthesized logs are mostly ``.gz``, ~5x smaller on disk, and printed
both ways), and a coarse Ganglia export writes many per-minute rows per byte (a 10,080 s row
fills 168 minutes), so its rows per CPU second is the comparable figure there.

Set PHILLY_BENCH_FULL_JOBS / _MACHINES / _DAYS for a smaller run, and PHILLY_BENCH_FULL_STEPS
(comma-separated, of philly, yarn, framework, ganglia, all; default every one) to run only
some steps.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

from bench._util import SCRATCH, python_measured_cpu

JOBS = int(os.environ.get("PHILLY_BENCH_FULL_JOBS", "117325"))
MACHINES = int(os.environ.get("PHILLY_BENCH_FULL_MACHINES", "552"))
DAYS = float(os.environ.get("PHILLY_BENCH_FULL_DAYS", "75"))
SEED = 0
FORMATS = ("philly", "yarn", "framework", "ganglia")
#: The goal for the whole run's peak RSS (issue 14).
RSS_GOAL_MB = 4000
#: Per format: the inputs of the history it reads.
STEPS = {
    "philly": [
        "cluster_job_log",
        "cluster_machine_list",
        "cluster_gpu_util",
        "cluster_cpu_util",
        "cluster_mem_util",
    ],
    "yarn": ["yarn"],
    "framework": ["framework"],
    "ganglia": ["ganglia"],
}
#: The steps to run: the formats above, and ``all`` (the whole folder in one process).
RUN = os.environ.get("PHILLY_BENCH_FULL_STEPS", ",".join([*STEPS, "all"])).split(",")

INGEST = """
import json, sys
from philly_analyze.cli import main
try:
    main(["ingest", *sys.argv[1:-1], "--store", sys.argv[-1], "--format", "json"])
except SystemExit as e:
    if e.code:
        raise
"""


def history() -> Path:
    """The cached history (generated on first use)."""
    d = SCRATCH / f"full-{JOBS}j-{MACHINES}m-{DAYS:g}d-s{SEED}"
    if (d / "ground_truth" / "manifest.json").exists():
        return d
    from philly_analyze.synth.run import SynthConfig, prepare_out, synthesize

    tmp = d.with_suffix(".tmp")
    prepare_out(tmp, force=True)
    print(f"generating the history in {d} (once) ...", flush=True)
    synthesize(
        tmp, SynthConfig(jobs=JOBS, machines=MACHINES, days=DAYS, seed=SEED, formats=FORMATS)
    )
    shutil.rmtree(d, ignore_errors=True)
    tmp.rename(d)
    return d


def _files(paths: list[Path]) -> list[Path]:
    return [f for p in paths for f in ([p] if p.is_file() else p.rglob("*")) if f.is_file()]


def _size(paths: list[Path]) -> int:
    return sum(f.stat().st_size for f in _files(paths))


def _text_size(paths: list[Path]) -> int:
    """Bytes once decompressed: a ``.gz`` file counts its gzip trailer's ISIZE (the text's
    size mod 2^32; one member under 4 GB, as rolled logs are). The per-byte comparison with
    ``bench/rawlogs.py`` (plain text) uses this: the synthesized YARN logs are mostly gzip."""
    total = 0
    for f in _files(paths):
        if f.suffix == ".gz":
            with open(f, "rb") as fh:
                fh.seek(-4, 2)
                total += int.from_bytes(fh.read(4), "little")
        else:
            total += f.stat().st_size
    return total


def _step(label: str, inputs: list[Path], store: Path) -> tuple[float, float, float]:
    """Ingest ``inputs`` into ``store`` in a fresh process; print and return (wall s, CPU s,
    peak RSS MB)."""
    secs, rss, cpu, out = python_measured_cpu(INGEST, *map(str, inputs), str(store))
    summary = json.loads(out)
    rows = sum(summary["rows_added"].values())
    mb = _size(inputs) / 1e6
    text_mb = _text_size(inputs) / 1e6
    print(
        f"  {label:10s} {mb:9,.0f} MB  wall {secs:7.1f} s  CPU {cpu:7.1f} s  "
        f"peak RSS {rss:6.0f} MB  {rows:13,} rows  {rows / secs:11,.0f} rows/s  "
        f"{mb / secs:6.1f} MB/s  ({cpu / mb * 1000:.0f} CPU ms/MB)"
        + (
            f"; {text_mb:,.0f} MB decompressed ({cpu / text_mb * 1000:.0f} CPU ms/MB)"
            if text_mb > mb
            else ""
        ),
        flush=True,
    )
    rejected = summary["rejected"]
    errors = [s for s in summary["sources"] if s["status"] == "error"]
    if rejected or errors:
        print(f"  {'':10s} {rejected:,} rows rejected, {len(errors)} sources in error", flush=True)
    return secs, cpu, rss


def run() -> None:
    d = history()
    total = _size([d])
    print(
        f"input: {total / 1e9:.2f} GB, {JOBS:,} jobs, {MACHINES} machines, {DAYS:g} days, every "
        f"raw format; cores: {os.cpu_count()}",
        flush=True,
    )
    manifest = json.loads((d / "ground_truth" / "manifest.json").read_text())
    print(f"  Ganglia step: {manifest.get('ganglia_step_seconds')} s", flush=True)
    store = SCRATCH / "full-store"
    shutil.rmtree(store, ignore_errors=True)
    print("each format in its own process, into one cold store:", flush=True)
    peaks = []
    for label, names in STEPS.items():
        if label in RUN:
            peaks.append(_step(label, [d / n for n in names], store)[2])
    shutil.rmtree(store, ignore_errors=True)
    if "all" in RUN:
        print("the whole folder in one process, into a cold store:", flush=True)
        peaks.append(_step("all", [d], store)[2])
        shutil.rmtree(store, ignore_errors=True)
    if peaks:
        print(
            f"peak RSS: largest of the steps run {max(peaks):,.0f} MB (goal < {RSS_GOAL_MB:,} "
            f"MB: {'met' if max(peaks) < RSS_GOAL_MB else 'NOT met'})",
            flush=True,
        )
