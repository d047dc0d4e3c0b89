"""``philly`` and ``relaxed``: Philly's YARN-like scheduler and the same without locality.

Philly (ATC'19 paper, Section 2): each VC has a guaranteed GPU quota; idle GPUs are shared
with VCs beyond their quota; jobs are gang-scheduled, placed on the fewest servers (one rack),
and that locality constraint is relaxed after a job has waited ``locality_wait_min``; failed
attempts are retried. No GPU sharing, no preemption.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from philly_analyze.sim.engine import EngineConfig
from philly_analyze.sim.policies import COMMON_PARAMS, Param, register
from philly_analyze.sim.policies.base import US, EnginePolicy

#: Default locality wait: Philly relaxed locality only after jobs had waited a while; the paper
#: gives no number, so this is a round figure (configurable).
DEFAULT_LOCALITY_WAIT_MIN = 10.0


@register
class Philly(EnginePolicy):
    name = "philly"
    description = "Philly: VC quotas + borrowing, gang, locality-first relaxed after a wait"
    params = (
        Param(
            "locality_wait_min",
            float,
            DEFAULT_LOCALITY_WAIT_MIN,
            "minutes a job waits for a placement meeting the locality constraint before any "
            "free GPUs will do",
            0,
        ),
        Param("borrow", bool, True, "VCs beyond their quota may use idle GPUs"),
        *COMMON_PARAMS,
    )

    def engine_config(self, params: Mapping[str, Any], quotas: list[int] | None) -> EngineConfig:
        return EngineConfig(
            quotas=quotas,
            borrow=params["borrow"],
            locality_wait_us=round(self._wait(params) * 60 * US),
        )

    def _wait(self, params: Mapping[str, Any]) -> float:
        return float(params["locality_wait_min"])


@register
class Relaxed(Philly):
    name = "relaxed"
    description = "philly without the locality constraint (any free GPUs, fewest servers first)"
    params = (
        Param("borrow", bool, True, "VCs beyond their quota may use idle GPUs"),
        *COMMON_PARAMS,
    )

    def _wait(self, params: Mapping[str, Any]) -> float:
        return 0.0
