"""Table 6 (status), Figure 9 (retries) and the summary, on a store worked out by hand."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from philly_analyze.analysis import run
from philly_analyze.store import Store
from tests.analysis_stores import Att, Job, write_store


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """GPU time (GPU-hours): A passed 1 GPU x 60 min = 1; B passed 2 x 30 min = 1;
    C killed 4 x 30 min = 2; D unsuccessful 1 GPU, two failed attempts of 60 min = 2;
    E still running (no status), 8 GPUs; F killed while queued (never ran, 0 GPU time)."""
    m = {"m0": 8, "m1": 8}
    jobs = [
        Job("A", "v", "u", "passed", 0, [Att(0, 60, "passed", {"m0": [0]})]),
        Job("B", "v", "u", "passed", 0, [Att(0, 30, "passed", {"m0": [1, 2]})]),
        Job("C", "v", "u", "killed", 0, [Att(0, 30, "killed", {"m0": [3, 4, 5, 6]})]),
        Job(
            "D",
            "v",
            "u",
            "unsuccessful",
            0,
            [Att(0, 60, "failed", {"m1": [0]}), Att(60, 120, "failed", {"m1": [0]})],
        ),
        Job("E", "v", "u", None, 0, [Att(0, None, "running", {"m1": list(range(1, 8))})]),
        Job("F", "v", "u", "killed", 0, [], num_gpus=2),
    ]
    # E holds 7 GPUs: bucket 5-8.
    return write_store(tmp_path_factory.mktemp("st") / "store", machines=m, jobs=jobs)


def test_table6(store: Path) -> None:
    with Store(store, read_only=True) as s:
        rep = run(s, ["status"])
    t6 = rep["status"].frame("table6").set_index("status")
    # Jobs that ran to an end: A, B passed; C killed; D unsuccessful -> 2/4, 1/4, 1/4.
    # F (killed while queued) never ran and E is still running: not counted, as in the paper.
    assert t6["jobs"].to_dict() == {"passed": 2, "killed": 1, "unsuccessful": 1, "total": 4}
    assert t6.loc["passed", "jobs_pct"] == pytest.approx(50.0)
    # GPU hours 2 + 2 + 2 = 6, a third each.
    assert t6.loc["total", "gpu_hours"] == pytest.approx(6.0)
    assert t6.loc["unsuccessful", "gpu_time_pct"] == pytest.approx(100 / 3)
    assert t6.loc["passed", "paper_jobs"] == 66696
    assert any("1 jobs that never started are not counted" in n for n in rep["status"].notes)
    assert any("1 jobs without a final status" in n for n in rep["status"].notes)


def test_retries(store: Path) -> None:
    with Store(store, read_only=True) as s:
        rep = run(s, ["retries"])
    r = rep["retries"].frame("fig9").set_index("gpu_bucket")
    # 1 GPU: A (0 retries) and D (1) -> 0.5; D unsuccessful -> rate 0.5.
    assert r.loc["1", "avg_retries"] == pytest.approx(0.5)
    assert r.loc["1", "unsuccessful_rate"] == pytest.approx(0.5)
    # 2-4: B and C, no retry, none unsuccessful. F never ran: left out.
    assert r.loc["2-4", "jobs"] == 2 and r.loc["2-4", "avg_retries"] == 0
    # 5-8: E only, whose status is unknown: no rate.
    assert r.loc["5-8", "jobs"] == 1
    assert math.isnan(r["unsuccessful_rate"].loc["5-8"])
    # all: 5 jobs that ran, 1 retry -> 0.2; 1 unsuccessful of 4 with a status -> 0.25.
    assert r.loc["all", "avg_retries"] == pytest.approx(0.2)
    assert r.loc["all", "unsuccessful_rate"] == pytest.approx(0.25)
    assert r.loc["all", "paper_avg_retries"] == pytest.approx(0.44)


def test_summary(store: Path) -> None:
    with Store(store, read_only=True) as s:
        rep = run(s, ["summary"])
    summary = rep["summary"].frame("summary")
    d = dict(zip(summary["metric"], summary["value"], strict=True))
    assert d["jobs"] == 6
    assert d["jobs that ran"] == 5
    assert d["attempts"] == 6
    assert d["GPUs"] == 16
    assert d["machine shapes"] == "2 x 8 GPUs"
