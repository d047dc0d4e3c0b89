"""The simulation state and its per-minute loop: state vectorised over online GPUs, a heap for
jobs on ordinary GPUs, periodic matching rounds. Never a Python loop over GPUs.

Each step (``step_minutes``, default 1) does, in order: arrivals; completions on ordinary GPUs
(heap, exact times); ordinary placements (first fit in queue order); the online load; the
shared GPUs' physics (``model.py``); progress and completions of shared jobs (exact time within
the step); protection (``shared.protect``); dynamic SM changes every ``sm.check_minutes``;
matching every ``matching.period_minutes``; metrics."""

from __future__ import annotations

import heapq

import numpy as np

from philly_analyze.sim.sharing import shared
from philly_analyze.sim.sharing.config import SharingConfig
from philly_analyze.sim.sharing.interference import load_interference
from philly_analyze.sim.sharing.matching import MatchStats
from philly_analyze.sim.sharing.model import (
    build_pair_tables,
    compose_util,
    slowdown_target,
    sm_speed,
)
from philly_analyze.sim.sharing.results import EVICTION_REASONS, Accumulator
from philly_analyze.sim.sharing.workload import (
    DONE,
    ORDINARY,
    PENDING,
    SHARED,
    OfflineJobs,
    OnlineFleet,
)


class SharingSim:
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
        G, n_ord = cfg.cluster.online_gpus, cfg.cluster.ordinary_gpus
        self.G, self.n_ord = G, n_ord
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
        # Jobs. A job runs its observed attempts in turn (``OfflineJobs.seg_*``): ``j_seg`` is
        # the current one, ``j_work`` its solo minutes, ``j_done`` the progress in it and
        # ``j_base`` the work of the attempts already run.
        self.j_state = np.zeros(J, np.int8)
        self.j_seg = jobs.seg_ptr[:-1].copy()
        self.j_work = jobs.seg_work[self.j_seg] if J else np.zeros(0)
        self.j_base = np.zeros(J)
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
        self.head = 0  # no pending job has a smaller index
        self.n_done = 0
        #: Jobs some GPU pool can hold (a bigger gang never starts).
        shareable = jobs.gpus <= min(cfg.offline.max_gang, G) if self.share_gpus else False
        if self.aware and G:  # muxflow places a job only under some GPU's memory limit
            shareable = shareable & (jobs.mem <= self.g_limit.max())
        self.runnable = (jobs.gpus <= n_ord) | shareable
        self.heap: list[tuple[float, int]] = []
        self.free_ordinary = list(range(G + n_ord - 1, G - 1, -1))  # a stack of global ids
        self.attempts: list[tuple[int, int, float, float, str, str, tuple[int, ...]]] = []
        self.acc = Accumulator(G, n_ord)
        self.match_stats = MatchStats()
        self.ordinary_dirty = True
        self._q_peak_t = -1.0
        self._q_peak = np.zeros(G)

    # ---------------------------------------------------------------- queue and ordinary GPUs
    def arrivals(self, t: float) -> None:
        """Jobs submitted at or before minute ``t`` join the queue (so no start precedes its
        submission; a job submitted mid-step waits for the next placement, at most a step)."""
        hi = int(np.searchsorted(self.jobs.submit, t, side="right"))
        if hi > self.next_arrival:
            sl = slice(self.next_arrival, hi)
            self.pending[sl] = True
            self.j_state[sl] = PENDING
            self.next_arrival = hi
            self.ordinary_dirty = True

    def queue(self, limit: int, max_gpus: int | None = None) -> np.ndarray:
        """Up to ``limit`` pending jobs in queue (submit) order. Only the window from the
        oldest pending job to the newest arrival is scanned."""
        while self.head < self.next_arrival and not self.pending[self.head]:
            self.head += 1
        idx = self.head + np.flatnonzero(self.pending[self.head : self.next_arrival])
        if max_gpus is not None:
            idx = idx[self.jobs.gpus[idx] <= max_gpus]
        return idx[:limit]

    def ordinary_events(self, t: float, t_end: float) -> None:
        """Arrivals and completions on ordinary GPUs inside ``[t, t_end)``, in time order, each
        followed by a placement attempt at its exact time (ordinary GPUs need no per-minute
        state, so their jobs start and end between minutes)."""
        if self.n_ord == 0:
            self.arrivals(t)
            return
        submit, n = self.jobs.submit, self.jobs.n
        while True:
            t_arr = submit[self.next_arrival] if self.next_arrival < n else np.inf
            t_done = self.heap[0][0] if self.heap else np.inf
            now = min(t_arr, t_done)
            if now >= t_end:
                break
            now = max(now, t)
            if t_done <= t_arr:
                self.complete_ordinary(now)
            else:
                self.arrivals(now)
            self.place_ordinary(now)

    def complete_ordinary(self, t_end: float) -> None:
        while self.heap and self.heap[0][0] <= t_end:
            end, j = heapq.heappop(self.heap)
            gpus = self.j_ord_gpus.pop(j)
            self.free_ordinary.extend(gpus)
            self.j_done[j] = self.j_work[j]
            self.attempt_done(j, end, "ordinary", tuple(gpus))
            self.ordinary_dirty = True

    def place_ordinary(self, t: float) -> None:
        """First fit in queue order on the free ordinary GPUs (a job never shares when a
        dedicated GPU is free)."""
        if not self.ordinary_dirty or not self.free_ordinary:
            return
        self.ordinary_dirty = False
        for j in self.queue(256).tolist():
            k = int(self.jobs.gpus[j])
            if k > len(self.free_ordinary):
                continue
            gpus = [self.free_ordinary.pop() for _ in range(k)]
            self.j_ord_gpus[j] = gpus
            self.start(j, t, ORDINARY)
            heapq.heappush(self.heap, (t + self.j_work[j] - self.j_done[j], j))
            if not self.free_ordinary:
                break

    def start(self, j: int, t: float, state: int) -> None:
        self.pending[j] = False
        self.j_state[j] = state
        self.j_att_start[j] = t
        self.j_run[j] = 0.0
        self.j_since_ckpt[j] = 0.0
        if np.isnan(self.j_first[j]):
            self.j_first[j] = t

    def attempt_done(self, j: int, t: float, kind: str, gpus: tuple[int, ...]) -> None:
        """Job ``j`` finished the work of its current attempt at ``t``: the attempt ends with
        its observed outcome. The last one ends the job; an earlier one (it failed and was
        retried) sends the job back to the queue for the next."""
        seg = int(self.j_seg[j])
        outcome = self.jobs.seg_outcome[seg]
        if seg == self.jobs.seg_ptr[j + 1] - 1:
            self.finish(j, t, outcome, kind, gpus)
            return
        self.attempts.append(
            (j, int(self.j_att_idx[j]), float(self.j_att_start[j]), t, outcome, kind, gpus)
        )
        self.j_att_idx[j] += 1
        self.j_base[j] += self.j_work[j]
        self.j_seg[j] = seg + 1
        self.j_work[j] = self.jobs.seg_work[seg + 1]
        self.j_done[j] = 0.0
        self.j_since_ckpt[j] = 0.0
        self._requeue(j)

    def _requeue(self, j: int) -> None:
        self.j_state[j] = PENDING
        self.pending[j] = True
        self.head = min(self.head, j)
        self.ordinary_dirty = True

    def finish(
        self, j: int, t: float, outcome: str | None, kind: str, gpus: tuple[int, ...]
    ) -> None:
        """End job ``j``'s attempt at ``t``: evicted (``outcome`` an eviction reason: the job
        queues again) or its last attempt's work done (the job ends with ``outcome``)."""
        self.attempts.append(
            (j, int(self.j_att_idx[j]), float(self.j_att_start[j]), t, outcome, kind, gpus)
        )
        self.j_att_idx[j] += 1
        if outcome not in EVICTION_REASONS:
            self.n_done += 1
            self.j_state[j] = DONE
            self.j_end[j] = t
        else:  # evicted: lose progress since the last checkpoint, back to the queue
            lost = self.j_since_ckpt[j]
            self.j_done[j] -= lost
            self.j_lost[j] += lost
            self.acc.lost_gpu_minutes += lost * self.jobs.gpus[j]
            self.j_evictions[j] += 1
            self._requeue(j)

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
            self.finish(j, t, reason, "shared", g)

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

    def q_peak(self, t: float) -> np.ndarray:
        """Forecast peak load of every online GPU over the SM horizon (cached per minute)."""
        if self._q_peak_t != t:
            self._q_peak = self.fleet.forecast_peak(t, self.cfg.sm.horizon_minutes)
            self._q_peak_t = t
        return self._q_peak

    def step(self, t: float, dt: float) -> None:
        """One step ``[t, t + dt)``: see the module docstring for the order."""
        cfg, fl, acc = self.cfg, self.fleet, self.acc
        t_end = t + dt
        self.ordinary_events(t, t_end)
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
            shared.protect(self, occ, sigma, smact, mem, m_off, up, t_end)
        if self.share_gpus and cfg.sm.dynamic and _every(t, dt, cfg.sm.check_minutes):
            shared.adjust_sm(self, t_end)
        if self.share_gpus and _every(t, dt, cfg.matching.period_minutes):
            self.arrivals(t_end)
            self.place_ordinary(t_end)  # a dedicated GPU, when one is free, beats sharing
            shared.match(self, t_end)
        self.record(t, dt, util, smact, mem, sigma, violate, up, occ)

    def progress(
        self, occ: np.ndarray, j: np.ndarray, rate: np.ndarray, t: float, dt: float
    ) -> None:
        """Advance shared jobs at the slowest worker's rate; finish those done in this step."""
        jobs, r = _job_min(j, rate, self.jobs.gpus)
        remaining = self.j_work[jobs] - self.j_done[jobs]
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
                self.attempt_done(jj, end_of[jj], "shared", g)

    def outage(self, gpus: np.ndarray, minutes: float, t: float) -> None:
        """The online services on ``gpus`` are down for ``minutes`` from ``t``."""
        if len(gpus):
            self.g_down[gpus] = np.maximum(self.g_down[gpus], t + minutes)
            self.acc.outage_events += len(gpus)

    def record(
        self,
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
        acc, G, n_ord = self.acc, self.G, self.n_ord
        n_ord_busy = n_ord - len(self.free_ordinary)
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


def _job_min(
    j: np.ndarray, rate: np.ndarray, job_gpus: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
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
