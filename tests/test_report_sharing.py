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


def test_the_run_is_as_short_as_asked(muxflow_store: Path) -> None:
    """`--param minutes=180` shortens the paper scenario (it was ignored: a day ran)."""
    assert SharingOutput.load(muxflow_store).metrics["minutes"] == 180


def test_counts_read_as_counts_and_the_caption_fits_any_length(
    muxflow_store: Path, tmp_path: Path
) -> None:
    """Jobs and evictions are whole numbers in every format (not "57.00"), beside
    percentages with decimals; the day figure's caption does not say "day" of a run of
    any length."""
    saved = SharingOutput.load(muxflow_store).metrics
    md = _invoke("report", "--store", str(muxflow_store), "--section", "gpu_sharing",
                 "--format", "md", "-q", "-o", str(tmp_path / "r.md"), "--figures",
                 str(tmp_path / "f"))  # fmt: skip
    md = (tmp_path / "r.md").read_text()
    row = next(ln for ln in md.splitlines() if ln.startswith("| offline jobs completed |"))
    assert row.split("|")[2].strip() == f"{saved['offline_completed']:,}"
    row = next(ln for ln in md.splitlines() if ln.startswith("| evictions of offline work |"))
    assert row.split("|")[2].strip() == f"{saved['evictions']:,}"
    row = next(ln for ln in md.splitlines() if ln.startswith("| GPU utilization of online"))
    assert row.split("|")[2].strip() == f"{100 * saved['gpu_util_online']:.2f}"
    doc = json.loads(_invoke("report", "--store", str(muxflow_store), "--section",
                             "gpu_sharing", "--format", "json", "-q"))  # fmt: skip
    rows = {r["metric"]: r["value"] for r in doc["gpu_sharing"]}
    assert type(rows["offline jobs completed"]) is int
    html = tmp_path / "r.html"
    _invoke("report", "--store", str(muxflow_store), "--section", "gpu_sharing", "-o",
            str(html), "-q")  # fmt: skip
    assert "online GPUs over the simulated period (MuxFlow)" in html.read_text()
    assert "simulated day" not in html.read_text()


def test_unfinished_attempts_have_no_duration_and_gpu_hours_add_up(muxflow_store: Path) -> None:
    """Attempts still running when the simulation stops have a null duration (not NaN,
    which made the summary's GPU hours absent: NaN summed to NaN), and the summary's GPU
    hours are those of the jobs whose every attempt has a duration."""
    from philly_analyze.store import Store

    with Store(muxflow_store, read_only=True) as st:
        n = st.df(
            "SELECT count(*) FILTER (WHERE isnan(duration_s)) AS nan, "
            "count(*) FILTER (WHERE duration_s IS NULL) AS null, "
            "count(*) FILTER (WHERE end_time IS NULL) AS running FROM attempts"
        ).iloc[0]
        # GPU time of the jobs whose attempts all have a known duration.
        known = st.df(
            "SELECT sum(s) / 3600 AS h FROM (SELECT job_id, CASE WHEN count(*) = "
            "count(duration_s) THEN sum(duration_s * num_gpus) END AS s FROM attempts "
            "GROUP BY job_id)"
        )["h"][0]
    assert (n["nan"], n["null"]) == (0, n["running"]) and n["running"] > 0
    doc = json.loads(_invoke("report", "--store", str(muxflow_store), "--section",
                             "summary", "--format", "json", "-q"))  # fmt: skip
    summary = {r["metric"]: r["value"] for r in doc["summary"]}
    assert summary["GPU hours used"] == pytest.approx(known) and known > 0
