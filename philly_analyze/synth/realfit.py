"""Compact parameters of the synthesizer's load, derived from real Philly data.

The real files live outside the project (``../shared/reference/philly``, see its README); none of
their rows are shipped. This module recomputes, from those files, the few numbers the
calibration file (``data/synth_calibration.toml``) carries in its ``[workload.arrivals]`` and
``[workload.vcs]`` tables, so the chain from data to constant stays checkable
(``tests/test_synth_realfit.py`` compares them when the files are present):

- **wall-clock origin of the RFold arrivals** (``rfold_philly_arrivals.csv`` counts seconds
  from its first arrival): the offset that makes most (duration, GPUs) pairs coincide with a
  job of the Pollux list (``pollux_philly_jobs.csv``, Pacific wall-clock submit times).
- **arrival groups**: arrivals sorted by time; a job joins the previous one's group when it
  asks for the same GPUs within ``GROUP_GAP_S`` seconds (a script submitting a sweep). Per GPU
  bucket, the share of groups by size (bins ``GROUP_BINS``, the last one up to the largest
  group seen), and the quantiles of the gaps inside groups.
- **hour-of-week rate** of group starts (168 values, Monday 00:00 first, mean 1), over the
  whole days of the node sequence's period (2017-10-03 to 2017-12-14, the default synthesized
  window; each slot divided by how often it occurs in that span).
- **day-to-day variation** over the same days: per day, the factor groups / expected from the
  hour-of-week rate; its quantiles (``DAY_QUANTILES``) and the lag-1 correlation of its normal
  scores (a Gaussian-copula AR(1): real busy days come in runs, and the factors have a light
  upper tail, at most about 2.5x, and a heavy lower one).
- **VCs** (Pollux list, 15 VCs by job count, largest first): per GPU bucket the share of that
  bucket's jobs in each VC, each VC's share of the GPU time, and its nodes in
  ``philly_vc_nodes.csv`` (0 for the 4 VCs it does not list).
- **active-node share** (``philly_node_sequence.csv``): per minute active / total nodes, for
  the comparisons of the tests, the benchmark and the docs (not a generator input).

``python -m philly_analyze.synth.realfit [DIR]`` prints the values as TOML.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from scipy import stats

from philly_analyze.errors import ExitStatus

#: Seconds between two arrivals of one group (chosen: a sweep script submits its jobs seconds
#: apart; 10 s keeps unrelated arrivals of a busy hour mostly apart).
GROUP_GAP_S = 10
#: Lower edges of the group-size bins; the last bin ends at the largest group seen.
GROUP_BINS = (1, 2, 3, 5, 9, 17, 33, 65, 129, 257)
#: GPU buckets (1, 2-4, 5-8, >8), as Figure 9's.
BUCKET_EDGES = (2, 5, 9)
GAP_QUANTILES = (0.0, 0.25, 0.5, 0.75, 1.0)
DAY_QUANTILES = (0.0, 0.05, 0.25, 0.5, 0.75, 0.95, 1.0)


def _bucket(gpus: np.ndarray) -> np.ndarray:
    return np.digitize(gpus, BUCKET_EDGES)


def read_rfold(ref: Path) -> pd.DataFrame:
    """RFold's arrivals: columns t (s from the first arrival), gpus, duration."""
    df = pd.read_csv(ref / "rfold_philly_arrivals.csv")
    df.columns = ["id", "t", "topology", "shape", "gpus", "duration"]
    return df.sort_values(["t", "id"], kind="stable").reset_index(drop=True)


def read_pollux(ref: Path) -> pd.DataFrame:
    """Pollux's job list with its submit times as naive Pacific wall-clock timestamps."""
    df = pd.read_csv(ref / "pollux_philly_jobs.csv")
    df["submit"] = pd.to_datetime(df["timestamp"])
    return df


def rfold_origin(rfold: pd.DataFrame, pollux: pd.DataFrame) -> pd.Timestamp:
    """Wall-clock time of RFold's second 0: the most common (Pollux submit - RFold arrival)
    over jobs with the same duration and GPUs (durations over 1,000 s, which are nearly
    unique; the mode holds most of the matches, the rest are coincidences)."""
    a = rfold[rfold.duration > 1000][["t", "gpus", "duration"]]
    b = pollux[pollux.duration > 1000][["submit", "num_gpus", "duration"]]
    m = a.merge(b, left_on=["duration", "gpus"], right_on=["duration", "num_gpus"])
    base = pd.Timestamp("2017-01-01")
    off = (m["submit"] - base).dt.total_seconds() - m["t"]
    return base + pd.Timedelta(seconds=float(off.round().mode().iloc[0]))


def groups(rfold: pd.DataFrame) -> pd.DataFrame:
    """One row per arrival group: start (s), gpus, jobs."""
    t = rfold["t"].to_numpy()
    g = rfold["gpus"].to_numpy()
    new = np.ones(len(t), dtype=bool)
    new[1:] = (g[1:] != g[:-1]) | (np.diff(t) > GROUP_GAP_S)
    gid = np.cumsum(new) - 1
    return pd.DataFrame({"t": t[new], "gpus": g[new], "jobs": np.bincount(gid)})


def group_params(rfold: pd.DataFrame) -> dict[str, Any]:
    """Group-size shares per GPU bucket and the gap quantiles inside groups."""
    gr = groups(rfold)
    b = _bucket(gr["gpus"].to_numpy())
    sizes = gr["jobs"].to_numpy()
    top = max(int(sizes.max()), GROUP_BINS[-1])
    edges = np.array([*GROUP_BINS, top + 1])
    shares = []
    for k in range(len(BUCKET_EDGES) + 1):
        h = np.histogram(sizes[b == k], bins=edges)[0]
        shares.append([round(float(x), 6) for x in h / max(h.sum(), 1)])
    t = rfold["t"].to_numpy()
    g = rfold["gpus"].to_numpy()
    same = (g[1:] == g[:-1]) & (np.diff(t) <= GROUP_GAP_S)
    gaps = np.diff(t)[same]
    return {
        "group_gap_seconds": GROUP_GAP_S,
        "group_size_bins": [*GROUP_BINS, top],
        "group_size_shares": shares,
        "group_gap_quantiles": [round(float(x), 3) for x in np.quantile(gaps, GAP_QUANTILES)],
    }


def weekly_params(
    rfold: pd.DataFrame, origin: pd.Timestamp, d0: pd.Timestamp, d1: pd.Timestamp
) -> dict[str, Any]:
    """Hour-of-week rate of group starts, and the day factors' log sd and lag-1 correlation,
    over the whole days from ``d0`` to ``d1`` (exclusive)."""
    gr = groups(rfold)
    ts = origin + pd.to_timedelta(gr["t"], unit="s")
    ts = ts[(ts >= d0) & (ts < d1)]
    how = ts.dt.day_of_week * 24 + ts.dt.hour
    counts = np.bincount(how, minlength=168).astype(float)
    hours = pd.date_range(d0, d1, freq="h", inclusive="left")
    occurs = np.bincount(hours.day_of_week * 24 + hours.hour, minlength=168)
    rate = counts / occurs
    rate /= rate.mean()
    days = pd.date_range(d0, d1, freq="D", inclusive="left")
    per_day = ts.dt.floor("D").value_counts().reindex(days, fill_value=0).to_numpy(float)
    expect = np.array([rate[d.day_of_week * 24 : d.day_of_week * 24 + 24].sum() for d in days])
    expect *= per_day.sum() / expect.sum()
    ratio = per_day / expect
    # Gaussian copula: the day factors' normal scores (by rank) and their lag-1 correlation.
    z = stats.norm.ppf((stats.rankdata(ratio) - 0.5) / len(ratio))
    rho = float(np.corrcoef(z[:-1], z[1:])[0, 1]) if z.std() > 0 else 0.0
    return {
        "hour_of_week": [round(float(v), 4) for v in rate],
        "day_factor_quantiles": [round(float(v), 4) for v in np.quantile(ratio, DAY_QUANTILES)],
        "day_factor_autocorr": round(rho, 4),
    }


def vc_params(pollux: pd.DataFrame, vc_nodes: pd.DataFrame) -> dict[str, Any]:
    """Per VC (largest job count first): P(VC | GPU bucket), GPU-time share, nodes."""
    p = pollux.assign(b=_bucket(pollux["num_gpus"].to_numpy()))
    order = p["cluster"].value_counts().index
    counts = p.groupby(["cluster", "b"]).size().unstack(fill_value=0).reindex(order, fill_value=0)
    counts = counts.reindex(columns=range(len(BUCKET_EDGES) + 1), fill_value=0)
    share = counts / counts.sum(axis=0)
    gt = p.groupby("cluster")["gpu_time"].sum().reindex(order)
    nodes = vc_nodes.set_index(vc_nodes.columns[0])[vc_nodes.columns[1]]
    return {
        "bucket_shares": [[round(float(v), 6) for v in row] for row in share.to_numpy()],
        "gpu_time_shares": [round(float(v), 6) for v in (gt / gt.sum()).to_numpy()],
        "nodes": [int(nodes.get(v, 0)) for v in order],
    }


def node_share(ref: Path) -> pd.DataFrame:
    """Per minute: time (naive Pacific wall-clock) and active / total nodes."""
    df = pd.read_csv(ref / "philly_node_sequence.csv", parse_dates=["time"])
    df["share"] = df["active"] / df["total"]
    return df


def derive_all(ref: Path) -> dict[str, Any]:
    """Every derived value (module docstring), keyed by its calibration-file table."""
    rfold = read_rfold(ref)
    pollux = read_pollux(ref)
    origin = rfold_origin(rfold, pollux)
    # The period of the node sequence (the default synthesized window): its whole days.
    t = node_share(ref)["time"]
    d0, d1 = t.min().normalize(), t.max().normalize()
    arrivals = {
        "rfold_origin": str(origin),
        "profile_days": [str(d0.date()), str(d1.date())],
        **weekly_params(rfold, origin, d0, d1),
    }
    arrivals.update(group_params(rfold))
    vcs = vc_params(pollux, pd.read_csv(ref / "philly_vc_nodes.csv"))
    return {"workload.arrivals": arrivals, "workload.vcs": vcs}


def _toml_value(v: Any) -> str:
    if isinstance(v, str):
        return f'"{v}"'
    if isinstance(v, list):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    return repr(v)


def main(argv: list[str]) -> int:
    """Print the values derived from the reference files as TOML tables (argv: the folder)."""
    ref = Path(argv[0]) if argv else Path("../shared/reference/philly")
    for table, values in derive_all(ref).items():
        print(f"[{table}]")
        for k, v in values.items():
            print(f"{k} = {_toml_value(v)}")
        print()
    return ExitStatus.OK


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
