"""Figure 8 (convergence) on loss curves worked out by hand."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

from philly_analyze.analysis import run
from philly_analyze.store import Store
from tests.analysis_stores import Att, Job, write_store


def _epochs(job: str, attempt: int, losses: list[float]) -> list[dict]:
    return [
        {
            "job_id": job,
            "attempt_idx": attempt,
            "epoch": i,
            "unit": "epoch",
            "loss": v,
            "line_no": 10 + i,
        }
        for i, v in enumerate(losses)
    ]


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """c1 passed, 2 GPUs x 100 min: losses 5, 3, 2.001, 2.0, 2.5 (+ a NaN, ignored):
       lowest at i=3 of n=5 -> 3/4; within 0.1% (<= 2.002) at i=2 -> 2/4; stopping after
       epoch 2 saves (5-1-2)/5 of 200/60 GPU-hours = 4/3.
    c2 killed, 1 GPU x 60 min: 1, 1, 1 -> both at i=0 -> 0; saves 2/3 of 1 GPU-hour.
    c3 unsuccessful: left out. c4 passed with one point: left out.
    c5 passed: attempt 0 (4, 3) and attempt 1 (3.5, 3.2, 3.0), 1 GPU x 30 min: the last
       attempt counts: lowest and within at i=2 of 3 -> 1.0; saves nothing."""
    jobs = [
        Job("c1", "v", "u", "passed", 0, [Att(0, 100, "passed", {"m0": [0, 1]})]),
        Job("c2", "v", "u", "killed", 0, [Att(0, 60, "killed", {"m0": [2]})]),
        Job("c3", "v", "u", "unsuccessful", 0, [Att(0, 60, "failed", {"m0": [3]})]),
        Job("c4", "v", "u", "passed", 0, [Att(0, 60, "passed", {"m0": [4]})]),
        Job(
            "c5",
            "v",
            "u",
            "passed",
            0,
            [Att(0, 10, "failed", {"m0": [5]}), Att(10, 40, "passed", {"m0": [5]})],
        ),
    ]
    rows = (
        _epochs("c1", 0, [5, 3, 2.001, 2.0, 2.5, float("nan")])
        + _epochs("c2", 0, [1, 1, 1])
        + _epochs("c3", 0, [3, 2, 1])
        + _epochs("c4", 0, [1])
        + _epochs("c5", 0, [4, 3])
        + _epochs("c5", 1, [3.5, 3.2, 3.0])
    )
    return write_store(
        tmp_path_factory.mktemp("c") / "store",
        machines={"m0": 8},
        jobs=jobs,
        extra={"epochs": pa.Table.from_pylist(rows)},
    )


def test_convergence_summary(store: Path) -> None:
    with Store(store, read_only=True) as s:
        rep = run(s, ["convergence"])
    c = rep["convergence"].data["curves"].set_index("job_id")
    assert set(c.index) == {"c1", "c2", "c5"}
    assert c.loc["c1", ["frac_lowest", "frac_within"]].tolist() == pytest.approx([0.75, 0.5])
    assert c.loc["c1", "saved_gpu_hours"] == pytest.approx(4 / 3)
    assert c.loc["c5", ["n", "frac_lowest", "saved_gpu_hours"]].tolist() == pytest.approx([3, 1, 0])
    t = rep["convergence"].frame("summary").set_index("status")
    assert t.loc["passed", "jobs"] == 2
    assert t.loc["passed", "median_frac_lowest"] == pytest.approx(0.875)
    assert t.loc["passed", "median_frac_within"] == pytest.approx(0.75)
    # GPU hours: c1 200/60 + c5 0.5; saved 4/3.
    assert t.loc["passed", "gpu_hours"] == pytest.approx(200 / 60 + 0.5)
    assert t.loc["passed", "saved_pct"] == pytest.approx(100 * (4 / 3) / (200 / 60 + 0.5))
    assert t.loc["killed", "within_by_40pct"] == pytest.approx(1.0)
    assert t.loc["killed", "saved_gpu_hours"] == pytest.approx(2 / 3)


def test_fig8_points(store: Path) -> None:
    with Store(store, read_only=True) as s:
        rep = run(s, ["convergence"])
    pts = rep["convergence"].frame("fig8_points")
    got = {
        (r.status, r.threshold, r.fraction_of_epochs): r.cumulative_fraction_of_jobs
        for r in pts.itertuples()
    }
    # passed within 0.1%: c1 0.5, c5 1.0 -> share <= 0.40 is 0, <= 0.95 is 1/2.
    assert got[("passed", "within_0.1pct_of_lowest", 0.40)] == pytest.approx(0.0)
    assert got[("passed", "within_0.1pct_of_lowest", 0.95)] == pytest.approx(0.5)
    # passed lowest: c1 0.75, c5 1.0 -> share <= 0.99 is 1/2; killed: c2 at 0.
    assert got[("passed", "lowest", 0.99)] == pytest.approx(0.5)
    assert got[("killed", "within_0.1pct_of_lowest", 0.40)] == pytest.approx(1.0)
    assert pts["paper_cumulative_fraction_of_jobs"].notna().all()


def test_gpu_hours_of_an_attempt_without_recorded_end_are_absent(tmp_path: Path) -> None:
    """c1 as above (passed, 2 GPUs x 100 min, saves 4/3 GPU-hours); k killed, its only
    attempt has no recorded end (the job ended: killed), losses 3, 2, 1: its curve counts
    (lowest and within at i=2 of 3 -> 1.0), its GPU time is unknown, so the killed row's
    GPU hours are absent (not 0) and "all" has c1's alone."""
    jobs = [
        Job("c1", "v", "u", "passed", 0, [Att(0, 100, "passed", {"m0": [0, 1]})]),
        Job("k", "v", "u", "killed", 0, [Att(0, None, "killed", {"m0": [2]})]),
    ]
    rows = _epochs("c1", 0, [5, 3, 2.001, 2.0, 2.5]) + _epochs("k", 0, [3, 2, 1])
    path = write_store(
        tmp_path / "store",
        machines={"m0": 8},
        jobs=jobs,
        extra={"epochs": pa.Table.from_pylist(rows)},
    )
    with Store(path, read_only=True) as s:
        rep = run(s, ["convergence"])
    t = rep["convergence"].frame("summary").set_index("status")
    assert t.loc["killed", "jobs"] == 1
    assert t.loc["killed", "median_frac_lowest"] == pytest.approx(1.0)
    assert t.loc["killed", ["gpu_hours", "saved_gpu_hours", "saved_pct"]].isna().all()
    assert t.loc["all", "jobs"] == 2
    assert t.loc["all", "gpu_hours"] == pytest.approx(200 / 60)
    assert t.loc["all", "saved_gpu_hours"] == pytest.approx(4 / 3)
    assert any(
        n.startswith("1 jobs' curve attempts have no known GPU time")
        for n in rep["convergence"].notes
    ), rep["convergence"].notes
