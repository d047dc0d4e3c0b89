"""Table 7 (failures) on a store worked out by hand."""

from __future__ import annotations

from pathlib import Path

import pytest

from philly_analyze.analysis import run
from philly_analyze.store import Store
from tests.analysis_stores import Att, Job, write_store


def _failure(job: str, attempt: int, reason: str, cats: str, message: str = "boom") -> dict:
    return {
        "job_id": job,
        "attempt_idx": attempt,
        "reason": reason,
        "categories": cats,
        "line_no": 7,
        "message": message,
    }


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Failed attempts (runtime to failure, minutes; GPUs):
    f1 (u1, 1 GPU): attempt 0 10 min CPU OOM, attempt 1 20 min CPU OOM, attempt 2 passed;
    f2 (u2, 4 GPUs): attempt 0 30 min Incorrect inputs;
    f3 (u1, 8 GPUs): attempt 0 60 min CPU OOM;
    f4 (u2, 1 GPU): passed, yet its log has a Core dump line -> not a failure;
    f5 (u2, 1 GPU): failed 5 min, no failure evidence."""
    g8 = list(range(8))
    jobs = [
        Job(
            "f1",
            "v",
            "u1",
            "passed",
            0,
            [
                Att(0, 10, "failed", {"m0": [0]}),
                Att(10, 30, "failed", {"m0": [0]}),
                Att(30, 40, "passed", {"m0": [0]}),
            ],
        ),
        Job("f2", "v", "u2", "unsuccessful", 0, [Att(0, 30, "failed", {"m1": [0, 1, 2, 3]})]),
        Job("f3", "v", "u1", "unsuccessful", 0, [Att(100, 160, "failed", {"m1": g8})]),
        Job("f4", "v", "u2", "passed", 0, [Att(0, 5, "passed", {"m0": [1]})]),
        Job("f5", "v", "u2", "unsuccessful", 0, [Att(0, 5, "failed", {"m0": [2]})]),
    ]
    fails = [
        _failure("f1", 0, "CPU out of memory", "AE,U"),
        _failure("f1", 1, "CPU out of memory", "AE,U"),
        _failure("f2", 0, "Incorrect inputs", "IF,U"),
        _failure("f3", 0, "CPU out of memory", "AE,U"),
        _failure("f4", 0, "Core dump", "AE,U"),
    ]
    import pyarrow as pa

    return write_store(
        tmp_path_factory.mktemp("f") / "store",
        machines={"m0": 8, "m1": 8},
        jobs=jobs,
        extra={"failures": pa.Table.from_pylist(fails)},
    )


def test_table7(store: Path) -> None:
    with Store(store, read_only=True) as s:
        rep = run(s, ["failures"])
    t7 = rep["failures"].frame("table7").set_index("reason")
    oom = t7.loc["CPU out of memory"]
    assert (oom["trials"], oom["jobs"], oom["users"]) == (3, 2, 1)
    # RTF 10, 20, 60: p50 20; linear p90 at position 1.8 -> 20 + 0.8 * 40 = 52; p95 -> 56.
    assert oom["rtf_p50_min"] == pytest.approx(20)
    assert oom["rtf_p90_min"] == pytest.approx(52)
    assert oom["rtf_p95_min"] == pytest.approx(56)
    # RTF share: 90 of 120 minutes; demand 1,1,8 GPUs.
    assert oom["rtf_total_pct"] == pytest.approx(75.0)
    assert (oom["gpu_demand_1"], oom["gpu_demand_2_4"], oom["gpu_demand_gt4"]) == (2, 0, 1)
    # RTF x demand: 10 + 20 + 60*8 = 510 of 510 + 30*4 = 630 GPU-minutes.
    assert oom["rtf_x_demand"] == pytest.approx(510)
    assert oom["rtf_x_demand_pct"] == pytest.approx(100 * 510 / 630)
    assert oom["categories"] == "AE,U"
    assert oom["paper_trials"] == 12076
    inp = t7.loc["Incorrect inputs"]
    assert (inp["trials"], inp["gpu_demand_2_4"], inp["rtf_p95_min"]) == (1, 1, 30)
    assert "Core dump" not in t7.index  # f4 passed
    assert t7.loc["total", "trials"] == 4 and t7.loc["total", "users"] == 2
    assert list(t7.index[:2]) == ["CPU out of memory", "Incorrect inputs"]  # by trials
    notes = " ".join(rep["failures"].notes)
    assert "1 attempts whose logs match a failure signature did not fail" in notes
    assert "4 of 5 failed attempts have failure evidence" in notes


def test_categories_and_repeats(store: Path) -> None:
    with Store(store, read_only=True) as s:
        rep = run(s, ["failures"])
    cat = rep["failures"].frame("categories").set_index("category")
    # AE: the 3 OOM trials; IF: the 1 incorrect-input trial; U: both reasons, all 4.
    assert cat.loc["AE", "trials"] == 3 and cat.loc["AE", "trials_pct"] == pytest.approx(75)
    assert cat.loc["IF", "trials"] == 1
    assert cat.loc["U", "trials"] == 4 and cat.loc["U", "rtf_pct"] == pytest.approx(100)
    rp = rep["failures"].frame("repeats").set_index("reason")
    # OOM: u1 alone, 3 trials; overall u1 3 and u2 1 -> 1 repeating user, top user 75%.
    assert rp.loc["CPU out of memory", "users_repeating"] == 1
    assert rp.loc["all", "trials_per_user"] == pytest.approx(2.0)
    assert rp.loc["all", "top_user_trials_pct"] == pytest.approx(75.0)


def test_missing_failures_table(tmp_path: Path) -> None:
    jobs = [Job("j", "v", "u", "passed", 0, [Att(0, 1, "passed", {"m0": [0]})])]
    p = write_store(tmp_path / "s", machines={"m0": 8}, jobs=jobs)
    with Store(p, read_only=True) as s:
        rep = run(s, ["failures"])
    assert rep["failures"].tables == [] and "failures table" in rep["failures"].notes[0]


def test_logs_only_store_uses_verdicts(tmp_path: Path) -> None:
    """Framework logs without scheduler data: verdict failed/unmatched rows are the trials
    (RTF unknown); completed/none are not failures."""
    import pyarrow as pa

    rows = [
        {**_failure("x1", 0, "GPU out of memory", "AE"), "verdict": "failed"},
        {**_failure("x2", 0, "No signature", "-"), "verdict": "unmatched"},
        {**_failure("x3", 0, "No signature", "-"), "verdict": "completed"},
        {**_failure("x4", 0, "No signature", "-"), "verdict": "none"},
    ]
    p = write_store(tmp_path / "s", extra={"failures": pa.Table.from_pylist(rows)})
    with Store(p, read_only=True) as s:
        rep = run(s, ["failures"])
    t7 = rep["failures"].frame("table7").set_index("reason")
    assert t7.loc["GPU out of memory", "trials"] == 1
    assert t7.loc["No signature", "trials"] == 1  # x2 only
    assert t7.loc["total", "trials"] == 2
    notes = " ".join(rep["failures"].notes)
    assert "2 failed trials are known only from their logs" in notes
    # x3 and x4 matched no signature: logs of attempts that ended well are not evidence.
    assert "did not fail" not in notes
