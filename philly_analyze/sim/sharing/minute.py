"""One step of the online and shared GPUs (``step_minutes``, default 1), vectorised over the
online GPUs: the online load, each shared GPU's physics (``model.py``), progress and
completions of shared jobs (exact time within the step), protection (``shared.protect``),
dynamic SM changes every ``sm.check_minutes``, matching every ``matching.period_minutes``
(after arrivals and a placement on free training GPUs: a dedicated GPU, when one is free,
beats sharing), and the step's metrics. ``engine.SharingSim`` runs it at the end of each step.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from philly_analyze.sim.sharing import shared
from philly_analyze.sim.sharing.model import compose_util, sm_speed
from philly_analyze.sim.sharing.workload import ORDINARY, SHARED

if TYPE_CHECKING:
    from philly_analyze.sim.sharing.engine import SharingSim


def step(sim: SharingSim, t: float, dt: float) -> None:
    """The minute ``[t, t + dt)`` of the online and shared GPUs (module docstring)."""
    cfg, fl, acc = sim.cfg, sim.fleet, sim.acc
    t_end = t + dt
    sim.q = q = fl.step(t)
    up = sim.g_down <= t
    u_on = np.where(up, fl.util(q), 0.0)
    need = fl.sm_need(q)
    m_on = np.where(up, fl.memory(q), 0.0)
    ln_sigma = np.zeros(sim.G)
    u_off = np.zeros(sim.G)
    sm_off = np.zeros(sim.G)
    m_off = np.zeros(sim.G)

    occ = np.flatnonzero(sim.g_job >= 0)
    if len(occ):
        j = sim.g_job[occ]
        jt, svc = sim.jobs.jtype[j], fl.svc[occ]
        active = (sim.g_paused[occ] <= t) & up[occ]
        lam = fl.lam(q[occ])
        share, duty = sim.g_share[occ], sim.g_duty[occ]
        r_int = np.exp(-sim.tables.y_off_true[jt, svc] * lam)
        f = sm_speed(share, sim.jobs.sm[j], cfg.sm.speed_exponent)
        rate = np.where(active, duty * r_int * f, 0.0)
        y_on = sim.tables.y_on_true[svc, jt] * lam * duty
        y_on *= np.power(share, cfg.sm.pressure_exponent)
        noise = sim.rng.normal(0.0, cfg.online.slowdown_noise, len(occ))
        ln_s = np.where(active, y_on + noise, 0.0)
        ln_sigma[occ] = ln_s
        busy = np.where(active, duty * (1.0 - (1.0 - sim.jobs.util[j]) * r_int * f), 0.0)
        u_off[occ] = busy
        sm_off[occ] = busy * np.minimum(sim.jobs.sm[j], share)
        spike = sim.rng.random(len(occ)) < cfg.offline.mem_spike_prob
        m_now = sim.jobs.mem[j] * np.where(spike, cfg.offline.mem_spike_factor, 1.0)
        m_off[occ] = m_now
        progress(sim, occ, j, rate, t, dt)
        acc.add_slowdowns(ln_s[active])
        acc.add("active_gpu_minutes", float(active.sum()) * dt)
        acc.add("duty_sum", float(duty[active].sum()) * dt)
        acc.add("speed_sum", float(rate[active].sum()) * dt)
    sigma = np.exp(ln_sigma)
    u_on_eff = np.minimum(1.0, u_on * sigma)
    util = compose_util(u_on_eff, u_off)
    smact = np.minimum(1.0, u_on_eff * need + sm_off)
    mem = m_on + m_off
    violate = up & (sigma > sim.g_slo)
    if len(occ):
        shared.protect(sim, occ, sigma, smact, mem, m_off, up, t_end)
    if sim.share_gpus and cfg.sm.dynamic and every(t, dt, cfg.sm.check_minutes):
        shared.adjust_sm(sim, t_end)
    if sim.share_gpus and every(t, dt, cfg.matching.period_minutes):
        sim.arrivals(t_end)
        sim.place_ordinary(t_end)  # a dedicated GPU, when one is free, beats sharing
        shared.match(sim, t_end)
    record(sim, t, dt, util, smact, mem, sigma, violate, up, occ)


def progress(
    sim: SharingSim, occ: np.ndarray, j: np.ndarray, rate: np.ndarray, t: float, dt: float
) -> None:
    """Advance shared jobs at the slowest worker's rate; finish those done in this step."""
    jobs, r = job_min(j, rate, sim.jobs.gpus)
    remaining = sim.j_work[jobs] - sim.j_done[jobs]
    finished = r * dt >= remaining
    gain = np.minimum(r * dt, remaining)
    sim.j_done[jobs] += gain
    sim.j_since_ckpt[jobs] += gain
    sim.j_run[jobs] += dt
    ck = sim.cfg.offline.checkpoint_minutes
    saved = np.floor(sim.j_run[jobs] / ck) > np.floor((sim.j_run[jobs] - dt) / ck)
    sim.j_since_ckpt[jobs[saved & ~finished]] = 0.0
    if finished.any():
        fj = jobs[finished]
        ends = t + remaining[finished] / np.maximum(r[finished], 1e-12)
        held, owner = sim._release(fj)
        end_of = dict(zip(fj.tolist(), ends.tolist(), strict=True))
        for jj, g in owner_groups(held, owner):
            sim.attempt_done(jj, end_of[jj], "shared", g)


def record(
    sim: SharingSim,
    t: float,
    dt: float,
    util: np.ndarray,
    smact: np.ndarray,
    mem: np.ndarray,
    sigma: np.ndarray,
    violate: np.ndarray,
    up: np.ndarray,
    occ: np.ndarray,
) -> None:
    """Add this step's cluster sums to the accumulator and a row to the time series."""
    acc, G, n_ord = sim.acc, sim.G, sim.n_ord
    n_ord_busy = n_ord - sim.fs.free_total
    ou = os_ = om = 0.0
    if n_ord_busy:
        busy = np.fromiter(sim.j_ord_pl.keys(), np.int64, len(sim.j_ord_pl))
        k = sim.jobs.gpus[busy]
        ou = float((sim.jobs.util[busy] * k).sum())
        os_ = float((sim.jobs.util[busy] * sim.jobs.sm[busy] * k).sum())
        om = float((sim.jobs.mem[busy] * k).sum())
    su, ss, sm_ = float(util.sum()), float(smact.sum()), float(mem.sum())
    n_shared = int((sim.g_job >= 0).sum())
    for key, v in (
        ("util_online", su),
        ("sm_online", ss),
        ("mem_online", sm_),
        ("util_ordinary", ou),
        ("sm_ordinary", os_),
        ("mem_ordinary", om),
        ("violation_gpu_minutes", float(violate.sum())),
        ("outage_gpu_minutes", float((~up).sum())),
        ("up_gpu_minutes", float(up.sum())),
        ("shared_gpu_minutes", float(n_shared)),
    ):
        acc.add(key, v * dt)
    acc.steps += 1
    acc.minutes += dt
    total = max(G + n_ord, 1)
    shared_sigma = sigma[occ].mean() if len(occ) else 1.0
    acc.rows.append(
        (
            t,
            su / max(G, 1),
            ss / max(G, 1),
            sm_ / max(G, 1),
            (su + ou) / total,
            (ss + os_) / total,
            (sm_ + om) / total,
            n_shared,
            float(shared_sigma),
            int(violate.sum()),
            int((~up).sum()),
            int(((sim.j_state == SHARED) | (sim.j_state == ORDINARY)).sum()),
            int(sim.pending.sum()),
        )
    )


def unique_jobs(j: np.ndarray, job_gpus: np.ndarray) -> np.ndarray:
    """Distinct job ids of per-GPU owners: 1-GPU jobs appear once, so only gangs are sorted."""
    single = job_gpus[j] == 1
    if single.all():
        return j
    return np.concatenate([j[single], np.unique(j[~single])])


def job_min(j: np.ndarray, rate: np.ndarray, job_gpus: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(distinct jobs, slowest rate over each job's GPUs) from per-GPU owners and rates."""
    single = job_gpus[j] == 1
    if single.all():
        return j, rate
    jm, rm = j[~single], rate[~single]
    order = np.argsort(jm, kind="stable")
    jm, rm = jm[order], rm[order]
    starts = np.flatnonzero(np.r_[True, jm[1:] != jm[:-1]])
    return (
        np.concatenate([j[single], jm[starts]]),
        np.concatenate([rate[single], np.minimum.reduceat(rm, starts)]),
    )


def owner_groups(held: np.ndarray, owner: np.ndarray) -> list[tuple[int, tuple[int, ...]]]:
    """(job, its GPUs) for each distinct owner."""
    if len(np.unique(owner)) == len(owner):
        return [(o, (h,)) for h, o in zip(held.tolist(), owner.tolist(), strict=True)]
    order = np.argsort(owner, kind="stable")
    held, owner = held[order], owner[order]
    bounds = np.flatnonzero(np.diff(owner)) + 1
    return [
        (int(o[0]), tuple(h.tolist()))
        for h, o in zip(np.split(held, bounds), np.split(owner, bounds), strict=True)
        if len(o)
    ]


def every(t: float, dt: float, period: float) -> bool:
    """True on the step that crosses a multiple of ``period`` minutes."""
    return np.floor((t + dt) / period) > np.floor(t / period)
