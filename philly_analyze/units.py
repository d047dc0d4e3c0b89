"""How replay metrics read: one unit per kind of quantity, wherever a metric is shown (the
replay comparison table, the report's GPU sharing section, sweep tables and figures).

- Fractions of a whole (utilization, shares of time) are stored as 0-1 by the sharing model
  and shown as percentages, like the ``*_pct`` metrics of the queue replay.
- Durations (``*_s`` in seconds, ``*_min`` and the horizon ``minutes`` in minutes) are shown
  in the largest unit that keeps them readable (s, min, h, d).
- Amounts of GPU time are sums over GPUs, not durations: ``*_minutes`` (``outage_minutes``,
  ``slo_violation_minutes``) in GPU-minutes, ``*gpu_hours*`` in GPU-hours; rates
  (``*_per_hour``) per hour with one decimal.
- Counts get thousands separators; ratios (``*_vs_philly``, slowdowns) three decimals.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

#: Metrics holding a fraction (0-1) of a whole (shown as a percentage), and the name of the
#: same quantity in percent that ``replay --format json|csv`` writes beside it: the names
#: say the unit (``*_pct`` percent, like ``gpu_util_allocated_pct``), while the fraction keeps
#: its name for readers of earlier output and of the library's ``metrics`` (docs/replay.md).
PERCENT_KEYS: dict[str, str] = {
    "fair_share_delay_frac": "fair_share_delay_pct",
    "gpu_util_online": "gpu_util_online_pct",
    "sm_activity_online": "sm_activity_online_pct",
    "gpu_memory_online": "gpu_memory_online_pct",
    "gpu_util_all": "gpu_util_all_pct",
    "sm_activity_all": "sm_activity_all_pct",
    "gpu_memory_all": "gpu_memory_all_pct",
    "shared_fraction": "shared_pct",
    "shared_duty_mean": "shared_duty_mean_pct",
    "slo_violation_fraction": "slo_violation_pct",
    "slo_violation_budget": "slo_violation_budget_pct",
}
FRACTION_METRICS: frozenset[str] = frozenset(PERCENT_KEYS)


def with_percent_keys(metrics: Mapping[str, Any]) -> dict[str, Any]:
    """``metrics`` with each fraction followed by the same quantity in percent under its
    ``PERCENT_KEYS`` name (absent stays absent; no float noise: 0.2986 -> 29.86)."""
    out: dict[str, Any] = {}
    for key, value in metrics.items():
        out[key] = value
        if key in PERCENT_KEYS:
            absent = value is None or (isinstance(value, float) and math.isnan(value))
            out[PERCENT_KEYS[key]] = None if absent else round(100.0 * float(value), 10)
    return out


def seconds_of(key: str, value: float) -> float | None:
    """``value`` in seconds when ``key`` names a duration, else None."""
    if key.endswith("_s"):
        return float(value)
    if key.endswith("_min") or key == "minutes":
        return float(value) * 60.0
    return None


def duration(seconds: float) -> str:
    """Seconds in the largest readable unit: ``45.0 s``, ``7.6 min``, ``23.7 h``, ``2.0 d``."""
    v = float(seconds)
    if abs(v) < 120:
        return f"{v:.1f} s"
    if abs(v) < 7200:
        return f"{v / 60:.1f} min"
    if abs(v) < 172800:
        return f"{v / 3600:.1f} h"
    return f"{v / 86400:.1f} d"


def human(key: str, value: Any) -> str:
    """One metric value as text in its kind's unit (``-`` when absent)."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    if key in FRACTION_METRICS:
        return f"{100.0 * float(value):.1f}%"
    if key.endswith("_pct"):
        return f"{float(value):.1f}%"
    secs = seconds_of(key, value)
    if secs is not None:
        return duration(secs)
    if key.endswith("_minutes"):
        return f"{float(value):,.0f} GPU-min"
    if "gpu_hours" in key:
        return f"{float(value):,.1f} GPU-h"
    if key.endswith("_per_hour"):  # a rate: offline_throughput_jobs_per_hour
        return f"{float(value):,.1f}/h"
    if isinstance(value, int) or (
        isinstance(value, float) and value.is_integer() and abs(value) >= 1000
    ):
        return f"{int(value):,}"
    return f"{float(value):.3f}"
