"""True waiting causes: worked out by hand for small schedules."""

from __future__ import annotations

import pyarrow as pa

from philly_analyze.sim import Cluster, Workload, simulate

S = 1_000_000


def test_scheduler_causes_on_a_two_server_cluster() -> None:
    """Servers m0, m1 with 4 GPUs; quotas a=4, b=6; no borrowing; locality wait 0.

    t=0  a1 (4 GPUs, 100 s) -> m0;  b1 (2 GPUs, 200 s) -> m1
    t=5  b2 (3 GPUs): b uses 2, 2+3 <= 6 quota left, but the cluster has 2 free GPUs (m1)
         < 3 -> capacity
    t=10 a2 (4 GPUs): a uses 4 of 4 -> fair_share
    t=100 a1 ends; a (0/4) is served before b (2/6): a2 -> m0; b2 still has 2 free < 3
    t=150 a2 ends; b2 -> m0.
    """
    wl = Workload.from_columns(
        ["a1", "b1", "b2", "a2"],
        [0, 0, 5 * S, 10 * S],
        ["a", "b", "b", "a"],
        [4, 2, 3, 4],
        [[100 * S], [200 * S], [10 * S], [50 * S]],
    )
    cluster = Cluster.build(["m0", "m1"], [4, 4])
    res = simulate(
        wl,
        cluster,
        "philly",
        {"a": 4, "b": 6},
        {"borrow": False, "locality_wait_min": 0, "slowdown": False},
    )
    starts = dict(
        zip(
            res.attempts.column("job_id").to_pylist(),
            res.attempts.column("start_time").cast(pa.int64()).to_pylist(),
            strict=True,
        )
    )
    assert {k: v // S for k, v in starts.items()} == {"a1": 0, "b1": 0, "a2": 100, "b2": 150}
    w = res.waiting.to_pylist()
    got = sorted(
        (r["job_id"], int(r["start"].timestamp()), int(r["end"].timestamp()), r["cause"]) for r in w
    )
    assert got == [("a2", 10, 100, "fair_share"), ("b2", 5, 150, "capacity")]
    assert res.metrics["fair_share_delay_s"] == 90.0
    assert res.metrics["capacity_delay_s"] == 145.0
    assert res.metrics["fragmentation_delay_s"] == 0.0
    pl = res.placements.to_pylist()
    assert {r["machine_id"] for r in pl if r["job_id"] == "b2"} == {"m0"}


def test_no_wait_gives_no_fair_share_fraction() -> None:
    """One 8-GPU server; a (4 GPUs, 0-100 s) and b (4 GPUs, submitted at 10 s) both start at
    once: nobody waits, every delay total is 0 and the fair-share share of no waiting is
    absent (NaN, shown as "-"; before: 0.0, as if all the waiting had other causes)."""
    import math

    wl = Workload.from_columns(["a", "b"], [0, 10 * S], ["v", "v"], [4, 4], [[100 * S], [50 * S]])
    res = simulate(wl, Cluster.build(["m0"], [8]), "philly", {"v": 8})
    m = res.metrics
    assert [m[f"{c}_delay_s"] for c in ("fair_share", "fragmentation", "capacity", "other")] == [
        0.0
    ] * 4
    assert math.isnan(m["fair_share_delay_frac"])
    assert res.waiting.num_rows == 0
