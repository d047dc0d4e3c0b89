"""The GPU-sharing policies: ``muxflow``, ``dedicated`` and ``mps-naive``.

Each class carries its mechanism set (``SharingMechanisms``: whether offline work shares the
online GPUs, whether placement is memory- and SLO-aware, which model mechanisms it never
uses), as the queue policies carry their engine config; the simulator reads that, never the
name. They run on the MuxFlow model (``philly_analyze.sim.sharing``), imported only when a
sharing policy runs: this module stays light so that listing the registry costs nothing.

The store's jobs are the offline side, the store's machines the ordinary (training-only)
GPUs, and an inference fleet of ``online_gpus`` GPUs hosts one online service each; with
``scenario=paper`` MuxFlow's deployment is simulated instead (``sim.sharing.replay``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, ClassVar

from philly_analyze.sim.policies import Param, Policy, register
from philly_analyze.sim.sharing.config import MECHANISMS, SharingMechanisms

if TYPE_CHECKING:
    from philly_analyze.sim.cluster import Cluster
    from philly_analyze.sim.result import ReplayResult
    from philly_analyze.sim.workload import Workload

PARAMS = (
    Param(
        "online_gpus",
        int,
        None,
        "GPUs of the inference fleet (None: online_ratio x the cluster's GPUs)",
        0,
        True,
    ),
    Param("online_ratio", float, 1.0, "inference-fleet size as a multiple of the cluster", 0),
    Param(
        "scenario",
        str,
        "",
        "'paper': MuxFlow's deployment (20,000 online GPUs, one day, synthetic offline work)",
    ),
    Param("model", str, "", "TOML file overriding parameters of data/muxflow_model.toml"),
    Param(
        "disable", str, "", "mechanisms to switch off, comma-separated: " + ", ".join(MECHANISMS)
    ),
    Param(
        "minutes",
        int,
        None,
        "simulated minutes (None: last submit + one day; with scenario paper, its day of 1,440)",
        1,
        True,
    ),
    Param("step_minutes", int, 1, "time step of the per-GPU state, minutes", 1),
    Param("compare_philly", bool, True, "also replay the jobs under philly for JCT/queue ratios"),
)


class SharingPolicy(Policy):
    """Base of the sharing policies: a mechanism set on the MuxFlow model."""

    params = PARAMS
    uses_quotas = False
    mechanisms: ClassVar[SharingMechanisms]
    #: Which of MuxFlow's published numbers the policy is compared with: "before" (a cluster
    #: without sharing), "after" (MuxFlow deployed), or None (the paper has none).
    paper_side: ClassVar[str | None] = None
    #: Line colour in figures.
    color: ClassVar[str | None] = None

    def simulate(
        self,
        workload: Workload,
        cluster: Cluster,
        quotas: Mapping[str, int] | None,
        params: dict[str, Any],
        seed: int,
    ) -> ReplayResult:
        """The sharing model on the workload (or the paper scenario), as a ``ReplayResult``."""
        from philly_analyze.sim.sharing.replay import replay_sharing

        return replay_sharing(self, workload, cluster, quotas, params, seed)


@register
class MuxFlowPolicy(SharingPolicy):
    name = "muxflow"
    description = (
        "MuxFlow GPU sharing: training jobs space-share an inference fleet's GPUs (xCUDA limits, "
        "SysMonitor, dynamic SM, matching, mixed error handling)"
    )
    mechanisms = SharingMechanisms(shares=True, aware=True)
    paper_side = "after"
    color = "#1f77b4"


@register
class DedicatedPolicy(SharingPolicy):
    name = "dedicated"
    description = "no sharing: training jobs on the cluster only, the inference fleet alone"
    mechanisms = SharingMechanisms(shares=False, aware=False)
    paper_side = "before"
    color = "#7f7f7f"


@register
class MpsNaivePolicy(SharingPolicy):
    name = "mps-naive"
    description = "plain MPS sharing: no protection, fixed 50% SM split, random pairing"
    # Every protection off, a fixed SM split, random pairing and plain-MPS error propagation.
    mechanisms = SharingMechanisms(
        shares=True,
        aware=False,
        switched_off=(
            "memory_limit",
            "launch_limit",
            "monitor",
            "dynamic_sm",
            "matching",
            "mixed_errors",
        ),
    )
    color = "#d62728"


def sharing_policy(name: str) -> SharingPolicy:
    """The registered sharing policy ``name``; a ``UsageError`` (exit 2) suggesting the
    closest sharing policy for any other name."""
    from philly_analyze.errors import unknown_name
    from philly_analyze.sim.policies import POLICIES, policy_names

    policy_names()  # loads the registry
    cls = POLICIES.get(name)
    if cls is None or not issubclass(cls, SharingPolicy):
        known = [n for n, c in POLICIES.items() if issubclass(c, SharingPolicy)]
        raise unknown_name("sharing policy", name, known)
    return cls()
