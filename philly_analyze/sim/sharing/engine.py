"""The sharing model's simulation state and its run on the one event loop (``sim.events``):
state vectorised over online GPUs, the training (ordinary) GPUs placed by the one placement
state (``sim.placement.FreeState``), periodic matching rounds. Never a Python loop over GPUs.

Events: arrivals (the loop's stream of submit-sorted jobs), completions on training GPUs (at
exact times, between minutes: those GPUs need no per-minute state) and the step at the end of
each ``step_minutes`` (default 1), which applies the minute ``[t, t + step)``
(``minute.step``): the online load, the shared GPUs' physics (``model.py``), progress and
completions of shared jobs (exact time within the step), protection (``shared.protect``),
dynamic SM changes every ``sm.check_minutes``, matching every ``matching.period_minutes``, and
metrics. At one time the step comes first (it closes the minute that ends then), then
completions, then arrivals, each followed by a placement on free training GPUs (first fit in
queue order). Without training GPUs nothing can start at an arrival, so arrivals are not
events then: the step takes them in a batch.
"""

from __future__ import annotations

import numpy as np

from philly_analyze.progress import NullTracker, Tracker, current
from philly_analyze.sim.cluster import Cluster
from philly_analyze.sim.events import EventLoop
from philly_analyze.sim.placement import FreeState, Placement
from philly_analyze.sim.sharing import minute
from philly_analyze.sim.sharing.config import SharingConfig, SharingMechanisms
from philly_analyze.sim.sharing.interference import load_interference
from philly_analyze.sim.sharing.matching import MatchStats
from philly_analyze.sim.sharing.model import build_pair_tables, slowdown_target
from philly_analyze.sim.sharing.results import EVICTION_REASONS, Accumulator
from philly_analyze.sim.sharing.workload import (
    DONE,
    ORDINARY,
    PENDING,
    OfflineJobs,
    OnlineFleet,
)

#: Event kinds (at one time: the step that ends then, then completions on training GPUs).
STEP, COMPLETE = 0, 1


def training_cluster(cfg: SharingConfig, cluster: Cluster | None) -> Cluster | None:
    """The training (ordinary) GPUs' servers: ``cluster`` (a replay's machines), or, for a
    model run without one, ``ordinary_gpus`` GPUs in servers of ``gpus_per_machine``."""
    n = cfg.cluster.ordinary_gpus
    if cluster is not None:
        if cluster.total_gpus != n:
            raise ValueError(f"cluster has {cluster.total_gpus} GPUs, ordinary_gpus is {n}")
        return cluster
    if n <= 0:
        return None
    per = cfg.cluster.gpus_per_machine
    shape = {per: n // per} if n >= per else {}
    if n % per:
        shape[n % per] = 1
    return Cluster.from_counts(shape)


class SharingSim:
    """State of one run. Arrays ``g*`` are per online GPU, ``j*`` per offline job."""

    def __init__(
        self,
        jobs: OfflineJobs,
        cfg: SharingConfig,
        mechanisms: SharingMechanisms,
        seed: int,
        minutes: int,
        *,
        label: str = "",
        cluster: Cluster | None = None,
    ) -> None:
        """``label``: the policy's name in the results; ``cluster``: the training GPUs'
        servers (``training_cluster``)."""
        self.cfg, self.policy, self.minutes = cfg, label, minutes
        self.share_gpus = mechanisms.shares
        self.aware = mechanisms.aware
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
        self._online_state(cfg, G)
        self._job_state(jobs)
        self.n_done = 0
        #: Jobs some GPU pool can hold (a bigger gang never starts).
        shareable = jobs.gpus <= min(cfg.offline.max_gang, G) if self.share_gpus else False
        if self.aware and G:  # muxflow places a job only under some GPU's memory limit
            shareable = shareable & (jobs.mem <= self.g_limit.max())
        self.runnable = (jobs.gpus <= n_ord) | shareable
        self.loop: EventLoop[float] = EventLoop(jobs.submit.tolist(), wake_on_arrivals=n_ord > 0)
        training = training_cluster(cfg, cluster)
        self.fs = FreeState(training if training is not None else Cluster.build([], []))
        #: Global id of GPU 0 of each training server (online GPUs are 0..G-1).
        self.ord_base = (G + np.cumsum(self.fs.size) - self.fs.size).tolist()
        #: (job, attempt, start, end, outcome or None if unknown, kind, global GPU ids)
        self.attempts: list[tuple[int, int, float, float, str | None, str, tuple[int, ...]]] = []
        self.acc = Accumulator(G, n_ord)
        self.match_stats = MatchStats()
        self.ordinary_dirty = True
        self._q_peak_t = -1.0
        self._q_peak = np.zeros(G)
        #: The online load of the current step (``minute.step``).
        self.q = np.zeros(G)
        self.tracker: Tracker = NullTracker()
        self.t_stop = 0.0

    def _online_state(self, cfg: SharingConfig, G: int) -> None:
        """Per online GPU: its offline job, launch duty, SM share, pauses and limits."""
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

    def _job_state(self, jobs: OfflineJobs) -> None:
        """Per offline job: state, progress, attempts, evictions. A job runs its observed
        attempts in turn (``OfflineJobs.seg_*``): ``j_seg`` is the current one, ``j_work`` its
        solo minutes, ``j_done`` the progress in it and ``j_base`` the work of the attempts
        already run."""
        J = jobs.n
        # OfflineJobs.__post_init__ fills the attempts of jobs given without them.
        assert jobs.seg_ptr is not None and jobs.seg_work is not None
        assert jobs.seg_outcome is not None
        self.seg_ptr, self.seg_work, self.seg_outcome = (
            jobs.seg_ptr,
            jobs.seg_work,
            jobs.seg_outcome,
        )
        self.j_state = np.zeros(J, np.int8)
        self.j_seg = self.seg_ptr[:-1].copy()
        self.j_work = self.seg_work[self.j_seg] if J else np.zeros(0)
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
        #: Placement of each job running on training GPUs.
        self.j_ord_pl: dict[int, Placement] = {}
        self.j_gpu = np.full(J, -1, np.int64)  # the online GPU of a running 1-GPU shared job
        self.pending = np.zeros(J, bool)
        self.head = 0  # no pending job has a smaller index
        self.joined = 0  # jobs below this index have joined the queue

    # ---------------------------------------------------------------- the run
    def run(self, horizon: float, dt: float, stop_when_done_after: float | None) -> float:
        """Steps of ``dt`` minutes until ``horizon``, or, with ``stop_when_done_after``, until
        every runnable job is done once past that minute. Returns the minute it stopped at.
        Progress (``progress.current``): jobs done of those that can run."""
        self._dt, self._horizon, self._after = dt, horizon, stop_when_done_after
        self._runnable, self._steps, self.t_stop = int(self.runnable.sum()), 0, 0.0
        self.tracker = current()
        self.tracker.update(completed=0, total=self._runnable)
        if horizon > 0:
            # The step [t, t + dt) is applied at its end, after the events inside it.
            self.loop.schedule(dt, STEP, 0.0)
            self.loop.run(self._at)
        self.tracker.update(completed=self.n_done)
        return self.t_stop

    def _at(self, now: float, arrived: range) -> None:
        """Everything due at ``now`` (module docstring for the order). ``arrived``: jobs due
        now, joined to the queue after the step and the completions."""
        events = self.loop.pop(now)
        if events and events[0][1] == STEP:
            if not self._step(events[0][3]):
                return
            # A completion the step scheduled at this very time joins the others, in job
            # order, as if it had been due before the step.
            late = self.loop.pop(now)
            events = sorted(events[1:] + late) if late else events[1:]
        for ev in events:
            self.complete_ordinary(ev[2], now)
        if events:
            self.place_ordinary(now)
        if arrived and self.arrivals(now):
            self.place_ordinary(now)

    def _step(self, t: float) -> bool:
        """The minute ``[t, t + dt)``; False (and the loop stopped) when the run ends."""
        dt = self._dt
        if self.n_ord == 0:
            self.arrivals(t)
        minute.step(self, t, dt)
        t += dt
        self._steps += 1
        if not self._steps & 255:  # progress: jobs done, every 256 steps
            self.tracker.update(completed=self.n_done)
        after = self._after
        if t >= self._horizon or (
            after is not None and t > after and self.n_done >= self._runnable
        ):
            self.t_stop = t
            self.loop.stop()
            return False
        self.loop.schedule(t + dt, STEP, t)
        return True

    # ---------------------------------------------------------------- queue and ordinary GPUs
    def arrivals(self, t: float) -> bool:
        """Jobs submitted at or before minute ``t`` join the queue (so no start precedes its
        submission; without training GPUs a job submitted mid-step waits for the next
        placement, at most a step). Whether any joined. The loop may have taken them from
        its stream already (those due at the current time): they join now."""
        self.loop.take_arrivals(t)
        hi = self.loop.next_arrival
        if hi <= self.joined:
            return False
        sl = slice(self.joined, hi)
        self.pending[sl] = True
        self.j_state[sl] = PENDING
        self.joined = hi
        self.ordinary_dirty = True
        return True

    def queue(self, limit: int, max_gpus: int | None = None) -> np.ndarray:
        """Up to ``limit`` pending jobs in queue (submit) order. Only the window from the
        oldest pending job to the newest arrival is scanned."""
        joined = self.joined
        while self.head < joined and not self.pending[self.head]:
            self.head += 1
        idx = self.head + np.flatnonzero(self.pending[self.head : joined])
        if max_gpus is not None:
            idx = idx[self.jobs.gpus[idx] <= max_gpus]
        return idx[:limit]

    def ord_ids(self, pl: Placement) -> tuple[int, ...]:
        """Global GPU ids of a placement on training GPUs."""
        base = self.ord_base
        return tuple(base[m] + g for m, gs in pl for g in gs)

    def complete_ordinary(self, j: int, t: float) -> None:
        """Job ``j``'s attempt on training GPUs did its work at ``t``: free them."""
        pl = self.j_ord_pl.pop(j)
        self.fs.release(pl)
        self.j_done[j] = self.j_work[j]
        self.attempt_done(j, t, "ordinary", self.ord_ids(pl))
        self.ordinary_dirty = True

    def place_ordinary(self, t: float) -> None:
        """First fit in queue order on the free training GPUs (a job never shares when a
        dedicated GPU is free), placed locality-first (``FreeState``: fewest servers, else
        any free GPUs; the model has no locality slowdown, so only which GPUs changes)."""
        fs = self.fs
        if not self.ordinary_dirty or not fs.free_total:
            return
        self.ordinary_dirty = False
        for j in self.queue(256).tolist():
            k = int(self.jobs.gpus[j])
            if k > fs.free_total:
                continue
            pl = fs.place(k, relaxed=True)
            assert pl is not None, "free_total counted the GPUs"
            self.j_ord_pl[j] = pl
            self.start(j, t, ORDINARY)
            self.loop.schedule_keyed(float(t + self.j_work[j] - self.j_done[j]), COMPLETE, j)
            if not fs.free_total:
                break

    def start(self, j: int, t: float, state: int) -> None:
        """Job ``j`` starts an attempt at ``t`` on training (``ORDINARY``) or shared GPUs."""
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
        outcome = self.seg_outcome[seg]
        if seg == self.seg_ptr[j + 1] - 1:
            self.finish(j, t, outcome, kind, gpus)
            return
        self.attempts.append(
            (j, int(self.j_att_idx[j]), float(self.j_att_start[j]), t, outcome, kind, gpus)
        )
        self.j_att_idx[j] += 1
        self.j_base[j] += self.j_work[j]
        self.j_seg[j] = seg + 1
        self.j_work[j] = self.seg_work[seg + 1]
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
        jobs = minute.unique_jobs(jobs[jobs >= 0], self.jobs.gpus)
        if len(jobs) == 0:
            return
        self.acc.evictions[reason] += len(jobs)
        held, owner = self._release(jobs)
        self.g_streak[held] = 0
        for j, g in minute.owner_groups(held, owner):
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

    def outage(self, gpus: np.ndarray, minutes: float, t: float) -> None:
        """The online services on ``gpus`` are down for ``minutes`` from ``t``."""
        if len(gpus):
            self.g_down[gpus] = np.maximum(self.g_down[gpus], t + minutes)
            self.acc.outage_events += len(gpus)
