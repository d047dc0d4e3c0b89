"""The round trip that checks the synthesizer's load calibration: synthesize the published job
log, ingest it with the real parser, and measure with the report's own definitions what the
calibration targets (``[targets]`` of ``data/synth_calibration.toml``): queueing delay of the
jobs that ran (mean, median, p90 per GPU bucket: Figure 3 as percentiles), run time, Table 6
through the report's status section, and the per-minute share of active servers beside the
real Philly node sequence (distribution, its top, hour-of-day and day-of-week profiles).

Used by ``bench/synth_queueing.py`` (``make bench``) and the slow test in
``tests/test_synth_queueing.py``; both print ``format_round_trip``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from philly_analyze.analysis.common import BUCKET_LABELS
from philly_analyze.synth import calibration, occupancy

RUN_TIME_SQL = """
SELECT median(run_time_s) AS run_median_s, avg(run_time_s) AS run_mean_s,
       avg(num_gpus) AS gpus_per_job, count(*) AS jobs
FROM jobs WHERE run_time_s IS NOT NULL AND num_gpus > 0
"""
INTERVALS_SQL = """
SELECT p.machine_id, epoch(a.start_time) AS s, epoch(a.end_time) AS e
FROM (SELECT DISTINCT job_id, attempt_idx, machine_id FROM placements) p
JOIN attempts a USING (job_id, attempt_idx) WHERE a.start_time IS NOT NULL
"""


@dataclass
class RoundTrip:
    """What the round trip measured."""

    #: Per GPU bucket ("all", "1", "2-4", "5-8", ">8"): jobs, mean_s, p50_s, p90_s.
    queueing: pd.DataFrame
    run_median_s: float
    run_mean_s: float
    gpus_per_job: float
    #: Per-minute active-server share of the synthesized window (naive wall-clock index).
    active: pd.Series
    #: The report's Table 6 (rows passed, killed, unsuccessful, total): jobs_pct,
    #: gpu_time_pct and the paper's values beside them.
    table6: pd.DataFrame


def targets() -> dict[str, Any]:
    """The calibration targets (with their source) from the data file."""
    return dict(calibration.load().section("targets"))


def measure(store_path: Path, truth: Path) -> RoundTrip:
    """Measure an ingested synthetic store (``truth``: its ground_truth folder, for the
    window and the quotas the scheduler enforced)."""
    import json

    from philly_analyze.analysis import run
    from philly_analyze.store import Store

    with Store(store_path, read_only=True) as store:
        rep = run(store, sections=["queueing", "status"], vc_quotas=truth / "vc_quotas.csv")
        rt = store.df(RUN_TIME_SQL).iloc[0]
        iv = store.df(INTERVALS_SQL)
        machines = store.df("SELECT machine_id FROM machines ORDER BY machine_id").machine_id
    d = rep["queueing"].frame("delay_by_vc")
    d = d[d["vc"] == "all"].set_index("gpu_bucket").loc[["all", *BUCKET_LABELS]]
    queueing = pd.DataFrame(
        {
            "jobs": d["jobs"].astype(int),
            "mean_s": d["mean_min"] * 60,
            "p50_s": d["p50_min"] * 60,
            "p90_s": d["p90_min"] * 60,
        }
    )
    win = json.loads((truth / "manifest.json").read_text())["window"]
    index = {m: i for i, m in enumerate(machines)}
    t0 = float(win["start_utc_epoch"])
    share = occupancy.active_share(
        iv["machine_id"].map(index).to_numpy(),
        (iv["s"].to_numpy() - t0),
        np.where(iv["e"].isna(), -1, iv["e"].to_numpy() - t0),
        len(machines),
        int(win["seconds"]) // 60,
    )
    times = pd.date_range(pd.Timestamp(int(t0), unit="s", tz="UTC"), periods=len(share), freq="min")
    active = pd.Series(share, index=times.tz_convert(win["timezone"]).tz_localize(None))
    table6 = rep["status"].frame("table6").set_index("status")
    return RoundTrip(
        queueing,
        float(rt.run_median_s),
        float(rt.run_mean_s),
        float(rt.gpus_per_job),
        active,
        table6,
    )


def round_trip(out: Path, jobs: int, machines: int, days: float, seed: int) -> RoundTrip:
    """Synthesize ``--formats philly-jobs`` into ``out``, ingest the job log and machine list
    into ``out/store`` and measure."""
    from philly_analyze.ingest.pipeline import ingest_paths
    from philly_analyze.store import Store
    from philly_analyze.synth.run import SynthConfig, synthesize

    synthesize(
        out,
        SynthConfig(jobs=jobs, machines=machines, days=days, seed=seed, formats=("philly-jobs",)),
    )
    with Store(out / "store") as store:
        ingest_paths(store, [out / "cluster_job_log", out / "cluster_machine_list"])
    return measure(out / "store", out / "ground_truth")


def format_round_trip(rt: RoundTrip, real: pd.Series | None) -> str:
    """The measured numbers beside the targets and, when given, the real active share."""
    t = targets()
    f = float(t["factor"])
    q = rt.queueing
    lines = [
        f"queueing delay of jobs that ran (s), target mean {t['queue_mean_s']:,.0f} and median "
        f"{t['queue_median_s']:,.0f} within {f}x, larger jobs waiting longer:",
        f"  {'GPUs':>5} {'jobs':>8} {'mean':>9} {'p50':>8} {'p90':>9}",
    ]
    for b, r in q.iterrows():
        lines.append(
            f"  {b:>5} {int(r.jobs):>8,} {r.mean_s:>9,.0f} {r.p50_s:>8,.0f} {r.p90_s:>9,.0f}"
        )
    mean_ok = _within(q["mean_s"].loc["all"], t["queue_mean_s"], f)
    med_ok = _within(q["p50_s"].loc["all"], t["queue_median_s"], f)
    rising = {c: q.loc[list(BUCKET_LABELS), c].is_monotonic_increasing for c in q.columns[1:]}
    lines.append(
        f"  mean {_ok(mean_ok)}, median {_ok(med_ok)}; rising with size (Figure 3): "
        + ", ".join(f"{c.removesuffix('_s')} {_ok(v)}" for c, v in rising.items())
    )
    lines.append(
        f"run time (s): median {rt.run_median_s:,.0f} (target {t['run_median_s']:,.0f} within "
        f"{f}x: {_ok(_within(rt.run_median_s, t['run_median_s'], f))}), mean "
        f"{rt.run_mean_s:,.0f} (recomputed {t['run_mean_s']:,.0f}, not a target), "
        f"{rt.gpus_per_job:.2f} GPUs per job (recomputed {t['gpus_per_job']}, not a target)"
    )
    t6 = rt.table6
    lines.append(
        "Table 6 (report), % synthesized (paper): "
        + "; ".join(
            f"{st} jobs {t6['jobs_pct'].loc[st]:.2f} ({t6['paper_jobs_pct'].loc[st]:.2f}) "
            f"GPU time {t6['gpu_time_pct'].loc[st]:.2f} ({t6['paper_gpu_time_pct'].loc[st]:.2f})"
            for st in ("passed", "killed", "unsuccessful")
        )
    )
    lines.append(f"active-server share per minute: synthesized {_share(rt.active)}")
    if real is not None:
        lines.append(f"                                real Philly {_share(real)}")
        got, want = occupancy.summary(rt.active), occupancy.summary(real)
        lines.append(
            "  profile shapes (largest difference once each is taken relative to its mean): "
            f"hour of day {occupancy.shape_gap(got['by_hour'], want['by_hour']):.3f}, "
            f"day of week {occupancy.shape_gap(got['by_weekday'], want['by_weekday']):.3f}"
        )
    return "\n".join(lines)


def _within(value: float, target: float, factor: float) -> bool:
    return target / factor <= value <= target * factor


def _ok(flag: bool) -> str:
    return "ok" if flag else "MISSED"


def _share(s: pd.Series) -> str:
    sm = occupancy.summary(s)
    q = " ".join(f"p{round(k * 100)} {v:.3f}" for k, v in sm["quantiles"].items())
    h = sm["by_hour"]
    w = " ".join(f"{v:.2f}" for v in sm["by_weekday"])
    return (
        f"mean {sm['mean']:.3f}  {q}  max {sm['max']:.3f}, every server active "
        f"{sm['all_active_minutes']:,} min; hourly means {h.min():.3f}-{h.max():.3f}; "
        f"Mon-Sun {w}"
    )
