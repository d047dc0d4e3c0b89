"""Figures of the jobs' queueing, final status, retries and convergence (Figure 3, Table 2,
Table 6, Figures 8 and 9)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from philly_analyze.analysis import paper
from philly_analyze.analysis.common import BUCKET_LABELS, ecdf
from philly_analyze.report.plot_style import (
    BUCKET_STYLE,
    cdf_steps,
    new_figure,
    no_reference,
    paired_bars,
    safe_text,
    section_or_none,
)

if TYPE_CHECKING:
    from matplotlib.figure import Figure

    from philly_analyze.analysis import Report


def fig3_queueing(report: Report) -> Figure | None:
    """Figure 3: CDFs of queueing delay by GPU demand, for all VCs and the five
    busiest; None without the queueing section's delays."""
    sec = section_or_none(report, "queueing")
    if sec is None or "delays" not in sec.data:
        return None
    d = sec.data["delays"]
    vcs = d["vc"].value_counts().sort_index().sort_values(ascending=False, kind="stable")
    panels = [("all VCs", d)] + [(f"VC {safe_text(v, 16)}", d[d["vc"] == v]) for v in vcs.index[:5]]
    ncols = {1: 1, 2: 2, 4: 2}.get(len(panels), 3)
    nrows = -(-len(panels) // ncols)
    fig, axes = new_figure(3.6 * ncols, 2.9 * nrows, ncols, nrows)
    for i, (title, dv) in enumerate(panels):
        ax = axes[i // ncols][i % ncols]
        right = max(1.0, float(np.nanmax(dv["delay_min"].to_numpy(), initial=0.0))) * 1.1
        for b in BUCKET_LABELS:
            v = dv.loc[dv["gpu_bucket"] == b, "delay_min"].to_numpy()
            if len(v) == 0:
                continue
            x, y = ecdf(v)
            if len(x) == 0:
                continue
            x, y = cdf_steps(x, y, right)
            color, ls = BUCKET_STYLE[b]
            ax.step(x, y, where="post", color=color, ls=ls, label=f"{b} GPU ({len(v):,})")
        ax.set_xscale("symlog", linthresh=1.0)
        ax.set_xlim(0, right)
        ax.set_ylim(0, 1.02)
        ax.set_title(f"{title} ({len(dv):,} jobs)")
        ax.set_xlabel("queueing delay (minutes, log above 1)")
        ax.set_ylabel("fraction of jobs")
        ax.legend(loc="best", title="demand (jobs)", title_fontsize=8)
    for j in range(len(panels), nrows * ncols):
        axes[j // ncols][j % ncols].set_visible(False)
    fig.suptitle(
        "Figure 3: queueing delay CDF by GPU demand (zero delays kept)\n" + no_reference("fig3")
    )
    return fig


def table2_causes(report: Report) -> Figure | None:
    """Table 2: the share of waiting jobs by main cause per GPU demand, the computed bar
    beside the paper's (hatched); None without the table."""
    sec = section_or_none(report, "queueing")
    if sec is None or not sec.has_table("table2"):
        return None
    from matplotlib.patches import Patch

    t2 = sec.frame("table2").set_index("delay_type")
    # Our bar by our causes; the paper's by its two (its fragmentation = ours + capacity).
    mine = (
        sec.frame("table2_causes").set_index("delay_type") if sec.has_table("table2_causes") else t2
    )
    cols = [("gpus_1", "1"), ("gpus_2_4", "2-4"), ("gpus_5_8", "5-8"), ("gpus_gt8", ">8")]
    fig, axes = new_figure(7.2, 3.6)
    ax = axes[0][0]
    colors = {
        "fair_share": "#1f77b4",
        "fragmentation": "#d62728",
        "capacity": "#ff9f40",
        "other": "#bbbbbb",
        # Moments the data cannot tell (waitcause.UNDETERMINED): pale, apart from the causes.
        "undetermined": "#c5b0d5",
    }
    kinds = [(k, colors[k]) for k in colors if k in mine.index]
    xt, xl = [], []
    waited = 0.0
    for i, (col, label) in enumerate(cols):
        ours = np.array([float(mine.loc[k, col]) for k, _ in kinds])
        waited += ours.sum()
        pcol = f"paper_{col}"
        pap_arr = np.array(
            [
                float(t2.loc[k, pcol])
                if k in t2.index and pcol in t2.columns and pd.notna(t2.loc[k, pcol])
                else 0.0
                for k, _ in kinds
            ]
        )
        _stacked_pair(ax, i, ours, pap_arr, kinds)
        xt += [i - 0.2, i + 0.2]
        xl += [f"{label}\nours", f"{label}\npaper"]
    ax.set_xticks(xt, xl)
    ax.set_ylabel("% of waiting jobs")
    ax.set_ylim(0, 100)
    ax.set_xlabel(
        "GPU demand; left bar computed, right bar (hatched) the paper's Table 2\n"
        "(the paper's fragmentation counts our fragmentation and capacity;\n"
        "undetermined: moments whose cause the data cannot tell)"
    )
    # The legend names the colours whichever bars were drawn (proxies, never empty).
    handles = [Patch(color=c, label=k.replace("_", "-")) for k, c in kinds]
    title = "main cause" if waited > 0 else "main cause\n(no job waited\nin this store)"
    ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.0, 1.0), title=title)
    ax.set_title("Table 2: why jobs waited (share of waiting jobs by main cause)")
    return fig


def _stacked_pair(
    ax: Any, i: int, ours: np.ndarray, paper_values: np.ndarray, kinds: list[tuple[str, str]]
) -> None:
    """Table 2's two bars at ``i``: ours and the paper's (hatched), each stacked by cause as
    percentages of its total; a bar with nothing to stack says why instead."""
    for off, vals, hatch, empty in (
        (-0.2, ours, "", "none\nwaited"),
        (0.2, paper_values, "//", "not in\npaper"),
    ):
        tot = vals.sum()
        if tot <= 0:
            ax.text(i + off, 2, empty, ha="center", va="bottom", fontsize=7, color="#777777")
            continue
        bottom = 0.0
        for (_, color), v in zip(kinds, vals, strict=True):
            share = 100.0 * v / tot
            ax.bar(
                i + off, share, 0.36, bottom=bottom, color=color, hatch=hatch,
                edgecolor="white",
            )  # fmt: skip
            bottom += share


def fig8_convergence(report: Report) -> Figure | None:
    """Figure 8: CDFs of the fraction of epochs passed and killed jobs needed to come
    within 0.1% of, or reach, their lowest loss, with the paper's points read off its plot."""
    sec = section_or_none(report, "convergence")
    if sec is None or "curves" not in sec.data:
        return None
    from philly_analyze.analysis.convergence import cdf

    c = sec.data["curves"]
    fig, axes = new_figure(8.4, 3.8)  # the plot as wide as before, the legend beside it
    ax = axes[0][0]
    spec = {
        ("passed", "frac_within"): ("#2ca02c", "-", "passed: within 0.1% of lowest"),
        ("passed", "frac_lowest"): ("#2ca02c", ":", "passed: lowest loss"),
        ("killed", "frac_within"): ("#ff7f0e", "-", "killed: within 0.1% of lowest"),
        ("killed", "frac_lowest"): ("#ff7f0e", ":", "killed: lowest loss"),
    }
    for (st, col), (color, ls, label) in spec.items():
        x, y = cdf(c.loc[c["status"] == st, col])
        if len(x):
            ax.step(
                np.concatenate([[0.0], x, [1.0]]),
                np.concatenate([[0.0], y, [1.0]]),
                where="post",
                color=color,
                ls=ls,
                label=label,
            )
    thr = {"within_0.1pct_of_lowest": "o", "lowest": "s"}
    for r in paper.rows("fig8"):
        color = spec[(str(r["jobs"]), "frac_within")][0]
        ax.plot(
            [r["fraction_of_epochs"]],
            [r["cumulative_fraction_of_jobs"]],
            thr[str(r["threshold"])],
            mfc="none",
            mec=color,
            ms=7,
        )
    ax.plot([], [], "o", mfc="none", mec="#555555", label="paper: within 0.1% (read off plot)")
    ax.plot([], [], "s", mfc="none", mec="#555555", label="paper: lowest (read off plot)")
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1.02)
    ax.set_xlabel("fraction of epochs (0 = first, 1 = last)")
    ax.set_ylabel("fraction of jobs")
    ax.set_title("Figure 8: epochs needed to reach the lowest loss")
    # Outside the axes: inside, any corner covers a curve or a paper marker of some store.
    ax.legend(loc="upper left", bbox_to_anchor=(1.02, 1.0), fontsize=7.5)
    return fig


def fig9_retries(report: Report) -> Figure | None:
    """Figure 9: average retries and unsuccessful rate by GPU demand, computed beside
    the paper's."""
    sec = section_or_none(report, "retries")
    if sec is None:
        return None
    df = sec.frame("fig9")
    df = df[df["gpu_bucket"] != "unknown"]
    return paired_bars(
        df,
        [f"{b} GPU" if b != "all" else "all" for b in df["gpu_bucket"]],
        (
            ("avg_retries", "average retries per job"),
            ("unsuccessful_rate", "unsuccessful rate (fraction of jobs)"),
        ),
        "GPU demand",
        "paper (read off plot)",
        "Figure 9: retries and unsuccessful jobs by GPU demand",
    )


def table6_status(report: Report) -> Figure | None:
    """Table 6: shares of jobs and GPU time by final status, computed beside the
    paper's."""
    sec = section_or_none(report, "status")
    if sec is None:
        return None
    df = sec.frame("table6")
    df = df[df["status"] != "total"]
    return paired_bars(
        df,
        list(df["status"]),
        (("jobs_pct", "% of jobs"), ("gpu_time_pct", "% of GPU time")),
        "final status",
        "paper",
        "Table 6: jobs and GPU time by final status",
    )
