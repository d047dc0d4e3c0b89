"""The MuxFlow simulation loop: per-minute state vectorised over online GPUs, a heap for jobs on
ordinary GPUs, periodic matching rounds. Never a Python loop over GPUs.

Each step (``step_minutes``, default 1) does, in order: arrivals; completions on ordinary GPUs
(heap, exact times); ordinary placements (first fit in queue order); the online load; the
shared GPUs' physics (``model.py``); progress and completions of shared jobs (exact time within
the step); protection (xCUDA memory limit, errors, SysMonitor, launch-rate feedback); dynamic SM
changes every ``sm.check_minutes``; matching every ``matching.period_minutes``; metrics."""

from __future__ import annotations

import heapq
import time
from typing import Any

import numpy as np
import pandas as pd

from philly_analyze.errors import UserError
from philly_analyze.sim.sharing.config import SharingConfig
from philly_analyze.sim.sharing.interference import load_interference
from philly_analyze.sim.sharing.matching import INFEASIBLE, MatchStats, match_round
from philly_analyze.sim.sharing.model import (
    build_pair_tables,
    compose_util,
    launch_control,
    safe_duty,
    slowdown_target,
    sm_speed,
    sm_target,
)
from philly_analyze.sim.sharing.results import (
    TIMESERIES_COLUMNS,
    Accumulator,
    SharingResult,
    job_metrics,
    round_metrics,
)
from philly_analyze.sim.sharing.workload import OfflineJobs, OnlineFleet, prepare_offline

POLICIES = ("muxflow", "dedicated", "mps-naive")

# Job states.
FUTURE, PENDING, SHARED, ORDINARY, DONE = 0, 1, 2, 3, 4


def policy_config(cfg: SharingConfig, policy: str) -> SharingConfig:
    """The configuration a policy runs with. ``muxflow`` uses ``cfg`` as given (so ablations
    are ``cfg.without(...)``); ``mps-naive`` shares with every protection off, a fixed SM split,
    random pairing and plain-MPS error propagation; ``dedicated`` does not share."""
    if policy == "muxflow" or policy == "dedicated":
        return cfg
    if policy == "mps-naive":
        return cfg.without(
            "memory_limit", "launch_limit", "monitor", "dynamic_sm", "matching", "mixed_errors"
        )
    raise UserError(f"unknown sharing policy {policy!r}; known: {', '.join(POLICIES)}")


class _Sim:
    """State of one run. Arrays ``g*`` are per online GPU, ``j*`` per offline job."""

    def __init__(
        self, jobs: OfflineJobs, cfg: SharingConfig, policy: str, seed: int, minutes: int
    ) -> None:
        self.cfg, self.policy, self.minutes = cfg, policy, minutes
        self.share_gpus = policy != "dedicated"
        self.aware = policy == "muxflow"  # scheduler checks memory / predicted SLO at placement
        self.rng = np.random.default_rng(seed)
        inter = load_interference(cfg.cluster.gpu_type)
        self.tables = build_pair_tables(
            inter,
            cfg.online.services,
            self.rng,
            cfg.matching.profile_noise,
            cfg.matching.truth_noise,
        )
        G, O = cfg.cluster.online_gpus, cfg.cluster.ordinary_gpus
        self.G, self.O = G, O
        self.fleet = OnlineFleet(cfg, G, self.rng)
        self.jobs = jobs
        J = jobs.n
        # Online GPUs.
        self.g_job = np.full(G, -1, np.int64)
        self.g_duty = np.ones(G)
        self.g_share = np.full(G, cfg.sm.fixed_share)
        self.g_paused = np.zeros(G)  # offline paused (SM restart) until this minute
        self.g_cool = np.zeros(G)  # no placement until (monitor cooldown)
        self.g_down = np.zeros(G)  # online service down until (outage)
        self.g_streak = np.zeros(G, np.int64)
        self.g_limit = 1.0 - self.fleet.mem_peak - cfg.memory.margin  # xCUDA memory limit
        self.g_slo = self.fleet.slo
        self.g_target = slowdown_target(cfg, self.fleet.slo)
        # Jobs.
        self.j_state = np.zeros(J, np.int8)
        self.j_done = np.zeros(J)
        self.j_since_ckpt = np.zeros(J)
        self.j_run = np.zeros(J)  # minutes in the current placement
        self.j_first = np.full(J, np.nan)
        self.j_end = np.full(J, np.nan)
        self.j_evictions = np.zeros(J, np.int64)
        self.j_lost = np.zeros(J)
        self.j_att_start = np.full(J, np.nan)
        self.j_att_idx = np.zeros(J, np.int64)
        self.j_ord_gpus: dict[int, list[int]] = {}
        self.j_gpu = np.full(J, -1, np.int64)  # the online GPU of a running 1-GPU shared job
        self.pending = np.zeros(J, bool)
        self.next_arrival = 0
        self.heap: list[tuple[float, int]] = []
        self.free_ordinary = list(range(G + O - 1, G - 1, -1))  # a stack of global ids
        self.attempts: list[tuple[int, int, float, float, str, str, tuple[int, ...]]] = []
        self.acc = Accumulator(G, O)
        self.match_stats = MatchStats()
        self.ordinary_dirty = True
        self._q_peak_t = -1.0
        self._q_peak = np.zeros(G)

    # ---------------------------------------------------------------- queue and ordinary GPUs
    def arrivals(self, t_end: float) -> None:
        hi = int(np.searchsorted(self.jobs.submit, t_end, side="left"))
        if hi > self.next_arrival:
            sl = slice(self.next_arrival, hi)
            self.pending[sl] = True
            self.j_state[sl] = PENDING
            self.next_arrival = hi
            self.ordinary_dirty = True

    def queue(self, limit: int, max_gpus: int | None = None) -> np.ndarray:
        """Up to ``limit`` pending jobs in queue (submit) order."""
        idx = np.flatnonzero(self.pending)
        if max_gpus is not None:
            idx = idx[self.jobs.gpus[idx] <= max_gpus]
        return idx[:limit]

    def complete_ordinary(self, t_end: float) -> None:
        while self.heap and self.heap[0][0] <= t_end:
            end, j = heapq.heappop(self.heap)
            gpus = self.j_ord_gpus.pop(j)
            self.free_ordinary.extend(gpus)
            self.j_done[j] = self.jobs.work[j]
            self._finish(j, end, "passed", "ordinary", tuple(gpus))
            self.ordinary_dirty = True

    def place_ordinary(self, t: float) -> None:
        if not self.ordinary_dirty or not self.free_ordinary:
            return
        self.ordinary_dirty = False
        for j in self.queue(256).tolist():
            k = int(self.jobs.gpus[j])
            if k > len(self.free_ordinary):
                continue
            gpus = [self.free_ordinary.pop() for _ in range(k)]
            self.j_ord_gpus[j] = gpus
            self._start(j, t, ORDINARY)
            heapq.heappush(self.heap, (t + self.jobs.work[j] - self.j_done[j], j))
            if not self.free_ordinary:
                break

    def _start(self, j: int, t: float, state: int) -> None:
        self.pending[j] = False
        self.j_state[j] = state
        self.j_att_start[j] = t
        self.j_run[j] = 0.0
        self.j_since_ckpt[j] = 0.0
        if np.isnan(self.j_first[j]):
            self.j_first[j] = t

    def _finish(self, j: int, t: float, outcome: str, kind: str, gpus: tuple[int, ...]) -> None:
        self.attempts.append(
            (j, int(self.j_att_idx[j]), float(self.j_att_start[j]), t, outcome, kind, gpus)
        )
        self.j_att_idx[j] += 1
        if outcome == "passed":
            self.j_state[j] = DONE
            self.j_end[j] = t
        else:  # evicted: lose progress since the last checkpoint, back to the queue
            lost = self.j_since_ckpt[j]
            self.j_done[j] -= lost
            self.j_lost[j] += lost
            self.acc.lost_gpu_minutes += lost * self.jobs.gpus[j]
            self.j_evictions[j] += 1
            self.j_state[j] = PENDING
            self.pending[j] = True
            self.ordinary_dirty = True

    # ---------------------------------------------------------------- shared GPUs
    def evict(self, gpus: np.ndarray, reason: str, t: float) -> None:
        """Evict the offline jobs on ``gpus`` (whole gangs) and requeue them."""
        jobs = self.g_job[gpus]
        jobs = _unique_jobs(jobs[jobs >= 0], self.jobs.gpus)
        if len(jobs) == 0:
            return
        self.acc.evictions[reason] += len(jobs)
        held, owner = self._release(jobs)
        self.g_streak[held] = 0
        for j, g in _groups(held, owner):
            self._finish(j, t, reason, "shared", g)

    def _release(self, jobs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Free every GPU held by ``jobs``; returns (gpus, owner job of each). Single-GPU jobs
        are found through ``j_gpu`` without scanning all GPUs."""
        single = self.jobs.gpus[jobs] == 1
        held = self.j_gpu[jobs[single]]
        multi = jobs[~single]
        if len(multi):
            held = np.concatenate([held, np.flatnonzero(np.isin(self.g_job, multi))])
        owner = self.g_job[held]
        self.g_job[held] = -1
        return held, owner

    def weights(self, rows: np.ndarray, col_job: np.ndarray, t: float, truth: bool) -> np.ndarray:
        """Expected offline progress rate of each worker on each free GPU (predicted or true)."""
        tb, cfg, fl = self.tables, self.cfg, self.fleet
        y_off = tb.y_off_true if truth else tb.y_off_pred
        y_on = tb.y_on_true if truth else tb.y_on_pred
        svc = fl.svc[rows][:, None]
        jt = self.jobs.jtype[col_job][None, :]
        lam = fl.lam(self.q[rows])[:, None]
        lam_peak = fl.lam(self.q_peak(t)[rows])[:, None]
        share = self.placement_share(rows, t)[:, None]
        speed = np.exp(-y_off[jt, svc] * lam) * sm_speed(
            share, self.jobs.sm[col_job][None, :], cfg.sm.speed_exponent
        )
        y_on_full = y_on[svc, jt] * lam_peak * np.power(share, cfg.sm.pressure_exponent)
        slo = self.g_slo[rows][:, None]
        if cfg.launch.enabled:
            duty = safe_duty(cfg, y_on_full, slo)
        else:
            duty = np.ones_like(y_on_full)
        w = duty * speed
        if self.aware:
            mem = self.jobs.mem[col_job][None, :]
            w = np.where(mem > self.g_limit[rows][:, None], INFEASIBLE, w)
            if not cfg.launch.enabled:  # no throttle to fall back on: avoid predicted breaches
                w = np.where(np.exp(y_on_full) > slo, INFEASIBLE, w)
        return w

    def placement_share(self, rows: np.ndarray, t: float) -> np.ndarray:
        if not self.cfg.sm.dynamic:
            return np.full(len(rows), self.cfg.sm.fixed_share)
        return sm_target(self.cfg, self.fleet.sm_need(self.q_peak(t)[rows], rows))

    def q_peak(self, t: float) -> np.ndarray:
        """Forecast peak load of every online GPU over the SM horizon (cached per minute)."""
        if self._q_peak_t != t:
            self._q_peak = self.fleet.forecast_peak(t, self.cfg.sm.horizon_minutes)
            self._q_peak_t = t
        return self._q_peak

    def match(self, t: float) -> None:
        cfg = self.cfg
        free = np.flatnonzero((self.g_job < 0) & (self.g_cool <= t) & (self.g_down <= t))
        if len(free) == 0 or not self.pending.any():
            return
        limit = int(np.ceil(cfg.matching.window_factor * len(free)))
        q = self.queue(limit, cfg.offline.max_gang)
        placements = match_round(
            free,
            q,
            self.jobs.gpus,
            lambda r, c: self.weights(r, c, t, truth=False),
            lambda r, c: self.weights(r, c, t, truth=True),
            use_matching=cfg.matching.enabled,
            block_rows=cfg.matching.block_rows,
            window_factor=cfg.matching.window_factor,
            min_weight=cfg.matching.min_weight,
            check_feasible=self.aware,
            oracle_sample=cfg.matching.oracle_sample,
            rng=self.rng,
            stats=self.match_stats,
        )
        if not placements:
            return
        gpus = np.concatenate([g for _, g in placements])
        owner = np.repeat([j for j, _ in placements], [len(g) for _, g in placements])
        self.g_job[gpus] = owner
        self.j_gpu[owner] = gpus  # for multi-GPU jobs: one of them (unused)
        self.g_share[gpus] = self.placement_share(gpus, t)
        if cfg.launch.enabled:  # start at the predicted safe duty; the loop corrects it
            y = self.tables.y_on_pred[self.fleet.svc[gpus], self.jobs.jtype[owner]]
            y = y * self.fleet.lam(self.q_peak(t)[gpus])
            y = y * np.power(self.g_share[gpus], cfg.sm.pressure_exponent)
            self.g_duty[gpus] = safe_duty(cfg, y, self.g_slo[gpus])
        else:
            self.g_duty[gpus] = 1.0
        self.g_paused[gpus] = t
        self.g_streak[gpus] = 0
        for j, _ in placements:
            self._start(j, t, SHARED)

    def adjust_sm(self, t: float) -> None:
        occ = np.flatnonzero(self.g_job >= 0)
        if len(occ) == 0:
            return
        target = self.placement_share(occ, t)
        change = np.abs(target - self.g_share[occ]) >= self.cfg.sm.threshold - 1e-9
        if change.any():
            g = occ[change]
            self.g_share[g] = target[change]
            self.g_paused[g] = t + self.cfg.sm.restart_minutes
            self.acc.sm_restarts += int(change.sum())

    def step(self, t: float, dt: float) -> None:
        cfg, fl, acc = self.cfg, self.fleet, self.acc
        t_end = t + dt
        self.arrivals(t_end)
        self.complete_ordinary(t)
        self.place_ordinary(t)
        self.q = q = fl.step(t)
        up = self.g_down <= t
        u_on = np.where(up, fl.util(q), 0.0)
        need = fl.sm_need(q)
        m_on = np.where(up, fl.memory(q), 0.0)
        ln_sigma = np.zeros(self.G)
        u_off = np.zeros(self.G)
        sm_off = np.zeros(self.G)
        m_off = np.zeros(self.G)

        occ = np.flatnonzero(self.g_job >= 0)
        if len(occ):
            j = self.g_job[occ]
            jt, svc = self.jobs.jtype[j], fl.svc[occ]
            active = (self.g_paused[occ] <= t) & up[occ]
            lam = fl.lam(q[occ])
            share, duty = self.g_share[occ], self.g_duty[occ]
            r_int = np.exp(-self.tables.y_off_true[jt, svc] * lam)
            f = sm_speed(share, self.jobs.sm[j], cfg.sm.speed_exponent)
            rate = np.where(active, duty * r_int * f, 0.0)
            y_on = self.tables.y_on_true[svc, jt] * lam * duty
            y_on *= np.power(share, cfg.sm.pressure_exponent)
            noise = self.rng.normal(0.0, cfg.online.slowdown_noise, len(occ))
            ln_s = np.where(active, y_on + noise, 0.0)
            ln_sigma[occ] = ln_s
            busy = np.where(active, duty * (1.0 - (1.0 - self.jobs.util[j]) * r_int * f), 0.0)
            u_off[occ] = busy
            sm_off[occ] = busy * np.minimum(self.jobs.sm[j], share)
            spike = self.rng.random(len(occ)) < cfg.offline.mem_spike_prob
            m_now = self.jobs.mem[j] * np.where(spike, cfg.offline.mem_spike_factor, 1.0)
            m_off[occ] = m_now
            self.progress(occ, j, rate, t, dt)
            acc.add_slowdowns(ln_s[active])
            acc.add("active_gpu_minutes", float(active.sum()) * dt)
            acc.add("duty_sum", float(duty[active].sum()) * dt)
            acc.add("speed_sum", float(rate[active].sum()) * dt)
        sigma = np.exp(ln_sigma)
        u_on_eff = np.minimum(1.0, u_on * sigma)
        util = compose_util(u_on_eff, u_off)
        smact = np.minimum(1.0, u_on_eff * need + sm_off)
        mem = m_on + m_off
        violate = up & (sigma > self.g_slo)
        if len(occ):
            self.protect(occ, sigma, smact, mem, m_on, m_off, up, t_end)
        if self.share_gpus and cfg.sm.dynamic and _every(t, dt, cfg.sm.check_minutes):
            self.adjust_sm(t_end)
        if self.share_gpus and _every(t, dt, cfg.matching.period_minutes):
            self.match(t_end)
        self.record(t, dt, util, smact, mem, sigma, violate, up, occ)

    def progress(self, occ: np.ndarray, j: np.ndarray, rate: np.ndarray, t: float, dt: float):
        """Advance shared jobs at the slowest worker's rate; finish those done in this step."""
        jobs, r = _job_min(j, rate, self.jobs.gpus)
        remaining = self.jobs.work[jobs] - self.j_done[jobs]
        finished = r * dt >= remaining
        gain = np.minimum(r * dt, remaining)
        self.j_done[jobs] += gain
        self.j_since_ckpt[jobs] += gain
        self.j_run[jobs] += dt
        ck = self.cfg.offline.checkpoint_minutes
        saved = np.floor(self.j_run[jobs] / ck) > np.floor((self.j_run[jobs] - dt) / ck)
        self.j_since_ckpt[jobs[saved & ~finished]] = 0.0
        if finished.any():
            fj = jobs[finished]
            ends = t + remaining[finished] / np.maximum(r[finished], 1e-12)
            held, owner = self._release(fj)
            end_of = dict(zip(fj.tolist(), ends.tolist(), strict=True))
            for jj, g in _groups(held, owner):
                self._finish(jj, end_of[jj], "passed", "shared", g)

    def protect(self, occ, sigma, smact, mem, m_on, m_off, up, t) -> None:
        """xCUDA memory limit, error handling, SysMonitor and the launch-rate feedback loop."""
        cfg, acc = self.cfg, self.acc
        occ = occ[self.g_job[occ] >= 0]  # jobs that finished this step are gone
        if len(occ) == 0:
            return
        if cfg.memory.enabled:
            over = occ[m_off[occ] > self.g_limit[occ]]
            self.evict(over, "memory_limit", t)
        else:
            over = occ[mem[occ] > 1.0]
            self._outage(over, cfg.memory.oom_outage_minutes, t)
            self.evict(over, "oom_crash", t)
        occ = occ[self.g_job[occ] >= 0]
        active = occ[(self.g_paused[occ] <= t) & up[occ]]
        p_err = 1.0 - np.exp(-cfg.errors.rate_per_hour * cfg.cluster.step_minutes / 60.0)
        hit = active[self.rng.random(len(active)) < p_err]
        if len(hit):
            signal = self.rng.random(len(hit)) < cfg.errors.signal_fraction
            if cfg.errors.mixed:
                self.evict(hit[signal], "error_signal", t)
                self._outage(hit[~signal], cfg.errors.reset_outage_minutes, t)
                self.evict(hit[~signal], "error_reset", t)
            else:
                self._outage(hit, cfg.errors.mps_outage_minutes, t)
                self.evict(hit, "error_propagated", t)
        occ = occ[self.g_job[occ] >= 0]
        if cfg.monitor.enabled and len(occ):
            mon = cfg.monitor
            bad = sigma[occ] > mon.slowdown_factor * self.g_slo[occ]
            self.g_streak[occ] = np.where(bad, self.g_streak[occ] + 1, 0)
            risk = (self.g_streak[occ] >= mon.consecutive) | (mem[occ] > mon.mem_threshold)
            risk |= smact[occ] > mon.sm_threshold
            out = occ[risk]
            self.g_cool[out] = t + mon.cooldown_minutes
            self.evict(out, "monitor", t)
            occ = occ[self.g_job[occ] >= 0]
        if cfg.launch.enabled and len(occ):
            self.g_duty[occ] = launch_control(cfg, sigma[occ], self.g_duty[occ], self.g_target[occ])

    def _outage(self, gpus: np.ndarray, minutes: float, t: float) -> None:
        if len(gpus):
            self.g_down[gpus] = np.maximum(self.g_down[gpus], t + minutes)
            self.acc.outage_events += len(gpus)

    def record(self, t, dt, util, smact, mem, sigma, violate, up, occ) -> None:
        acc, G, O = self.acc, self.G, self.O
        n_ord_busy = O - len(self.free_ordinary)
        ou = os_ = om = 0.0
        if n_ord_busy:
            busy = np.fromiter(self.j_ord_gpus.keys(), np.int64, len(self.j_ord_gpus))
            k = self.jobs.gpus[busy]
            ou = float((self.jobs.util[busy] * k).sum())
            os_ = float((self.jobs.util[busy] * self.jobs.sm[busy] * k).sum())
            om = float((self.jobs.mem[busy] * k).sum())
        su, ss, sm_ = float(util.sum()), float(smact.sum()), float(mem.sum())
        n_shared = int((self.g_job >= 0).sum())
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
        total = max(G + O, 1)
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
                int(((self.j_state == SHARED) | (self.j_state == ORDINARY)).sum()),
                int(self.pending.sum()),
            )
        )


def _unique_jobs(j: np.ndarray, job_gpus: np.ndarray) -> np.ndarray:
    """Distinct job ids of per-GPU owners: 1-GPU jobs appear once, so only gangs are sorted."""
    single = job_gpus[j] == 1
    if single.all():
        return j
    return np.concatenate([j[single], np.unique(j[~single])])


def _job_min(j: np.ndarray, rate: np.ndarray, job_gpus: np.ndarray):
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


def _groups(held: np.ndarray, owner: np.ndarray) -> list[tuple[int, tuple[int, ...]]]:
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


def _every(t: float, dt: float, period: float) -> bool:
    """True on the step that crosses a multiple of ``period`` minutes."""
    return np.floor((t + dt) / period) > np.floor(t / period)


def simulate_sharing(
    offline_jobs: pd.DataFrame | dict[str, Any],
    config: SharingConfig | None = None,
    policy: str = "muxflow",
    seed: int = 0,
    minutes: int | None = None,
) -> SharingResult:
    """Simulate online services and offline jobs sharing GPUs under ``policy``.

    ``offline_jobs``: columns ``job_id``, ``submit`` (minutes) or ``submit_time``,
    ``num_gpus``, ``duration`` (solo seconds) or ``work_minutes``, optional ``vc``, ``user``.
    ``minutes``: horizon (default: last submit + one day). Same seed, same result."""
    cfg = policy_config(config or SharingConfig.load(), policy)
    rng = np.random.default_rng(seed)
    n_types = len(load_interference(cfg.cluster.gpu_type).types)
    jobs = prepare_offline(offline_jobs, cfg, n_types, rng)
    if minutes is None:
        minutes = int(np.ceil((jobs.submit.max() if jobs.n else 0.0) + 1440.0))
    if cfg.cluster.online_gpus + cfg.cluster.ordinary_gpus <= 0:
        raise UserError("the cluster has no GPUs (online_gpus + ordinary_gpus = 0)")
    sim = _Sim(jobs, cfg, policy, seed + 1, minutes)
    dt = float(cfg.cluster.step_minutes)
    t0 = time.perf_counter()
    for t in np.arange(0.0, float(minutes), dt):
        sim.step(float(t), dt)
    res = _result(sim, float(minutes))
    res.timing["seconds"] = time.perf_counter() - t0
    return res


def _result(sim: _Sim, horizon: float) -> SharingResult:
    jobs, acc, cfg = sim.jobs, sim.acc, sim.cfg
    # Close running attempts at the horizon.
    for j in np.flatnonzero((sim.j_state == SHARED) | (sim.j_state == ORDINARY)).tolist():
        gpus = (
            tuple(sim.j_ord_gpus[j])
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
    )
    G, O, T = sim.G, sim.O, max(acc.minutes, 1e-9)
    s = acc.sums
    per_online = max(G, 1) * T
    per_all = max(G + O, 1) * T
    ms = sim.match_stats
    m: dict[str, Any] = {
        "policy": sim.policy,
        "online_gpus": G,
        "ordinary_gpus": O,
        "minutes": horizon,
        "gpu_util_online": s["util_online"] / per_online,
        "sm_activity_online": s["sm_online"] / per_online,
        "gpu_memory_online": s["mem_online"] / per_online,
        "gpu_util_all": (s["util_online"] + s["util_ordinary"]) / per_all,
        "sm_activity_all": (s["sm_online"] + s["sm_ordinary"]) / per_all,
        "gpu_memory_all": (s["mem_online"] + s["mem_ordinary"]) / per_all,
        "shared_fraction": s["shared_gpu_minutes"] / per_online,
        "shared_duty_mean": s.get("duty_sum", 0.0) / max(s.get("active_gpu_minutes", 0.0), 1e-9),
        "shared_speed_mean": s.get("speed_sum", 0.0) / max(s.get("active_gpu_minutes", 0.0), 1e-9),
        "online_slowdown_p50": acc.slowdown_quantile(0.5),
        "online_slowdown_p99": acc.slowdown_quantile(0.99),
        "slo_violation_minutes": s["violation_gpu_minutes"],
        "slo_violation_fraction": s["violation_gpu_minutes"] / max(s["up_gpu_minutes"], 1e-9),
        "slo_violation_budget": cfg.online.slo_violation_budget,
        "outage_minutes": s["outage_gpu_minutes"],
        "outage_events": acc.outage_events,
        **job_metrics(jt, horizon),
        "offline_work_gpu_hours": float((np.minimum(sim.j_done, jobs.work) * jobs.gpus).sum())
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
    ts = pd.DataFrame(acc.rows, columns=list(TIMESERIES_COLUMNS))
    return SharingResult(
        policy=sim.policy,
        metrics=round_metrics(m),
        timeseries=ts,
        jobs=jt,
        attempts=att,
        config=cfg,
        origin=jobs.origin,
        timing={"solver_seconds": ms.solver_seconds, "largest_block": list(ms.largest_block)},
    )
