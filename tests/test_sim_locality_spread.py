"""Per-job locality waits (``philly``'s ``locality_wait_spread``) and the borrowing limit
(``borrow_limit``), on hand-made cases worked out in the comments."""

from __future__ import annotations

import numpy as np
import pytest

from philly_analyze.sim import simulate
from philly_analyze.sim.cluster import Cluster
from philly_analyze.sim.engine import EngineConfig, QueueEngine
from philly_analyze.sim.placement import FreeState
from philly_analyze.sim.policies.philly import job_locality_waits
from philly_analyze.sim.result import ReplayResult
from philly_analyze.sim.slowdown import SlowdownModel
from philly_analyze.sim.workload import Workload

S = 1_000_000


def _starts(vcs: list[str], waits_s: list[int]) -> dict[str, float]:
    # Two 8-GPU servers. A and B (6 GPUs, 1000 s) take one server each: 2 GPUs stay free on
    # each, so the 4-GPU jobs X1 (submitted at 1 s) and X2 (at 2 s) fit only by breaking
    # locality (4 free GPUs, never 4 on one server) until A and B end at 1000 s.
    cluster = Cluster.from_counts({8: 2})
    wl = Workload.from_columns(
        ["A", "B", "X1", "X2"],
        [0, 0, 1 * S, 2 * S],
        ["a", "a", vcs[0], vcs[1]],
        [6, 6, 4, 4],
        [[1000 * S], [1000 * S], [50 * S], [50 * S]],
    )
    cfg = EngineConfig(
        quotas=[16] * len(wl.vc_names),
        locality_wait_by_job=[0, 0, waits_s[0] * S, waits_s[1] * S],
    )
    tr = QueueEngine(wl, FreeState(cluster), cfg, SlowdownModel(8, enabled=False)).run()
    rows = tr.columns().T.ravel()  # seven integers per started row: job, attempt, ready, start, ...
    return {wl.job_ids[rows[i]]: rows[i + 3] / S for i in range(0, len(rows), 7)}


def test_each_job_relaxes_after_its_own_wait() -> None:
    # Different VCs: X2 (wait 100 s) relaxes at 2 + 100 = 102 s and takes the 4 free GPUs.
    # X2 ends at 152 s: 2 + 2 GPUs free again on two servers, but X1 (wait 300 s) is still
    # strict until 1 + 300 = 301 s, when it relaxes.
    got = _starts(["b", "c"], [300, 100])
    assert got["X2"] == 102.0
    assert got["X1"] == 301.0


def test_one_vc_and_demand_are_first_come_first_served() -> None:
    # Same VC and demand: X2's wait ends first (at 102 s) but X1 is ahead of it; X1 relaxes
    # at 301 s, X2 right after X1 ends (351 s; its own wait long over).
    got = _starts(["b", "b"], [300, 100])
    assert got["X1"] == 301.0
    assert got["X2"] == 351.0


def test_job_waits_are_log_normal_around_the_median() -> None:
    wl = Workload.from_columns(
        [f"j{i}" for i in range(20_000)], [0] * 20_000, ["a"] * 20_000, [1] * 20_000,
        [[S]] * 20_000,
    )  # fmt: skip
    assert job_locality_waits(wl, 10.0, 0.0, 1) is None  # one timer
    w = np.array(job_locality_waits(wl, 10.0, 0.5, 1)) / (60 * S)
    assert np.median(w) == pytest.approx(10.0, rel=0.02)
    # log sd 0.5: 90% between 10 x exp(-0.5 x 1.645) = 4.4 and 10 x exp(0.8225) = 22.8 min.
    assert np.quantile(w, [0.05, 0.95]) == pytest.approx([4.39, 22.76], rel=0.03)
    # Same seed, same waits.
    assert job_locality_waits(wl, 10.0, 0.5, 1) == job_locality_waits(wl, 10.0, 0.5, 1)


def test_borrow_limit_caps_a_vc_beyond_its_quota() -> None:
    # 8 servers x 2 GPUs = 16 GPUs; quotas a 4, b 12. VC a submits eight 1-GPU jobs of 100 s.
    # Unlimited borrowing: all 8 start at 0. borrow_limit 0.125: a may hold 4 + 2 = 6 (one
    # server's GPUs is the floor: max(0.125 x 16, 2) = 2), so 2 wait until 100 s.
    cluster = Cluster.from_counts({2: 8})
    wl = Workload.from_columns(
        [f"j{i}" for i in range(8)], [0] * 8, ["a"] * 8, [1] * 8, [[100 * S]] * 8
    )
    quotas = {"a": 4, "b": 12}
    free = simulate(wl, cluster, "philly", quotas, {}, 0)
    capped = simulate(wl, cluster, "philly", quotas, {"borrow_limit": 0.125}, 0)

    def starts(res: ReplayResult) -> list[float]:
        col = res.attempts.column("start_time").cast("int64").to_pylist()
        return sorted(x / S for x in col)

    assert starts(free) == [0.0] * 8
    assert starts(capped) == [0.0] * 6 + [100.0] * 2
