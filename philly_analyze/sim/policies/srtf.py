"""``srtf``: oracle shortest remaining time first, preemptive. Jobs are ranked by the run time
they still need (the replay knows every attempt's duration: an oracle no real scheduler has),
so it bounds what duration-aware scheduling could gain."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from philly_analyze.sim.policies import COMMON_PARAMS, register
from philly_analyze.sim.policies.base import PreemptivePolicy
from philly_analyze.sim.preemptive import PreemptConfig, PreemptiveEngine


def _key(eng: PreemptiveEngine, j: int, now: int) -> tuple[int]:
    return (eng.remaining_total(j, now),)


@register
class Srtf(PreemptivePolicy):
    name = "srtf"
    description = "oracle shortest remaining time first (knows durations), preemptive"
    params = COMMON_PARAMS

    def config(self, params: Mapping[str, Any]) -> PreemptConfig:
        """Ranked by remaining intrinsic work."""
        return PreemptConfig(key=_key)
