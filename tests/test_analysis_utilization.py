"""GPU utilization (Table 3) and locality (Table 5, delay vs servers) by hand."""

from __future__ import annotations

from pathlib import Path

import pytest

from philly_analyze.analysis import run
from philly_analyze.store import Store
from tests.analysis_stores import Att, Job, minutes_util, write_store


@pytest.fixture(scope="module")
def util_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """m0 (8 GPUs), s0 (2 GPUs). Per-minute samples (minute, machine, gpu, util):
    - p1 passed 1 GPU s0/0 [0,4): 10, 20, 30, 40; plus 99 at minute 4 (after its end: out)
    - p1b passed 1 GPU s0/0 [10,12): 75, 85; nothing between 5 and 9 on s0/0
    - k4 killed 4 GPUs m0/0-3 [0,2): gpu0 50,50  gpu1 60,60  gpu2 70,70  gpu3 80,80
    - u1 unsuccessful 1 GPU s0/1: attempt 0 [0,2) 100,100; attempt 1 [3,4) 0
    - m0/4-7 idle at minutes 0-1 with util 5 (no placement: out)
    """
    jobs = [
        Job("p1", "v", "u", "passed", 0, [Att(0, 4, "passed", {"s0": [0]})]),
        Job("p1b", "v", "u", "passed", 10, [Att(10, 12, "passed", {"s0": [0]})]),
        Job("k4", "v", "u", "killed", 0, [Att(0, 2, "killed", {"m0": [0, 1, 2, 3]})]),
        Job(
            "u1",
            "v",
            "u",
            "unsuccessful",
            0,
            [Att(0, 2, "failed", {"s0": [1]}), Att(3, 4, "failed", {"s0": [1]})],
        ),
    ]
    rows = [(m, "s0", 0, u) for m, u in zip(range(5), (10, 20, 30, 40, 99), strict=True)]
    rows += [(10, "s0", 0, 75), (11, "s0", 0, 85)]
    rows += [(m, "m0", g, 50 + 10 * g) for m in (0, 1) for g in range(4)]
    rows += [(m, "m0", g, 5) for m in (0, 1) for g in range(4, 8)]
    rows += [(0, "s0", 1, 100), (1, "s0", 1, 100), (3, "s0", 1, 0)]
    return write_store(
        tmp_path_factory.mktemp("u") / "store",
        machines={"m0": 8, "s0": 2},
        jobs=jobs,
        extra={"gpu_util": minutes_util(rows)},
    )


def test_table3_per_minute_means(util_store: Path) -> None:
    with Store(util_store, read_only=True) as s:
        rep = run(s, ["gpu_utilization"])
    t3 = rep["gpu_utilization"].frame("table3_minute_weighted").set_index("job_size")
    # size 1 passed: (10+20+30+40+75+85)/6 = 260/6; unsuccessful: (100+100+0)/3
    assert t3.loc["1", "passed"] == pytest.approx(260 / 6)
    assert t3.loc["1", "unsuccessful"] == pytest.approx(200 / 3)
    assert t3.loc["1", "all"] == pytest.approx(460 / 9)
    assert t3.loc["1", "jobs"] == 3
    # size 4 killed: (50+60+70+80)*2/8 = 65
    assert t3.loc["4", "killed"] == pytest.approx(65.0)
    # all sizes, all statuses: (260 + 520 + 200) / 17 GPU-minutes
    assert t3.loc["all", "all"] == pytest.approx(980 / 17)
    assert t3.loc["all", "gpu_minutes"] == 17
    assert t3.loc["16", "jobs"] == 0
    assert t3.loc["1", "paper_passed"] == pytest.approx(53.51)
    jm = rep["gpu_utilization"].frame("table3").set_index("job_size")
    # per-job means: p1 25, p1b 80, k4 65, u1 200/3 -> size 1 passed (25+80)/2
    assert jm.loc["1", "passed"] == pytest.approx(52.5)
    assert jm.loc["all", "all"] == pytest.approx((25 + 80 + 65 + 200 / 3) / 4)


def test_running_attempt_counts_to_last_sample(tmp_path: Path) -> None:
    """An attempt without an end counts up to the last sample: r8 starts at 20, samples at
    minutes 20 and 21 (util 30 and 50 on its GPU) both count: mean 40."""
    jobs = [Job("r8", "v", "u", None, 20, [Att(20, None, "running", {"m0": [0]})])]
    rows = [(20, "m0", 0, 30.0), (21, "m0", 0, 50.0)]
    p = write_store(
        tmp_path / "s", machines={"m0": 8}, jobs=jobs, extra={"gpu_util": minutes_util(rows)}
    )
    with Store(p, read_only=True) as s:
        rep = run(s, ["gpu_utilization"])
    t3 = rep["gpu_utilization"].frame("table3_minute_weighted").set_index("job_size")
    assert t3.loc["1", "all"] == pytest.approx(40.0)
    assert t3.loc["1", "gpu_minutes"] == 2
    assert rep["gpu_utilization"].frame("table3").set_index("job_size").loc["1", "all"] == 40.0


@pytest.fixture(scope="module")
def locality_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """a0..a3 (8 GPUs each).
    - x2: 16 GPUs on a0+a1 (8 each), submit 0, runs [0,2): a0 GPUs at 40, a1 GPUs at 60
      -> 32 samples, 16 x 40 and 16 x 60.
    - x4: 16 GPUs on a0..a3 (4 each), submit 4, runs [10,11): per server 10, 20, 30, 100
      -> 16 samples, 4 of each.
    - s1: 1 GPU on a3, submit 0, runs [0,1): delay 0, one server.
    """
    four = [0, 1, 2, 3]
    jobs = [
        Job(
            "x2",
            "v",
            "u",
            "passed",
            0,
            [Att(0, 2, "passed", {"a0": list(range(8)), "a1": list(range(8))})],
        ),
        Job(
            "x4", "v", "u", "passed", 4, [Att(10, 11, "passed", {f"a{i}": four for i in range(4)})]
        ),
        Job("s1", "v", "u", "passed", 0, [Att(0, 1, "passed", {"a3": [7]})]),
    ]
    rows = [(m, "a0", g, 40.0) for m in (0, 1) for g in range(8)]
    rows += [(m, "a1", g, 60.0) for m in (0, 1) for g in range(8)]
    rows += [(10, f"a{i}", g, v) for i, v in enumerate((10, 20, 30, 100)) for g in four]
    return write_store(
        tmp_path_factory.mktemp("l") / "store",
        machines={f"a{i}": 8 for i in range(4)},
        jobs=jobs,
        extra={"gpu_util": minutes_util(rows)},
    )


def test_table5_by_servers(locality_store: Path) -> None:
    with Store(locality_store, read_only=True) as s:
        rep = run(s, ["locality"])
    t5 = rep["locality"].frame("table5").set_index("servers")
    # 2 servers: mean (16*40 + 16*60)/32 = 50; nearest-rank p50 = 16th of 32 -> 40;
    # p90 = 28.8th -> 60; p95 -> 60.
    assert t5.loc[2, ["mean", "p50", "p90", "p95"]].to_numpy().tolist() == pytest.approx(
        [50, 40, 60, 60]
    )
    # 4 servers: mean (10+20+30+100)*4/16 = 40; p50 = 8th of 16 -> 20; p90 = 14.4th -> 100.
    assert t5.loc[4, ["mean", "p50", "p90", "p95"]].to_numpy().tolist() == pytest.approx(
        [40, 20, 100, 100]
    )
    assert t5.loc[2, "paper_mean"] == pytest.approx(43.66)
    assert t5.loc[4, "attempts"] == 1


def test_delay_by_servers(locality_store: Path) -> None:
    with Store(locality_store, read_only=True) as s:
        rep = run(s, ["locality"])
    d = rep["locality"].frame("delay_by_servers").set_index(["gpu_bucket", "servers"])
    assert d.loc[(">8", 2), "mean_min"] == pytest.approx(0.0)
    assert d.loc[(">8", 4), "mean_min"] == pytest.approx(6.0)  # submit 4, start 10
    assert d.loc[("1", 1), "jobs"] == 1


def test_missing_gpu_util_is_a_note(tmp_path: Path) -> None:
    jobs = [Job("j", "v", "u", "passed", 0, [Att(0, 1, "passed", {"m0": [0]})])]
    p = write_store(tmp_path / "s", machines={"m0": 8}, jobs=jobs)
    with Store(p, read_only=True) as s:
        rep = run(s, ["gpu_utilization", "locality"])
    assert rep["gpu_utilization"].tables == []
    assert "gpu_util" in rep["gpu_utilization"].notes[0]
    assert any("Table 5" in n for n in rep["locality"].notes)
    assert rep["locality"].has_table("delay_by_servers")  # needs only placements


def test_table5_per_attempt_weighs_each_attempt_once(tmp_path: Path) -> None:
    eight = list(range(8))
    on_two = {"a0": eight, "a1": eight}
    jobs = [
        Job("short", "v", "u", "passed", 0, [Att(0, 1, "passed", on_two)]),  # 1 min at 90%
        Job("long", "v", "u", "passed", 10, [Att(10, 13, "passed", on_two)]),  # 3 min at 30%
    ]
    rows = [(0, m, g, 90.0) for m in ("a0", "a1") for g in eight]
    rows += [(t, m, g, 30.0) for t in (10, 11, 12) for m in ("a0", "a1") for g in eight]
    store = write_store(
        tmp_path / "store",
        machines={"a0": 8, "a1": 8},
        jobs=jobs,
        extra={"gpu_util": minutes_util(rows)},
    )
    with Store(store, read_only=True) as s:
        rep = run(s, ["locality"])
    # Per GPU-minute: (16 x 90 + 48 x 30) / 64 = 45; per attempt: (90 + 30) / 2 = 60, and the
    # percentiles interpolate between the two attempts: p50 60, p90 84, p95 87.
    assert rep["locality"].frame("table5").set_index("servers").loc[2, "mean"] == pytest.approx(45)
    t = rep["locality"].frame("table5_per_attempt").set_index("servers")
    assert t.loc[2, ["attempts", "mean", "p50", "p90", "p95"]].to_numpy().tolist() == pytest.approx(
        [2, 60, 60, 84, 87]
    )
    assert t.loc[2, "paper_mean"] == pytest.approx(43.66)
