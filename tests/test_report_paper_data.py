"""The paper's numbers the report shows (philly_analyze/data/paper_atc19.json) match the
reference copies of the paper's tables (../shared/reference/paper/*.csv)."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from philly_analyze.analysis import paper

TABLES = {
    "table2": "table2_queueing_delay",
    "table3": "table3_gpu_util_by_size_status",
    "table4": "table4_resnet50_locality",
    "table5": "table5_16gpu_util_by_servers",
    "table6": "table6_final_status",
    "table7": "table7_failures",
    "fig8": "fig8_convergence_approx",
    "fig9": "fig9_retries_approx",
}


@pytest.mark.parametrize("key", sorted(TABLES))
def test_paper_numbers_match_reference(reference: Path, key: str) -> None:
    with open(reference / "paper" / f"{TABLES[key]}.csv", newline="") as f:
        ref = list(csv.DictReader(f))
    ours = paper.rows(key)
    assert len(ours) == len(ref)
    for mine, theirs in zip(ours, ref, strict=True):
        assert set(mine) == set(theirs)
        for col, raw in theirs.items():
            try:
                assert float(mine[col]) == pytest.approx(float(raw)), (key, col)
            except ValueError:
                assert str(mine[col]) == raw, (key, col)


def test_citation_and_lookup() -> None:
    assert "ATC 2019" in paper.citation()
    assert paper.lookup("table6", "status", "passed", "jobs") == 66696
    assert paper.lookup("table5", "servers", 8, "p95") == pytest.approx(78.85)
    assert paper.lookup("table3", "job_size", "nope", "all") is None
    assert paper.where("table7") == "Table 7"
