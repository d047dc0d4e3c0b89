"""Each MuxFlow mechanism in isolation, on hand-built one- or few-GPU setups."""

from __future__ import annotations

import itertools

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from philly_analyze.errors import UserError
from philly_analyze.sim.sharing.config import ServiceSpec, SharingConfig
from philly_analyze.sim.sharing.matching import MatchStats, match_round, max_weight_assignment
from philly_analyze.sim.sharing.model import launch_control, sm_target
from philly_analyze.sim.sharing.simulate import simulate_sharing

FLAT = ServiceSpec(
    name="flat",
    share=1.0,
    peak_util=0.3,
    trough=1.0,  # constant load
    peak_hour=12.0,
    sm_low=0.5,
    sm_high=0.5,
    mem_static=0.5,
    mem_load=0.0,
    sensitivity=0.2,
    pressure=0.3,
    slo=1.2,
)


def tiny(service: ServiceSpec = FLAT, gpus: int = 1, /, **over: object) -> SharingConfig:
    """A noise-free cluster of ``gpus`` online GPUs running ``service``, matching every minute,
    no injected errors or memory spikes unless ``over`` says so."""
    # service and gpus are positional-only: the dotted keys of ``over`` never name them.
    base = {
        "cluster.online_gpus": gpus,
        "cluster.ordinary_gpus": 0,
        "online.services": (service,),
        "online.noise_sigma": 0.0,
        "online.util_spread": 0.0,
        "online.mem_spread": 0.0,
        "online.peak_jitter_hours": 0.0,
        "online.slowdown_noise": 0.0,
        "offline.mem_spike_prob": 0.0,
        "errors.rate_per_hour": 0.0,
        "matching.period_minutes": 1,
        "matching.oracle_sample": 0.0,
        "matching.truth_noise": False,
        "matching.profile_noise": False,
    }
    base.update(over)
    return SharingConfig.load().with_(**base)


def one_job(mem: float = 0.2, work: float = 10_000.0, gpus: int = 1, n: int = 1) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "job_id": [f"j{i}" for i in range(n)],
            "submit": [0.0] * n,
            "work_minutes": [work] * n,
            "num_gpus": [gpus] * n,
            "mem": [mem] * n,
            "util": [0.6] * n,
            "sm": [0.5] * n,
            "job_type": [7] * n,
        }
    )


# ---------------------------------------------------------------- xCUDA memory limit
def test_memory_over_the_limit_evicts_the_offline_job_only() -> None:
    # Online peak memory 0.5, margin 0.05: limit 0.45. The job uses 0.2, spikes to 0.6.
    cfg = tiny(**{"offline.mem_spike_prob": 1.0, "offline.mem_spike_factor": 3.0})
    m = simulate_sharing(one_job(0.2), cfg, "muxflow", minutes=60).metrics
    assert m["evictions_memory_limit"] >= 1
    assert m["evictions_oom_crash"] == 0
    assert m["outage_minutes"] == 0


def test_without_the_limit_the_same_spike_takes_the_online_service_down() -> None:
    cfg = tiny(
        **{"offline.mem_spike_prob": 1.0, "offline.mem_spike_factor": 3.0, "memory.enabled": False}
    )
    m = simulate_sharing(one_job(0.2), cfg, "muxflow", minutes=60).metrics
    assert m["evictions_oom_crash"] >= 1
    assert m["outage_minutes"] >= cfg.memory.oom_outage_minutes


def test_a_spike_under_the_limit_is_harmless() -> None:
    cfg = tiny(**{"offline.mem_spike_prob": 1.0, "offline.mem_spike_factor": 2.0})  # 0.4 < 0.45
    m = simulate_sharing(one_job(0.2), cfg, "muxflow", minutes=60).metrics
    assert m["evictions"] == 0
    assert m["shared_fraction"] > 0.9


def test_a_job_bigger_than_the_limit_is_never_placed_by_muxflow() -> None:
    m = simulate_sharing(one_job(0.5), tiny(), "muxflow", minutes=60).metrics
    assert m["shared_fraction"] == 0 and m["evictions"] == 0
    # Nothing shared: the means over shared GPU-minutes are absent, not 0 (issue 13).
    assert m["shared_duty_mean"] is None and m["shared_speed_mean"] is None
    assert m["online_slowdown_p50"] is None


# ---------------------------------------------------------------- matching
def _brute_force(w: np.ndarray, min_weight: float) -> float:
    """Best total over all partial injective row->column maps using pairs >= min_weight."""
    rows, cols = w.shape
    best = 0.0
    for perm in itertools.permutations(range(cols), rows):
        best = max(best, sum(w[r, c] for r, c in enumerate(perm) if w[r, c] >= min_weight))
    return best


def test_matcher_picks_the_max_weight_assignment_on_a_hand_made_matrix() -> None:
    w = np.array(
        [
            [0.9, 0.8, 0.1, 0.0],
            [0.8, 0.1, 0.1, 0.2],
            [0.7, 0.6, 0.5, -1.0],
        ]
    )
    r, c = max_weight_assignment(w, 0.05)
    # By hand: greedy would take 0.9 (0,0) then 0.6 (2,1), 0.2 (1,3) = 1.7; the optimum gives
    # column 0 to row 1: 0.8 (0,1) + 0.8 (1,0) + 0.5 (2,2) = 2.1.
    assert sorted(zip(r.tolist(), c.tolist(), strict=True)) == [(0, 1), (1, 0), (2, 2)]
    assert w[r, c].sum() == pytest.approx(2.1)
    assert w[r, c].sum() == pytest.approx(_brute_force(w, 0.05))


@settings(max_examples=60, deadline=None)
@given(
    st.integers(1, 4).flatmap(
        lambda r: st.tuples(
            st.just(r),
            st.integers(r, 5),
            st.lists(st.floats(-1.0, 1.0, allow_nan=False), min_size=25, max_size=25),
        )
    )
)
def test_matcher_equals_brute_force(case: tuple[int, int, list[float]]) -> None:
    rows, cols, vals = case
    w = np.array(vals[: rows * cols]).reshape(rows, cols)
    r, c = max_weight_assignment(w, 0.05)
    assert len(set(r.tolist())) == len(r) and len(set(c.tolist())) == len(c)
    assert (w[r, c] >= 0.05).all()
    assert w[r, c].sum() == pytest.approx(_brute_force(w, 0.05))


def _round(free: list[int], queue: list[int], gpus: list[int], w: np.ndarray):
    rng = np.random.default_rng(0)
    job_gpus = np.array(gpus)

    def weights(rows: np.ndarray, col_job: np.ndarray) -> np.ndarray:
        return w[np.ix_(rows, col_job)]

    return match_round(
        np.array(free),
        np.array(queue),
        job_gpus,
        weights,
        weights,
        use_matching=True,
        block_rows=64,
        window_factor=4.0,
        min_weight=0.05,
        check_feasible=True,
        oracle_sample=1.0,
        rng=rng,
        stats=MatchStats(),
    )


def test_a_gang_is_placed_whole_or_not_at_all() -> None:
    w = np.full((3, 2), 0.5)  # 3 GPUs x 2 jobs; job 0 needs 2 GPUs, job 1 needs 1
    one_free = _round([0], [0], [2, 1], w)
    assert one_free == []
    two_free = _round([0, 1], [0], [2, 1], w)
    assert len(two_free) == 1 and two_free[0][0] == 0 and sorted(two_free[0][1]) == [0, 1]


# ---------------------------------------------------------------- mixed error handling
ERRORS = {"errors.rate_per_hour": 30.0}


def test_signal_errors_kill_only_the_offline_process_under_muxflow() -> None:
    cfg = tiny(**ERRORS, **{"errors.signal_fraction": 1.0})
    m = simulate_sharing(one_job(n=3), cfg, "muxflow", minutes=240).metrics
    assert m["evictions_error_signal"] > 10
    assert m["outage_minutes"] == 0 and m["outage_events"] == 0


def test_errors_propagate_to_the_online_service_under_plain_mps() -> None:
    cfg = tiny(**ERRORS, **{"errors.signal_fraction": 1.0})
    m = simulate_sharing(one_job(n=3), cfg, "mps-naive", minutes=240).metrics
    assert m["evictions_error_propagated"] > 10
    assert m["outage_events"] == m["evictions_error_propagated"]
    assert m["outage_minutes"] >= m["outage_events"] * 1  # >= 1 min each, overlaps merge


def test_non_signal_errors_cost_a_short_context_reset_under_muxflow() -> None:
    cfg = tiny(**ERRORS, **{"errors.signal_fraction": 0.0})
    mux = simulate_sharing(one_job(n=3), cfg, "muxflow", minutes=240).metrics
    naive = simulate_sharing(one_job(n=3), cfg, "mps-naive", minutes=240).metrics
    assert mux["evictions_error_reset"] > 0 and mux["outage_events"] > 0
    per_event_mux = mux["outage_minutes"] / mux["outage_events"]
    per_event_naive = naive["outage_minutes"] / naive["outage_events"]
    assert per_event_mux <= cfg.errors.reset_outage_minutes + 1e-9
    assert per_event_naive > per_event_mux


# ---------------------------------------------------------------- dynamic SM allocation
def test_sm_target_is_complementary_rounded_and_clipped() -> None:
    cfg = SharingConfig.load().with_(
        **{"sm.headroom": 0.05, "sm.step": 0.05, "sm.min_share": 0.1, "sm.max_share": 0.9}
    )
    need = np.array([0.62, 0.2, 0.0, 0.95])
    # 1 - 0.62 - 0.05 = 0.33 -> 0.30; 0.75; 0.95 -> clipped 0.9; -0.0 -> clipped 0.1
    np.testing.assert_allclose(sm_target(cfg, need), [0.30, 0.75, 0.9, 0.1])


DIURNAL = ServiceSpec(**{**FLAT.__dict__, "trough": 0.0, "sm_low": 0.1, "sm_high": 0.8})


def _sm_run(threshold: float, restart: float = 1.0) -> dict:
    cfg = tiny(DIURNAL, **{"sm.threshold": threshold, "sm.restart_minutes": restart})
    return simulate_sharing(one_job(0.1, work=1e6), cfg, "muxflow", minutes=1440).metrics


def test_sm_share_changes_only_past_the_threshold() -> None:
    # The target sweeps 0.15..0.85 and back over the day (0.7 each way in 0.05 steps).
    fine, coarse, never = _sm_run(0.05), _sm_run(0.3), _sm_run(1.0)
    assert never["sm_restarts"] == 0
    assert 0 < coarse["sm_restarts"] < fine["sm_restarts"]
    assert coarse["sm_restarts"] <= 2 * (0.7 / 0.3 + 1)
    assert fine["sm_restarts"] <= 2 * (0.7 / 0.05 + 1)


def test_each_sm_change_costs_a_restart() -> None:
    cheap, dear = _sm_run(0.05, restart=0.0), _sm_run(0.05, restart=20.0)
    assert cheap["sm_restarts"] == dear["sm_restarts"] > 0
    assert dear["offline_work_gpu_hours"] < cheap["offline_work_gpu_hours"]


def test_no_dynamic_sm_means_no_restarts() -> None:
    cfg = tiny(DIURNAL, **{"sm.dynamic": False, "sm.threshold": 0.05})
    m = simulate_sharing(one_job(0.1, work=1e6), cfg, "muxflow", minutes=1440).metrics
    assert m["sm_restarts"] == 0


# ---------------------------------------------------------------- launch limit and monitor
def test_launch_control_steps() -> None:
    cfg = SharingConfig.load().with_(
        **{
            "launch.decrease": 0.08,
            "launch.steps_per_minute": 12,
            "launch.tolerance": 0.03,
            "launch.increase": 0.05,
            "launch.min_duty": 0.05,
        }
    )
    sigma = np.array([1.21, 2.0, 1.05, 1.08, 1.0])
    duty = np.array([1.0, 1.0, 0.5, 0.5, 0.98])
    got = launch_control(cfg, sigma, duty, np.full(5, 1.1))
    # ln1.1/ln1.21 = 0.5 (proportional); 0.92^12 = 0.3677 floors the 2.0 case; 1.05 < 1.067
    # rises by 0.05; 1.08 is in the dead band; 0.98 + 0.05 caps at 1.
    np.testing.assert_allclose(got, [0.5, 0.92**12, 0.55, 0.5, 1.0], rtol=1e-9)


HARSH = ServiceSpec(**{**FLAT.__dict__, "sensitivity": 2.0})
#: Idle at midnight, busy at noon: a pair that is safe at placement becomes unsafe later.
RISING = ServiceSpec(**{**FLAT.__dict__, "trough": 0.0, "sensitivity": 0.6})


def test_monitor_evicts_when_latency_stays_over_the_slo() -> None:
    on = tiny(RISING, **{"launch.enabled": False, "sm.horizon_minutes": 1})
    off = on.with_(**{"monitor.enabled": False})
    m_on = simulate_sharing(one_job(0.1), on, "muxflow", minutes=720).metrics
    m_off = simulate_sharing(one_job(0.1), off, "muxflow", minutes=720).metrics
    assert m_on["evictions_monitor"] >= 1
    assert m_on["slo_violation_minutes"] <= on.monitor.consecutive * m_on["evictions_monitor"]
    assert m_off["evictions_monitor"] == 0
    assert m_off["slo_violation_minutes"] > 60
    assert m_on["slo_violation_minutes"] < m_off["slo_violation_minutes"]


def test_launch_limit_holds_latency_at_its_target() -> None:
    cfg = tiny(HARSH, **{"monitor.enabled": False})
    m = simulate_sharing(one_job(0.1), cfg, "muxflow", minutes=240).metrics
    target = 1 + cfg.launch.target_fraction * (HARSH.slo - 1)
    assert m["shared_fraction"] > 0.9
    assert m["online_slowdown_p99"] <= target * 1.01
    # At most the first minute, before the loop's first correction of the predicted duty.
    assert m["slo_violation_minutes"] <= 1
    assert m["shared_duty_mean"] < 0.5  # the loop throttled the offline job hard


def test_unknown_parameters_and_policies_are_user_errors() -> None:
    with pytest.raises(UserError, match="unknown parameter"):
        SharingConfig.load().with_(**{"sm.nope": 1})
    with pytest.raises(UserError, match="unknown sharing policy"):
        simulate_sharing(one_job(), tiny(), "gandiva")
    with pytest.raises(UserError, match="num_gpus"):
        simulate_sharing(pd.DataFrame({"job_id": ["a"]}), tiny())


def test_slowdown_quantiles_from_the_histogram() -> None:
    from philly_analyze.sim.sharing.results import Accumulator

    acc = Accumulator(1, 0)
    assert acc.slowdown_quantile(0.5) is None
    # 90 minutes at slowdown 1.10 and 10 at 1.50: p50 is 1.10, p99 is 1.50 (to the bin, 0.1%).
    acc.add_slowdowns(np.log(np.r_[np.full(90, 1.10), np.full(10, 1.50)]))
    assert acc.slowdown_quantile(0.5) == pytest.approx(1.10, rel=2e-3)
    assert acc.slowdown_quantile(0.99) == pytest.approx(1.50, rel=2e-3)


def test_docs_parameter_table_is_fresh() -> None:
    """docs/muxflow.md embeds the table generated from the model file, unchanged."""
    from pathlib import Path

    from philly_analyze.sim.sharing.config import parameters_markdown

    doc = (Path(__file__).resolve().parents[1] / "docs" / "muxflow.md").read_text()
    assert parameters_markdown() in doc
    assert "NOT FOUND" in parameters_markdown()
