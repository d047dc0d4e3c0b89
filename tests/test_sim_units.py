"""One unit per kind of metric wherever replay metrics are shown (``units``)."""

from __future__ import annotations

import pytest

from philly_analyze.units import human


@pytest.mark.parametrize(
    ("key", "value", "text"),
    [
        ("gpu_util_online", 0.756, "75.6%"),  # a fraction of a whole: as a percentage
        ("gpu_util_allocated_pct", 97.9, "97.9%"),  # already a percentage
        ("fair_share_delay_frac", 0.5, "50.0%"),
        ("queue_mean_s", 456.0, "7.6 min"),  # 456 s / 60
        ("offline_jct_mean_min", 64.044, "64.0 min"),  # minutes stay minutes below 120
        ("offline_queue_p95_min", 990.0, "16.5 h"),  # 990 min = 59,400 s = 16.5 h
        ("minutes", 1440, "24.0 h"),  # the horizon is a duration
        ("outage_minutes", 230, "230 GPU-min"),  # a sum over GPUs, not a duration
        ("offline_work_gpu_hours", 2435.101, "2,435.1 GPU-h"),
        ("jobs_unscheduled", 147956, "147,956"),
        ("offline_throughput_jobs_per_hour", 1651.958, "1,652.0/h"),  # a rate, not a ratio
        ("online_slowdown_p99", 1.2013, "1.201"),
        ("jct_mean_s", None, "-"),
        ("jct_mean_s", float("nan"), "-"),
    ],
)
def test_metric_text(key: str, value: object, text: str) -> None:
    assert human(key, value) == text
