"""Figures of locality, GPU utilization, host resources and GPU sharing (Table 5 and
Figures 4-7, MuxFlow's day and slowdown)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from philly_analyze.analysis import paper
from philly_analyze.analysis.common import BUCKET_LABELS, STATUSES, hist_cdf
from philly_analyze.report.plot_style import (
    BUCKET_STYLE,
    COLORS,
    STATUS_COLORS,
    cdf_steps,
    fmt_value,
    line_style,
    new_figure,
    no_reference,
    section_or_none,
)

if TYPE_CHECKING:
    from matplotlib.figure import Figure

    from philly_analyze.analysis import Report, Section


def _table5_panel(ax: Any, s16: pd.DataFrame) -> None:
    """Utilization CDF of 16-GPU jobs per number of servers spanned, the paper's Table 5 mean
    in the legend; every line its own colour and style."""
    groups = list(s16.groupby("servers", sort=True))
    for k, (servers, h) in enumerate(groups):
        x, y = cdf_steps(*hist_cdf(h), 100.0)
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
    sec = section_or_none(report, "locality")
    s16, dly = _fig4_panels(sec) if sec is not None else (None, None)
    if s16 is None:
        return "Queueing delay by servers spanned (Figure 4)"
    if dly is None:
        return "GPU utilization of 16-GPU jobs by servers spanned (Table 5)"
    return "Utilization and delay by servers spanned (Table 5, Figure 4)"


def fig4_locality(report: Report) -> Figure | None:
    """Figure 4: Table 5's utilization of 16-GPU jobs by servers spanned and the
    queueing delay by servers spanned, each panel drawn only when it has data."""
    sec = section_or_none(report, "locality")
    if sec is None:
        return None
    s16, dly = _fig4_panels(sec)
    panels = int(s16 is not None) + int(dly is not None)
    if panels == 0:
        return None
    fig, axes = new_figure(4.6 * panels, 3.6, panels, 1)
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
    """CDF of per-minute GPU utilization by final status (``by="status"``) or by job
    size, with the computed and the paper's means in the legend."""
    sec = section_or_none(report, "gpu_utilization")
    if sec is None or "hist" not in sec.data:
        return None
    h = sec.data["hist"]
    t3 = sec.frame("table3").set_index("job_size")
    fig, axes = new_figure(6.0, 3.8)
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
        x, y = cdf_steps(*hist_cdf(g), 100.0)
        label = f"{name} (mean {fmt_value(mean)}%, paper {fmt_value(ref)}%)"
        ax.step(x, y, where="post", color=color, label=label, lw=2.0 if name == "all" else 1.4)
    ax.set_xlim(0, 100)
    ax.set_ylim(0, 1.02)
    ax.set_xlabel("GPU utilization (%)")
    ax.set_ylabel("fraction of GPU-minutes")
    ax.legend(loc="lower right")
    return fig


def fig5_util_status(report: Report) -> Figure | None:
    """Figure 5: per-minute GPU utilization by final status."""
    return _util_cdf(report, "status")


def fig6_util_size(report: Report) -> Figure | None:
    """Figure 6: per-minute GPU utilization by job size (1, 4, 8, 16 GPUs)."""
    return _util_cdf(report, "size")


def fig7_host(report: Report) -> Figure | None:
    """Figure 7: CDFs of host CPU and memory use of servers running GPU jobs, all and
    by the servers' GPU count."""
    sec = section_or_none(report, "host_resources")
    if sec is None or not sec.data.get("hists"):
        return None
    hists = {k: h for k, h in sec.data["hists"].items() if not h.empty}
    if not hists:
        return None
    fig, axes = new_figure(4.2 * len(hists), 3.4, len(hists), 1)
    titles = {"cpu": "CPU utilization (%)", "mem": "memory used (%)"}
    for i, (key, h) in enumerate(sorted(hists.items())):
        ax = axes[0][i]
        groups = [("all servers", h)] + [
            (f"{int(n)}-GPU servers", g) for n, g in h.groupby("server_gpus", sort=True)
        ]
        for k, (label, g) in enumerate(groups):
            x, y = cdf_steps(*hist_cdf(g), 100.0)
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
    fig.suptitle("Figure 7: host resources\n" + no_reference("fig7"))
    return fig


def _sharing_section(report: Report) -> Any:
    """The sharing section when it holds a sharing run's output, else None."""
    sec = section_or_none(report, "gpu_sharing")
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
