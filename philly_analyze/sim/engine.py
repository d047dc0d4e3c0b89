"""The queue engine for queue-based policies (philly, relaxed, fifo): per-VC pending queues
split by GPU demand, on the one event loop (``sim.events``) and the one placement state
(``sim.placement.FreeState``).

Events: arrivals (the loop's stream of submit-sorted jobs), attempt ends, requeues of failed
attempts (after ``retry_delay``), and locality timeouts. All events at one timestamp are
applied, then one scheduling pass runs. The pass (the reference simulator in
``tests/test_sim_reference.py`` implements exactly this, job by job):

1. VCs in order of used/quota (ties: VC index). In each VC, pending attempts in order of
   (ready time, sequence); each starts if the VC stays within its quota and a placement is
   free: strict locality, or relaxed once it has waited its job's ``locality_wait`` (one
   value for every job, or one per job). Attempts of one VC and one GPU demand are served
   first come, first served: once one cannot start in a pass, the later ones of that class
   wait too (with per-job waits, a later attempt whose own wait is over does not overtake the
   class's head). Without quotas (fifo) there is one queue.
2. If borrowing is allowed, the same again (order recomputed) without the quota check: idle
   GPUs go to VCs beyond their quota, up to each VC's borrowing cap when there is one.
With head-of-line blocking (fifo) the pass stops at the first attempt that cannot be placed.

Speed: attempts of one VC and one GPU demand form a FIFO class. Within a pass, once a class's
head cannot start, no later member can (same demand, same quota test, never more relaxed,
and the state only tightens as the pass allocates), so a pass costs O(VCs x demands + starts)
rather than O(pending jobs); a pass is skipped when no pending demand fits in the free GPUs.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

from philly_analyze.sim.core import BaseEngine, Trace
from philly_analyze.sim.events import NEVER as INF
from philly_analyze.sim.placement import FreeState, Placement
from philly_analyze.sim.slowdown import SlowdownModel
from philly_analyze.sim.workload import Workload

#: Event kinds (at one time: attempt ends, then retries ready, then locality timeouts).
END, READY, TIMEOUT = 0, 1, 2


@dataclass
class EngineConfig:
    """How the queue engine schedules (set by the policy from its params)."""

    #: GPUs guaranteed per VC index; None = no quotas (one queue, fifo).
    quotas: list[int] | None
    borrow: bool = True
    #: Most GPUs each VC index may hold while borrowing (None: every idle GPU).
    borrow_cap: list[int] | None = None
    hol_blocking: bool = False
    #: Microseconds an attempt waits for a strict placement before relaxed placement is allowed.
    locality_wait_us: int = 0
    #: The same per job index (overrides ``locality_wait_us``), e.g. drawn around a median.
    locality_wait_by_job: list[int] | None = None
    #: Retries allowed after the first attempt (None: as many as the data has).
    max_retries: int | None = None
    retry_delay_us: int = 0


class QueueEngine(BaseEngine):
    """One run of a queue-based policy over a workload (see module docstring)."""

    def __init__(
        self, wl: Workload, fs: FreeState, cfg: EngineConfig, model: SlowdownModel
    ) -> None:
        # Arrivals are numbered by job index, everything else after them: a retry ready at
        # the same time as an arrival queues behind it.
        super().__init__(wl, fs, model, cfg.max_retries, first_seq=len(wl))
        self.cfg = cfg
        self.vc = wl.vc.tolist() if cfg.quotas is not None else [0] * len(wl)
        nvc = (max(self.vc) + 1) if len(wl) else 1
        self.quota = list(cfg.quotas) + [0] * (nvc - len(cfg.quotas)) if cfg.quotas else None
        self.used = [0] * nvc
        self.cap = (
            list(cfg.borrow_cap) + [0] * (nvc - len(cfg.borrow_cap)) if cfg.borrow_cap else None
        )
        #: Smallest pending demand per VC (INF when its queue is empty).
        self.vc_min = [INF] * nvc
        #: pending[v][n]: deque of (ready, seq, job, attempt); empty deques are removed.
        self.pending: list[dict[int, deque[tuple[int, int, int, int]]]] = [{} for _ in range(nvc)]
        self.npending = 0
        self.pending_by_n: dict[int, int] = {}
        self.running: dict[int, tuple[int, Placement]] = {}
        self.rack = fs.rack
        self.one_rack = len(set(fs.rack)) <= 1
        #: Index of the attempt of each job that started last (-1: none yet).
        self.started = [-1] * len(wl)
        #: Locality wait of each job (us).
        lw = cfg.locality_wait_by_job
        self.jwait = list(lw) if lw is not None else [cfg.locality_wait_us] * len(wl)

    # ------------------------------------------------------------------ main loop
    def run(self) -> Trace:
        """Simulate the whole workload; the trace of what ran."""
        self.progress_start()
        # Locality timeouts: with one wait for every job they are due in the order they are
        # made (ready time + a constant), so the loop's FIFO holds them (a saturated replay
        # makes one per waiting attempt); per-job waits (locality_wait_spread) go on its heap.
        self._timeout = (
            self.loop.schedule_in_order
            if self.cfg.locality_wait_by_job is None
            else self.loop.schedule
        )
        self.loop.run(self._at)
        for v in self.pending:
            for q in v.values():
                self.trace.unscheduled.extend(item[2] for item in q)
        self.progress_done()
        return self.trace

    def _at(self, now: int, arrived: range) -> None:
        """Everything due at ``now``, then one scheduling pass (module docstring)."""
        started = self.started
        ready: list[tuple[int, int, int, int]] = []
        touched = False
        for _, kind, seq, j, k in self.loop.pop(now):
            if kind == END:
                self._end(j, k, now, ready)
                touched = True
            elif kind == READY:
                ready.append((now, seq, j, k))
            else:  # TIMEOUT: only matters if the attempt still waits (it may now go relaxed)
                touched = touched or started[j] != k
        for ai in arrived:  # sequence number = job index: arrivals queue in (submit, id) order
            ready.append((now, ai, ai, 0))
        if len(ready) == 1 and not self.npending:
            # Fast path (most arrivals on a cluster with no queue): exactly what a pass over
            # this one attempt would do, without building queues.
            self._start_or_enqueue(ready[0], now)
            touched = False
        elif ready:
            if len(ready) > 1:
                ready.sort()
            for item in ready:
                self._enqueue(item)
            touched = True
        if touched and self.npending:
            free = self.fs.free_total
            # Saturated clusters free a few GPUs at a time: skip the pass cheaply when no
            # pending demand fits.
            if free and (1 in self.pending_by_n or free >= min(self.pending_by_n)):
                self._pass(now)
        if ready:
            # Locality timeouts only for attempts the pass could not start.
            jwait = self.jwait
            for r, _, j, k in ready:
                if started[j] != k and jwait[j] > 0:
                    self._timeout(r + jwait[j], TIMEOUT, j, k)

    def _start_or_enqueue(self, item: tuple[int, int, int, int], now: int) -> None:
        """The fast path's pass over one attempt: start it if its VC may and a placement is
        free (relaxed at once when its job has no locality wait), else queue it."""
        j = item[2]
        n = self.gpus[j]
        quota = self.quota
        pl = None
        v = self.vc[j]
        if (
            quota is None
            or (self.cfg.borrow and (self.cap is None or self.used[v] + n <= self.cap[v]))
            or self.used[v] + n <= quota[v]
        ):
            pl = self.fs.place(n, self.jwait[j] <= 0)
        if pl is not None:
            self._start(item, pl, now)
        else:
            self._enqueue(item)

    def _enqueue(self, item: tuple[int, int, int, int]) -> None:
        j = item[2]
        n = self.gpus[j]
        cls = self.pending[self.vc[j]]
        q = cls.get(n)
        if q is None:
            q = cls[n] = deque()
        q.append(item)
        v = self.vc[j]
        if n < self.vc_min[v]:
            self.vc_min[v] = n
        self.npending += 1
        self.pending_by_n[n] = self.pending_by_n.get(n, 0) + 1

    def _end(self, j: int, k: int, now: int, ready: list[tuple[int, int, int, int]]) -> None:
        row, pl = self.running.pop(j)
        self.fs.release(pl)
        self.used[self.vc[j]] -= self.gpus[j]
        if self.attempt_ended(j, k, row):
            delay = self.cfg.retry_delay_us
            if delay:
                self.loop.schedule(now + delay, READY, j, k + 1)
            else:
                ready.append((now, self.loop.ticket(), j, k + 1))

    # ------------------------------------------------------------------ scheduling
    def _pass(self, now: int) -> None:
        #: Smallest demand whose strict placement failed in this pass: strict fits are
        #: monotone in n (see cluster.py) and the state only tightens during a pass.
        self._sfail = 1 << 62
        quota = self.quota
        if quota is None:
            self._serve(0, now, None, set())
            return
        used = self.used
        vmin = self.vc_min
        fs = self.fs
        free = fs.free_total
        # Only VCs whose smallest pending demand fits in the free GPUs can start anything.
        # Phase 2 (borrowing) only needs the VCs that had demand held back by their quota:
        # every other class started, failed placement, or needs more GPUs than are free,
        # and none of that improves within the pass.
        over: list[int] = []
        order = []
        for v, mn in enumerate(vmin):
            if mn <= free:
                if mn > quota[v] - used[v]:
                    over.append(v)
                else:
                    order.append((used[v] / quota[v] if quota[v] else INF, v))
        if len(order) > 1:
            order.sort()
        blocked: set[tuple[int, int]] = set()
        for _, v in order:
            if vmin[v] <= fs.free_total:
                if self._serve(v, now, quota, blocked):
                    over.append(v)
                if fs.free_total == 0:
                    return
        if not (over and self.cfg.borrow):
            return
        free = fs.free_total
        order = [(used[v] / quota[v] if quota[v] else INF, v) for v in over if vmin[v] <= free]
        if len(order) > 1:
            order.sort()
        for _, v in order:
            if vmin[v] <= fs.free_total:
                self._serve(v, now, self.cap, blocked)
                if fs.free_total == 0:
                    return

    def _serve(
        self, v: int, now: int, quota: list[int] | None, blocked: set[tuple[int, int]]
    ) -> bool:
        """Start what fits from VC ``v``'s queue. Returns True if some class was held back by
        the quota (so borrowing may apply); with head-of-line blocking, stops at the first
        attempt that cannot start."""
        fs = self.fs
        classes = self.pending[v]
        jwait = self.jwait
        hol = self.cfg.hol_blocking
        limit = (1 << 62) if hol else fs.free_total
        over = False
        if quota is not None:
            room = quota[v] - self.used[v]
            over = max(classes) > room
            limit = min(limit, room)
        # Classes that can possibly start: within limit, not known to fail in this pass
        # (strict fails for n >= _sfail unless the head may already be placed relaxed).
        sfail = self._sfail
        cand = [
            n
            for n in classes
            if n <= limit
            and (hol or n < sfail or classes[n][0][0] + jwait[classes[n][0][2]] <= now)
            and (v, n) not in blocked
        ]
        while cand:
            n = cand[0]
            head = classes[n][0]
            for m in cand:
                h = classes[m][0]
                if h < head:
                    n, head = m, h
            pl = None
            if n <= fs.free_total:
                if n < self._sfail:
                    pl = fs.place_strict(n)
                    if pl is None:
                        self._sfail = n
                if pl is None and now >= head[0] + jwait[head[2]]:
                    pl = fs.place_relaxed(n)
            if pl is None:
                blocked.add((v, n))
                if hol:
                    return over
                cand.remove(n)
                continue
            q = classes[n]
            q.popleft()
            if not q:
                del classes[n]
                cand.remove(n)
                self.vc_min[v] = min(classes) if classes else INF
            self.npending -= 1
            c = self.pending_by_n[n] - 1
            if c:
                self.pending_by_n[n] = c
            else:
                del self.pending_by_n[n]
            self._start(head, pl, now)
            if fs.free_total == 0:
                return over
            if quota is not None:
                room = quota[v] - self.used[v]
                if any(m > room for m in cand):
                    over = True
                    cand = [m for m in cand if m <= room]
        return over

    def _start(self, item: tuple[int, int, int, int], pl: Placement, now: int) -> None:
        ready, _, j, k = item
        n = self.gpus[j]
        v = self.vc[j]
        intr = self.intr[self.ptr[j] + k]
        if len(pl) == 1:
            f = 1.0
        else:
            racks = 1 if self.one_rack else len({self.rack[m] for m, _ in pl})
            f = self.model.factor(n, len(pl), racks)
        dur = round(intr * f)
        end = now + dur
        tr = self.trace
        row = len(tr.outcome)
        tr.rows.extend((j, k, ready, now, end, len(pl), intr))
        seg = tr.seg
        gpus = tr.seg_gpus
        for m, g in pl:
            seg.extend((row, m, len(g)))
            gpus.extend(g)
        tr.outcome.append(-1)
        self.running[j] = (row, pl)
        self.started[j] = k
        self.used[v] += n
        self.loop.schedule(end, END, j, k)
