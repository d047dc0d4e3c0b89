"""``philly`` and ``relaxed``: Philly's YARN-like scheduler and the same without locality.

Philly (ATC'19 paper, Section 2): each VC has a guaranteed GPU quota; idle GPUs are shared
with VCs beyond their quota (up to ``borrow_limit`` of the cluster beyond it); jobs are
gang-scheduled, placed on the fewest servers (one rack), and that locality constraint is
relaxed after a job has waited its locality wait; failed attempts are retried. No GPU
sharing, no preemption.

The locality wait is not one timer for every job: a job's wait is drawn once per job, log-normal
with median ``locality_wait_min`` and log standard deviation ``locality_wait_spread`` (0: the
same timer for all, the default). Real waits are not a single timer (YARN relaxes locality after a number of
missed scheduling opportunities, which depends on how busy the servers are, and users state
their own placement preferences), and a single timer puts a cliff at exactly that wait in the
delay distribution (Figure 3). The draw uses the replay's seed, so a run is reproducible.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

import numpy as np

from philly_analyze.sim.cluster import Cluster
from philly_analyze.sim.engine import EngineConfig
from philly_analyze.sim.policies import COMMON_PARAMS, Param, register
from philly_analyze.sim.policies.base import US, EnginePolicy
from philly_analyze.sim.workload import Workload

#: Default locality wait: Philly relaxed locality only after jobs had waited a while; the paper
#: gives no number, so this is a round figure (configurable).
DEFAULT_LOCALITY_WAIT_MIN = 10.0
#: Default spread of the per-job locality wait (log standard deviation): 0, one timer for every
#: job, so a replay stays a deterministic function of its input unless asked otherwise. The
#: synthesizer uses 0.5 (half of the jobs relax between 7 and 14 minutes, 90% between 4.4 and
#: 23 minutes: no cliff at one timer, same median); the paper gives no distribution.
DEFAULT_LOCALITY_WAIT_SPREAD = 0.0

BORROW = Param("borrow", bool, True, "VCs beyond their quota may use idle GPUs")
BORROW_LIMIT = Param(
    "borrow_limit",
    float,
    1.0,
    "most GPUs a VC may hold beyond its quota when borrowing, as a share of the cluster's GPUs "
    "(at least one server's when above 0; 1: any idle GPU)",
    0,
)


def job_locality_waits(
    wl: Workload, median_min: float, spread: float, seed: int
) -> list[int] | None:
    """Per job, the locality wait in microseconds: ``median_min`` x exp(spread x z), z standard
    normal from ``seed``; None when every job has the median (spread 0)."""
    if spread <= 0 or median_min <= 0:
        return None
    z = np.random.default_rng(seed).standard_normal(len(wl))
    return np.round(median_min * 60 * US * np.exp(spread * z)).astype(np.int64).tolist()


@register
class Philly(EnginePolicy):
    name = "philly"
    description = "Philly: VC quotas + borrowing, gang, locality-first relaxed after a wait"
    params: ClassVar[tuple[Param, ...]] = (
        Param(
            "locality_wait_min",
            float,
            DEFAULT_LOCALITY_WAIT_MIN,
            "median minutes a job waits for a placement meeting the locality constraint before "
            "any free GPUs will do",
            0,
        ),
        Param(
            "locality_wait_spread",
            float,
            DEFAULT_LOCALITY_WAIT_SPREAD,
            "log standard deviation of the per-job locality wait around its median (0: one "
            "timer for every job)",
            0,
        ),
        BORROW,
        BORROW_LIMIT,
        *COMMON_PARAMS,
    )

    def engine_config(self, params: Mapping[str, Any], quotas: list[int] | None) -> EngineConfig:
        """VC quotas, borrowing, the median locality wait."""
        return EngineConfig(
            quotas=quotas,
            borrow=params["borrow"],
            locality_wait_us=round(self._wait(params) * 60 * US),
        )

    def tune(
        self,
        cfg: EngineConfig,
        wl: Workload,
        cluster: Cluster,
        params: Mapping[str, Any],
        seed: int,
    ) -> None:
        """The borrowing cap (``borrow_limit``) and the per-job locality waits."""
        lim = params["borrow_limit"]
        if cfg.quotas is not None and lim < 1.0:
            extra = int(lim * cluster.total_gpus)
            if lim > 0:  # at least one server's GPUs, so a small cluster can still lend
                extra = max(extra, cluster.largest)
            cfg.borrow_cap = [q + extra for q in cfg.quotas]
        cfg.locality_wait_by_job = job_locality_waits(
            wl, self._wait(params), float(params.get("locality_wait_spread", 0.0)), seed
        )

    def _wait(self, params: Mapping[str, Any]) -> float:
        return float(params["locality_wait_min"])


@register
class Relaxed(Philly):
    name = "relaxed"
    description = "philly without the locality constraint (any free GPUs, fewest servers first)"
    params = (BORROW, BORROW_LIMIT, *COMMON_PARAMS)

    def _wait(self, params: Mapping[str, Any]) -> float:
        return 0.0
