"""Ready-made experiments on the sharing model: the paper scenario (MuxFlow's deployment with its
before/after numbers beside the simulated ones), ablations (each mechanism switched off) and
one-parameter sweeps. ``philly-analyze replay --scenario paper`` runs them (``--ablate``,
``--vary PARAM=V1,V2``, ``--figures DIR``: ``run_ablations``, ``run_sweep``)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from philly_analyze.sim.sharing.config import MECHANISMS, SharingConfig
from philly_analyze.sim.sharing.results import SharingResult
from philly_analyze.sim.sharing.simulate import simulate_sharing
from philly_analyze.sim.sharing.workload import synthetic_offline

#: (metric key, label, paper key) of the paper's headline numbers.
PAPER_METRICS = (
    ("gpu_util_online", "GPU utilization", "gpu_util"),
    ("sm_activity_online", "SM activity", "sm_activity"),
    ("gpu_memory_online", "GPU memory", "gpu_memory"),
)

#: Metrics shown in ablation and sweep tables.
TABLE_METRICS = (
    "gpu_util_online",
    "sm_activity_online",
    "gpu_memory_online",
    "online_slowdown_p99",
    "slo_violation_fraction",
    "outage_minutes",
    "offline_work_gpu_hours",
    "offline_completed",
    "offline_jct_mean_min",
    "evictions",
    "gpu_hours_lost",
    "sm_restarts",
    "matching_quality",
)


def paper_config(cfg: SharingConfig | None = None, gpus: int | None = None) -> SharingConfig:
    """The configuration of ``--scenario paper``, optionally scaled to ``gpus`` online GPUs
    (ordinary GPUs and the backlog scale with it). Idempotent: the scaled size is kept in
    ``paper.online_gpus``, so applying it again changes nothing."""
    cfg = cfg or SharingConfig.load()
    sc = cfg.paper
    n = sc.online_gpus if gpus is None else gpus
    scale = n / sc.online_gpus
    ordinary = round(sc.ordinary_gpus * scale)
    backlog = round(sc.backlog_jobs * scale)
    return cfg.with_(
        **{
            "cluster.online_gpus": n,
            "cluster.ordinary_gpus": ordinary,
            "paper.online_gpus": n,
            "paper.ordinary_gpus": ordinary,
            "paper.backlog_jobs": backlog,
        }
    )


def paper_jobs(cfg: SharingConfig, seed: int = 0) -> pd.DataFrame:
    """The paper scenario's synthetic offline work for ``cfg`` (see ``paper_config``)."""
    return synthetic_offline(
        cfg, cfg.cluster.online_gpus, cfg.paper.minutes, np.random.default_rng(seed)
    )


@dataclass
class PaperComparison:
    """Simulated results of the paper scenario and the paper's numbers beside them."""

    results: dict[str, SharingResult]
    table: pd.DataFrame  # metric, paper_before, sim_before, paper_after, sim_after

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: the comparison rows and every policy's metrics."""
        return {
            "scenario": "paper",
            "comparison": self.table.to_dict(orient="records"),
            "results": {p: r.metrics for p, r in self.results.items()},
        }


def _paper_side(policy: str) -> str | None:
    """Which of the paper's numbers ("before", "after") a policy's result stands beside."""
    from philly_analyze.sim.policies.sharing import sharing_policy

    return sharing_policy(policy).paper_side


def run_paper(
    cfg: SharingConfig | None = None,
    seed: int = 0,
    gpus: int | None = None,
    policies: Sequence[str] = ("dedicated", "muxflow"),
) -> PaperComparison:
    """Simulate MuxFlow's deployment (``[scenario.paper]``) under ``policies``; the policy
    whose ``paper_side`` is "before" (``dedicated``) gives the simulated "before" numbers, the
    one whose side is "after" (``muxflow``) the "after"."""
    cfg = paper_config(cfg, gpus)
    jobs = paper_jobs(cfg, seed)
    results = {
        p: simulate_sharing(jobs, cfg, p, seed=seed, minutes=cfg.paper.minutes) for p in policies
    }
    side = {_paper_side(p): r for p, r in results.items()}
    before, after = side.get("before"), side.get("after")
    rows = []
    for key, label, pkey in PAPER_METRICS:
        rows.append(
            {
                "metric": label,
                "paper_before": cfg.paper.paper_before.get(pkey),
                "sim_before": before.metrics[key] if before is not None else None,
                "paper_after": cfg.paper.paper_after.get(pkey),
                "sim_after": after.metrics[key] if after is not None else None,
            }
        )
    return PaperComparison(results, pd.DataFrame(rows))


#: The policy ``ablations`` switches mechanisms off in, and the baselines run beside it.
ABLATED = "muxflow"
BASELINES = ("mps-naive", "dedicated")

#: Default ablation variants: mechanisms switched off together (the pair shows the monitor's
#: contribution where it matters: without the launch limit in front of it).
ABLATIONS: tuple[tuple[str, ...], ...] = (
    (),
    *((m,) for m in MECHANISMS),
    ("launch_limit", "monitor"),
)


def ablations(
    jobs: pd.DataFrame,
    cfg: SharingConfig,
    seed: int = 0,
    minutes: int | None = None,
    variants: Iterable[tuple[str, ...]] = ABLATIONS,
    baselines: bool = True,
) -> pd.DataFrame:
    """One row per variant (MuxFlow with the named mechanisms off; then mps-naive and
    dedicated when ``baselines``), all on the same jobs and seed. Columns: ``variant``,
    ``TABLE_METRICS`` and the per-reason eviction counts."""
    runs: list[tuple[str, str, SharingConfig]] = [
        (ABLATED + "".join(f" - {m}" for m in off), ABLATED, cfg.without(*off)) for off in variants
    ]
    if baselines:
        runs += [(name, name, cfg) for name in BASELINES]
    rows = []
    for label, policy, c in runs:
        m = simulate_sharing(jobs, c, policy, seed=seed, minutes=minutes).metrics
        extra = {k: v for k, v in m.items() if k.startswith("evictions_")}
        rows.append({"variant": label, **{k: m.get(k) for k in TABLE_METRICS}, **extra})
    return pd.DataFrame(rows)


def sweep(
    jobs: pd.DataFrame,
    cfg: SharingConfig,
    param: str,
    values: Iterable[Any],
    seed: int = 0,
    minutes: int | None = None,
    policy: str = "muxflow",
) -> pd.DataFrame:
    """One row per value of the dotted parameter ``param`` (e.g. ``sm.threshold``)."""
    rows = []
    for v in values:
        r = simulate_sharing(jobs, cfg.with_(**{param: v}), policy, seed=seed, minutes=minutes)
        rows.append({param: v, **{k: r.metrics.get(k) for k in TABLE_METRICS}})
    return pd.DataFrame(rows)


@dataclass
class Experiment:
    """A table of sharing runs on a scenario's jobs (``replay --ablate`` / ``--vary``), with
    what produced it and the figure that shows it."""

    table: pd.DataFrame
    config: SharingConfig
    seed: int
    #: The dotted parameter varied (``--vary``), None for ablations.
    param: str | None = None

    def header(self) -> dict[str, Any]:
        """What the rows were run on (for the JSON output)."""
        out: dict[str, Any] = {"online_gpus": self.config.cluster.online_gpus, "seed": self.seed}
        if self.param is not None:
            out["param"] = self.param
        return out

    def figure(self, directory: Path) -> Path:
        """The experiment's figure (ablation bars, or the metrics against the parameter) as a
        PNG in ``directory``."""
        from philly_analyze.sim.sharing.figures import plot_ablation, plot_sweep

        directory.mkdir(parents=True, exist_ok=True)
        budget = self.config.online.slo_violation_budget
        if self.param is None:
            return plot_ablation(self.table, directory / "muxflow_ablation.png", budget)
        name = "muxflow_sweep_" + self.param.replace(".", "_") + ".png"
        return plot_sweep(self.table, self.param, directory / name, budget)


def scenario_config(policy: str, scenario: str, params: Mapping[str, Any] | None) -> SharingConfig:
    """The model configuration of ``--scenario`` for a sharing policy's replay ``params``
    (``online_gpus``, ``model``, ``disable``, ``step_minutes``; validated)."""
    from philly_analyze.sim.policies import validate_params
    from philly_analyze.sim.policies.sharing import sharing_policy
    from philly_analyze.sim.sharing.replay import sharing_config

    p = validate_params(sharing_policy(policy), {**dict(params or {}), "scenario": scenario})
    return sharing_config(p, 0)[0]


def run_ablations(scenario: str, params: Mapping[str, Any] | None, seed: int = 0) -> Experiment:
    """``replay --scenario S --ablate``: ``ablations`` on the scenario's jobs over its day
    (``params``: the ablated policy's, e.g. ``online_gpus``)."""
    cfg = scenario_config(ABLATED, scenario, params)
    table = ablations(paper_jobs(cfg, seed), cfg, seed=seed, minutes=cfg.paper.minutes)
    return Experiment(table, cfg, seed)


def run_sweep(
    policy: str,
    scenario: str,
    param: str,
    values: Sequence[Any],
    params: Mapping[str, Any] | None,
    seed: int = 0,
) -> Experiment:
    """``replay --scenario S --policy P --vary PARAM=V1,V2``: ``sweep`` of one model parameter
    (dotted, as in the model file) on the scenario's jobs over its day."""
    cfg = scenario_config(policy, scenario, params)
    table = sweep(paper_jobs(cfg, seed), cfg, param, values, seed, cfg.paper.minutes, policy)
    return Experiment(table, cfg, seed, param)


def parse_value(text: str) -> Any:
    """A model parameter's value from the command line: bool, int, float or string."""
    low = text.strip().lower()
    if low in ("true", "false"):
        return low == "true"
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text.strip()
