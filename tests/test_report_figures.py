"""The report's figures on small hand-made stores: what each one says, and that drawing them
raises no matplotlib warning (a warning is printed on the user's stderr)."""

from __future__ import annotations

import os
import subprocess
import sys
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd
import pytest

from philly_analyze.analysis import Report, ResultTable, Section, run
from philly_analyze.report import figures
from philly_analyze.sharingout import LN_BIN, LN_BINS, SharingOutput
from philly_analyze.store import Store
from tests._sweep_data import sample_store
from tests.analysis_stores import Att, Job, minutes_util, write_store
from tests.conftest import ROOT

if TYPE_CHECKING:
    from matplotlib.figure import Figure
    from numpy.typing import ArrayLike


def _report(path: Path) -> Report:
    with Store(path, read_only=True) as store:
        return run(store)


def _drawn(report: Report) -> dict[str, Figure]:
    """Every figure of ``report``, drawn to PNG with warnings recorded (must be none)."""
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        built = figures.build(report)
        for _, fig in built:
            figures.to_bytes(fig, "png")
    assert [str(w.message) for w in seen] == []
    return {spec.name: fig for spec, fig in built}


def _values(data: ArrayLike) -> list[Any]:
    """A line's data as a list (matplotlib types it as any array-like)."""
    return np.asarray(data).tolist()


@pytest.fixture(scope="module")
def no_wait_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two jobs that start the minute they are submitted: nobody waited."""
    jobs = [
        Job("j1", "a", "u", "passed", 0, [Att(0, 30, "passed", {"m0": [0, 1]})]),
        Job("j2", "a", "u", "passed", 0, [Att(0, 30, "passed", {"m0": [2]})]),
    ]
    util = minutes_util([(m, "m0", g, 40.0) for m in range(30) for g in range(3)])
    return write_store(
        tmp_path_factory.mktemp("fig") / "s",
        machines={"m0": 8},
        jobs=jobs,
        extra={"gpu_util": util},
    )


def test_table2_legend_says_no_job_waited(no_wait_store: Path) -> None:
    fig = _drawn(_report(no_wait_store))["table2_wait_causes"]
    legend = fig.axes[0].get_legend()
    assert legend is not None
    # The colours are named even though only the paper's bars were drawn (the legend used to
    # be empty, with matplotlib's "No artists with labels" warning on stderr).
    assert [t.get_text() for t in legend.get_texts()] == [
        "fair-share",
        "fragmentation",
        "capacity",
        "other",
        "undetermined",
    ]
    assert "no job waited" in legend.get_title().get_text()
    texts = [t.get_text() for t in fig.axes[0].texts]
    assert texts.count("none\nwaited") == 4 and texts.count("not in\npaper") == 1


def test_utilization_cdfs_of_one_value_are_lines(no_wait_store: Path) -> None:
    """Every GPU-minute of the store at 40%: each CDF of Figures 5 and 6 rises from 0 to 1 at
    40 and runs to 100 (a lone point at (40, 1.0) before), whatever its line."""
    drawn = _drawn(_report(no_wait_store))
    for name in ("fig5_util_by_status", "fig6_util_by_size"):
        lines = [ln for ln in drawn[name].axes[0].get_lines() if len(_values(ln.get_xdata()))]
        assert lines, name
        for ln in lines:
            assert _values(ln.get_xdata()) == [40.0, 40.0, 100.0], (name, ln.get_label())
            assert _values(ln.get_ydata()) == [0.0, 1.0, 1.0], (name, ln.get_label())


def test_table5_panel_tells_13_server_counts_apart(tmp_path: Path) -> None:
    """16-GPU jobs spread over 2..14 servers of 8 GPUs: 13 lines, each its own colour and
    line style (7 colours used to repeat)."""
    machines = {f"m{i}": 8 for i in range(14)}
    jobs, util = [], []
    for k, servers in enumerate(range(2, 15)):
        # 16 GPUs over `servers` machines: 16 // servers each, the remainder on the first ones.
        per = [16 // servers + (i < 16 % servers) for i in range(servers)]
        gpus = {f"m{i}": list(range(n)) for i, n in enumerate(per)}
        start = 60 * k  # one after the other, so they never share a GPU
        jobs.append(
            Job(f"j{k}", "a", "u", "passed", start, [Att(start, start + 5, "passed", gpus)])
        )
        util += [(start + m, mid, g, 10.0 * servers) for m in range(5) for mid, gs in gpus.items()
                 for g in gs]  # fmt: skip
    store = write_store(
        tmp_path / "s", machines=machines, jobs=jobs, extra={"gpu_util": minutes_util(util)}
    )
    fig = _drawn(_report(store))["fig4_locality"]
    lines = [ln for ln in fig.axes[0].get_lines() if "servers:" in str(ln.get_label())]
    assert [str(ln.get_label()).split(" ")[0] for ln in lines] == [str(s) for s in range(2, 15)]
    styles = {(ln.get_color(), ln.get_linestyle()) for ln in lines}
    assert len(styles) == 13
    # Each job's minutes all fall in one 1% bin: each line still rises from 0 at its bin and
    # runs flat to 100% (it used to be a lone point at (bin, 1.0): 13 legend entries, no line).
    for ln, servers in zip(lines, range(2, 15), strict=True):
        bin_ = min(10 * servers, 100)
        assert _values(ln.get_xdata()) == [bin_, bin_, 100.0], servers
        assert _values(ln.get_ydata()) == [0.0, 1.0, 1.0], servers
    # The paper's Table 5 mean beside the computed one where it has the row (2, 4, 8 servers).
    assert "2 servers: mean 20.0 (paper 43.7)" in [ln.get_label() for ln in lines]


def test_figures_3_and_7_say_the_papers_curves_are_not_drawn() -> None:
    delays = pd.DataFrame({"vc": ["a", "a"], "gpu_bucket": ["1", "2-4"], "delay_min": [0.0, 5.0]})
    hist = pd.DataFrame({"server_gpus": [8, 8], "ubin": [10, 20], "minutes": [3, 1]})
    report = Report(
        {
            "queueing": Section(
                "queueing", "Q", [ResultTable("t", "t", pd.DataFrame())], data={"delays": delays}
            ),
            "host_resources": Section(
                "host_resources",
                "H",
                [ResultTable("h", "h", pd.DataFrame())],
                data={"hists": {"cpu": hist}},
            ),
        }
    )
    drawn = _drawn(report)
    for name, where in (("fig3_queueing_delay", "Figure 3"), ("fig7_host_resources", "Figure 7")):
        title = drawn[name].get_suptitle()
        assert f"the paper's {where}: no values transcribed, so none drawn" in title
    # Each CDF rises from 0 at its first value and runs flat to the panel's right edge: one
    # delay per bucket (0 and 5 minutes; edge 1.1 x 5), CPU minutes 3 at 10% and 1 at 20%.
    fig3 = [(_values(ln.get_xdata()), _values(ln.get_ydata())) for ln in drawn["fig3_queueing_delay"].axes[0].get_lines()]  # fmt: skip
    assert fig3 == [([0.0, 0.0, 5.5], [0.0, 1.0, 1.0]), ([5.0, 5.0, 5.5], [0.0, 1.0, 1.0])]
    cpu = drawn["fig7_host_resources"].axes[0].get_lines()[0]
    assert _values(cpu.get_xdata()) == [10.0, 10.0, 20.0, 100.0]
    assert _values(cpu.get_ydata()) == [0.0, 0.75, 1.0, 1.0]


def _sharing_report(top_slowdown: float) -> Report:
    """A sharing section whose shared GPU-minutes have slowdowns up to ``top_slowdown``."""
    hist = np.zeros(LN_BINS, np.int64)
    hist[: int(np.log(top_slowdown) / LN_BIN)] = 1
    ts = pd.DataFrame(
        {"minute": np.arange(120.0), "util_online": 0.3, "sm_online": 0.2, "mem_online": 0.4}
    )
    out = SharingOutput(policy="muxflow", metrics={}, timeseries=ts, slowdown_hist=hist)
    paper = {"before": {"gpu_util": 0.26}, "after": {"gpu_util": 0.76}}
    sec = Section(
        "gpu_sharing", "S", [ResultTable("m", "m", pd.DataFrame())],
        data={"output": out, "paper": paper},
    )  # fmt: skip
    return Report({"gpu_sharing": sec})


def test_sharing_figures_have_titles_and_fit_the_data() -> None:
    drawn = _drawn(_sharing_report(1.26))
    assert "GPU sharing (muxflow)" in drawn["sharing_day"].get_suptitle()
    ax = drawn["sharing_slowdown"].axes[0]
    assert ax.get_title() == "Online latency slowdown on shared GPUs (muxflow)"
    # Data end at 1.26 (bins of 0.001 in ln): the axis ends 5% of the span beyond, not at 2.5.
    left, right = ax.get_xlim()
    assert left == 1.0 and right == pytest.approx(1.0 + 0.26 * 1.05, abs=0.003)
    # Below the 1.2 SLO, the axis still reaches the SLO line.
    right = _drawn(_sharing_report(1.1))["sharing_slowdown"].axes[0].get_xlim()[1]
    assert right == pytest.approx(1.0 + 0.2 * 1.05)


def test_the_demos_report_prints_nothing_on_stderr(tmp_path: Path) -> None:
    """`make demo`'s report command as a user runs it, in its own process (pytest records
    warnings in-process, so a matplotlib warning would not show there): with -q, stderr is
    empty, so no warning (Python's or matplotlib's logging) reaches the user."""
    store = sample_store(tmp_path / "store")
    quotas = ROOT / "sample_data" / "ground_truth" / "vc_quotas.csv"
    p = subprocess.run(
        [sys.executable, "-c", "from philly_analyze.cli import main; main()", "report",
         "--store", str(store), "--vc-quotas", str(quotas), "--format", "html",
         "-o", str(tmp_path / "report.html"), "--figures", str(tmp_path / "figures"), "-q"],
        capture_output=True, text=True, env={**os.environ, "PYTHONWARNINGS": "default"},
    )  # fmt: skip
    assert p.returncode == 0, p.stderr
    assert p.stderr == ""
    assert len(list((tmp_path / "figures").glob("*.png"))) == 9


def test_figure8_legend_sits_beside_the_plot_not_on_it() -> None:
    """The legend used to sit in the upper left, over the curve of jobs within 0.1% early
    (here: every passed job at its first epoch, a line along the top from x = 0)."""
    curves = pd.DataFrame(
        {
            "status": ["passed", "passed", "killed"],
            "frac_lowest": [0.9, 1.0, 0.5],
            "frac_within": [0.0, 0.0, 0.3],
        }
    )
    empty = [ResultTable("s", "s", pd.DataFrame())]
    report = Report({"convergence": Section("convergence", "C", empty, data={"curves": curves})})
    fig = _drawn(report)["fig8_convergence"]
    fig.draw_without_rendering()
    ax = fig.axes[0]
    drawn_legend = ax.get_legend()
    assert drawn_legend is not None
    legend, plot = drawn_legend.get_window_extent(), ax.get_window_extent()
    assert legend.x0 >= plot.x1  # wholly right of the plotting area
    assert legend.y1 <= fig.bbox.y1 and legend.x1 <= fig.bbox.x1  # and inside the figure


def _caption(report: Report, name: str) -> str:
    (one,) = [r for r in figures.render_all(report, ("png",)) if r.spec.name == name]
    return one.caption


def test_figure4_caption_names_table5_only_when_its_panel_is_drawn(
    no_wait_store: Path, tmp_path: Path
) -> None:
    """The no-wait store has no 16-GPU job: Figure 4 is the delay panel alone, and its
    caption does not promise Table 5; with a 16-GPU job both panels and both names."""
    report = _report(no_wait_store)
    assert _caption(report, "fig4_locality") == "Queueing delay by servers spanned (Figure 4)"
    assert len(_drawn(report)["fig4_locality"].axes) == 1
    gpus = {"m0": list(range(8)), "m1": list(range(8))}
    jobs = [Job("j", "a", "u", "passed", 0, [Att(0, 5, "passed", gpus)])]
    util = minutes_util([(m, h, g, 50.0) for m in range(5) for h in gpus for g in range(8)])
    both = write_store(
        tmp_path / "s", machines={"m0": 8, "m1": 8}, jobs=jobs, extra={"gpu_util": util}
    )
    assert _caption(_report(both), "fig4_locality") == (
        "Utilization and delay by servers spanned (Table 5, Figure 4)"
    )
