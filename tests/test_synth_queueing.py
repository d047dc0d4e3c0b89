"""The synthesizer's load against real Philly: the per-minute active-server share of a
synthesized history beside the real node sequence (fast, 14 days), and the full-size round trip
of queueing delay and run time (slow).

Tolerance of the fast test: a synthesized two-week window must look like *some* two-week
window of the real sequence. Its mean, quartiles and the spread of its hour-of-day profile are
compared with the range those statistics take over every 14-day window of the real sequence
(slid by a day: mean 0.654-0.841, median 0.648-0.857), widened by 0.03 (one server in 150 is
0.007 of the share). Measured at this size over seeds 0-4: means 0.73-0.79, medians
0.73-0.78, hourly spreads 0.02-0.05, all inside. The upper tail is not compared here: on 150
servers the largest real sweeps (up to 554 jobs at once) fill the cluster for hours, so some
seeds reach every server busy (p95 of 1.0). Nor is it at full size: there the synthesized
history has every server busy for 3,781 minutes (p95 0.971) where the real cluster never passed
0.936 (p95 0.898), a known gap (docs/synth.md, "Load and queueing").
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from philly_analyze.analysis.common import BUCKET_LABELS
from philly_analyze.synth import calcheck, calibration, occupancy, realfit
from philly_analyze.synth.run import SynthConfig, synthesize

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
    a busy stretch makes 22 jobs of more than 4 GPUs wait 5-20 minutes for the scheduler (seed
    3: 5), enough for a single locality timer to show (test_no_cliff_at_the_locality_timer)."""
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
        lo, hi = ranges.loc["min", key], ranges.loc["max", key]
        if key == "hour_spread":
            lo = 0.0  # a flatter daily profile than the flattest real window is fine
        assert lo - MARGIN <= value <= hi + MARGIN, (key, value, lo, hi)


def test_window_opens_on_a_busy_cluster(two_weeks: pd.Series) -> None:
    # Warm start: the jobs of the lead-in still running at the window's start are there, so
    # the first hour is busy: 0.50 of the servers here (0.79 over the two weeks), against
    # 0.008 with warm_start = false in the data file (the cluster would start empty).
    assert two_weeks.iloc[:60].mean() > 0.4


def test_no_cliff_at_the_locality_timer(two_weeks_truth: Path) -> None:
    """Figure 3 of a synthesized history had a cliff at exactly 10 minutes for 5-8 and >8 GPU
    jobs: one locality timer for every job (issue 17). With per-job waits (the data file's
    ``locality_wait_spread``) no more of these jobs start at the median wait than nearby.

    Measured on the scheduler's own wait (first start - submit - startup latency: the latency
    would blur a cliff in the report's delay): of this history's 278 jobs of more than 4 GPUs,
    22 wait 300-1,200 s, 0 within 5 s of 600 s (0.27 expected at a flat density); with
    ``locality_wait_spread = 0`` in the data file, 19 of 25 do. At 20,000 jobs on the same
    cluster (seeds 0 and 1): 0 of 933 and of 1,024 with the spread, 20 and 27 without."""
    params = calibration.load().section("scheduler", "philly")["params"]
    timer = float(params["locality_wait_min"]) * 60
    jobs = pd.read_parquet(two_weeks_truth / "jobs.parquet")
    jobs = jobs[jobs.first_start.notna() & ~jobs.carried_over & (jobs.num_gpus > 4)]
    wait = (jobs.first_start - jobs.submit_time).dt.total_seconds() - jobs.startup_s
    around = int(((wait >= timer / 2) & (wait < 2 * timer)).sum())
    assert around >= 15  # enough jobs wait that long for a cliff to show
    at_timer = int((np.abs(wait - timer) <= 5).sum())
    assert at_timer <= 2, (at_timer, around)


# ----------------------------------------------------------------------------- slow
@pytest.mark.slow
def test_full_size_queueing_and_run_time(
    tmp_path_factory: pytest.TempPathFactory, reference: Path
) -> None:
    """The default full size (117,325 jobs, 552 servers, 75 days, seed 0) through the job log,
    the ingest and the report's queueing section: the targets of issue 17."""
    out = tmp_path_factory.mktemp("fullsize")
    rt = calcheck.round_trip(out, 117325, 552, 75, seed=0)
    real = realfit.node_share(reference / "philly").set_index("time")["share"]
    print("\n" + calcheck.format_round_trip(rt, real))
    t = calcheck.targets()
    f = t["factor"]
    q = rt.queueing
    assert t["queue_mean_s"] / f <= q.loc["all", "mean_s"] <= t["queue_mean_s"] * f
    assert t["queue_median_s"] / f <= q.loc["all", "p50_s"] <= t["queue_median_s"] * f
    # Figure 3's ordering: larger jobs wait longer (mean, median and p90).
    for col in ("mean_s", "p50_s", "p90_s"):
        assert q.loc[list(BUCKET_LABELS), col].is_monotonic_increasing, col
    assert t["run_median_s"] / f <= rt.run_median_s <= t["run_median_s"] * f
    # A whole run of real length: the mean and spread of the real sequence, within 0.03.
    got, want = occupancy.summary(rt.active), occupancy.summary(real)
    assert got["mean"] == pytest.approx(want["mean"], abs=MARGIN)
    for k in (0.25, 0.5, 0.75):
        assert got["quantiles"][k] == pytest.approx(want["quantiles"][k], abs=2 * MARGIN)
    assert np.ptp(got["by_hour"]) < 0.1
