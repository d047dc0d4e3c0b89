"""``fifo``: one queue in submission order, no VC quotas, head-of-line blocking (a job that
cannot be placed holds everyone behind it), locality-first placement relaxed after a wait."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from philly_analyze.sim.engine import EngineConfig
from philly_analyze.sim.policies import COMMON_PARAMS, Param, register
from philly_analyze.sim.policies.base import US, EnginePolicy
from philly_analyze.sim.policies.philly import DEFAULT_LOCALITY_WAIT_MIN


@register
class Fifo(EnginePolicy):
    name = "fifo"
    description = "first in, first out over the whole cluster: no quotas, head-of-line blocking"
    uses_quotas = False
    params = (
        Param(
            "locality_wait_min",
            float,
            DEFAULT_LOCALITY_WAIT_MIN,
            "minutes before a job accepts a placement that breaks the locality constraint",
            0,
        ),
        Param("backfill", bool, False, "let later jobs start when the head cannot (no HOL)"),
        *COMMON_PARAMS,
    )

    def engine_config(self, params: Mapping[str, Any], quotas: list[int] | None) -> EngineConfig:
        """One queue, head-of-line blocking unless ``backfill``."""
        return EngineConfig(
            quotas=None,
            hol_blocking=not params["backfill"],
            locality_wait_us=round(params["locality_wait_min"] * 60 * US),
        )
