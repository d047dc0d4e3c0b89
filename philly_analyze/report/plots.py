"""The figure builders of the report: one function per figure, ``Report -> Figure | None``
(None when the section is missing or empty). Pure matplotlib object API on an Agg canvas, no
pyplot state; ``figures`` applies the fixed style, encodes and writes them. Every axis has a
label with its unit; text from the data (VC names) is escaped for mathtext."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from philly_analyze.analysis import paper
from philly_analyze.analysis.common import BUCKET_LABELS, STATUSES, ecdf, hist_cdf

if TYPE_CHECKING:
    from matplotlib.figure import Figure

    from philly_analyze.analysis import Report, Section

COLORS = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#7f7f7f")
#: Ten colours (matplotlib's tab10) and the line styles that tell a colour's later uses apart:
#: ``line_style(k)`` is distinct for k < 40 (Table 5 can list a dozen server counts).
CYCLE_COLORS = (
    "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd",
    "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf",
)  # fmt: skip
CYCLE_STYLES = ("-", "--", ":", "-.")
STATUS_COLORS = dict(
    zip((*STATUSES, "all"), ("#2ca02c", "#ff7f0e", "#d62728", "#333333"), strict=True)
)
BUCKET_STYLE = {
    "1": ("#2ca02c", "-"),
    "2-4": ("#1f77b4", "-."),
    "5-8": ("#d62728", "--"),
    ">8": ("#9467bd", ":"),
}


def _fig(w: float, h: float, ncols: int = 1, nrows: int = 1) -> tuple[Figure, Any]:
    from matplotlib.figure import Figure

    fig = Figure(figsize=(w, h), layout="constrained")
    axes = fig.subplots(nrows, ncols, squeeze=False)
    return fig, axes


def _safe(text: object, limit: int = 28) -> str:
    """Data text for a label: no mathtext, bounded length."""
    s = str(text)
    if len(s) > limit:
        s = s[: limit - 1] + "…"
    return s.replace("$", r"\$")


def _section(report: Report, name: str) -> Any:
    sec = report.sections.get(name)
    return sec if sec is not None and sec.tables else None


def _no_reference(key: str) -> str:
    """Says on a figure that the paper's curves are not drawn, for figures whose values the
    data file does not hold (``paper.rows(key)`` empty: Figures 3 and 7)."""
    if paper.rows(key):  # values transcribed later must be drawn, not announced as absent
        raise ValueError(f"{key}: the paper's values exist; draw them")
    return f"(the paper's {paper.where(key)}: no values transcribed, so none drawn)"


def line_style(k: int) -> tuple[str, str]:
    """(colour, line style) of the k-th line of a panel: all colours solid, then dashed..."""
    n = len(CYCLE_COLORS)
    return CYCLE_COLORS[k % n], CYCLE_STYLES[(k // n) % len(CYCLE_STYLES)]


def _fmt(v: Any, digits: int = 1) -> str:
    return "–" if v is None or (isinstance(v, float) and np.isnan(v)) else f"{v:.{digits}f}"


def _cdf_steps(x: np.ndarray, y: np.ndarray, right: float) -> tuple[np.ndarray, np.ndarray]:
    """A CDF for ``ax.step(where="post")``: up from 0 at the first value, flat to ``right``
    (one value alone, e.g. all minutes in one 1% bin, is a line, not a lone point)."""
    return np.concatenate(([x[0]], x, [right])), np.concatenate(([0.0], y, [y[-1]]))


def fig3_queueing(report: Report) -> Figure | None:
    sec = _section(report, "queueing")
    if sec is None or "delays" not in sec.data:
        return None
    d = sec.data["delays"]
    vcs = d["vc"].value_counts().sort_index().sort_values(ascending=False, kind="stable")
    panels = [("all VCs", d)] + [(f"VC {_safe(v, 16)}", d[d["vc"] == v]) for v in vcs.index[:5]]
    ncols = {1: 1, 2: 2, 4: 2}.get(len(panels), 3)
    nrows = -(-len(panels) // ncols)
    fig, axes = _fig(3.6 * ncols, 2.9 * nrows, ncols, nrows)
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
            x, y = _cdf_steps(x, y, right)
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
        "Figure 3: queueing delay CDF by GPU demand (zero delays kept)\n" + _no_reference("fig3")
    )
    return fig


def table2_causes(report: Report) -> Figure | None:
    sec = _section(report, "queueing")
    if sec is None or not sec.has_table("table2"):
        return None
    from matplotlib.patches import Patch

    t2 = sec.frame("table2").set_index("delay_type")
    # Our bar by our causes; the paper's by its two (its fragmentation = ours + capacity).
    mine = (
        sec.frame("table2_causes").set_index("delay_type") if sec.has_table("table2_causes") else t2
    )
    cols = [("gpus_1", "1"), ("gpus_2_4", "2-4"), ("gpus_5_8", "5-8"), ("gpus_gt8", ">8")]
    fig, axes = _fig(7.2, 3.6)
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
        for off, vals, hatch, empty in (
            (-0.2, ours, "", "none\nwaited"),
            (0.2, pap_arr, "//", "not in\npaper"),
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


def _table5_panel(ax: Any, s16: pd.DataFrame) -> None:
    """Utilization CDF of 16-GPU jobs per number of servers spanned, the paper's Table 5 mean
    in the legend; every line its own colour and style."""
    groups = list(s16.groupby("servers", sort=True))
    for k, (servers, h) in enumerate(groups):
        x, y = _cdf_steps(*hist_cdf(h), 100.0)
        mean = float(h["util_sum"].sum()) / float(h["minutes"].sum())
        pm = paper.lookup("table5", "servers", servers, "mean")
        ref = f" (paper {pm:.1f})" if pm is not None else ""
        color, ls = line_style(k)
        ax.step(
            x, y, where="post", color=color, ls=ls,
            label=f"{servers} servers: mean {mean:.1f}{ref}",
        )  # fmt: skip
    ax.set_xlim(0, 100)
    ax.set_ylim(0, 1.02)
    ax.set_xlabel("GPU utilization (%)")
    ax.set_ylabel("fraction of GPU-minutes")
    ax.set_title("16-GPU jobs by servers spanned (Table 5)")
    if len(groups) > 5:  # a long legend would cover the curves: beside the panel
        ax.legend(
            loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=7,
            title="mean util %", title_fontsize=7.5,
        )  # fmt: skip
    else:
        ax.legend(loc="lower right", fontsize=7.5, title="mean util %", title_fontsize=7.5)


def _fig4_panels(sec: Section) -> tuple[pd.DataFrame | None, pd.DataFrame | None]:
    """The data of Figure 4's two panels, None for a panel with nothing to draw: Table 5's
    utilization of 16-GPU attempts by servers, and the queueing delay by servers spanned."""
    s16 = sec.data.get("servers16")
    dly = sec.frame("delay_by_servers") if sec.has_table("delay_by_servers") else None
    return (
        s16 if s16 is not None and not s16.empty else None,
        dly if dly is not None and not dly.empty else None,
    )


def fig4_caption(report: Report) -> str:
    """Figure 4's caption, naming Table 5 only when its panel is drawn."""
    sec = _section(report, "locality")
    s16, dly = _fig4_panels(sec) if sec is not None else (None, None)
    if s16 is None:
        return "Queueing delay by servers spanned (Figure 4)"
    if dly is None:
        return "GPU utilization of 16-GPU jobs by servers spanned (Table 5)"
    return "Utilization and delay by servers spanned (Table 5, Figure 4)"


def fig4_locality(report: Report) -> Figure | None:
    sec = _section(report, "locality")
    if sec is None:
        return None
    s16, dly = _fig4_panels(sec)
    panels = int(s16 is not None) + int(dly is not None)
    if panels == 0:
        return None
    fig, axes = _fig(4.6 * panels, 3.6, panels, 1)
    i = 0
    if s16 is not None:
        _table5_panel(axes[0][i], s16)
        i += 1
    if dly is not None:
        from matplotlib.ticker import MaxNLocator

        ax = axes[0][i]
        for b in BUCKET_LABELS:
            db = dly[dly["gpu_bucket"] == b]
            if db.empty:
                continue
            color, ls = BUCKET_STYLE[b]
            ax.plot(db["servers"], db["p50_min"], marker="o", color=color, ls=ls, label=f"{b} GPU")
            ax.plot(db["servers"], db["p90_min"], marker="^", color=color, ls=ls, lw=0.8, alpha=0.5)
        ax.plot([], [], "o", color="#555555", label="median")
        ax.plot([], [], "^", color="#555555", alpha=0.5, label="p90")
        ax.set_yscale("symlog", linthresh=1.0)
        # At least 0-1 minute: when nobody waited, matplotlib's default for an all-zero symlog
        # axis is a 0.055 "minute" scale printed as 5.5x10^-2.
        top = float(np.nanmax(dly[["p50_min", "p90_min"]].to_numpy(float), initial=0.0))
        ax.set_ylim(0, max(top * 1.5, 1.0))
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set_xlabel("servers spanned by the first attempt")
        ax.set_ylabel("queueing delay (minutes, log above 1)")
        ax.set_title("Queueing delay vs servers spanned")
        ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), title="demand")
    fig.suptitle("Figure 4: locality")
    return fig


def _util_cdf(report: Report, by: str) -> Figure | None:
    sec = _section(report, "gpu_utilization")
    if sec is None or "hist" not in sec.data:
        return None
    h = sec.data["hist"]
    t3 = sec.frame("table3").set_index("job_size")
    fig, axes = _fig(6.0, 3.8)
    ax = axes[0][0]
    # (label, histogram rows, computed mean, paper mean, colour) per line.
    if by == "status":
        lines = [
            (
                s,
                h[h["status"] == s],
                t3.loc["all", s],
                t3.loc["all", f"paper_{s}"],
                STATUS_COLORS[s],
            )
            for s in STATUSES
        ]
        ax.set_title("Figure 5: per-minute GPU utilization by final status")
    else:
        lines = [
            (
                f"{n} GPU",
                h[h["job_gpus"] == n],
                t3.loc[str(n), "all"],
                t3.loc[str(n), "paper_all"],
                COLORS[k],
            )
            for k, n in enumerate((1, 4, 8, 16))
        ]
        ax.set_title("Figure 6: per-minute GPU utilization by job size")
    lines.append(("all", h, t3.loc["all", "all"], t3.loc["all", "paper_all"], "#333333"))
    for name, g, mean, ref, color in lines:
        if g.empty:
            continue
        x, y = _cdf_steps(*hist_cdf(g), 100.0)
        label = f"{name} (mean {_fmt(mean)}%, paper {_fmt(ref)}%)"
        ax.step(x, y, where="post", color=color, label=label, lw=2.0 if name == "all" else 1.4)
    ax.set_xlim(0, 100)
    ax.set_ylim(0, 1.02)
    ax.set_xlabel("GPU utilization (%)")
    ax.set_ylabel("fraction of GPU-minutes")
    ax.legend(loc="lower right")
    return fig


def fig5_util_status(report: Report) -> Figure | None:
    return _util_cdf(report, "status")


def fig6_util_size(report: Report) -> Figure | None:
    return _util_cdf(report, "size")


def fig7_host(report: Report) -> Figure | None:
    sec = _section(report, "host_resources")
    if sec is None or not sec.data.get("hists"):
        return None
    hists = {k: h for k, h in sec.data["hists"].items() if not h.empty}
    if not hists:
        return None
    fig, axes = _fig(4.2 * len(hists), 3.4, len(hists), 1)
    titles = {"cpu": "CPU utilization (%)", "mem": "memory used (%)"}
    for i, (key, h) in enumerate(sorted(hists.items())):
        ax = axes[0][i]
        groups = [("all servers", h)] + [
            (f"{int(n)}-GPU servers", g) for n, g in h.groupby("server_gpus", sort=True)
        ]
        for k, (label, g) in enumerate(groups):
            x, y = _cdf_steps(*hist_cdf(g), 100.0)
            color, ls = ("#333333", "-") if k == 0 else line_style(k - 1)
            ax.step(
                x,
                y,
                where="post",
                color=color,
                ls=ls,
                lw=2.0 if k == 0 else 1.3,
                label=label,
            )
        ax.set_xlim(0, 100)
        ax.set_ylim(0, 1.02)
        ax.set_xlabel(titles[key])
        ax.set_ylabel("fraction of server-minutes")
        ax.set_title(f"{'CPU' if key == 'cpu' else 'Memory'} of servers running GPU jobs")
        ax.legend(loc="lower right")
    fig.suptitle("Figure 7: host resources\n" + _no_reference("fig7"))
    return fig


def fig8_convergence(report: Report) -> Figure | None:
    sec = _section(report, "convergence")
    if sec is None or "curves" not in sec.data:
        return None
    from philly_analyze.analysis.convergence import cdf

    c = sec.data["curves"]
    fig, axes = _fig(8.4, 3.8)  # the plot as wide as before, the legend beside it
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


def _headroom(ax: Any, *values: np.ndarray) -> None:
    """Room above the bars for a one-line legend."""
    top = max((float(np.nanmax(v)) for v in values if len(v) and np.isfinite(v).any()), default=1.0)
    ax.set_ylim(0, (top or 1.0) * 1.25)


def _paired_bars(
    df: Any,
    ticks: list[str],
    panels: tuple[tuple[str, str], ...],
    xlabel: str,
    paper_label: str,
    title: str,
) -> Figure:
    """One panel per (column, y label): the computed value beside the paper's (hatched)."""
    fig, axes = _fig(3.6 * len(panels) + 0.8, 3.3, len(panels), 1)
    x = np.arange(len(df))
    for ax, (col, label) in zip(axes[0], panels, strict=True):
        ours = df[col].astype(float).to_numpy()
        pap = df[f"paper_{col}"].astype(float).to_numpy()
        ax.bar(x - 0.2, ours, 0.38, color="#1f77b4", label="computed")
        for xi in x[np.isnan(ours)]:  # absent, not 0: say so where the bar would be
            ax.text(xi - 0.2, 0, "no data", rotation=90, ha="center", va="bottom", fontsize=8)
        ax.bar(
            x + 0.2,
            np.nan_to_num(pap),
            0.38,
            color="#bbbbbb",
            hatch="//",
            edgecolor="white",
            label=paper_label,
        )
        ax.set_xticks(x, ticks)
        ax.set_xlim(-0.6, len(df) - 0.4)
        ax.set_xlabel(xlabel)
        ax.set_ylabel(label)
        _headroom(ax, ours, pap)
        ax.legend(loc="upper left", ncols=2)
    fig.suptitle(title)
    return fig


def fig9_retries(report: Report) -> Figure | None:
    sec = _section(report, "retries")
    if sec is None:
        return None
    df = sec.frame("fig9")
    df = df[df["gpu_bucket"] != "unknown"]
    return _paired_bars(
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
    sec = _section(report, "status")
    if sec is None:
        return None
    df = sec.frame("table6")
    df = df[df["status"] != "total"]
    return _paired_bars(
        df,
        list(df["status"]),
        (("jobs_pct", "% of jobs"), ("gpu_time_pct", "% of GPU time")),
        "final status",
        "paper",
        "Table 6: jobs and GPU time by final status",
    )


def _sharing_section(report: Report) -> Any:
    sec = _section(report, "gpu_sharing")
    return sec if sec is not None and "output" in sec.data else None


def sharing_day(report: Report) -> Figure | None:
    """MuxFlow: the day's utilization, SM activity and memory of online GPUs, with the paper's
    before/after numbers (drawn by ``report.sharing``, as ``replay --figures`` draws them)."""
    sec = _sharing_section(report)
    if sec is None:
        return None
    from philly_analyze.report.sharing import day_figure

    out = sec.data["output"]
    return day_figure({out.policy: out}, sec.data["paper"])


def sharing_slowdown(report: Report) -> Figure | None:
    """MuxFlow: CDF of the online latency slowdown over shared GPU-minutes."""
    sec = _sharing_section(report)
    if sec is None:
        return None
    from philly_analyze.report.sharing import slowdown_figure

    out = sec.data["output"]
    return slowdown_figure({out.policy: out})
