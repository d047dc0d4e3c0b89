"""A custom policy for the sweep tests (imported with ``--import tests._sweep_plugin``):
``philly`` that kills its own process when ``crash`` is true, as an out-of-memory kill or a
segfault in native code would."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from philly_analyze.sim.policies import Param, register
from philly_analyze.sim.policies.philly import Philly


@register
class Crashy(Philly):
    name = "crashy-test"
    description = "philly, or an abrupt exit of the worker process when crash=true (tests)"
    params = (*Philly.params, Param("crash", bool, False, "exit the process abruptly"))

    def simulate(self, workload, cluster, quotas, params: Mapping[str, Any], seed: int):
        if params["crash"]:
            os._exit(7)
        return super().simulate(workload, cluster, quotas, dict(params), seed)
