"""las and srtf on schedules worked out by hand (one server with one GPU)."""

from __future__ import annotations

import pyarrow as pa

from philly_analyze.sim import Cluster, Workload, simulate

M = 60_000_000  # one minute in microseconds


def _segments(res) -> list[tuple[str, int, int, str]]:
    a = res.attempts
    rows = zip(
        a.column("job_id").to_pylist(),
        a.column("start_time").cast(pa.int64()).to_pylist(),
        a.column("end_time").cast(pa.int64()).to_pylist(),
        a.column("outcome").to_pylist(),
        strict=True,
    )
    return sorted((j, s // M, e // M, o) for j, s, e, o in rows)


def _one_gpu(jobs):
    wl = Workload.from_columns(
        [j[0] for j in jobs],
        [j[1] * M for j in jobs],
        ["v"] * len(jobs),
        [1] * len(jobs),
        [[j[2] * M] for j in jobs],
        outcomes=[["passed"]] * len(jobs),
    )
    return wl, Cluster.build(["m0"], [1])


def test_las_demotes_at_the_threshold_and_preempts() -> None:
    """A (120 min) starts at 0; B (30 min) arrives at 10 in the same queue and waits (A came
    first). At 60 A has 1 GPU-hour and drops to queue 1: B preempts it, runs 60-90; A
    resumes at 90 with 60 minutes left."""
    wl, cluster = _one_gpu([("A", 0, 120), ("B", 10, 30)])
    res = simulate(wl, cluster, "las", params={"thresholds_gpu_h": "1"})
    assert _segments(res) == [
        ("A", 0, 60, "killed"),
        ("A", 90, 150, "passed"),
        ("B", 60, 90, "passed"),
    ]
    assert res.metrics["preemptions"] == 1


def test_srtf_preempts_for_shorter_remaining_time() -> None:
    """A (100 min) starts at 0; B (10 min) arrives at 5 with less left than A's 95: it
    preempts A, runs 5-15, and A finishes its remaining 95 minutes at 110."""
    wl, cluster = _one_gpu([("A", 0, 100), ("B", 5, 10)])
    res = simulate(wl, cluster, "srtf")
    assert _segments(res) == [
        ("A", 0, 5, "killed"),
        ("A", 15, 110, "passed"),
        ("B", 5, 15, "passed"),
    ]
    # Ground truth: A's wait after preemption is capacity, not quota (no quotas).
    w = res.waiting.to_pylist()
    # (the one GPU is busy with B: 0 free < 1)
    assert [(r["job_id"], r["cause"]) for r in w] == [("A", "capacity")]
