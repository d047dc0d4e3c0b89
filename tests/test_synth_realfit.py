"""The load parameters derived from real Philly data (``synth/realfit.py``), the arrival model
that uses them (``synth/arrivals.py``) and the active-node share (``synth/occupancy.py``).

Hand-made inputs with the answers worked out in comments; and, when ``../shared/reference``
is present, the derivation re-run on the real files must give the calibration file's numbers.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from philly_analyze.synth import calibration, realfit
from philly_analyze.synth.arrivals import day_factors, group_size_law
from philly_analyze.synth.occupancy import active_share, summary


def test_groups_join_same_size_arrivals_within_the_gap() -> None:
    # t:    0  5  12 30 31 31 100   gpus: 1 1 1 1 8 8 1
    # gaps:    5  7  18 1  0  69     same size and <= 10 s joins: [0,5,12] [30] [31,31] [100]
    df = pd.DataFrame(
        {"t": [0, 5, 12, 30, 31, 31, 100], "gpus": [1, 1, 1, 1, 8, 8, 1], "duration": 1}
    )
    g = realfit.groups(df)
    assert g["t"].tolist() == [0, 30, 31, 100]
    assert g["gpus"].tolist() == [1, 1, 8, 1]
    assert g["jobs"].tolist() == [3, 1, 2, 1]
    p = realfit.group_params(df)
    # 1-GPU groups: sizes 3, 1, 1 -> bins [1]: 2/3, [3-4]: 1/3; 5-8 bucket: one group of 2.
    assert p["group_size_shares"][0][:3] == [
        pytest.approx(2 / 3, abs=1e-6),
        0.0,
        pytest.approx(1 / 3, abs=1e-6),
    ]
    assert p["group_size_shares"][2][1] == 1.0
    # Gaps inside groups: 5, 7 (sizes 1) and 0 (8 GPUs): quantiles 0, 2.5, 5, 6, 7.
    assert p["group_gap_quantiles"] == [0.0, 2.5, 5.0, 6.0, 7.0]
    # The last bin ends at the largest group seen, or at its own start when none is larger.
    assert p["group_size_bins"][-1] == 257


def test_origin_is_the_most_common_offset() -> None:
    # Two jobs match with offset 1000 s from 2017-01-01 00:00, one coincidence with another.
    rf = pd.DataFrame({"t": [0.0, 50.0, 70.0], "gpus": [1, 2, 1], "duration": [5000.0, 7000, 9000]})
    base = pd.Timestamp("2017-01-01")
    po = pd.DataFrame(
        {
            "submit": [base + pd.Timedelta(seconds=x) for x in (1000, 1050, 4242)],
            "num_gpus": [1, 2, 1],
            "duration": [5000.0, 7000, 9000],
        }
    )
    assert realfit.rfold_origin(rf, po) == base + pd.Timedelta(seconds=1000)


def test_weekly_rate_and_day_factors_hand_worked() -> None:
    # One week from Monday 2017-10-02: every day a 1-GPU group at 10:00, and on Monday a
    # 2-GPU group at 10:30. Hour-of-week counts: Monday 10h 2, the other days' 10h 1 (each slot
    # occurs once): 8 groups, mean 8/168 per slot, so rates 2 / (8/168) = 42 and 21.
    origin = pd.Timestamp("2017-10-02 00:00")
    t = [d * 86400 + 10 * 3600 for d in range(7)] + [10 * 3600 + 1800]
    df = pd.DataFrame({"t": t, "gpus": [1] * 7 + [2], "duration": 1}).sort_values("t")
    p = realfit.weekly_params(df, origin, origin, origin + pd.Timedelta(days=7))
    rate = np.array(p["hour_of_week"])
    assert rate[10] == pytest.approx(42)
    assert [rate[24 * d + 10] for d in range(1, 7)] == pytest.approx([21] * 6)
    assert rate.sum() == pytest.approx(168)
    # Expected per day from the profile: Monday 42 of 168 -> 2 of 8 groups, other days 1: as
    # observed, so every day factor is 1 (and a constant series has no correlation: 0).
    assert p["day_factor_quantiles"] == [1.0] * 7
    assert p["day_factor_autocorr"] == 0.0


def test_group_size_law_spreads_each_bin_evenly() -> None:
    arr = {"group_size_bins": [1, 2, 3, 5, 6], "group_size_shares": [[0.5, 0.2, 0.2, 0.1]]}
    values, p = group_size_law(arr, 0)
    # Bins [1], [2], [3-4], [5-6]: 0.5, 0.2, 0.1 + 0.1, 0.05 + 0.05.
    assert values.tolist() == [1, 2, 3, 4, 5, 6]
    assert p.tolist() == pytest.approx([0.5, 0.2, 0.1, 0.1, 0.05, 0.05])


def test_day_factors_keep_the_quantiles_and_the_correlation() -> None:
    arr = {"day_factor_quantiles": [0.1, 0.5, 0.8, 1.0, 1.2, 1.6, 2.0], "day_factor_autocorr": 0.6}
    f = day_factors(arr, 20_000, np.random.default_rng(3))
    # Through a Gaussian copula the factors' quantiles are the table's (at its probabilities).
    q = np.quantile(f, [0.05, 0.25, 0.5, 0.75, 0.95])
    assert q == pytest.approx([0.5, 0.8, 1.0, 1.2, 1.6], abs=0.03)
    assert f.min() >= 0.1 and f.max() <= 2.0
    # Lag-1 correlation of the normal scores is the AR(1) coefficient.
    from scipy import stats

    z = stats.norm.ppf(np.clip(stats.rankdata(f) / (len(f) + 1), 1e-9, 1 - 1e-9))
    assert np.corrcoef(z[:-1], z[1:])[0, 1] == pytest.approx(0.6, abs=0.03)


def test_active_share_hand_worked() -> None:
    # 3 servers, 3 minutes. m0: [0, 120) and [60, 150) -> union [0, 150): minutes 0, 1, 2
    # (start <= 60 m < end). m1: [30, 61) -> minute 1 only. m2: idle. A still-running
    # attempt (end -1) on m2 from 130 s -> minute 2 (after 130 s: 180 is past the window).
    share = active_share(
        np.array([0, 0, 1, 2]), np.array([0, 60, 30, 130]), np.array([120, 150, 61, -1]), 3, 3
    )
    assert share.tolist() == pytest.approx([1 / 3, 2 / 3, 1 / 3])
    s = summary(pd.Series(share, index=pd.date_range("2017-10-03", periods=3, freq="min")))
    assert s["mean"] == pytest.approx(4 / 9)


def test_realfit_reproduces_the_calibration_file(reference: Path) -> None:
    """Re-deriving from ../shared/reference/philly gives the data file's numbers (rounded as
    stored)."""
    got = realfit.derive_all(reference / "philly")
    raw = calibration.load().raw
    for table, values in got.items():
        stored = raw
        for part in table.split("."):
            stored = stored[part]
        for key, value in values.items():
            want = stored[key]
            if isinstance(value, list) and not isinstance(value[0], str):
                np.testing.assert_allclose(
                    np.array(value, dtype=float), np.array(want, dtype=float), atol=1e-6
                )
            else:
                assert value == want, (table, key)


def test_real_sequence_is_what_the_docs_say(reference: Path) -> None:
    """The facts docs/synth.md quotes about the real node sequence."""
    real = realfit.node_share(reference / "philly").set_index("time")["share"]
    s = summary(real)
    assert s["mean"] == pytest.approx(0.739, abs=0.001)
    assert s["quantiles"][0.5] == pytest.approx(0.752, abs=0.001)
    # The real daily profile is flat: every hour's mean within 0.03 of the overall mean.
    assert np.abs(s["by_hour"] - s["mean"]).max() < 0.03
    assert math.isclose(real.max(), 0.9357, abs_tol=1e-3)
