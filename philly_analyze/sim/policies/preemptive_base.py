"""``PreemptivePolicy``: a policy run by the preemptive engine (``sim/preemptive.py``)."""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from philly_analyze.sim.cluster import Cluster, FreeState
from philly_analyze.sim.policies import Policy
from philly_analyze.sim.policies.base import US, slowdown_model
from philly_analyze.sim.preemptive import PreemptConfig, PreemptiveEngine
from philly_analyze.sim.result import ReplayResult, build_result
from philly_analyze.sim.workload import Workload


class PreemptivePolicy(Policy):
    """Base of preemptive policies: subclasses give the ranking key and thresholds."""

    uses_quotas = False

    def config(self, params: Mapping[str, Any]) -> PreemptConfig:
        raise NotImplementedError

    def simulate(
        self,
        workload: Workload,
        cluster: Cluster,
        quotas: Mapping[str, int] | None,
        params: dict[str, Any],
        seed: int,
    ) -> ReplayResult:
        cfg = self.config(params)
        cfg.max_retries = params["max_retries"]
        cfg.retry_delay_us = round(params["retry_delay_s"] * US)
        t0 = time.perf_counter()
        eng = PreemptiveEngine(workload, FreeState(cluster), cfg, slowdown_model(cluster, params))
        trace = eng.run()
        secs = time.perf_counter() - t0
        res = build_result(
            trace,
            workload,
            cluster,
            None,
            policy=self.name,
            params=params,
            seed=seed,
            notes=list(workload.notes),
        )
        res.seconds = secs
        return res
