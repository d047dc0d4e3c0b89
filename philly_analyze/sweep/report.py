"""The sweep's summary as a wide table (one row per cell, ``mean ± half-width`` per metric),
as the document ``sweep`` prints (output layer: ``philly_analyze.report``) and as
``report.md`` next to the figures."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from philly_analyze.report import markdown
from philly_analyze.report.model import TEXT_FORMATS, Document, Section, Table
from philly_analyze.report.text import label
from philly_analyze.sweep.figures import unit
from philly_analyze.sweep.spec import PARAM_PREFIX

if TYPE_CHECKING:
    from philly_analyze.sweep.run import SweepResult

TITLE = "sweep: mean over seeds ± half-width of the t-interval"
#: Shown by default in the terminal table and the report (every metric is in the files).
HEADLINE = ("jct_mean_s", "queue_mean_s", "queue_p95_s", "gpu_util_allocated_pct", "makespan_s")


def headline(summary: pd.DataFrame, requested: list[str] | None = None) -> list[str]:
    """The metrics to show: those requested, else the headline ones present, else the
    first five."""
    present = list(dict.fromkeys(summary["metric"]))
    if requested:
        return [m for m in requested if m in present]
    return [m for m in HEADLINE if m in present] or present[:5]


def fmt_ci(metric: str, mean: Any, hw: Any) -> str:
    """``mean ± half-width`` in one unit picked from the mean (``6.30 ± 0.02 h``)."""
    if mean is None or (isinstance(mean, float) and math.isnan(mean)):
        return "-"
    div, name = unit(metric, np.array([float(mean)]))
    m = float(mean) / div
    if m == 0 and not hw:
        return "0" + (f" {name}" if name and name != "%" else name)
    digits = 0 if abs(m) >= 1000 else (1 if abs(m) >= 100 else (2 if abs(m) >= 1 else 3))
    text = f"{m:,.{digits}f}"
    if hw is not None and not (isinstance(hw, float) and math.isnan(hw)):
        text += f" ± {float(hw) / div:,.{digits}f}"
    return text + (f" {name}" if name and name != "%" else name)


def wide(summary: pd.DataFrame, metrics: list[str]) -> tuple[list[str], list[list[str]]]:
    """Header and rows: policy, the parameters set, runs, failed, then one column per metric."""
    params = [c for c in summary.columns if c.startswith(PARAM_PREFIX)]
    params = [c for c in params if summary[c].notna().any()]
    header = ["policy", *(c[len(PARAM_PREFIX) :] for c in params), "runs", "failed", *metrics]
    rows = []
    cells = ["policy", *params]
    first = summary.drop_duplicates(subset=[*cells, "runs", "failed"]).reset_index(drop=True)
    for _, cell in first.iterrows():
        mask = np.ones(len(summary), bool)
        for c in cells:
            v = cell[c]
            mask &= summary[c].isna().to_numpy() if pd.isna(v) else (summary[c] == v).to_numpy()
        g = summary[mask].set_index("metric")
        row = [str(cell["policy"]), *(label(cell[c]) for c in params)]
        row += [str(int(cell["runs"])), str(int(cell["failed"]))]
        row += [
            fmt_ci(m, g.at[m, "mean"], g.at[m, "half_width"]) if m in g.index else "-"
            for m in metrics
        ]
        rows.append(row)
    return header, rows


def summary_table(summary: pd.DataFrame, metrics: list[str]) -> Table:
    """The wide summary (``wide``) as a table of the output layer: its cells are text
    (``mean ± half-width``), shown by table, md and html (csv and json carry the numbers)."""
    header, rows = wide(summary, metrics)
    frame = pd.DataFrame(rows, columns=header, dtype=object)
    return Table(
        "summary_wide",
        TITLE,
        frame,
        texts=frame,
        headers={h: h for h in header},
        numeric=frozenset(header[1:]),
        formats=TEXT_FORMATS,
    )


def summary_document(result: SweepResult, store_path: str, metrics: list[str] | None) -> Document:
    """What ``sweep`` prints: the wide table of the headline (or chosen) metrics in table, md
    and html; every metric of the summary (``summary.parquet``'s columns) in csv; and in json
    the sweep's object (docs/sweep.md: store, inputs_id, runs, failed, summary, ...)."""
    s = result.summary
    numbers = Table("summary", TITLE, s, formats=frozenset({"csv"}))
    data = {
        "store": str(store_path),
        "inputs_id": result.inputs_id,
        "out": str(result.out) if result.out else None,
        "executor": result.executor,
        "runs": len(result.runs),
        "executed": result.executed,
        "skipped": result.skipped,
        "seconds": round(result.seconds, 3),
        "startup_seconds": round(result.startup_seconds, 3),
        "failed": [
            {
                "policy": r["policy"],
                "seed": int(r["seed"]),
                "params": json.loads(r["params_json"]),
                "error": r["error"],
            }
            for _, r in result.failed.iterrows()
        ],
        "summary": numbers.records(),
        "figures": [str(f) for f in result.figures],
        "notes": result.notes,
    }
    wide_table = summary_table(s, headline(s, metrics or None))
    return Document([Section("sweep", None, [wide_table, numbers])], data=data)


def write_report(
    result: SweepResult, path: Path, confidence: float, metrics: list[str] | None = None
) -> Path:
    """``report.md``: what ran, the summary of the headline metrics, the figures, failures."""
    spec = result.spec
    lines = [
        "# Sweep report",
        "",
        f"- policies: {', '.join(spec.policies)}; seeds: {len(spec.seeds)}"
        + (f"; arrival jitter ±{spec.jitter_s:g} s" if spec.jitter_s else ""),
        *(f"- {line}" for line in spec.describe()),
        f"- runs: {len(result.runs)} ({result.executed} run by this invocation, "
        f"{result.skipped} already done), {len(result.failed)} failed",
        f"- inputs: {result.inputs_id}; executor: {result.executor}; "
        + (
            "inputs shipped to workers"
            if result.store_mode == "ship"
            else "workers read the store path"
        ),
        "",
        f"Mean over seeds ± half-width of the {confidence:.0%} t-interval "
        "(every metric: `summary.parquet`; every run: `runs.parquet`).",
        "",
    ]
    lines += markdown.table(
        summary_table(result.summary, headline(result.summary, metrics)), heading=False
    )
    for png in result.figures:
        lines += [f"![{png.stem}]({png.relative_to(path.parent)})", ""]
    if len(result.failed):
        lines += ["## Failed runs", ""]
        for _, r in result.failed.iterrows():
            lines.append(f"- `{r['policy']}` seed {r['seed']} {r['params_json']}: {r['error']}")
        lines.append("")
    lines += [f"- {n}" for n in result.notes]
    path.write_text("\n".join(lines).rstrip() + "\n")
    return path
