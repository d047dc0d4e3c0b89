"""The synthesizer's load against real Philly: the per-minute active-server share of a
synthesized history beside the real node sequence (fast, 14 days), and the full-size round trip
of queueing delay and run time (slow).

Tolerance of the fast test: a synthesized two-week window must look like *some* two-week
window of the real sequence. Its mean, quartiles and the spread of its hour-of-day profile are
compared with the range those statistics take over every 14-day window of the real sequence
(slid by a day: mean 0.654-0.841, median 0.648-0.857), widened by 0.03 (one server in 150 is
0.007 of the share). Measured at this size over seeds 0-4: means 0.72-0.83, medians
0.73-0.81, hourly spreads 0.02-0.05, all inside. The upper tail is not compared here: on 150
servers the largest real sweeps (up to 554 jobs at once) fill the cluster for hours, so some
seeds reach every server busy (p95 of 1.0); the full-size slow test checks the tail.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from philly_analyze.analysis.common import BUCKET_LABELS
from philly_analyze.synth import calcheck, occupancy, realfit
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
def two_weeks(tmp_path_factory: pytest.TempPathFactory) -> pd.Series:
    out = tmp_path_factory.mktemp("load")
    synthesize(out, SynthConfig(jobs=JOBS, machines=MACHINES, days=DAYS, seed=3, formats=()))
    return occupancy.from_ground_truth(out / "ground_truth")


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
    # the first hour is busy: 0.51 of the servers here (0.73 over the two weeks), against
    # 0.009 with warm_start = false in the data file (the cluster would start empty).
    assert two_weeks.iloc[:60].mean() > 0.4


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
