"""The sweep's plan (cross product, parameter parsing, run keys), arrival jitter and the
t-interval, without running replays."""

from __future__ import annotations

import hashlib
import json
import math
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from philly_analyze.errors import UserError
from philly_analyze.sim.workload import Workload
from philly_analyze.sweep.inputs import jittered
from philly_analyze.sweep.spec import SweepSpec, parse_param_args, run_key, split_values
from philly_analyze.sweep.summary import t_interval


def test_cross_product_crosses_each_policy_with_the_parameters_it_takes() -> None:
    # The example: relaxed and las have no locality wait, so they are not multiplied
    # by its 4 values: 4 x 5 + 5 + 5 = 30 runs.
    spec = SweepSpec.build(
        "philly,relaxed,las", parse_param_args(["locality_wait_min=0,5,30,120"]), 5
    )
    tasks = spec.tasks("inputs")
    by_policy = {p: [t for t in tasks if t.policy == p] for p in spec.policies}
    assert {p: len(v) for p, v in by_policy.items()} == {"philly": 20, "relaxed": 5, "las": 5}
    assert sorted({t.given["locality_wait_min"] for t in by_policy["philly"]}) == [0, 5, 30, 120]
    assert all(t.given == {} for t in by_policy["relaxed"])
    assert sorted({t.seed for t in tasks}) == [0, 1, 2, 3, 4]
    assert len({t.run_id for t in tasks}) == 30
    # Every run carries every parameter of its policy, defaults filled.
    assert by_policy["philly"][0].params["borrow"] is True
    assert spec.swept() == ["locality_wait_min"]
    assert spec.describe()[0] == "philly: locality_wait_min=0,5,30,120 x 5 seeds = 20 runs"


def test_two_parameters_and_a_scoped_one() -> None:
    spec = SweepSpec.build(
        ["philly", "fifo"],
        parse_param_args(
            ["locality_wait_min=0,30", "max_retries=0,1,none", "fifo.backfill=true,false"]
        ),
        [7],
    )
    tasks = spec.tasks("x")
    philly = [t for t in tasks if t.policy == "philly"]
    fifo = [t for t in tasks if t.policy == "fifo"]
    assert len(philly) == 2 * 3 and len(fifo) == 2 * 3 * 2
    assert {t.given["max_retries"] for t in philly} == {0, 1, None}
    assert {t.given["backfill"] for t in fifo} == {True, False}
    assert all("backfill" not in t.given for t in philly)
    assert {t.seed for t in tasks} == {7}


def test_scoped_value_wins_over_the_plain_key() -> None:
    spec = SweepSpec.build(
        "philly,fifo",
        parse_param_args(["locality_wait_min=5,10", "fifo.locality_wait_min=60"]),
        1,
    )
    assert spec.grid["philly"]["locality_wait_min"] == [5.0, 10.0]
    assert spec.grid["fifo"]["locality_wait_min"] == [60.0]


def test_value_lists() -> None:
    assert split_values("0,5, 30", float) == ["0", "5", "30"]
    # Text parameters hold comma lists themselves (las thresholds): ';' separates values.
    assert split_values("1,10;0.5,5", str) == ["1,10", "0.5,5"]
    assert split_values('["1,10", "2,20"]', str) == ["1,10", "2,20"]
    assert split_values("[0, 2.5]", float) == [0, 2.5]
    spec = SweepSpec.build("las", {"thresholds_gpu_h": "1,10;0.5,5"}, 1)
    assert spec.grid["las"]["thresholds_gpu_h"] == ["1,10", "0.5,5"]
    # Duplicates (5 and 5.0 are the same float) collapse.
    spec = SweepSpec.build("philly", {"locality_wait_min": "5,5.0,6"}, 1)
    assert spec.grid["philly"]["locality_wait_min"] == [5.0, 6.0]


@pytest.mark.parametrize(
    ("policies", "params", "message"),
    [
        ("philly", ["locality_wait=0,5"], "did you mean locality_wait_min"),
        ("relaxed", ["locality_wait_min=0"], "no chosen policy takes 'locality_wait_min'"),
        ("philly", ["fifo.backfill=true"], "policy 'fifo' is not in --policy"),
        ("philly", ["locality_wait_min=-1"], "must be >= 0"),
        ("philly", ["borrow=maybe"], "must be bool"),
        ("nosuch", [], "unknown policy 'nosuch'"),
        ("philly", ["locality_wait_min"], "expects KEY=VALUES"),
        ("philly", ["locality_wait_min=[1,"], "not a JSON list"),
    ],
)
def test_mistakes_are_user_errors(policies: str, params: list[str], message: str) -> None:
    with pytest.raises(UserError, match=message):
        SweepSpec.build(policies, parse_param_args(params), 1)


def test_run_key_is_the_documented_hash() -> None:
    params = {"locality_wait_min": 5.0, "borrow": True, "max_retries": None}
    doc = '{"inputs":"abc","jitter_s":0.0,"params":{"borrow":true,"locality_wait_min":5.0,"max_retries":null},"policy":"philly","seed":3}'
    assert run_key("philly", params, 3, 0.0, "abc") == hashlib.sha256(doc.encode()).hexdigest()[:20]


def test_a_default_set_explicitly_is_the_same_run() -> None:
    a = SweepSpec.build("philly", {}, 2).tasks("i")
    b = SweepSpec.build("philly", {"locality_wait_min": 10}, 2).tasks("i")
    c = SweepSpec.build("philly", {"locality_wait_min": 11}, 2).tasks("i")
    assert [t.run_id for t in a] == [t.run_id for t in b]
    assert not {t.run_id for t in a} & {t.run_id for t in c}
    # Another store (inputs identity) or jitter: other runs.
    assert not {t.run_id for t in a} & {
        t.run_id for t in SweepSpec.build("philly", {}, 2).tasks("j")
    }
    j = SweepSpec.build("philly", {}, 2, jitter_s=1).tasks("i")
    assert not {t.run_id for t in a} & {t.run_id for t in j}


def _wl() -> Workload:
    return Workload.from_columns(
        ["a", "b", "c", "d"],
        [0, 1_000_000, 2_000_000, 100_000_000],
        ["v", "v", "w", "w"],
        [1, 2, 1, 8],
        [[5_000_000], [1_000_000, 2_000_000], [3_000_000], [4_000_000]],
        obs_start_us=[10_000_000, None, 2_000_000, 100_000_000],
    )


def test_jitter_moves_arrivals_within_the_bound_and_keeps_observed_delays() -> None:
    wl = _wl()
    assert jittered(wl, 0, 0.0) is wl
    j = jittered(wl, 3, 2.0)
    # Jobs a, b, c are within 2 s of each other: their order may change; d cannot move past.
    assert j.job_ids[-1] == "d"
    assert np.all(np.diff(j.submit_us) >= 0)
    orig = dict(zip(wl.job_ids, wl.submit_us, strict=True))
    shift = {jid: int(s) - orig[jid] for jid, s in zip(j.job_ids, j.submit_us, strict=True)}
    assert all(abs(v) <= 2_000_000 for v in shift.values()) and any(v != 0 for v in shift.values())
    obs = dict(zip(j.job_ids, j.obs_start_us, strict=True))
    assert obs["a"] - orig["a"] - shift["a"] == 10_000_000 - 0  # observed delay kept
    assert obs["b"] == Workload.MISSING
    # Attempts follow their job.
    k = list(j.job_ids).index("b")
    assert list(j.att_dur_us[j.att_ptr[k] : j.att_ptr[k + 1]]) == [1_000_000, 2_000_000]
    # Same seed, same draw (numpy's PCG64: the same on every machine); another seed differs.
    again = jittered(wl, 3, 2.0)
    assert list(again.submit_us) == list(j.submit_us)
    assert list(jittered(wl, 4, 2.0).submit_us) != list(j.submit_us)


def test_t_interval_against_the_t_table() -> None:
    # n = 3, sd = 1: t(0.975, 2) = 4.302653 (standard t table), half-width 4.302653 / sqrt(3).
    r = t_interval([1.0, 2.0, 3.0], 0.95)
    assert r["n"] == 3 and r["mean"] == 2.0 and r["sd"] == 1.0
    assert r["half_width"] == pytest.approx(4.302653 / math.sqrt(3), abs=1e-6)
    assert r["ci_low"] == pytest.approx(2 - 2.484138, abs=1e-6)
    # n = 5 at 90%: t(0.95, 4) = 2.131847; values 10, 12, 14, 16, 18 have sd sqrt(10).
    r = t_interval([10, 12, 14, 16, 18], 0.90)
    assert r["half_width"] == pytest.approx(2.131847 * math.sqrt(10) / math.sqrt(5), abs=1e-6)
    assert t_interval([4.0], 0.95) == {
        "n": 1,
        "mean": 4.0,
        "sd": None,
        "ci_low": None,
        "ci_high": None,
        "half_width": None,
    }
    assert t_interval([7.0, 7.0, 7.0])["half_width"] == 0.0
    assert t_interval([None, float("nan")])["n"] == 0


@settings(max_examples=50, deadline=None)
@given(
    st.lists(st.floats(-1e6, 1e6, allow_nan=False), min_size=2, max_size=30),
    st.floats(-1e6, 1e6, allow_nan=False),
)
def test_t_interval_shifts_with_the_data(xs: list[float], c: float) -> None:
    a, b = t_interval(xs), t_interval([x + c for x in xs])
    lo, mean, hi = a["ci_low"], a["mean"], a["ci_high"]
    assert lo is not None and mean is not None and hi is not None  # n >= 2: all known
    assert b["mean"] == pytest.approx(mean + c, abs=1e-6)
    assert b["half_width"] == pytest.approx(a["half_width"], rel=1e-6, abs=1e-6)
    assert lo <= mean <= hi


def test_spec_is_json_serialisable() -> None:
    spec = SweepSpec.build("philly,las", {"max_retries": "0,none"}, 2)
    json.dumps(spec.grid)


def test_editing_a_model_file_makes_a_new_run(tmp_path: Path) -> None:
    model = tmp_path / "m.toml"
    model.write_text("[slo]\nviolation_budget = 0.02\n")
    params = {"model": str(model)}
    before = run_key("muxflow", params, 0, 0.0, "abc")
    assert run_key("muxflow", params, 0, 0.0, "abc") == before
    model.write_text("[slo]\nviolation_budget = 0.05\n")
    assert run_key("muxflow", params, 0, 0.0, "abc") != before
