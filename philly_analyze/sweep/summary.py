"""Across-seed summary of a sweep: per (policy, parameter values) cell and metric, the mean
and a Student-t confidence interval over the seeds.

The interval is ``mean ± t_{(1+c)/2, n-1} · s / sqrt(n)`` (``scipy.stats.t``), with ``s`` the
sample standard deviation (ddof 1) of the ``n`` successful runs that report the metric; it is
undefined (null) for one run. Seeds are independent replications, so this is the textbook
interval for the expected metric under the seed's randomness (arrival jitter, MuxFlow's
random draws); it says nothing about error in the simulator's model itself.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from philly_analyze.sweep.spec import PARAM_PREFIX

SUMMARY_COLUMNS = ("metric", "n", "mean", "sd", "ci_low", "ci_high", "half_width")


def t_interval(values: Sequence[float | None], confidence: float = 0.95) -> dict[str, float | None]:
    """Mean, sd and the t-interval of ``values`` (nulls dropped). ``n`` may be 0 or 1."""
    from scipy import stats

    x = np.asarray([v for v in values if v is not None and not math.isnan(v)], dtype=float)
    n = len(x)
    out: dict[str, float | None] = dict.fromkeys(SUMMARY_COLUMNS[1:])
    out["n"] = n
    if n == 0:
        return out
    out["mean"] = mean = float(x.mean())
    if n == 1:
        return out
    sd = float(x.std(ddof=1))
    hw = float(stats.t.ppf((1 + confidence) / 2, n - 1) * sd / math.sqrt(n)) if sd > 0 else 0.0
    out.update(sd=sd, ci_low=mean - hw, ci_high=mean + hw, half_width=hw)
    return out


def metric_columns(runs: pd.DataFrame) -> list[str]:
    """The numeric metric columns of a runs table, in table order."""
    from philly_analyze.sweep.results import FIXED

    return [
        c
        for c in runs.columns
        if c not in FIXED
        and not c.startswith(PARAM_PREFIX)
        and (pd.api.types.is_numeric_dtype(runs[c]) and not pd.api.types.is_bool_dtype(runs[c]))
    ]


def cell_columns(runs: pd.DataFrame) -> list[str]:
    """What identifies a cell: policy and every parameter column."""
    return ["policy", *sorted(c for c in runs.columns if c.startswith(PARAM_PREFIX))]


def summarize(runs: pd.DataFrame, confidence: float = 0.95) -> pd.DataFrame:
    """Long summary: one row per (cell, metric) with ``runs`` (ok runs of the cell),
    ``failed``, and ``SUMMARY_COLUMNS``. Cells keep the order of their first run in
    ``runs``."""
    cells = cell_columns(runs)
    metrics = metric_columns(runs)
    out: list[dict[str, Any]] = []
    keys = runs[cells].astype(object).where(runs[cells].notna(), None)
    cell_of = [tuple(r) for r in keys.itertuples(index=False)]
    order: dict[tuple[Any, ...], list[int]] = {}
    for i, c in enumerate(cell_of):
        order.setdefault(c, []).append(i)
    status = runs["status"].to_numpy()
    for cell, idx in order.items():
        ok = [i for i in idx if status[i] == "ok"]
        base = dict(zip(cells, cell, strict=True))
        base.update(runs=len(ok), failed=len(idx) - len(ok))
        for m in metrics:
            col = runs[m].to_numpy(dtype=float, na_value=np.nan)
            out.append({**base, "metric": m, **t_interval(col[ok].tolist(), confidence)})
    return pd.DataFrame(out, columns=[*cells, "runs", "failed", *SUMMARY_COLUMNS])


def seed_invariant(summary: pd.DataFrame) -> list[str]:
    """Policies whose every cell had >1 run and zero spread in every metric: their seeds
    changed nothing (the bundled queue policies use no randomness; ``--jitter`` adds some)."""
    out = []
    for pol, g in summary.groupby("policy", sort=False):
        g = g[g["n"] > 1]
        if len(g) and (g["sd"] == 0).all():
            out.append(str(pol))
    return out
