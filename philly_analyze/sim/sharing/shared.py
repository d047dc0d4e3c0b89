"""What MuxFlow does on the shared GPUs, as functions of the simulation state: the matching
round and its weights, dynamic SM allocation, and the protection layers (xCUDA memory limit,
error handling, SysMonitor, launch-rate feedback)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from philly_analyze.sim.sharing.matching import INFEASIBLE, match_round
from philly_analyze.sim.sharing.model import launch_control, safe_duty, sm_speed, sm_target
from philly_analyze.sim.sharing.workload import SHARED

if TYPE_CHECKING:
    from philly_analyze.sim.sharing.engine import SharingSim


def weights(
    sim: SharingSim, rows: np.ndarray, col_job: np.ndarray, t: float, truth: bool
) -> np.ndarray:
    """Expected offline progress rate of each worker on each free GPU (predicted or true)."""
    tb, cfg, fl = sim.tables, sim.cfg, sim.fleet
    y_off = tb.y_off_true if truth else tb.y_off_pred
    y_on = tb.y_on_true if truth else tb.y_on_pred
    svc = fl.svc[rows][:, None]
    jt = sim.jobs.jtype[col_job][None, :]
    lam = fl.lam(sim.q[rows])[:, None]
    lam_peak = fl.lam(sim.q_peak(t)[rows])[:, None]
    share = placement_share(sim, rows, t)[:, None]
    speed = np.exp(-y_off[jt, svc] * lam) * sm_speed(
        share, sim.jobs.sm[col_job][None, :], cfg.sm.speed_exponent
    )
    y_on_full = y_on[svc, jt] * lam_peak * np.power(share, cfg.sm.pressure_exponent)
    slo = sim.g_slo[rows][:, None]
    duty = safe_duty(cfg, y_on_full, slo) if cfg.launch.enabled else np.ones_like(y_on_full)
    w = duty * speed
    if sim.aware:
        mem = sim.jobs.mem[col_job][None, :]
        w = np.where(mem > sim.g_limit[rows][:, None], INFEASIBLE, w)
        if not cfg.launch.enabled:  # no throttle to fall back on: avoid predicted breaches
            w = np.where(np.exp(y_on_full) > slo, INFEASIBLE, w)
    return w


def placement_share(sim: SharingSim, rows: np.ndarray, t: float) -> np.ndarray:
    """Offline SM share on GPUs ``rows``: complementary to the online need forecast over the
    SM horizon (dynamic allocation), else the fixed share."""
    if not sim.cfg.sm.dynamic:
        return np.full(len(rows), sim.cfg.sm.fixed_share)
    return sm_target(sim.cfg, sim.fleet.sm_need(sim.q_peak(t)[rows], rows))


def match(sim: SharingSim, t: float) -> None:
    """A matching round: free online GPUs (not cooling down, online service up) against the
    head of the queue; placed workers start at the predicted safe duty and SM share."""
    cfg = sim.cfg
    free = np.flatnonzero((sim.g_job < 0) & (sim.g_cool <= t) & (sim.g_down <= t))
    if len(free) == 0 or not sim.pending.any():
        return
    limit = int(np.ceil(cfg.matching.window_factor * len(free)))
    q = sim.queue(limit, cfg.offline.max_gang)
    placements = match_round(
        free,
        q,
        sim.jobs.gpus,
        lambda r, c: weights(sim, r, c, t, truth=False),
        lambda r, c: weights(sim, r, c, t, truth=True),
        use_matching=cfg.matching.enabled,
        block_rows=cfg.matching.block_rows,
        window_factor=cfg.matching.window_factor,
        min_weight=cfg.matching.min_weight,
        check_feasible=sim.aware,
        oracle_sample=cfg.matching.oracle_sample,
        rng=sim.rng,
        stats=sim.match_stats,
    )
    if not placements:
        return
    gpus = np.concatenate([g for _, g in placements])
    owner = np.repeat([j for j, _ in placements], [len(g) for _, g in placements])
    sim.g_job[gpus] = owner
    sim.j_gpu[owner] = gpus  # for multi-GPU jobs: one of them (unused)
    sim.g_share[gpus] = placement_share(sim, gpus, t)
    if cfg.launch.enabled:  # start at the predicted safe duty; the loop corrects it
        y = sim.tables.y_on_pred[sim.fleet.svc[gpus], sim.jobs.jtype[owner]]
        y = y * sim.fleet.lam(sim.q_peak(t)[gpus])
        y = y * np.power(sim.g_share[gpus], cfg.sm.pressure_exponent)
        sim.g_duty[gpus] = safe_duty(cfg, y, sim.g_slo[gpus])
    else:
        sim.g_duty[gpus] = 1.0
    sim.g_paused[gpus] = t
    sim.g_streak[gpus] = 0
    for j, _ in placements:
        sim.start(j, t, SHARED)


def adjust_sm(sim: SharingSim, t: float) -> None:
    """Dynamic SM allocation: move a running offline process to its new target share only
    when the target moved by at least the threshold; each move pauses it (MPS restart)."""
    occ = np.flatnonzero(sim.g_job >= 0)
    if len(occ) == 0:
        return
    target = placement_share(sim, occ, t)
    change = np.abs(target - sim.g_share[occ]) >= sim.cfg.sm.threshold - 1e-9
    if change.any():
        g = occ[change]
        sim.g_share[g] = target[change]
        sim.g_paused[g] = t + sim.cfg.sm.restart_minutes
        sim.acc.sm_restarts += int(change.sum())


def protect(
    sim: SharingSim,
    occ: np.ndarray,
    sigma: np.ndarray,
    smact: np.ndarray,
    mem: np.ndarray,
    m_off: np.ndarray,
    up: np.ndarray,
    t: float,
) -> None:
    """xCUDA memory limit, error handling, SysMonitor and the launch-rate feedback loop."""
    cfg = sim.cfg
    occ = occ[sim.g_job[occ] >= 0]  # jobs that finished this step are gone
    if len(occ) == 0:
        return
    if cfg.memory.enabled:
        over = occ[m_off[occ] > sim.g_limit[occ]]
        sim.evict(over, "memory_limit", t)
    else:
        over = occ[mem[occ] > 1.0]
        sim.outage(over, cfg.memory.oom_outage_minutes, t)
        sim.evict(over, "oom_crash", t)
    occ = occ[sim.g_job[occ] >= 0]
    active = occ[(sim.g_paused[occ] <= t) & up[occ]]
    p_err = 1.0 - np.exp(-cfg.errors.rate_per_hour * cfg.cluster.step_minutes / 60.0)
    hit = active[sim.rng.random(len(active)) < p_err]
    if len(hit):
        signal = sim.rng.random(len(hit)) < cfg.errors.signal_fraction
        if cfg.errors.mixed:
            sim.evict(hit[signal], "error_signal", t)
            sim.outage(hit[~signal], cfg.errors.reset_outage_minutes, t)
            sim.evict(hit[~signal], "error_reset", t)
        else:
            sim.outage(hit, cfg.errors.mps_outage_minutes, t)
            sim.evict(hit, "error_propagated", t)
    occ = occ[sim.g_job[occ] >= 0]
    if cfg.monitor.enabled and len(occ):
        mon = cfg.monitor
        bad = sigma[occ] > mon.slowdown_factor * sim.g_slo[occ]
        sim.g_streak[occ] = np.where(bad, sim.g_streak[occ] + 1, 0)
        risk = (sim.g_streak[occ] >= mon.consecutive) | (mem[occ] > mon.mem_threshold)
        risk |= smact[occ] > mon.sm_threshold
        out = occ[risk]
        sim.g_cool[out] = t + mon.cooldown_minutes
        sim.evict(out, "monitor", t)
        occ = occ[sim.g_job[occ] >= 0]
    if cfg.launch.enabled and len(occ):
        sim.g_duty[occ] = launch_control(cfg, sigma[occ], sim.g_duty[occ], sim.g_target[occ])
