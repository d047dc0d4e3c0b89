"""``synthesize``: model -> schedule -> history -> every output format + ground truth.

Output layout under ``out``::

    cluster_job_log  cluster_machine_list  cluster_gpu_util  cluster_cpu_util  cluster_mem_util
    yarn/yarn-resourcemanager.log[.N[.gz]]              ResourceManager log (rolled)
    framework/<application_id>/attempt_<idx>/stdout.txt  per-attempt training logs
    ganglia/<cluster>/<host>/<metric>.csv                ganglia-web CSV exports
    ground_truth/*.parquet, manifest.json, vc_quotas.csv   what really happened

Determinism: every random draw comes from ``numpy.random.SeedSequence(seed)`` children in a
fixed order; the per-minute metrics of day ``d`` from a generator keyed by (seed, d), so the
worker processes that format days in parallel cannot change a byte.
"""

from __future__ import annotations

import json
import multiprocessing
import shutil
import time
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from philly_analyze import __version__
from philly_analyze.synth import (
    calibration,
    history,
    render_ganglia,
    render_philly,
    rescale,
    truth,
)
from philly_analyze.synth.clock import Clock
from philly_analyze.synth.cluster import SynthCluster, build_cluster
from philly_analyze.synth.schedule import POLICY, Schedule, schedule
from philly_analyze.synth.timeseries import MinuteModel
from philly_analyze.synth.workload import JobPlan, Window, attempt_cap, sample_workload
from philly_analyze.timeutil import DEFAULT_TIMEZONE
from philly_analyze.vcquota import STORE_QUOTA_FILE, write_quotas

FORMATS = ("philly", "yarn", "framework", "ganglia", "philly-jobs")
#: What ``--formats`` writes by default (philly-jobs is part of philly).
DEFAULT_FORMATS = FORMATS[:4]
#: Everything ``synthesize`` may create directly under ``out`` (``--force`` removes only these).
OUTPUT_NAMES = (*render_philly.FILES, "yarn", "framework", "ganglia", "ground_truth")

Progress = Callable[[str], None]


@dataclass
class SynthConfig:
    """What to synthesize (see ``philly-analyze synth --help``)."""

    jobs: int = 2000
    machines: int = 552
    days: float = 7.0
    seed: int = 0
    formats: tuple[str, ...] = DEFAULT_FORMATS
    start: str = "2017-10-03"
    timezone: str = DEFAULT_TIMEZONE
    workers: int = 2
    #: The replay policy that schedules the jobs: only ``philly`` (recorded in the manifest).
    scheduler: str = POLICY
    #: Ganglia export step in seconds; None = the finest default RRA step under the size cap.
    ganglia_step: int | None = None


@dataclass
class SynthResult:
    """What was written."""

    out: Path
    files: dict[str, list[Path]] = field(default_factory=dict)
    seconds: float = 0.0
    summary: dict[str, Any] = field(default_factory=dict)

    @property
    def bytes_written(self) -> int:
        """Size of every file written."""
        return sum(p.stat().st_size for ps in self.files.values() for p in ps)


def synthesize(out: Path, config: SynthConfig, progress: Progress | None = None) -> SynthResult:
    """Write one synthetic cluster history in ``config.formats`` under ``out``."""
    say = progress or (lambda _msg: None)
    t_start = time.perf_counter()
    _check(config)
    cal = calibration.load()
    seeds = np.random.SeedSequence(config.seed).spawn(8)
    rngs = [np.random.default_rng(s) for s in seeds]
    cluster, window, wl, sch = plan_and_schedule(cal, config, seeds, rngs, say)
    hist = history.realize(cal, cluster, window, wl, sch, rngs[3])
    clock = Clock(window)
    res = SynthResult(out=out)
    out.mkdir(parents=True, exist_ok=True)
    say("writing ground truth")
    res.files["ground_truth"] = truth.write_truth(out / "ground_truth", cal, hist)
    jobs_only = "philly-jobs" in config.formats and "philly" not in config.formats
    if "philly" in config.formats or jobs_only:
        say("writing the job log and machine list")
        render_philly.write_machine_list(out / "cluster_machine_list", hist)
        render_philly.write_job_log(out / "cluster_job_log", hist, clock, rngs[4])
    step = 0
    if "ganglia" in config.formats:
        step = config.ganglia_step or render_ganglia.choose_step(cal, hist)
        if step % 60:
            raise ValueError("the Ganglia step must be a whole number of minutes")
    if "philly" in config.formats or "ganglia" in config.formats:
        say("writing per-minute metrics")
        model = MinuteModel(hist, cal, int(seeds[5].generate_state(1)[0]))
        acc = _minute_pass(out, cal, hist, model, clock, config, step)
        if acc is not None:  # Ganglia is asked for (step > 0: the accumulator was made)
            say(f"writing ganglia exports ({step} s step)")
            res.files["ganglia"] = render_ganglia.write_ganglia(
                out / "ganglia", cal, hist, acc, step
            )
    if "philly" in config.formats:
        res.files["philly"] = [out / f for f in render_philly.FILES]
    elif jobs_only:
        res.files["philly"] = [out / f for f in render_philly.FILES[:2]]
    res.files.update(_write_logs(out, cal, hist, clock, config, rngs, say))
    res.summary = summarize(cal, hist, config, config.scheduler, step)
    manifest = out / "ground_truth" / "manifest.json"
    manifest.write_text(json.dumps(res.summary, indent=2, sort_keys=True) + "\n")
    res.files["ground_truth"].append(manifest)
    # The quotas the scheduler enforced, as a `report --vc-quotas` / `replay --quotas` file:
    # without them both infer quotas from GPU-time shares, which can differ on small traces.
    quotas = write_quotas(out / "ground_truth" / STORE_QUOTA_FILE, hist.sched.quotas)
    res.files["ground_truth"].append(quotas)
    res.seconds = time.perf_counter() - t_start
    return res


def _check(config: SynthConfig) -> None:
    """``ValueError`` for an unknown format or scheduler."""
    bad = [f for f in config.formats if f not in FORMATS]
    if bad:
        raise ValueError(f"unknown format(s) {bad}; choose from {', '.join(FORMATS)}")
    if config.scheduler != POLICY:
        raise ValueError(
            f"unknown scheduler {config.scheduler!r}: the jobs are scheduled by the replay "
            f"engine's {POLICY!r} policy (the built-in scheduler was removed)"
        )


def _write_logs(
    out: Path,
    cal: calibration.Calibration,
    hist: history.History,
    clock: Clock,
    config: SynthConfig,
    rngs: list[np.random.Generator],
    say: Progress,
) -> dict[str, list[Path]]:
    """The YARN RM logs and the framework logs, if asked for (each with its own generator,
    so adding one format does not change the bytes of another)."""
    files: dict[str, list[Path]] = {}
    if "yarn" in config.formats:
        from philly_analyze.synth import render_yarn

        say("writing YARN ResourceManager logs")
        files["yarn"] = render_yarn.write_yarn(out / "yarn", cal, hist, clock, rngs[6])
    if "framework" in config.formats:
        from philly_analyze.synth import render_framework

        say("writing framework logs")
        files["framework"] = render_framework.write_framework(
            out / "framework", cal, hist, clock, rngs[7]
        )
    return files


def plan_and_schedule(
    cal: calibration.Calibration,
    config: SynthConfig,
    seeds: list[np.random.SeedSequence],
    rngs: list[np.random.Generator],
    say: Progress,
) -> tuple[SynthCluster, Window, JobPlan, Schedule]:
    """The cluster, the window, the jobs and their schedule (``synthesize``'s random streams:
    ``rngs[0]`` the cluster, ``rngs[1]`` the workload, ``seeds[2]`` the scheduler)."""
    window = Window.from_date(config.start, config.days, config.timezone)
    say("sampling the workload")
    cluster = build_cluster(cal, config.machines, rngs[0])
    wl = sample_workload(cal, cluster, window, config.jobs, rngs[1])
    say(f"scheduling {wl.num_jobs:,} jobs ({config.scheduler})")
    params = cal.section("scheduler", POLICY).get("params", {})
    sched_seed = int(seeds[2].generate_state(1)[0])
    sch = schedule(wl, cluster, window.seconds, sched_seed, params, causes=False)
    # Table 6's GPU-time shares among the jobs that finish depend on their waits: run times
    # solved again on the scheduled finishes, then scheduled again (synth/rescale.py).
    wl = rescale.after_queueing(
        cal, wl, sch.att_start, sch.att_end, window.seconds, attempt_cap(cal, window)
    )
    sch = schedule(wl, cluster, window.seconds, sched_seed, params)
    return cluster, window, wl, sch


def prepare_out(out: Path, force: bool) -> None:
    """Refuse to mix outputs: ``out`` must hold none of our outputs unless ``force``, which
    removes exactly those (never anything else)."""
    existing = [out / n for n in OUTPUT_NAMES if (out / n).exists()]
    if existing and not force:
        raise FileExistsError(
            f"{out} already holds synthesizer outputs ({existing[0].name}, ...); use --force"
        )
    for p in existing:
        if p.is_dir():
            shutil.rmtree(p)
        else:
            p.unlink()


# ----------------------------------------------------------------------- per-minute pass
_STATE: dict[str, Any] = {}


def _render_day(d: int) -> tuple[bytes, bytes, bytes, Any]:
    s = _STATE
    day = s["model"].day(d)
    csv = (b"", b"", b"")
    if s["philly"]:
        csv = render_philly.format_day(day, s["hist"], s["clock"], s["values"], s["ids"])
    sums = None
    if s["step_min"]:
        sums = render_ganglia.day_sums(day, s["model"], s["step_min"], s["cpu_sys"])
    return (*csv, sums)


def _minute_pass(
    out: Path,
    cal: calibration.Calibration,
    hist: history.History,
    model: MinuteModel,
    clock: Clock,
    config: SynthConfig,
    step: int,
) -> render_ganglia.GangliaAccumulator | None:
    """Every day's metrics, formatted (in worker processes) and written in order."""
    philly = "philly" in config.formats
    _STATE.update(
        model=model,
        hist=hist,
        clock=clock,
        philly=philly,
        values=render_philly.util_value_strings(),
        ids=pa.array(list(hist.cluster.machine_ids)),
        step_min=step // 60,
        cpu_sys=float(cal.section("host")["cpu_system_share"]),
    )
    acc = None
    if step:
        bins = -(-model.minutes // (step // 60))
        acc = render_ganglia.GangliaAccumulator(bins, model.machines, model.slots)
    names = ("cluster_gpu_util", "cluster_cpu_util", "cluster_mem_util")
    with ExitStack() as stack:
        files = [stack.enter_context(open(out / n, "wb")) if philly else None for n in names]
        for f, head in zip(files, render_philly.util_headers(model.slots), strict=True):
            if f:
                f.write(head)
        days = range(model.days)
        try:
            if config.workers > 1 and model.days > 1:
                ctx = multiprocessing.get_context("fork")
                with ctx.Pool(min(config.workers, model.days)) as pool:
                    _consume(_bounded_map(pool, days, config.workers), files, acc)
            else:
                _consume(map(_render_day, days), files, acc)
        finally:
            _STATE.clear()
    return acc


def _bounded_map(pool: Any, items: range, ahead: int) -> Iterator[Any]:
    """``pool.imap`` with back-pressure: at most ``ahead`` days in flight, so formatted days
    never pile up in memory when writing is slower than formatting."""
    pending: deque[Any] = deque()
    it = iter(items)
    for item in it:
        pending.append(pool.apply_async(_render_day, (item,)))
        if len(pending) >= ahead:
            break
    while pending:
        yield pending.popleft().get()
        nxt = next(it, None)
        if nxt is not None:
            pending.append(pool.apply_async(_render_day, (nxt,)))


def _consume(results: Any, files: list[Any], acc: Any) -> None:
    for gpu, cpu, mem, sums in results:
        for f, data in zip(files, (gpu, cpu, mem), strict=True):
            if f:
                f.write(data)
        if acc is not None and sums is not None:
            acc.add(sums)


def summarize(
    cal: calibration.Calibration,
    hist: history.History,
    config: SynthConfig,
    scheduler: str,
    step: int,
) -> dict[str, Any]:
    """Parameters and headline numbers of the run (ground_truth/manifest.json)."""
    wl = hist.wl
    cfg = asdict(config)
    cfg["formats"] = list(config.formats)
    del cfg["workers"]  # does not change a byte of the output, so not part of it
    return {
        "generator": f"philly-analyze {__version__} synth",
        "config": cfg,
        "scheduler": scheduler,
        "window": {
            "start_utc_epoch": hist.window.start_epoch,
            "seconds": hist.window.seconds,
            "timezone": hist.window.timezone,
        },
        "cluster": {
            "machines": hist.cluster.num_machines,
            "gpus": hist.cluster.total_gpus,
            "mislisted_machines": int((hist.cluster.gpus != hist.cluster.listed_gpus).sum()),
        },
        "jobs": wl.num_jobs,
        "carried_over_jobs": wl.carried,
        "attempts_started": len(hist.ra),
        "vc_quotas": hist.sched.quotas,
        "duration_scales": wl.scales,
        "ganglia_step_seconds": step,
        "rm_restarts": [{"window_second": a, "cluster_timestamp": b} for a, b in hist.restarts],
        "model": {
            "size_probs": dict(
                zip(map(str, cal.sizes.tolist()), np.round(cal.size_probs, 6).tolist(), strict=True)
            ),
            "extra_failures_mean": round(cal.extra_failures_mean, 6),
        },
    }
