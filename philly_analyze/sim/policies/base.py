"""Bases of the policies run by the bundled event engines: ``EnginePolicy`` (the queue engine,
``sim/engine.py``) and ``PreemptivePolicy`` (``sim/preemptive.py``). Subclasses only turn
their params into the engine's config."""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from philly_analyze.progress import current
from philly_analyze.sim.cluster import Cluster
from philly_analyze.sim.core import BaseEngine
from philly_analyze.sim.engine import EngineConfig, QueueEngine
from philly_analyze.sim.events import gc_paused
from philly_analyze.sim.placement import FreeState
from philly_analyze.sim.policies import Policy
from philly_analyze.sim.preemptive import PreemptConfig, PreemptiveEngine
from philly_analyze.sim.result import ReplayResult, build_result
from philly_analyze.sim.slowdown import SlowdownModel
from philly_analyze.sim.workload import Workload

US = 1_000_000


def quota_vector(wl: Workload, quotas: Mapping[str, int] | None) -> list[int]:
    """Quota per VC index of the workload (0 for VCs the quotas do not name)."""
    q = dict(quotas or {})
    return [int(q.get(name, 0)) for name in wl.vc_names]


def slowdown_model(cluster: Cluster, params: Mapping[str, Any]) -> SlowdownModel:
    """The locality slowdown model configured by the common params."""
    return SlowdownModel(
        cluster.largest, enabled=bool(params["slowdown"]), rack_slowdown=params["rack_slowdown"]
    )


class _EventPolicy(Policy):
    """Runs an engine (``engine_class`` built with ``build_config``) and turns its trace into a
    ``ReplayResult``."""

    engine_class: type[BaseEngine]

    def build_config(
        self,
        wl: Workload,
        cluster: Cluster,
        quotas: list[int] | None,
        params: Mapping[str, Any],
        seed: int,
    ) -> EngineConfig | PreemptConfig:
        """The engine's config for these params (subclasses)."""
        raise NotImplementedError

    def make_engine(
        self,
        wl: Workload,
        cluster: Cluster,
        quotas: list[int] | None,
        params: Mapping[str, Any],
        seed: int = 0,
    ) -> BaseEngine:
        """The engine for one run: config, free GPUs of ``cluster``, slowdown model."""
        cfg = self.build_config(wl, cluster, quotas, params, seed)
        cfg.max_retries = params["max_retries"]
        cfg.retry_delay_us = round(params["retry_delay_s"] * US)
        engine: Any = self.engine_class
        return engine(wl, FreeState(cluster), cfg, slowdown_model(cluster, params))

    def simulate(
        self,
        workload: Workload,
        cluster: Cluster,
        quotas: Mapping[str, int] | None,
        params: dict[str, Any],
        seed: int,
    ) -> ReplayResult:
        """Run the engine over the workload and build the ``ReplayResult``."""
        qv = quota_vector(workload, quotas) if self.uses_quotas else None
        t0 = time.perf_counter()
        with gc_paused():
            trace = self.make_engine(workload, cluster, qv, params, seed).run()
        secs = time.perf_counter() - t0
        notes = list(workload.notes)
        if trace.unscheduled:
            notes.append(
                f"{len(trace.unscheduled):,} jobs never started under {self.name} (their demand "
                "exceeds what the policy would ever give their VC)"
            )
        # The waiting causes and metrics of a saturated million-job run take seconds: say so.
        current().describe(f"{self.name}: building the result (waiting causes, metrics)")
        with gc_paused():
            res = build_result(
                trace,
                workload,
                cluster,
                qv,
                policy=self.name,
                params=params,
                seed=seed,
                notes=notes,
            )
        res.seconds = secs
        return res


class EnginePolicy(_EventPolicy):
    """Base of queue-engine policies: implement ``engine_config`` (and ``tune`` for settings
    that depend on the workload, the cluster or the seed)."""

    engine_class = QueueEngine

    def engine_config(self, params: Mapping[str, Any], quotas: list[int] | None) -> EngineConfig:
        """The queue engine's config for these params and quotas (subclasses)."""
        raise NotImplementedError

    def tune(
        self,
        cfg: EngineConfig,
        wl: Workload,
        cluster: Cluster,
        params: Mapping[str, Any],
        seed: int,
    ) -> None:
        """Per-job values or caps in GPUs; none by default."""

    def build_config(
        self,
        wl: Workload,
        cluster: Cluster,
        quotas: list[int] | None,
        params: Mapping[str, Any],
        seed: int,
    ) -> EngineConfig:
        """``engine_config``, then ``tune``."""
        cfg = self.engine_config(params, quotas)
        self.tune(cfg, wl, cluster, params, seed)
        return cfg


class PreemptivePolicy(_EventPolicy):
    """Base of preemptive policies (no quotas): implement ``config``."""

    uses_quotas = False
    engine_class = PreemptiveEngine

    def config(self, params: Mapping[str, Any]) -> PreemptConfig:
        """The preemptive engine's config (its ranking key) for these params (subclasses)."""
        raise NotImplementedError

    def build_config(
        self,
        wl: Workload,
        cluster: Cluster,
        quotas: list[int] | None,
        params: Mapping[str, Any],
        seed: int,
    ) -> PreemptConfig:
        """``config`` (preemptive policies take no quotas)."""
        return self.config(params)
