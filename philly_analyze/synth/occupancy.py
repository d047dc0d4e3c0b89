"""How busy a cluster history keeps its servers: the per-minute share of *active* nodes (nodes
running at least one attempt), as in the real Philly node sequence
(``../shared/reference/philly/philly_node_sequence.csv``, read by ``realfit.node_share``).

``active_share`` counts, per minute ``m`` of a window, the servers that hold an attempt with
``start <= 60 m < end`` (the rule the utilization files use for a minute), divided by the
number of servers. ``summary`` gives the numbers the tests, the benchmark and docs/synth.md
compare: mean, quantiles, the mean by hour of day (wall-clock in the cluster's zone) and the
mean by day. ``plot`` draws real and synthesized side by side.

``python -m philly_analyze.synth.occupancy GROUND_TRUTH_DIR REFERENCE_DIR FIGURE.png`` prints
both summaries and writes the figure (docs/synth_active_nodes.png was made this way).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from philly_analyze.errors import ExitStatus

QUANTILES = (0.05, 0.25, 0.5, 0.75, 0.95)


def active_share(
    machine: np.ndarray, start_s: np.ndarray, end_s: np.ndarray, machines: int, minutes: int
) -> np.ndarray:
    """Per minute 0..minutes-1: share of ``machines`` servers running at least one of the
    intervals (machine index, start, end in seconds from the window start; an end past the
    window or -1 for still running counts to the window's end)."""
    horizon = minutes * 60
    end = np.where(end_s < 0, horizon, np.minimum(end_s, horizon)).astype(np.int64)
    start = np.asarray(start_s, dtype=np.int64)
    ok = end > start
    m, s, e = np.asarray(machine)[ok].astype(np.int64), start[ok], end[ok]
    # Union of each machine's intervals: shift machines apart, merge on a running max of ends.
    big = horizon + 1
    order = np.lexsort((s, m))
    s2, e2 = s[order] + m[order] * big, e[order] + m[order] * big
    reach = np.maximum.accumulate(e2)
    new = np.ones(len(s2), dtype=bool)
    new[1:] = s2[1:] > reach[:-1]
    seg_start = s2[new] % big
    seg_end = np.maximum.reduceat(e2, np.flatnonzero(new)) - (m[order][new] * big)
    # Minute m is covered when start <= 60 m < end.
    diff = np.zeros(minutes + 1, dtype=np.int64)
    np.add.at(diff, np.minimum(-(-seg_start // 60), minutes), 1)
    np.add.at(diff, np.minimum(-(-seg_end // 60), minutes), -1)
    return np.cumsum(diff)[:minutes] / machines


def from_ground_truth(truth: Path) -> pd.Series:
    """Per-minute active share of a synthesized history, from its ``ground_truth`` folder,
    indexed by naive wall-clock time in the window's zone."""
    manifest = json.loads((truth / "manifest.json").read_text())
    win = manifest["window"]
    att = pd.read_parquet(
        truth / "attempts.parquet", columns=["job_id", "attempt_idx", "start_time", "end_time"]
    )
    pl = pd.read_parquet(
        truth / "placements.parquet", columns=["job_id", "attempt_idx", "machine_id"]
    )
    ids = pd.read_parquet(truth / "machines.parquet", columns=["machine_id"])["machine_id"]
    x = pl.drop_duplicates().merge(att, on=["job_id", "attempt_idx"])
    t0 = pd.Timestamp(win["start_utc_epoch"], unit="s", tz="UTC")
    start = ((x["start_time"] - t0).dt.total_seconds()).to_numpy()
    end = ((x["end_time"] - t0).dt.total_seconds()).fillna(-1).to_numpy()
    index = {m: i for i, m in enumerate(ids)}
    machine = x["machine_id"].map(index).to_numpy()
    minutes = int(win["seconds"]) // 60
    share = active_share(machine, start, end, len(ids), minutes)
    times = pd.date_range(t0, periods=minutes, freq="min").tz_convert(win["timezone"])
    return pd.Series(share, index=times.tz_localize(None), name="share")


def summary(share: pd.Series) -> dict[str, Any]:
    """Mean, quantiles, largest value, minutes with every server active, mean by hour of day,
    by day of the week (Monday first) and by day of a per-minute share series (index: naive
    wall-clock times)."""
    idx = pd.DatetimeIndex(share.index)
    return {
        "minutes": len(share),
        "mean": float(share.mean()),
        "quantiles": {
            q: float(v) for q, v in zip(QUANTILES, share.quantile(list(QUANTILES)), strict=True)
        },
        "max": float(share.max()),
        "all_active_minutes": int((share >= 1.0 - 1e-9).sum()),
        "by_hour": share.groupby(idx.hour).mean().to_numpy(),
        "by_weekday": share.groupby(idx.day_of_week).mean().to_numpy(),
        "by_day": share.groupby(idx.normalize()).mean().to_numpy(),
    }


def shape_gap(a: np.ndarray, b: np.ndarray) -> float:
    """Largest difference between two profiles (e.g. ``by_hour``) once each is taken relative
    to its own mean: how far apart their shapes are, whatever their levels."""
    return float(np.abs((a - a.mean()) - (b - b.mean())).max())


def plot(real: pd.Series, synth: pd.Series, path: Path, synth_label: str = "synthesized") -> None:
    """Three panels: distribution (CDF), mean by hour of day, mean by day of the window."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(13, 3.8))
    for s, label, style in ((real, "real Philly", "-"), (synth, synth_label, "--")):
        v = np.sort(s.to_numpy())
        axes[0].plot(v, np.arange(1, len(v) + 1) / len(v), style, label=label)
        sm = summary(s)
        axes[1].plot(range(24), sm["by_hour"], style, marker=".", label=label)
        axes[2].plot(np.arange(len(sm["by_day"])), sm["by_day"], style, label=label)
    axes[0].set(xlabel="active-node share (per minute)", ylabel="fraction of minutes", xlim=(0, 1))
    axes[0].set_title("Distribution")
    axes[1].set(xlabel="hour of day (Pacific)", ylabel="mean active-node share", ylim=(0, 1))
    axes[1].set_title("Daily profile")
    axes[2].set(xlabel="day of the window", ylabel="mean active-node share", ylim=(0, 1))
    axes[2].set_title("Day by day")
    for ax in axes:
        ax.grid(alpha=0.3)
    axes[0].legend(loc="upper left", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _fmt(sm: dict[str, Any]) -> str:
    q = " ".join(f"p{round(k * 100)} {v:.3f}" for k, v in sm["quantiles"].items())
    h = sm["by_hour"]
    return f"mean {sm['mean']:.3f}  {q}  by hour {h.min():.3f}-{h.max():.3f}"


def main(argv: list[str]) -> int:
    """Print the real and synthesized summaries and write the figure (module docstring)."""
    from philly_analyze.synth.realfit import node_share

    truth, ref, fig = Path(argv[0]), Path(argv[1]), Path(argv[2])
    real = node_share(ref).set_index("time")["share"]
    synth = from_ground_truth(truth)
    print(f"real         {_fmt(summary(real))}")
    print(f"synthesized  {_fmt(summary(synth))}")
    cfg = json.loads((truth / "manifest.json").read_text())["config"]
    label = f"synthesized ({cfg['jobs']:,} jobs, {cfg['machines']} servers, seed {cfg['seed']})"
    plot(real, synth, fig, label)
    return ExitStatus.OK


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
