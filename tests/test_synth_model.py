"""The synthesizer's model pieces against independent references.

Expected values come from the paper's CSVs (``../shared/reference/paper``), from pandas /
Python formatting, or are worked out by hand; never from the synthesizer's own constants.
"""

from __future__ import annotations

import csv
import itertools
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from philly_analyze.synth import calibration, textfmt
from philly_analyze.synth.clock import Clock
from philly_analyze.synth.cluster import build_cluster
from philly_analyze.synth.loss import build_curves
from philly_analyze.synth.schedule import schedule
from philly_analyze.synth.workload import Window, sample_workload
from philly_analyze.waitcause import CAUSES


def _paper(reference: Path, name: str) -> list[dict[str, str]]:
    with open(reference / "paper" / name, newline="") as f:
        return list(csv.DictReader(f))


def test_status_mix_matches_table6_and_figure9(reference: Path) -> None:
    cal = calibration.load()
    t6 = {r["status"]: float(r["jobs_pct"]) for r in _paper(reference, "table6_final_status.csv")}
    overall = cal.size_probs @ cal.status_probs * 100
    assert overall[0] == pytest.approx(t6["passed"], abs=0.5)
    assert overall[1] == pytest.approx(t6["killed"], abs=0.5)
    assert overall[2] == pytest.approx(t6["unsuccessful"], abs=0.5)
    fig9 = {r["gpu_bucket"]: r for r in _paper(reference, "fig9_retries_approx.csv")}
    b = calibration.bucket_of(cal.sizes, calibration.FIG9_BUCKETS)
    for i, key in enumerate(("1", "2-4", "5-8", "gt8")):
        w = cal.size_probs[b == i]
        u = float((cal.status_probs[b == i, 2] * w).sum() / w.sum())
        # The bucket rates are fitted jointly with Table 6 and Table 3: within 0.05.
        assert u == pytest.approx(float(fig9[key]["unsuccessful_rate"]), abs=0.05)


def test_reason_chain_keeps_table7_trial_shares(reference: Path) -> None:
    """The sticky reason chain's stationary law, mixed over demand buckets with the model's
    failed-trial mass, gives Table 7's trial shares."""
    cal = calibration.load()
    rows = _paper(reference, "table7_failures.csv")
    trials = np.array([float(r["trials"]) for r in rows])
    names = [r["failure_reason"] for r in rows]
    assert names == [r.name for r in cal.reasons]
    # Stationarity: pi = pi P for each bucket's transition matrix.
    for d in range(3):
        pi = cal.reason_mix[d]
        s = cal.reason_repeat
        p = np.diag(s) + (1 - s)[:, None] * cal.reason_fresh[d][None, :]
        np.testing.assert_allclose(pi @ p, pi, atol=1e-9)
    # Mixture over buckets by expected failed trials reproduces Table 7's shares.
    sizes, probs, sp = cal.sizes, cal.size_probs, cal.status_probs
    fb = calibration.bucket_of(sizes, calibration.FIG9_BUCKETS)
    p_fail = sp[:, 2] + (sp[:, 0] + sp[:, 1]) * cal.fail_first_prob[fb]
    mass = np.bincount(
        calibration.bucket_of(sizes, calibration.DEMAND_BUCKETS),
        weights=probs * p_fail,
        minlength=3,
    )
    mix = (mass[:, None] * cal.reason_mix).sum(axis=0) / mass.sum()
    np.testing.assert_allclose(mix, trials / trials.sum(), atol=1e-6)


def test_runtime_to_failure_passes_through_table7_percentiles(reference: Path) -> None:
    cal = calibration.load()
    z = np.array([0.0, 1.2815515655446004, 1.6448536269514722])
    for r, row in zip(cal.reasons, _paper(reference, "table7_failures.csv"), strict=True):
        got = calibration.rtf_seconds(r, z) / 60
        want = [float(row[k]) for k in ("rtf_p50_min", "rtf_p90_min", "rtf_p95_min")]
        np.testing.assert_allclose(got, np.maximum(want, 1e-3), rtol=1e-9)


def test_cdf_inverse_hand_worked() -> None:
    pts = [[0.0, 0.40], [0.40, 0.75], [0.95, 0.87], [1.0, 1.0]]
    u = np.array([0.1, 0.40, 0.575, 0.81, 0.935, 1.0])
    # 0.575 is halfway between 0.40 and 0.75 -> x = 0.20; 0.81 halfway 0.75..0.87 -> 0.675.
    np.testing.assert_allclose(
        calibration.cdf_inverse(pts, u), [0.0, 0.0, 0.20, 0.675, 0.975, 1.0], atol=1e-12
    )


def test_cluster_default_is_phillys_shape() -> None:
    cal = calibration.load()
    cl = build_cluster(cal, 552, np.random.default_rng(0))
    assert (cl.gpus == 2).sum() == 321 and (cl.gpus == 8).sum() == 231
    assert cl.total_gpus == 2490
    assert len(set(cl.machine_ids)) == 552
    # The listed counts under-report a few 8-GPU machines, as in the real list.
    wrong = cl.listed_gpus != cl.gpus
    assert (
        1 <= wrong.sum() <= 5 and (cl.gpus[wrong] == 8).all() and (cl.listed_gpus[wrong] == 2).all()
    )


@settings(max_examples=60, deadline=None)
@given(st.lists(st.floats(0, 1e9, allow_nan=False), min_size=1, max_size=50), st.integers(0, 4))
def test_decimal_block_matches_python(values: list[float], decimals: int) -> None:
    vals = np.round(np.array(values), decimals)
    got = textfmt.join_rows([textfmt.decimal(vals, decimals, trim=False)]).decode().split("\n")[:-1]
    want = [f"{v:.{decimals}f}" for v in vals]
    assert got == want


_WINDOW = Window.from_date("2017-10-03", 75, "America/Los_Angeles")
_CLOCK = Clock(_WINDOW)


@settings(max_examples=40, deadline=None)
@given(st.lists(st.integers(0, 75 * 86400 - 1), min_size=1, max_size=40))
def test_clock_matches_pandas(offsets: list[int]) -> None:
    w = _WINDOW
    epochs = w.start_epoch + np.array(offsets, dtype=np.int64)
    want = list(
        pd.to_datetime(epochs, unit="s", utc=True)
        .tz_convert(w.timezone)
        .strftime("%Y-%m-%d %H:%M:%S %Z")
    )
    assert _CLOCK.strings(epochs, with_zone=True) == want


def test_fall_back_hour_prints_twice() -> None:
    w = Window.from_date("2017-11-04", 3, "America/Los_Angeles")
    first = 1509868800  # 2017-11-05 08:00 UTC = 01:00 PDT
    got = Clock(w).strings(np.array([first, first + 3600]), with_zone=True)
    assert got == ["2017-11-05 01:00:00 PDT", "2017-11-05 01:00:00 PST"]


def test_loss_curves_have_the_drawn_convergence_points() -> None:
    cal = calibration.load()
    status = np.array([0, 1, 2, 0, 1] * 200, dtype=np.int8)
    curves = build_curves(cal, status, np.full(len(status), 3600.0 * 20), np.random.default_rng(3))
    for j in range(len(status)):
        e = int(curves.epochs[j])
        if e == 0:
            continue
        loss = curves.loss[curves.offsets[j] : curves.offsets[j + 1]]
        lowest = int(np.argmin(loss)) + 1
        within = int(np.flatnonzero(loss <= loss.min() * 1.001)[0]) + 1
        assert lowest == curves.e_lowest[j]
        assert within == curves.e_within[j]


def test_scheduler_never_double_books_and_gangs() -> None:
    cal = calibration.load()
    rng = np.random.default_rng(5)
    cl = build_cluster(cal, 30, rng)
    w = Window.from_date("2017-10-03", 3, "America/Los_Angeles")
    wl = sample_workload(cal, cl, w, 1500, rng)
    sch = schedule(wl, cl, w.seconds, 1, cal.section("scheduler", "philly").get("params", {}))
    started = np.flatnonzero(sch.att_start >= 0)
    # Attempts run in order, each after the previous one ended; none before its submission.
    assert (sch.att_start[started] >= wl.submit[wl.att_job[started]]).all()
    later = started[wl.att_idx[started] > 0]
    assert (sch.att_start[later] >= sch.att_end[later - 1]).all()
    # Withdrawn jobs never run.
    assert (sch.att_start[wl.first_attempt[wl.withdraw >= 0]] < 0).all()
    counts = sch.pl_offsets[started + 1] - sch.pl_offsets[started]
    # Gang: every started attempt holds exactly its job's GPUs.
    assert (counts == wl.gpus[wl.att_job[started]]).all()
    # No GPU held by two attempts at once: per (machine, gpu), intervals do not overlap.
    rows = []
    for a in started:
        for k in range(sch.pl_offsets[a], sch.pl_offsets[a + 1]):
            rows.append(
                (
                    int(sch.pl_machine[k]),
                    int(sch.pl_gpu[k]),
                    int(sch.att_start[a]),
                    int(sch.att_end[a]),
                )
            )
    rows.sort()
    for prev, cur in itertools.pairwise(rows):
        if prev[:2] == cur[:2]:
            assert cur[2] >= prev[3]
    # GPU indices exist on their machines.
    assert (sch.pl_gpu < cl.gpus[sch.pl_machine]).all()
    # Waits: one row per (job, attempt, cause), each cause's total within its first and last
    # moment, and an attempt that started did so when its last wait ended.
    assert set(np.unique(sch.wait_cause).tolist()) <= set(range(len(CAUSES)))
    assert (sch.wait_end > sch.wait_start).all()
    assert (sch.wait_seconds > 0).all()
    assert (sch.wait_seconds <= sch.wait_end - sch.wait_start).all()
    key = np.stack([sch.wait_job, sch.wait_attempt, sch.wait_cause], axis=1)
    assert len(np.unique(key, axis=0)) == len(key)
    att = wl.first_attempt[sch.wait_job] + sch.wait_attempt
    last_end: dict[int, int] = {}
    for a, e in zip(att.tolist(), sch.wait_end.tolist(), strict=True):
        last_end[a] = max(e, last_end.get(a, e))
    for attempt, end in last_end.items():
        if 0 <= sch.att_start[attempt] < w.seconds:
            assert end == sch.att_start[attempt], attempt
