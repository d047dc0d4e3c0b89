"""Replayed jobs keep their observed outcomes (issue 13), under every policy: the final status
of each job and its retries (failed attempts, retried) are the input's, whatever the
schedule. Before, the sharing policies wrote every training job as passed in one attempt:
Table 6 at 100% passed and Figure 9 at zero retries.

Hand-made store, two 8-GPU machines, VC v; attempts as (start, end) minutes and outcome:
  P1 passed        1 GPU   0-60 passed
  P2 passed        2 GPUs  0-10 failed; 15-45 passed                    (1 retry)
  K1 killed        4 GPUs  5-35 killed
  K2 killed        1 GPU   5-20 failed; 25-50 killed                    (1 retry)
  U1 unsuccessful  1 GPU   10-30 failed; 35-50 failed; 55-70 failed     (2 retries)
  P3 passed        8 GPUs  20-80 passed
Table 6: passed 3, killed 2, unsuccessful 1 (50%, 33.3%, 16.7% of 6 jobs).
Figure 9: 1 GPU: P1, K2, U1 -> 3 jobs, 3 retries, 1.0 per job, 1 of 3 unsuccessful;
2-4: P2, K1 -> 2 jobs, 1 retry; 5-8: P3 -> 0; all: 6 jobs, 4 retries, 1 of 6 unsuccessful.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from philly_analyze.cli import main
from tests.analysis_stores import Att, Job, write_store

POLICIES = ("philly", "relaxed", "fifo", "las", "srtf", "muxflow", "dedicated", "mps-naive")


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    def a(s: float, e: float, outcome: str, gpus: dict[str, list[int]]) -> Att:
        return Att(s, e, outcome, gpus)

    jobs = [
        Job("P1", "v", "u", "passed", 0, [a(0, 60, "passed", {"m0": [0]})]),
        Job(
            "P2",
            "v",
            "u",
            "passed",
            0,
            [a(0, 10, "failed", {"m0": [1, 2]}), a(15, 45, "passed", {"m0": [1, 2]})],
        ),
        Job("K1", "v", "u", "killed", 5, [a(5, 35, "killed", {"m0": [3, 4, 5, 6]})]),
        Job(
            "K2",
            "v",
            "u",
            "killed",
            5,
            [a(5, 20, "failed", {"m0": [7]}), a(25, 50, "killed", {"m0": [7]})],
        ),
        Job(
            "U1",
            "v",
            "u",
            "unsuccessful",
            10,
            [
                a(10, 30, "failed", {"m1": [0]}),
                a(35, 50, "failed", {"m1": [0]}),
                a(55, 70, "failed", {"m1": [0]}),
            ],
        ),
        Job("P3", "v", "u", "passed", 20, [a(20, 80, "passed", {"m1": list(range(8))})]),
    ]
    path = tmp_path_factory.mktemp("outcomes") / "store"
    return write_store(path, machines={"m0": 8, "m1": 8}, jobs=jobs)


def _report(store: Path) -> dict:
    r = CliRunner().invoke(
        main,
        [
            "report",
            "--store",
            str(store),
            "--format",
            "json",
            "-q",
            "--section",
            "status",
            "--section",
            "retries",
        ],
    )
    assert r.exit_code == 0, r.output
    return json.loads(r.output)


def _outcomes(doc: dict) -> tuple[dict, dict]:
    t6 = {r["status"]: (r["jobs"], round(r["jobs_pct"], 3)) for r in doc["status"]}
    fig9 = {
        r["gpu_bucket"]: (r["jobs"], r["retries"], round(r["unsuccessful_rate"], 3))
        for r in doc["retries"]
    }
    return t6, fig9


def test_the_input_store(store: Path) -> None:
    t6, fig9 = _outcomes(_report(store))
    assert t6 == {
        "passed": (3, 50.0),
        "killed": (2, 33.333),
        "unsuccessful": (1, 16.667),
        "total": (6, 100.0),
    }
    assert fig9 == {
        "1": (3, 3, 0.333),
        "2-4": (2, 1, 0.0),
        "5-8": (1, 0, 0.0),
        "all": (6, 4, 0.167),
    }


@pytest.mark.parametrize("policy", POLICIES)
def test_every_policy_keeps_statuses_and_retries(store: Path, tmp_path: Path, policy: str) -> None:
    out = tmp_path / policy
    r = CliRunner().invoke(
        main, ["replay", "--store", str(store), "--policy", policy, "--out", str(out), "-q"]
    )
    assert r.exit_code == 0, r.output
    assert _outcomes(_report(out)) == _outcomes(_report(store))
