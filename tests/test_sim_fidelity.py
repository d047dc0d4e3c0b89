"""Fidelity: a schedule written as a store and replayed with the same settings comes back
identical; on observed data the replay reports its median absolute queueing-delay error."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from philly_analyze.sim import Cluster, Workload, run_replay, simulate, write_result_store
from tests._sim_data import observed_store


def busy_workload(n: int = 400, seed: int = 3) -> Workload:
    rng = np.random.default_rng(seed)
    return Workload.from_columns(
        [f"job{i:04d}" for i in range(n)],
        (1_500_000_000_000_000 + np.sort(rng.integers(0, 4 * 3600, n)) * 1_000_000).tolist(),
        rng.choice(["vc1", "vc2", "vc3"], n).tolist(),
        rng.choice([1, 1, 2, 4, 8, 16, 24], n).tolist(),
        [
            [int(d) for d in rng.integers(60, 3600, rng.integers(1, 4)) * 1_000_003]
            for _ in range(n)
        ],
    )


def _starts(table: pa.Table) -> dict[tuple[str, int], int]:
    t = table.select(["job_id", "attempt_idx", "start_time"])
    return {
        (j, a): s
        for j, a, s in zip(
            t.column(0).to_pylist(),
            t.column(1).to_pylist(),
            t.column(2).cast(pa.int64()).to_pylist(),
            strict=True,
        )
    }


def test_replaying_a_replay_reproduces_start_times(tmp_path: Path) -> None:
    wl = busy_workload()
    cluster = Cluster.from_counts({2: 8, 8: 6}, racks=2)
    params = {"locality_wait_min": 5, "max_retries": 1}
    first = simulate(wl, cluster, "philly", None, params)
    assert first.metrics["queue_mean_s"] > 60  # a real queue, so order matters
    assert (np.asarray(first.attempts.column("num_machines")) > 1).any()  # slowdown exercised
    out = write_result_store(first, tmp_path / "out")
    second = run_replay(out, "philly", params, racks=2)
    assert _starts(second.attempts) == _starts(first.attempts)
    assert second.metrics["fidelity_queue_median_abs_err_s"] == 0.0
    assert second.metrics["fidelity_jobs"] == len(wl)
    for k in ("jct_mean_s", "queue_p95_s", "makespan_s", "gpu_util_allocated_pct"):
        assert second.metrics[k] == first.metrics[k]


def test_results_are_deterministic() -> None:
    wl = busy_workload(200, seed=9)
    cluster = Cluster.from_counts({8: 4})
    for policy in ("philly", "fifo", "las", "srtf"):
        a = simulate(wl, cluster, policy, seed=1)
        b = simulate(wl, cluster, policy, seed=1)
        assert a.metrics == b.metrics
        assert a.attempts.equals(b.attempts) and a.placements.equals(b.placements)


def test_observed_data_reports_median_absolute_queue_error(tmp_path: Path) -> None:
    res = run_replay(observed_store(tmp_path / "s"), "philly")
    assert res.metrics["fidelity_queue_median_abs_err_s"] == 30.0
    # errors 0, 30, 60 s: the 90th percentile interpolates 30 + 0.8 x 30
    assert res.metrics["fidelity_queue_p90_abs_err_s"] == pytest.approx(54.0)
    assert res.metrics["fidelity_jobs"] == 3
    assert res.metrics["queue_mean_s"] == 0.0


def test_frame_counts_and_quota_file(tmp_path: Path) -> None:
    import pandas as pd

    from philly_analyze.sim.cluster import Cluster as C

    assert C.from_counts().total_gpus == 2490 and C.from_counts().num_machines == 552
    df = pd.DataFrame(
        {
            "job_id": ["b", "a", "c"],
            "submit_time": pd.to_datetime(
                ["2017-10-01 00:00:10", "2017-10-01 00:00:00", "2017-10-01 00:00:00"]
            ),
            "vc": ["x", "x", "y"],
            "num_gpus": [8, 8, 8],
            "durations_s": [[100.0], [50.0, 100.0], [30.0]],
        }
    )
    wl = Workload.from_frame(df)
    # Sorted by (submit, id); the two-attempt job's first attempt failed and is retried.
    assert wl.job_ids.tolist() == ["a", "c", "b"]
    cluster = C.build(["m0"], [8])
    res = simulate(wl, cluster, "philly", {"x": 8, "y": 0}, {"borrow": False})
    # y has no quota and may not borrow: c never runs. a's first attempt fails at 50; its
    # retry queues behind b, which has waited since 10: b runs 50-150, the retry 150-250.
    starts = _starts(res.attempts)
    assert {k: v - starts[("a", 0)] for k, v in starts.items()} == {
        ("a", 0): 0,
        ("b", 0): 50_000_000,
        ("a", 1): 150_000_000,
    }
    assert res.metrics["jobs_unscheduled"] == 1
    # The same quotas from a file, through run_replay on a written store.
    out = write_result_store(res, tmp_path / "o")
    qf = tmp_path / "q.csv"
    qf.write_text("vc,gpus\nx,8\ny,8\n")
    again = run_replay(out, "philly", {"borrow": False}, quotas=qf)
    assert again.quotas == {"x": 8} and again.metrics["jobs"] == 2


def test_jobs_without_a_vc_keep_a_null_vc() -> None:
    wl = Workload.from_columns(
        ["a", "b"], [0, 0], ["x", None], [1, 1], [[10_000_000], [10_000_000]]
    )
    res = simulate(wl, Cluster.build(["m0"], [2]), "philly")
    assert dict(zip(*(res.jobs.column(c).to_pylist() for c in ("job_id", "vc")), strict=True)) == {
        "a": "x",
        "b": None,
    }
    assert set(res.quotas) == {"x"}
    assert None in res.per_vc.column("vc").to_pylist()
    assert res.metrics["jobs"] == 2  # the VC-less job borrowed idle GPUs
