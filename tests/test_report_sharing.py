"""The report on a sharing replay's output: the gpu_sharing section and its figures."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from philly_analyze.cli import main
from philly_analyze.sharingout import SharingOutput
from philly_analyze.sim.sharing.config import SharingConfig


def _invoke(*args: str) -> str:
    r = CliRunner().invoke(main, list(args))
    assert r.exit_code == 0, r.output
    return r.stdout


@pytest.fixture(scope="module")
def muxflow_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("mux") / "replay"
    _invoke(
        "replay", "--policy", "muxflow", "--scenario", "paper", "--param", "online_gpus=30",
        "--param", "minutes=180", "--out", str(out), "-q", "--format", "json",
    )  # fmt: skip
    return out


def test_sharing_section_shows_the_runs_metrics_beside_the_papers(muxflow_store: Path) -> None:
    doc = json.loads(_invoke("report", "--store", str(muxflow_store), "--format", "json", "-q"))
    rows = {r["metric"]: r for r in doc["gpu_sharing"]}
    saved = SharingOutput.load(muxflow_store).metrics
    util = rows["GPU utilization of online GPUs (%)"]
    # The section reads what the replay saved (fractions shown as %), and muxflow sits beside
    # the paper's "after" number from the model's data file.
    assert util["value"] == pytest.approx(100 * saved["gpu_util_online"], abs=0.01)
    after = SharingConfig.load().paper.paper_after["gpu_util"]
    assert util["paper_value"] == pytest.approx(100 * after)
    assert rows["evictions of offline work"]["value"] == saved["evictions"]
    assert "gpu_sharing" in doc["meta"]["sections"]


def test_sharing_figures_are_written(muxflow_store: Path, tmp_path: Path) -> None:
    figs = tmp_path / "figs"
    _invoke("report", "--store", str(muxflow_store), "-o", str(tmp_path / "r.md"),
            "--figures", str(figs), "-q")  # fmt: skip
    for name in ("sharing_day", "sharing_slowdown"):
        assert (figs / f"{name}.png").stat().st_size > 10_000
    assert "sharing_day.png" in (tmp_path / "r.md").read_text()


def test_other_stores_leave_the_section_out_unless_asked(tmp_path: Path) -> None:
    store = tmp_path / "s"
    ref = Path(__file__).parents[1] / "sample_data" / "cluster_machine_list"
    _invoke("ingest", str(ref), "--store", str(store), "-q")
    doc = json.loads(_invoke("report", "--store", str(store), "--format", "json", "-q"))
    assert "gpu_sharing" not in doc["meta"]["sections"]
    doc = json.loads(
        _invoke("report", "--store", str(store), "--format", "json", "-q", "--section", "muxflow")
    )
    assert doc["gpu_sharing"] == []
    assert "replay --policy muxflow --out" in doc["section_notes"]["gpu_sharing"][0]


def test_footer_cites_muxflow_beside_the_atc_paper(muxflow_store: Path, tmp_path: Path) -> None:
    """The sharing section's paper values are MuxFlow's: the footer cites it (and the ATC'19
    paper for the other sections); a report without that section cites only ATC'19."""
    _invoke("report", "--store", str(muxflow_store), "-o", str(tmp_path / "r.html"), "-q")
    footer = (tmp_path / "r.html").read_text().split("<footer>")[1]
    assert "Zhao et al. MuxFlow: Efficient and Safe GPU Sharing" in footer
    assert "arXiv 2303.13803" in footer and "USENIX ATC 2019" in footer
    only = json.loads(
        _invoke(
            "report",
            "--store",
            str(muxflow_store),
            "--section",
            "gpu_sharing",
            "--format",
            "json",
            "-q",
        )
    )["meta"]["citations"]
    assert len(only) == 1 and only[0].startswith("(paper) values of the GPU sharing section: Zhao")
    plain = json.loads(
        _invoke(
            "report", "--store", str(muxflow_store), "--section", "status", "--format", "json", "-q"
        )
    )["meta"]["citations"]
    assert len(plain) == 1 and "ATC 2019" in plain[0] and "Zhao" not in plain[0]
