"""``las``: Tiresias-style discretized least attained service (Gu et al., NSDI'19).

Jobs are ranked by the queue their attained service (GPUs x time run so far) puts them in:
queue 0 below the first threshold, queue 1 below the second, ...; within a queue, by
submission time (FIFO). Higher queues are preempted for lower ones. The thresholds are a
parameter (GPU-hours, comma-separated)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from philly_analyze.errors import UserError
from philly_analyze.sim.policies import COMMON_PARAMS, Param, register
from philly_analyze.sim.policies.base import PreemptivePolicy
from philly_analyze.sim.preemptive import PreemptConfig, PreemptiveEngine

GPU_HOUR_US = 3600 * 1_000_000


def _key(eng: PreemptiveEngine, j: int, now: int) -> tuple[int]:
    return (eng.lvl[j],)


@register
class Las(PreemptivePolicy):
    name = "las"
    description = "Tiresias-style least attained service: priority queues by GPU-time, preemptive"
    params = (
        Param(
            "thresholds_gpu_h",
            str,
            "1,10",
            "attained-service thresholds between priority queues, GPU-hours, ascending",
        ),
        *COMMON_PARAMS,
    )

    def config(self, params: Mapping[str, Any]) -> PreemptConfig:
        """Ranked by LAS queue; the thresholds parsed from GPU-hours."""
        raw = params["thresholds_gpu_h"]
        try:
            th = [float(x) for x in raw.split(",") if x.strip()]
        except ValueError:
            raise UserError(
                f"policy las: thresholds_gpu_h must be numbers separated by commas, got {raw!r}"
            ) from None
        if any(not math.isfinite(t) or t <= 0 for t in th) or th != sorted(th):
            raise UserError(
                f"policy las: thresholds_gpu_h must be finite, positive and ascending: {raw!r}"
            )
        return PreemptConfig(key=_key, thresholds=tuple(round(t * GPU_HOUR_US) for t in th))
