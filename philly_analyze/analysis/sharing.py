"""GPU sharing (MuxFlow; not an analysis of the ATC'19 paper): what a sharing replay did.

A store written by ``replay --policy muxflow|dedicated|mps-naive --out DIR`` holds, beside the
canonical tables, the sharing model's own output (``sharing.json``, ``sharing_timeseries.parquet``,
declared in ``schemas.ARTIFACTS``; read as a ``sharingout.SharingOutput``). This section shows
its headline metrics, with MuxFlow's published before/after numbers beside the online-GPU means
(the side the run recorded: the paper's "before" is a cluster without sharing, so it sits beside
``dedicated``; its "after" beside ``muxflow``; the paper has no number for plain MPS), and feeds
the day and slowdown figures. Other stores have no such output: the section is then left out of
the default report (asked for by name, it says why). It reads the store only, not the simulator.
"""

from __future__ import annotations

import pandas as pd

from philly_analyze.analysis.common import Context
from philly_analyze.analysis.paper import muxflow_published
from philly_analyze.analysis.result import ResultTable, Section
from philly_analyze.sharingout import SharingOutput
from philly_analyze.units import FRACTION_METRICS

#: (metric key, what it is, key of the paper's before/after numbers or None).
METRICS: tuple[tuple[str, str, str | None], ...] = (
    ("gpu_util_online", "GPU utilization of online GPUs (%)", "gpu_util"),
    ("sm_activity_online", "SM activity of online GPUs (%)", "sm_activity"),
    ("gpu_memory_online", "GPU memory used on online GPUs (%)", "gpu_memory"),
    ("gpu_util_all", "GPU utilization of all GPUs (%)", None),
    ("shared_fraction", "online GPU-minutes shared with offline work (%)", None),
    ("online_slowdown_p50", "online latency slowdown, median (x)", None),
    ("online_slowdown_p99", "online latency slowdown, p99 (x)", None),
    ("slo_violation_fraction", "online GPU-minutes over the latency SLO (%)", None),
    ("slo_violation_budget", "SLO-violation budget (%)", None),
    ("outage_minutes", "online outage from offline errors (GPU-minutes)", None),
    ("offline_completed", "offline jobs completed", None),
    ("offline_jct_mean_min", "offline JCT, mean (minutes)", None),
    ("offline_queue_mean_min", "offline queueing, mean (minutes)", None),
    ("evictions", "evictions of offline work", None),
    ("gpu_hours_lost", "GPU hours of offline work lost to evictions", None),
    ("jct_mean_vs_philly", "offline JCT mean / the same jobs under philly", None),
)


#: The metrics of ``METRICS`` that count things.
COUNTS = frozenset({"offline_completed", "evictions"})


def compute(ctx: Context) -> Section:
    """Headline sharing metrics of a sharing replay's store, and the figures' inputs."""
    sec = Section(
        "gpu_sharing", "GPU sharing with an inference fleet (MuxFlow)", citation="muxflow"
    )
    if note := ctx.lacking("gpu_sharing"):
        sec.notes.append(note)
        return sec
    out = SharingOutput.from_store(ctx.store)
    assert out is not None  # ctx.lacking checked it
    published = muxflow_published()
    side = out.paper_side  # recorded by the run: its policy's
    paper = published[side] if side else {}
    rows = []
    for key, label, paper_key in METRICS:
        value = out.metrics.get(key)
        if value is None:
            continue
        scale = 100.0 if key in FRACTION_METRICS else 1.0
        ref = paper.get(paper_key) if paper_key else None
        rows.append(
            {
                "metric": label,
                # Counts (jobs, evictions) stay integers: "276", not "276.00".
                "value": int(value) if key in COUNTS else float(value) * scale,
                "paper_value": None if ref is None else ref * scale,
            }
        )
    frame = pd.DataFrame(rows, columns=["metric", "value", "paper_value"])
    # One type per value (pandas would make 276 a float beside 29.86).
    frame["value"] = pd.Series([r["value"] for r in rows], index=frame.index, dtype=object)
    sec.tables.append(
        ResultTable(
            "sharing_metrics",
            f"Policy {out.policy}: online service and offline work",
            frame,
            paper=f"MuxFlow, {side} sharing" if side else None,
            per_row=True,
            description=(
                "Means over the simulated minutes; the paper's numbers are MuxFlow's production "
                "cluster (20,000+ GPUs) and are comparable only in shape on other fleets."
            ),
        )
    )
    if not ctx.scope.is_all:
        sec.notes.append("--vc/--since/--until do not apply: the sharing run is shown whole")
    sec.data["output"] = out
    sec.data["paper"] = published
    return sec
