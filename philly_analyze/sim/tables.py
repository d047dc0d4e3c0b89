"""What ``replay`` prints, as documents of the output layer (``philly_analyze.report``):
the policy comparison (a metric per row, a policy per column) and the table of runs of an
``--ablate`` / ``--vary`` experiment. The CLI renders them in any format.

The JSON objects keep the contract keys of docs/replay.md (``store``, ``cluster``,
``results[]`` with ``metrics``, ``per_vc``...; an experiment's header keys and ``rows``);
json and csv carry each fraction followed by the same in percent (``units.with_percent_keys``),
the text tables each value in its unit (``units.human``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from philly_analyze.report.model import TEXT_FORMATS as TEXT
from philly_analyze.report.model import Document, Section, Table
from philly_analyze.sim.metrics import METRICS
from philly_analyze.units import human, with_percent_keys


def comparison_document(
    results: Sequence[tuple[Any, Path | None]], store: str, machines: int, gpus: int
) -> Document:
    """The policies' metrics side by side (``results``: (ReplayResult, store written or
    None) per policy), on a cluster of ``machines`` and ``gpus``."""
    names = [r.policy for r, _ in results]
    keys = [k for k in METRICS if any(k in r.metrics for r, _ in results)]
    # Policies may report more (the sharing ones: utilization, latency, evictions...).
    for r, _ in results:
        keys += [k for k in r.metrics if k not in METRICS and k not in keys]
    cols = ["metric", *names]
    shown = [[k, *(r.metrics.get(k) for r, _ in results)] for k in keys]
    texts, footnotes = _cells(results, shown)
    # json and csv: each fraction followed by the same in percent (units.py).
    full = [with_percent_keys(r.metrics) for r, _ in results]
    every = list(with_percent_keys(dict.fromkeys(keys, 0.0)))
    same = {c: c for c in cols}  # metric and policy names are shown as they are
    comparison = Table(
        "comparison",
        "replay: policy comparison",
        pd.DataFrame(shown, columns=cols, dtype=object),
        texts=pd.DataFrame(texts, columns=cols, dtype=object),
        headers=same,
        numeric=frozenset(names),
        notes=footnotes,
        formats=TEXT,
    )
    metrics = Table(
        "metrics",
        "replay: every metric",
        pd.DataFrame([[k, *(m.get(k) for m in full)] for k in every], columns=cols, dtype=object),
        headers=same,
        formats=frozenset({"csv"}),
    )
    data = {
        "store": str(store),
        "cluster": {"machines": machines, "gpus": gpus},
        "results": [_result(r, t) for r, t in results],
    }
    return Document([Section("replay", None, [comparison, metrics])], data=data)


def _result(r: Any, target: Path | None) -> dict[str, Any]:
    """One policy's object in ``results`` (values made plain by the renderer)."""
    return {
        "policy": r.policy,
        "params": r.params,
        "seed": r.seed,
        "sim_seconds": round(r.seconds, 3),
        "metrics": with_percent_keys(r.metrics),
        "per_vc": r.per_vc.to_pylist(),
        "quotas": r.quotas,
        "notes": r.notes,
        "footnotes": r.footnotes,
        "out": str(target) if target else None,
    }


def _cells(
    results: Sequence[tuple[Any, Path | None]], rows: list[list[Any]]
) -> tuple[list[list[str]], list[str]]:
    """Each row as text: the metric's name, then each value in its unit (``units``) with a
    ``[n]`` marker when it has a footnote (``ReplayResult.footnotes``); and the footnotes."""
    footnotes: list[str] = []
    cells = []
    for row in rows:
        texts = [str(row[0])]
        for (r, _), v in zip(results, row[1:], strict=True):
            text = human(row[0], v)
            note = r.footnotes.get(row[0])
            if note:
                footnotes.append(f"[{len(footnotes) + 1}] {r.policy} {row[0]}: {note}")
                text += f" [{len(footnotes)}]"
            texts.append(text)
        cells.append(texts)
    return cells, footnotes


def runs_document(df: pd.DataFrame, header: Mapping[str, Any]) -> Document:
    """An experiment's runs (one row each: an ablation variant or a parameter value) with
    ``header`` (scenario, online_gpus, seed, param): run per row in md, html, json and csv,
    transposed (a metric per row, a run per column) in the terminal table."""
    cols = [str(c) for c in df.columns]
    records = [{str(k): v for k, v in r.items()} for r in df.to_dict(orient="records")]
    # The first column names the run (variant or the parameter's value): shown as it is.
    texts = [[str(r[cols[0]]), *(human(c, r[c]) for c in cols[1:])] for r in records]
    same = {c: c for c in cols}
    with_pct = [with_percent_keys(r) for r in records]
    pct_cols = list(with_pct[0]) if with_pct else cols
    runs = Table(
        "runs",
        f"replay: scenario {header['scenario']}",
        pd.DataFrame([list(r.values()) for r in records], columns=cols, dtype=object),
        texts=pd.DataFrame(texts, columns=cols, dtype=object),
        headers=same,
        numeric=frozenset(cols[1:]),
        formats=frozenset({"md", "html"}),
    )
    runs_csv = Table(
        "runs",
        runs.title,
        pd.DataFrame([[r[c] for c in pct_cols] for r in with_pct], columns=pct_cols, dtype=object),
        headers={c: c for c in pct_cols},
        formats=frozenset({"csv"}),
    )
    names = [t[0] for t in texts]
    grid = [[c, *(t[i] for t in texts)] for i, c in enumerate(cols[1:], start=1)]
    by_metric = Table(
        "runs_by_metric",
        runs.title,
        pd.DataFrame(grid, columns=[cols[0], *names], dtype=object),
        texts=pd.DataFrame(grid, columns=[cols[0], *names], dtype=object),
        headers={c: c for c in [cols[0], *names]},
        numeric=frozenset(names),
        formats=frozenset({"table"}),
    )
    data = {**header, "rows": with_pct}
    return Document([Section("replay", None, [runs, runs_csv, by_metric])], data=data)
