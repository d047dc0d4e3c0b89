"""``simulate_sharing``: the library entry point of the MuxFlow model (a sharing policy of
``sim.policies.sharing`` on offline jobs) and the assembly of a ``SharingResult`` from the
final simulation state."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from philly_analyze.errors import UserError
from philly_analyze.sharingout import TIMESERIES_COLUMNS
from philly_analyze.sim.sharing.config import SharingConfig
from philly_analyze.sim.sharing.engine import SharingSim
from philly_analyze.sim.sharing.interference import load_interference
from philly_analyze.sim.sharing.results import SharingResult, job_metrics, round_metrics
from philly_analyze.sim.sharing.workload import ORDINARY, SHARED, prepare_offline

if TYPE_CHECKING:
    from philly_analyze.sim.cluster import Cluster

#: Without a horizon, a run stops when all runnable jobs are done, or this long after the last
#: submission.
MAX_EXTRA_MINUTES = 30 * 1440.0


def simulate_sharing(
    offline_jobs: pd.DataFrame | dict[str, Any],
    config: SharingConfig | None = None,
    policy: str = "muxflow",
    seed: int = 0,
    minutes: int | None = None,
    cluster: Cluster | None = None,
) -> SharingResult:
    """Simulate online services and offline jobs sharing GPUs under the sharing ``policy``
    (a registered name: its mechanism set is applied to ``config``).

    ``offline_jobs``: columns ``job_id``, ``submit`` (minutes) or ``submit_time``,
    ``num_gpus``, ``duration`` (solo seconds) or ``work_minutes``, optional ``vc``, ``user``.
    ``minutes``: horizon; None runs until every job that can run has finished (at most
    ``MAX_EXTRA_MINUTES`` past the last submission), so online-side averages then cover each
    policy's own span: pass ``minutes`` to compare policies over the same span. ``cluster``:
    the training GPUs' servers (``ordinary_gpus`` of them; default: servers of
    ``gpus_per_machine``). Same seed, same result."""
    from philly_analyze.sim.policies.sharing import sharing_policy

    pol = sharing_policy(policy)
    mech = pol.mechanisms
    cfg = mech.configure(config or SharingConfig.load())
    rng = np.random.default_rng(seed)
    n_types = len(load_interference(cfg.cluster.gpu_type).types)
    jobs = prepare_offline(offline_jobs, cfg, n_types, rng)
    if cfg.cluster.online_gpus + cfg.cluster.ordinary_gpus <= 0:
        raise UserError("the cluster has no GPUs (online_gpus + ordinary_gpus = 0)")
    last = float(jobs.submit.max()) if jobs.n else 0.0
    horizon = last + MAX_EXTRA_MINUTES if minutes is None else float(minutes)
    sim = SharingSim(
        jobs, cfg, mech, seed + 1, int(np.ceil(horizon)), label=policy, cluster=cluster
    )
    t0 = time.perf_counter()
    t = sim.run(horizon, float(cfg.cluster.step_minutes), last if minutes is None else None)
    res = _result(sim, t)
    res.timing["seconds"] = time.perf_counter() - t0
    # Recorded with the output, so that a store of it says so without the policy registry.
    res.paper_side, res.color = pol.paper_side, pol.color
    return res


def _result(sim: SharingSim, horizon: float) -> SharingResult:
    """The run's ``SharingResult``: jobs and attempts (those still running closed at the
    horizon), metrics, the time series and the slowdown histogram."""
    jobs, acc, cfg = sim.jobs, sim.acc, sim.cfg
    # Close running attempts at the horizon.
    for j in np.flatnonzero((sim.j_state == SHARED) | (sim.j_state == ORDINARY)).tolist():
        gpus = (
            sim.ord_ids(sim.j_ord_pl[j])
            if sim.j_state[j] == ORDINARY
            else tuple(np.flatnonzero(sim.g_job == j).tolist())
        )
        kind = "ordinary" if sim.j_state[j] == ORDINARY else "shared"
        sim.attempts.append(
            (j, int(sim.j_att_idx[j]), float(sim.j_att_start[j]), horizon, "running", kind, gpus)
        )
    jt = pd.DataFrame(
        {
            "job_id": jobs.job_id,
            "vc": jobs.vc,
            "user": jobs.user,
            "submit_min": jobs.submit,
            "num_gpus": jobs.gpus,
            "work_min": jobs.work,
            "first_start_min": sim.j_first,
            "end_min": sim.j_end,
            "evictions": sim.j_evictions,
            "lost_work_min": sim.j_lost,
            "job_type": np.asarray(load_interference(cfg.cluster.gpu_type).types)[jobs.jtype],
        }
    )
    att = pd.DataFrame(
        sim.attempts,
        columns=["job", "attempt_idx", "start_min", "end_min", "outcome", "kind", "gpus"],
    ).astype({"job": np.int64, "attempt_idx": np.int64, "start_min": float, "end_min": float})
    m = _metrics(sim, jt, horizon)
    ts = pd.DataFrame(acc.rows, columns=list(TIMESERIES_COLUMNS))
    return SharingResult(
        policy=sim.policy,
        metrics=round_metrics(m),
        timeseries=ts,
        jobs=jt,
        attempts=att,
        config=cfg,
        origin=jobs.origin,
        timing={
            "solver_seconds": sim.match_stats.solver_seconds,
            "largest_block": list(sim.match_stats.largest_block),
        },
        slowdown_hist=acc.ln_hist.copy(),
    )


def _metrics(sim: SharingSim, jt: pd.DataFrame, horizon: float) -> dict[str, Any]:
    """The flat metrics of a finished run (``docs/muxflow.md`` lists each key)."""
    jobs, acc, cfg = sim.jobs, sim.acc, sim.cfg
    G, n_ord, T = sim.G, sim.n_ord, max(acc.minutes, 1e-9)
    s = acc.sums
    per_online = max(G, 1) * T
    per_all = max(G + n_ord, 1) * T
    ms = sim.match_stats
    active = s.get("active_gpu_minutes", 0.0)
    return {
        "policy": sim.policy,
        "online_gpus": G,
        "ordinary_gpus": n_ord,
        "minutes": horizon,
        "gpu_util_online": s["util_online"] / per_online,
        "sm_activity_online": s["sm_online"] / per_online,
        "gpu_memory_online": s["mem_online"] / per_online,
        "gpu_util_all": (s["util_online"] + s["util_ordinary"]) / per_all,
        "sm_activity_all": (s["sm_online"] + s["sm_ordinary"]) / per_all,
        "gpu_memory_all": (s["mem_online"] + s["mem_ordinary"]) / per_all,
        "shared_fraction": s["shared_gpu_minutes"] / per_online,
        # Means over shared GPU-minutes: absent (None), not 0, when no GPU was shared.
        "shared_duty_mean": s.get("duty_sum", 0.0) / active if active else None,
        "shared_speed_mean": s.get("speed_sum", 0.0) / active if active else None,
        "online_slowdown_p50": acc.slowdown_quantile(0.5),
        "online_slowdown_p99": acc.slowdown_quantile(0.99),
        "slo_violation_minutes": s["violation_gpu_minutes"],
        "slo_violation_fraction": s["violation_gpu_minutes"] / max(s["up_gpu_minutes"], 1e-9),
        "slo_violation_budget": cfg.online.slo_violation_budget,
        "outage_minutes": s["outage_gpu_minutes"],
        "outage_events": acc.outage_events,
        **job_metrics(jt, horizon),
        "offline_unrunnable": int((~sim.runnable).sum()),
        "offline_work_gpu_hours": float(
            (np.minimum(sim.j_base + sim.j_done, jobs.work) * jobs.gpus).sum()
        )
        / 60.0,
        "evictions": sum(acc.evictions.values()),
        **{f"evictions_{k}": v for k, v in acc.evictions.items()},
        "gpu_hours_lost": acc.lost_gpu_minutes / 60.0,
        "sm_restarts": acc.sm_restarts,
        "matching_rounds": ms.rounds,
        "matching_blocks": ms.blocks,
        "matching_quality": ms.quality(),
        "predictor_mae_sim": sim.tables.predictor_mae(),
        "predictor_mae_gavel_heldout": load_interference(cfg.cluster.gpu_type).heldout["mae"],
    }
