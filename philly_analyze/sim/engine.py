"""The queue engine for queue-based policies (philly, relaxed, fifo): per-VC pending queues
split by GPU demand, on the one event loop (``sim.events``) and the one placement state
(``sim.placement.FreeState``).

Events: arrivals (the loop's stream of submit-sorted jobs), attempt ends, requeues of failed
attempts (after ``retry_delay``), and the ends of locality waits. All events at one timestamp
are applied, then one scheduling pass runs. The pass (the reference simulator in
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
rather than O(pending jobs). What can start is known before trying: a demand below the free
state's ``strict_limit`` has a strict placement, and a class whose head has waited its
locality wait (``rel``) a relaxed one if the GPUs are free. So a pass runs only when some
class could start, and serves only the VCs that have one (a saturated cluster frees a few
GPUs at a time, mostly too few or too scattered for what waits). Only class heads are
timed, and the end of a wait is an event only while GPUs are free (``_wake``); while none are
free, arrivals before the next event are queued in one call (``_arrive_while_full``). None
of this changes a schedule: the reference simulator and the hashes of a saturated
million-job replay's starts, placements and waiting causes agree before and after
(docs/replay.md, *Performance*).
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import Any, Final

from philly_analyze.sim.core import BaseEngine, Trace
from philly_analyze.sim.events import NEVER as INF
from philly_analyze.sim.events import Deadlines
from philly_analyze.sim.placement import FreeState, Placement
from philly_analyze.sim.slowdown import SlowdownModel
from philly_analyze.sim.workload import Workload

#: ``deque`` as a C static when compiled (an imported name is a dict lookup at every use).
_deque: Final = deque

#: Event kinds (at one time: attempt ends, then retries ready, then wake-ups for the end of a
#: locality wait, ``QueueEngine._wake``). Attempt ends, one per attempt, are the loop's
#: grouped events (``EventLoop.schedule_grouped``, payload: the job), which come first.
READY: Final = 1
WAKE: Final = 2


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
        self.vc: list[int] = wl.vc.tolist() if cfg.quotas is not None else [0] * len(wl)
        nvc = (max(self.vc) + 1) if len(wl) else 1
        self.quota = list(cfg.quotas) + [0] * (nvc - len(cfg.quotas)) if cfg.quotas else None
        self.used = [0] * nvc
        self.cap = (
            list(cfg.borrow_cap) + [0] * (nvc - len(cfg.borrow_cap)) if cfg.borrow_cap else None
        )
        self.hol = cfg.hol_blocking
        #: Smallest pending demand per VC (INF when its queue is empty).
        self.vc_min = [INF] * nvc
        #: pending[v][n]: deque of (ready, seq, job, attempt); empty deques are removed.
        self.pending: list[dict[int, deque[tuple[int, int, int, int]]]] = [{} for _ in range(nvc)]
        self.npending = 0
        self.pending_by_n: dict[int, int] = {}
        #: rel[v]: the demands of VC v whose class head may be placed relaxed now (it has
        #: waited its locality wait); rel_by_n: how many such classes per demand.
        self.rel: list[set[int]] = [set() for _ in range(nvc)]
        self.rel_by_n: dict[int, int] = {}
        #: The placement and trace row of each job's running attempt (placement None: not
        #: running); ``started`` holds its attempt index. No dict or tuple per start.
        self.run_pl: list[Placement | None] = [None] * len(wl)
        self.run_row: list[int] = [0] * len(wl)
        self.rack = fs.rack
        self.one_rack = len(set(fs.rack)) <= 1
        #: Index of the attempt of each job that started last (-1: none yet).
        self.started = [-1] * len(wl)
        #: Locality wait of each job (us).
        lw = cfg.locality_wait_by_job
        self.jwait = list(lw) if lw is not None else [cfg.locality_wait_us] * len(wl)
        #: Class heads still waiting for their locality wait to end: (time it ends, job,
        #: attempt), a heap; and the time of the next wake-up event (``_wake``).
        self.relax_at = Deadlines()
        self.wake_at = -1
        self._sfail = 0

    # ------------------------------------------------------------------ main loop
    def run(self) -> Trace:
        """Simulate the whole workload; the trace of what ran."""
        self.progress_start()
        self.trace.reserve(self.planned)  # every attempt starts at most once
        self.loop.run(self._at)
        self.trace.trim()
        for v in self.pending:
            for q in v.values():
                self.trace.unscheduled.extend(item[2] for item in q)
        self.progress_done()
        return self.trace

    def _at(self, now: int, arrived: range) -> None:
        """Everything due at ``now``, then one scheduling pass (module docstring)."""
        ready: list[tuple[int, int, int, int]] = []
        relax_at = self.relax_at
        touched = bool(relax_at) and relax_at.items[0][0] <= now and self._relax_due(now)
        run_pl, used, vc, gpus, started = self.run_pl, self.used, self.vc, self.gpus, self.started
        loop = self.loop
        ended = loop.pop_grouped(now)
        if ended is not None:
            # Attempt ends: grouped events whose payload is the job (inline: once per attempt).
            for j in ended:
                k = started[j]
                pl = run_pl[j]
                assert pl is not None
                run_pl[j] = None
                self.fs.release(pl)
                used[vc[j]] -= gpus[j]
                if self.attempt_ended(j, k, self.run_row[j]):
                    self._retry(j, k, now, ready)
            touched = True
        heap = loop.heap
        if heap and heap[0][0] == now:  # (the queue engine puts nothing in the FIFO)
            for ev in loop.pop(now):
                # Typed locals: compiled (sim.native), an int is unboxed once, not at every use.
                kind: int = ev[1]
                if kind == READY:
                    ready.append((now, ev[2], ev[3], ev[4]))
                # else WAKE: only makes sure this time is visited (``_wake``)
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
                self._enqueue(item, now)
            touched = True
        if touched and self.npending:
            # A pass only if it could start anything: some pending demand has a strict
            # placement, or a class head that may go relaxed needs no more GPUs than are free
            # (a saturated cluster frees a few GPUs at a time, mostly too few or too
            # scattered for what waits).
            fs = self.fs
            free = fs.free_total
            if free:
                least = _least(self.pending_by_n)
                if least <= free:
                    limit = fs.strict_limit()
                    rel = self.rel_by_n
                    if least < limit or (rel and _least(rel) <= free):
                        self._pass(now, limit)
        if self.fs.free_total:
            if relax_at:
                self._wake(now)
        else:
            nxt = loop.next_arrival
            if nxt < len(loop.arrivals) and loop.arrivals[nxt] < loop.next_event():
                self._arrive_while_full(now)

    def _relax_due(self, now: int) -> bool:
        """Class heads whose locality wait ended by ``now`` may now be placed relaxed; True if
        any still waits (the pass has something new to try). Only a class's head can start
        (first come, first served), so only heads are timed: an attempt behind it whose wait
        ends first is relaxable as soon as it becomes the head (``_new_head``)."""
        relax_at, started = self.relax_at, self.started
        vc, gpus = self.vc, self.gpus
        changed = False
        due = relax_at.items
        while due and due[0][0] <= now:
            _, j, k = relax_at.pop()
            if started[j] < k:  # still waiting, so still its class's head
                self._relax(vc[j], gpus[j])
                changed = True
        return changed

    def _wake(self, now: int) -> None:
        """With GPUs free, the next end of a head's locality wait must be visited (a pass may
        then place it relaxed); with none free it need not be: nothing can start before the
        next end frees GPUs, and ``_relax_due`` catches up then. So waits end without an
        event each, and a saturated cluster (no GPU free between passes) needs almost none."""
        relax_at, started = self.relax_at, self.started
        due = relax_at.items
        while due and started[due[0][1]] >= due[0][2]:
            relax_at.pop()  # its attempt started: no longer waits
        if due:
            r = due[0][0]
            if self.wake_at <= now or r < self.wake_at:
                self.wake_at = r
                self.loop.schedule(r, WAKE)

    def _arrive_while_full(self, now: int) -> None:
        """No GPU is free, so nothing starts before the next event (only an attempt's end
        frees GPUs, and no pass runs with none free): the arrivals before it only queue.
        Take them now, in their order, each ready at its own submit time; one call instead of
        one per arrival."""
        loop = self.loop
        arr = loop.take_arrivals(loop.next_event() - 1)
        if arr:
            submit = loop.arrivals
            for ai in arr:
                self._enqueue((submit[ai], ai, ai, 0), now)

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
            self._enqueue(item, now)

    def _enqueue(self, item: tuple[int, int, int, int], now: int) -> None:
        j = item[2]
        n = self.gpus[j]
        v = self.vc[j]
        cls = self.pending[v]
        q = cls.get(n)
        if q is None:
            q = cls[n] = _deque((item,))
            self._new_head(v, n, q, now)
        else:
            q.append(item)
        if n < self.vc_min[v]:
            self.vc_min[v] = n
        self.npending += 1
        self.pending_by_n[n] = self.pending_by_n.get(n, 0) + 1

    def _new_head(self, v: int, n: int, q: deque[tuple[int, int, int, int]], now: int) -> None:
        """Class (v, n) has a new head ``q[0]``: relaxable now if it has waited its locality
        wait (or has none), else timed (``relax_at``). An attempt taken early by
        ``_arrive_while_full`` may be ready later than ``now``; with no wait it counts as
        relaxable at once, which no pass can tell apart (none runs before it is ready: no GPU
        is free until then)."""
        ready, _, j, k = q[0]
        w = self.jwait[j]
        if w <= 0 or ready + w <= now:
            self._relax(v, n)
        else:
            self.relax_at.add(ready + w, j, k)

    def _relax(self, v: int, n: int) -> None:
        rs = self.rel[v]
        if n not in rs:
            rs.add(n)
            self.rel_by_n[n] = self.rel_by_n.get(n, 0) + 1

    def _retry(self, j: int, k: int, now: int, ready: list[tuple[int, int, int, int]]) -> None:
        """Job ``j``'s attempt ``k`` failed: its next attempt is ready now or after the delay."""
        delay = self.cfg.retry_delay_us
        if delay:
            self.loop.schedule(now + delay, READY, j, k + 1)
        else:
            ready.append((now, self.loop.ticket(), j, k + 1))

    # ------------------------------------------------------------------ scheduling
    def _pass(self, now: int, strict_limit: int) -> None:
        fs = self.fs
        #: Smallest demand with no strict placement: strict fits are monotone in n (see
        #: placement.py) and the state only tightens during a pass, so it starts at the
        #: state's limit (``FreeState.strict_limit``) and drops when a placement fails.
        self._sfail = sfail = strict_limit
        quota = self.quota
        if quota is None:
            self._serve(0, now, None, set())
            return
        used = self.used
        vmin = self.vc_min
        rel = self.rel
        free = fs.free_total
        # Only VCs that can start something are served: a class within the free GPUs and the
        # VC's room, with a strict placement (n < sfail) or a head that may go relaxed. A VC
        # held back by its quota (a class beyond its room) may borrow in phase 2; nothing else
        # improves within the pass.
        over: list[int] = []
        order = []
        for v, mn in enumerate(vmin):
            if mn <= free:
                room = quota[v] - used[v]
                if mn > room:
                    over.append(v)
                elif mn < sfail or (
                    rel[v] and _least_of(rel[v]) <= (free if free < room else room)
                ):
                    order.append((used[v] / quota[v] if quota[v] else INF, v))
                elif _most(self.pending[v]) > room:
                    over.append(v)
        if len(order) > 1:
            order.sort()
        #: Classes that could not start in this pass, as ``n << 20 | v`` (an int, not a tuple
        #: made at every check; VC indices are below 2**20).
        blocked: set[int] = set()
        for _, v in order:
            if vmin[v] <= fs.free_total:
                if self._serve(v, now, quota, blocked):
                    over.append(v)
                if fs.free_total == 0:
                    return
        if not (over and self.cfg.borrow):
            return
        free = fs.free_total
        sfail = self._sfail
        cap = self.cap
        order = []
        for v in over:
            mn = vmin[v]
            if mn <= free:
                lim = free if cap is None or free < cap[v] - used[v] else cap[v] - used[v]
                if (mn <= lim and mn < sfail) or (rel[v] and _least_of(rel[v]) <= lim):
                    order.append((used[v] / quota[v] if quota[v] else INF, v))
        if len(order) > 1:
            order.sort()
        for _, v in order:
            if vmin[v] <= fs.free_total:
                self._serve(v, now, cap, blocked)
                if fs.free_total == 0:
                    return

    def _serve(self, v: int, now: int, quota: list[int] | None, blocked: set[int]) -> bool:
        """Start what fits from VC ``v``'s queue. Returns True if some class was held back by
        the quota (so borrowing may apply); with head-of-line blocking, stops at the first
        attempt that cannot start."""
        fs = self.fs
        classes = self.pending[v]
        rs = self.rel[v]
        hol = self.hol
        limit = (1 << 62) if hol else fs.free_total
        over = False
        if quota is not None:
            room = quota[v] - self.used[v]
            over = _most(classes) > room
            if room < limit:
                limit = room
        # Classes that can possibly start: within limit, not known to fail in this pass
        # (strict fails for n >= _sfail unless the head may already be placed relaxed).
        sfail = self._sfail
        cand = [
            n
            for n in classes
            if n <= limit and (hol or n < sfail or n in rs) and (n << 20 | v) not in blocked
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
                if pl is None and n in rs:
                    pl = fs.place_relaxed(n)
            if pl is None:
                blocked.add(n << 20 | v)
                if hol:
                    return over
                cand.remove(n)
                continue
            self._pop(v, n, now)
            if n not in classes:
                cand.remove(n)
            self._start(head, pl, now)
            if fs.free_total == 0:
                return over
            if quota is not None:
                room = quota[v] - self.used[v]
                if any(m > room for m in cand):
                    over = True
                    cand = [m for m in cand if m <= room]
        return over

    def _pop(self, v: int, n: int, now: int) -> None:
        """Take the head of class (v, n) off the queue (it starts)."""
        classes = self.pending[v]
        q = classes[n]
        q.popleft()
        rs = self.rel[v]
        if n in rs:
            rs.discard(n)
            c = self.rel_by_n[n] - 1
            if c:
                self.rel_by_n[n] = c
            else:
                del self.rel_by_n[n]
        if q:
            self._new_head(v, n, q, now)
        else:
            del classes[n]
            self.vc_min[v] = _least(classes) if classes else INF
        self.npending -= 1
        c = self.pending_by_n[n] - 1
        if c:
            self.pending_by_n[n] = c
        else:
            del self.pending_by_n[n]

    def _start(self, item: tuple[int, int, int, int], pl: Placement, now: int) -> None:
        ready, _, j, k = item
        n = self.gpus[j]
        intr = self.intr[self.ptr[j] + k]
        if len(pl) == 1:
            end = now + intr
        else:
            racks = 1 if self.one_rack else len({self.rack[m] for m, _ in pl})
            end = now + round(intr * self.model.factor(n, len(pl), racks))
        row = self.trace.record_start(j, k, ready, now, end, pl, intr)
        self.run_pl[j] = pl
        self.run_row[j] = row
        self.started[j] = k
        self.used[self.vc[j]] += n
        self.loop.schedule_grouped(end, j)


# min() and max() of the few keys of a dict or set, as loops: compiled (sim.native), the
# builtins cost a generic call and a boxed comparison per key (7% of a saturated replay).
def _least(keys: dict[int, Any]) -> int:
    """The smallest key (INF if none)."""
    out = INF
    for n in keys:
        if n < out:
            out = n
    return out


def _least_of(keys: set[int]) -> int:
    """The smallest member (INF if none)."""
    out = INF
    for n in keys:
        if n < out:
            out = n
    return out


def _most(keys: dict[int, Any]) -> int:
    """The largest key (-1 if none)."""
    out = -1
    for n in keys:
        if n > out:
            out = n
    return out
