"""The synthesizer's load against real Philly: the per-minute active-server share of a
synthesized history beside the real node sequence (fast, 14 days), and the full-size round trip
of queueing delay and run time (slow).

Tolerance of the fast test: a synthesized two-week window must look like *some* two-week
window of the real sequence. Its mean, quartiles and the spread of its hour-of-day profile are
compared with the range those statistics take over every 14-day window of the real sequence
(slid by a day: mean 0.654-0.841, median 0.648-0.857), widened by 0.03 (one server in 150 is
0.007 of the share); the shape of its hour-of-day profile with the real windows' shapes.
Measured at this size over seeds 0-4: means 0.71-0.80, medians 0.72-0.79, hourly spreads
0.02-0.05, hour-of-day shape 0.017-0.035 from the real one (real windows: up to 0.039), all
inside. The upper tail is not compared here: on 150 servers the largest real sweeps (up to
554 jobs at once) fill the cluster for hours, so some seeds have every server busy (seeds 1
and 2: 1,185 and 1,506 of 20,160 minutes, p95 of 1.0). At full size it is bounded, a known
gap: the synthesized history has every server busy for 4,062 minutes (p95 0.984) where the
real cluster never passed 0.936 (p95 0.898) (docs/synth.md, "Load and queueing").

The fast tests also check the waiting the calibration promises at this size, with numbers
worked out from the data file (startup latency, borrowing cap); the slow test checks issue
17's targets at full size.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from philly_analyze.analysis.common import BUCKET_LABELS
from philly_analyze.synth import calcheck, calibration, occupancy, realfit
from philly_analyze.synth.run import SynthConfig, synthesize
from tests.conftest import SHOW

DAYS = 14
MACHINES = 150
#: The full-size job density (117,325 jobs on 552 servers over 75 days), at this size.
JOBS = round(117325 * MACHINES / 552 * DAYS / 75)
MARGIN = 0.03


def _window_stats(share: pd.Series) -> dict[str, float]:
    s = occupancy.summary(share)
    return {
        "mean": s["mean"],
        **{f"p{round(q * 100)}": v for q, v in s["quantiles"].items()},
        "hour_spread": float(s["by_hour"].max() - s["by_hour"].min()),
    }


def _real_ranges(real: pd.Series) -> pd.DataFrame:
    days = pd.DatetimeIndex(real.index).normalize().unique()
    rows = []
    for d0 in days[: len(days) - DAYS + 1]:
        w = real[(real.index >= d0) & (real.index < d0 + pd.Timedelta(days=DAYS))]
        rows.append(_window_stats(w))
    return pd.DataFrame(rows).agg(["min", "max"])


@pytest.fixture(scope="module")
def two_weeks_truth(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The ground truth of a two-week, 150-server history at the full-size job density. Seed 4:
    a busy stretch makes 25 jobs of more than 4 GPUs wait 5-20 minutes for the scheduler (seed
    3: 6), enough for a single locality timer to show (test_no_cliff_at_the_locality_timer)."""
    out = tmp_path_factory.mktemp("load")
    synthesize(out, SynthConfig(jobs=JOBS, machines=MACHINES, days=DAYS, seed=4, formats=()))
    return out / "ground_truth"


@pytest.fixture(scope="module")
def two_weeks(two_weeks_truth: Path) -> pd.Series:
    return occupancy.from_ground_truth(two_weeks_truth)


def test_active_share_looks_like_a_real_two_week_window(
    two_weeks: pd.Series, reference: Path
) -> None:
    real = realfit.node_share(reference / "philly").set_index("time")["share"]
    ranges = _real_ranges(real)
    got = _window_stats(two_weeks)
    for key in ("mean", "p25", "p50", "hour_spread"):
        value = got[key]
        lo, hi = ranges[key].loc["min"], ranges[key].loc["max"]
        if key == "hour_spread":
            lo = 0.0  # a flatter daily profile than the flattest real window is fine
        assert lo - MARGIN <= value <= hi + MARGIN, (key, value, lo, hi)


def test_window_opens_on_a_busy_cluster(two_weeks: pd.Series) -> None:
    # Warm start: the jobs of the lead-in still running at the window's start are there, so
    # the first hour is busy: 0.63 of the servers here (0.75 over the two weeks), against
    # 0.011 with warm_start = false in the data file (the cluster would start empty).
    assert two_weeks.iloc[:60].mean() > 0.4


def test_no_cliff_at_the_locality_timer(two_weeks_truth: Path) -> None:
    """Figure 3 of a synthesized history had a cliff at exactly 10 minutes for 5-8 and >8 GPU
    jobs: one locality timer for every job (issue 17). With per-job waits (the data file's
    ``locality_wait_spread``) no more of these jobs start at the median wait than nearby.

    Measured on the scheduler's own wait (first start - submit - startup latency: the latency
    would blur a cliff in the report's delay): of this history's 284 jobs of more than 4 GPUs,
    25 wait 300-1,200 s, 0 within 5 s of 600 s (0.28 expected at a flat density); with
    ``locality_wait_spread = 0`` in the data file, 9 of the 12 that wait 300-1,200 s do. At
    20,000 jobs on the same cluster (seeds 0 and 1): 2 of 928 and of 1,027 with the spread
    (0.64 expected at a flat density), 34 and 17 without."""
    params = calibration.load().section("scheduler", "philly")["params"]
    timer = float(params["locality_wait_min"]) * 60
    jobs = pd.read_parquet(two_weeks_truth / "jobs.parquet")
    jobs = jobs[jobs.first_start.notna() & ~jobs.carried_over & (jobs.num_gpus > 4)]
    wait = (jobs.first_start - jobs.submit_time).dt.total_seconds() - jobs.startup_s
    around = int(((wait >= timer / 2) & (wait < 2 * timer)).sum())
    assert around >= 15  # enough jobs wait that long for a cliff to show
    at_timer = int((np.abs(wait - timer) <= 5).sum())
    assert at_timer <= 2, (at_timer, around)


def _real_shape_gaps(real: pd.Series) -> tuple[list[float], list[float]]:
    """Over every 14-day window of the real sequence (slid by a day): how far the shapes of
    its hour-of-day and day-of-week profiles are from the whole sequence's
    (``occupancy.shape_gap``). Measured: hour of day at most 0.039 (median 0.022), day of week
    at most 0.243 (median 0.060)."""
    whole = occupancy.summary(real)
    days = pd.DatetimeIndex(real.index).normalize().unique()
    hour, weekday = [], []
    for d0 in days[: len(days) - DAYS + 1]:
        w = occupancy.summary(
            real[(real.index >= d0) & (real.index < d0 + pd.Timedelta(days=DAYS))]
        )
        hour.append(occupancy.shape_gap(w["by_hour"], whole["by_hour"]))
        weekday.append(occupancy.shape_gap(w["by_weekday"], whole["by_weekday"]))
    return hour, weekday


def test_daily_profile_has_the_real_shape(two_weeks: pd.Series, reference: Path) -> None:
    """The hour-of-day profile's shape (each hour relative to the window's mean) is as close to
    the real sequence's as every real two-week window's is (at most 0.039; seeds 0-4 of this
    fixture's size: 0.017-0.035). The day-of-week profile of two weeks rests on two days per
    weekday (real two-week windows are up to 0.24 off the whole sequence's): it is compared at
    full size only."""
    real = realfit.node_share(reference / "philly").set_index("time")["share"]
    hour_gaps, _ = _real_shape_gaps(real)
    want = occupancy.summary(real)["by_hour"]
    got = occupancy.shape_gap(occupancy.summary(two_weeks)["by_hour"], want)
    assert got <= max(hour_gaps), (got, max(hour_gaps))


def test_every_job_waits_its_startup_latency(two_weeks_truth: Path) -> None:
    """The calibration's startup latency is log-normal, median 180 s, log sd 1
    (``[workload.startup]``), and the scheduler sees a job only after it: every job that ran
    waited at least its latency, so the median queueing delay is at least the latencies'
    median. Worked out: over about 5,700 jobs the sample median of a log-normal with log sd 1
    has a standard error of 1.2533 / sqrt(5,700) = 0.017 in log terms, so it lies above
    180 x exp(-5 x 0.017) = 165 s; the queueing delays only add to it."""
    jobs = pd.read_parquet(two_weeks_truth / "jobs.parquet")
    ran = jobs[jobs.first_start.notna() & ~jobs.carried_over]
    delay = (ran.first_start - ran.submit_time).dt.total_seconds()
    assert len(ran) > 5000
    assert (delay >= ran.startup_s - 1).all()  # whole seconds: a start floored, at most 1 s
    assert np.median(ran.startup_s) >= 165
    assert np.median(delay) >= 165


def test_borrowing_stops_at_its_cap(two_weeks_truth: Path) -> None:
    """No VC ever holds more than its quota plus the borrowing cap, and the cap binds: some
    VC reaches it (over quota, waiting jobs are held back by it). Worked out for this
    cluster: ``borrow_limit`` x the cluster's GPUs, rounded down (at least one 8-GPU server:
    ``sim.policies.philly``): 0.035 x 678 = 23.7 -> 23 GPUs beyond the quota."""
    cal = calibration.load()
    limit = float(cal.section("scheduler", "philly")["params"]["borrow_limit"])
    machines = pd.read_parquet(two_weeks_truth / "machines.parquet")
    total = int(machines.num_gpus.sum())
    assert total == 678
    extra = max(int(limit * total), 8)
    assert extra == 23
    quotas = pd.read_csv(two_weeks_truth / "vc_quotas.csv").set_index("vc").gpus
    att = pd.read_parquet(two_weeks_truth / "attempts.parquet").merge(
        pd.read_parquet(two_weeks_truth / "jobs.parquet", columns=["job_id", "vc"]), on="job_id"
    )
    peak = {}
    for vc, a in att.groupby("vc"):
        # Sweep over starts (+GPUs) and ends (-GPUs), ends first at equal times.
        t = np.r_[a.start_time.astype("int64"), a.end_time.dropna().astype("int64")]
        d = np.r_[a.num_gpus, -a.num_gpus[a.end_time.notna()]]
        order = np.lexsort((d, t))
        peak[vc] = int(np.cumsum(d[order]).max())
    over = {vc: peak[vc] - int(quotas.get(vc, 0)) for vc in peak}
    assert max(over.values()) == extra, over


# ----------------------------------------------------------------------------- slow
#: Issue 17's targets, pinned here rather than read from ``synth_calibration.toml`` (the file
#: that drives the generator): recomputations of the published trace, over its jobs that ran,
#: with the official notebook's definitions (queueing delay = first start - submit; run time =
#: last end - first start): mean queueing delay about 3,760 s, median about 189 s, run-time
#: median about 874 s; each to be met within a factor of 1.5.
QUEUE_MEAN_S = 3760
QUEUE_MEDIAN_S = 189
RUN_MEDIAN_S = 874
FACTOR = 1.5
#: Tolerances of the paper's tables, as the 24,000-job round trip (test_synth_roundtrip.py):
#: Table 3 cells and Table 6/7 shares, in points.
TABLE3_TOL, TABLE6_TOL, TABLE7_TOL = 3.0, 2.0, 2.0


def _within(value: float, target: float) -> bool:
    return target / FACTOR <= value <= target * FACTOR


def _paper(reference: Path, name: str) -> pd.DataFrame:
    return pd.read_csv(reference / "paper" / name)


def _table3_gaps(truth: Path, reference: Path) -> pd.DataFrame:
    """Table 3 of the ground truth beside the paper's: per cell (size, status) the mean over
    its jobs (those with utilization minutes in the window) of their mean utilization."""
    jobs = pd.read_parquet(truth / "jobs.parquet")
    jobs = jobs[jobs.util_measurable & jobs.status.notna()]
    rows = []
    for _, r in _paper(reference, "table3_gpu_util_by_size_status.csv").iterrows():
        size = str(r["job_size"])
        d = jobs if size == "all" else jobs[jobs.num_gpus == int(size)]
        for st in ("passed", "killed", "unsuccessful", "all"):
            got = float((d if st == "all" else d[d.status == st]).util_mean.mean())
            rows.append((f"{size} GPUs {st}", got, float(r[st])))
    return _gaps(rows)


def _table7_gaps(truth: Path, reference: Path) -> pd.DataFrame:
    """Each failure reason's share of the ground truth's failed attempts beside the paper's
    share of trials (%)."""
    att = pd.read_parquet(truth / "attempts.parquet", columns=["outcome", "failure_reason"])
    shares = att[att.outcome == "failed"].failure_reason.value_counts(normalize=True) * 100
    paper = _paper(reference, "table7_failures.csv")
    want = paper.set_index("failure_reason").trials / paper.trials.sum() * 100
    return _gaps([(r, float(shares.get(r, 0.0)), float(w)) for r, w in want.items()])


def _gaps(rows: Sequence[tuple[Hashable, float, float]]) -> pd.DataFrame:
    df = pd.DataFrame(rows, columns=["cell", "got", "paper"]).set_index("cell")
    df["gap"] = (df.got - df.paper).abs()  # NaN (an empty cell) fails every <= below
    return df


def _worst(df: pd.DataFrame) -> str:
    i = int(df.gap.fillna(np.inf).to_numpy().argmax())  # the first largest, as idxmax
    cell, row = df.index[i], df.iloc[i]
    return f"largest gap {row['gap']:.2f} ({cell}: {row['got']:.2f} vs {row['paper']:.2f})"


@pytest.mark.slow
def test_full_size_round_trip(
    tmp_path_factory: pytest.TempPathFactory, reference: Path, record_property: Any
) -> None:
    """The default full size (117,325 jobs, 552 servers, 75 days, seed 0) through the job log,
    the ingest and the report: issue 17's targets, with Tables 3, 6 and 7 in tolerance. One test,
    so the round trip (about 45 s) runs once under xdist. Its table is shown after the run
    (conftest.SHOW).

    Table 6 comes from the report's status section on the ingested job log. Tables 3 and 7 need
    the per-minute utilization files and the framework logs, which are 9.6 GB at this size
    (docs/synth.md): they come from the ground truth here, so they check the synthesizer's
    sampling (the utilization rescaling, the failure-reason chain) at full size, and the
    24,000-job round trip checks them through the parsers."""
    out = tmp_path_factory.mktemp("fullsize")
    rt = calcheck.round_trip(out, 117325, 552, 75, seed=0)
    real = realfit.node_share(reference / "philly").set_index("time")["share"]
    truth = out / "ground_truth"
    t3, t7 = _table3_gaps(truth, reference), _table7_gaps(truth, reference)
    record_property(
        SHOW,
        calcheck.format_round_trip(rt, real)
        + f"\nTable 3 (ground truth): {_worst(t3)}\nTable 7 (ground truth): {_worst(t7)}",
    )
    q = rt.queueing
    assert _within(q["mean_s"].loc["all"], QUEUE_MEAN_S), q.loc["all"]
    assert _within(q["p50_s"].loc["all"], QUEUE_MEDIAN_S), q.loc["all"]
    # Figure 3's ordering: larger jobs wait longer (mean, median and p90).
    for col in ("mean_s", "p50_s", "p90_s"):
        assert q.loc[list(BUCKET_LABELS), col].is_monotonic_increasing, col
    assert _within(rt.run_median_s, RUN_MEDIAN_S), rt.run_median_s
    t6 = _paper(reference, "table6_final_status.csv").set_index("status")
    for st in ("passed", "killed", "unsuccessful"):
        for col in ("jobs_pct", "gpu_time_pct"):
            got, want = rt.table6[col].loc[st], float(t6[col].loc[st])
            assert got == pytest.approx(want, abs=TABLE6_TOL), (st, col)
    assert (t3.gap <= TABLE3_TOL).all(), t3[~(t3.gap <= TABLE3_TOL)]
    assert (t7.gap <= TABLE7_TOL).all(), t7[~(t7.gap <= TABLE7_TOL)]
    _check_active_share(rt.active, real)


def _check_active_share(got_share: pd.Series, real: pd.Series) -> None:
    """A whole run of real length against the real sequence: mean within 0.03, quartiles
    within 0.06; its hour-of-day profile as close in shape as every real two-week window's,
    its day-of-week profile as close as half of them (a 75-day run averages over ten weeks);
    and the top of the distribution, a known gap (docs/synth.md, *Load and queueing*): the
    real cluster never had every server active (largest share 0.936), the synthesized history
    has busy stretches that fill every server (seeds 0-4 at full size: 142-6,467 of its
    108,000 minutes). This bounds the gap at 7% of the minutes, so it cannot grow unnoticed."""
    got, want = occupancy.summary(got_share), occupancy.summary(real)
    assert got["mean"] == pytest.approx(want["mean"], abs=MARGIN)
    for k in (0.25, 0.5, 0.75):
        assert got["quantiles"][k] == pytest.approx(want["quantiles"][k], abs=2 * MARGIN)
    hour_gaps, weekday_gaps = _real_shape_gaps(real)
    assert occupancy.shape_gap(got["by_hour"], want["by_hour"]) <= max(hour_gaps)
    assert occupancy.shape_gap(got["by_weekday"], want["by_weekday"]) <= np.median(weekday_gaps)
    assert want["all_active_minutes"] == 0
    assert got["all_active_minutes"] <= 0.07 * got["minutes"]
