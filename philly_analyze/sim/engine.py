"""The event engine for queue-based policies (philly, fifo, relaxed): a heap of timed events,
per-VC pending queues split by GPU demand, and ``FreeState`` for placement.

Events: arrivals (a pointer over the submit-sorted jobs, no heap entry), attempt ends,
requeues of failed attempts (after ``retry_delay``), and locality timeouts. All events at one
timestamp are applied, then one scheduling pass runs. The pass (the reference simulator in
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

import gc
import heapq
from array import array
from collections import deque
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

import numpy as np

from philly_analyze.progress import Tracker, current
from philly_analyze.sim.cluster import FreeState, Placement
from philly_analyze.sim.slowdown import SlowdownModel
from philly_analyze.sim.workload import FAILED, Workload

END, READY = 0, 1
INF = 1 << 62
#: Progress is reported every 8,192 attempt ends (a bit mask: one AND per end).
PROGRESS_EVERY = 8191


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


#: Fields of a trace row, in order (``Trace.columns``).
ROW_FIELDS = ("job", "attempt", "ready", "start", "end", "servers", "intrinsic")
_W = len(ROW_FIELDS)


@dataclass
class Trace:
    """What the engine did: one row per started attempt (or preempted segment), kept in flat
    machine-integer arrays (a million-job replay has over a million rows: tuples and lists per
    row took ~0.5 kB each).

    Row ``i`` is ``rows[7 i : 7 i + 7] = (job, attempt, ready, start, end, servers,
    intrinsic)`` where ``intrinsic`` is the useful work (us) done in that row; its placement is
    the segments (``seg``: row, server, GPUs; three integers each, in order) whose GPU indices
    follow one another in ``seg_gpus``; ``outcome[i]`` the replayed outcome code (workload
    codes, -1 unknown)."""

    rows: array = field(default_factory=lambda: array("q"))
    seg: array = field(default_factory=lambda: array("q"))
    seg_gpus: array = field(default_factory=lambda: array("h"))
    outcome: array = field(default_factory=lambda: array("b"))
    #: Rows cut short by preemption.
    preempted: set[int] = field(default_factory=set)
    #: Jobs that never started, and jobs cut short by max_retries.
    unscheduled: list[int] = field(default_factory=list)
    truncated: set[int] = field(default_factory=set)
    preemptions: int = 0

    def __len__(self) -> int:
        return len(self.outcome)

    def record_start(
        self, j: int, k: int, ready: int, now: int, end: int, pl: Placement, intr: int
    ) -> int:
        """Append a started row; returns its index."""
        row = len(self.outcome)
        self.rows.extend((j, k, ready, now, end, len(pl), intr))
        for m, g in pl:
            self.seg.extend((row, m, len(g)))
            self.seg_gpus.extend(g)
        self.outcome.append(-1)
        return row

    def end_of(self, row: int) -> int:
        return self.rows[_W * row + 4]

    def cut(self, row: int, end: int, intrinsic: int) -> None:
        """End a row early (preemption) with the useful work it did."""
        self.rows[_W * row + 4] = end
        self.rows[_W * row + 6] = intrinsic

    def columns(self) -> np.ndarray:
        """The rows as a (7, rows) int64 array (``ROW_FIELDS``), without a copy."""
        return np.frombuffer(self.rows, np.int64).reshape(-1, _W).T

    def segments(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Placement segments as arrays: (row, server, GPUs), and every GPU index in order."""
        seg = np.frombuffer(self.seg, np.int64).reshape(-1, 3).T
        return seg[0], seg[1], seg[2], np.frombuffer(self.seg_gpus, np.int16)

    def placements(self) -> list[Placement]:
        """Each row's placement as ``[(server, [gpu indices])]`` (for checks; slow)."""
        out: list[Placement] = [[] for _ in range(len(self))]
        row, server, n, gpus = self.segments()
        at = 0
        for r, m, k in zip(row.tolist(), server.tolist(), n.tolist(), strict=True):
            out[r].append((m, gpus[at : at + k].tolist()))
            at += k
        return out


@contextmanager
def gc_paused() -> Iterator[None]:
    """No cyclic garbage collection inside: an engine allocates millions of tuples, lists and
    dicts that form no cycles, and the collector would scan every live one again and again
    (a quarter of a saturated million-job replay's time). Reference counting still frees
    everything; the collector runs again on exit."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def intrinsic_durations(wl: Workload, model: SlowdownModel) -> np.ndarray:
    """Attempt durations with the observed placement's slowdown taken out (int us)."""
    if not model.enabled or not (wl.att_servers > 1).any():
        return wl.att_dur_us.copy()
    n = np.repeat(wl.num_gpus, wl.num_attempts)
    pairs, inv = np.unique(np.stack([n, wl.att_servers]), axis=1, return_inverse=True)
    f = np.array([model.factor(int(g), int(s)) if s > 0 else 1.0 for g, s in pairs.T])
    return np.round(wl.att_dur_us / f[inv.ravel()]).astype(np.int64)


class BaseEngine:
    """State both engines share: the workload as Python lists (fast scalar access), the free
    GPUs, the slowdown model, the trace being written, and each job's last attempt."""

    def __init__(
        self, wl: Workload, fs: FreeState, model: SlowdownModel, max_retries: int | None
    ) -> None:
        self.wl = wl
        self.fs = fs
        self.model = model
        self.trace = Trace()
        self.intr = intrinsic_durations(wl, model).tolist()
        self.ptr = wl.att_ptr.tolist()
        self.outcome_code = wl.att_outcome.tolist()
        self.gpus = wl.num_gpus.tolist()
        counts = np.diff(wl.att_ptr) - 1
        #: Index of each job's last attempt to run (max_retries cuts the data's list short).
        self.last_att = (
            counts if max_retries is None else np.minimum(counts, max_retries)
        ).tolist()

    def run(self) -> Trace:
        raise NotImplementedError

    @property
    def planned(self) -> int:
        """Attempts the engine will run if every job starts."""
        return len(self.last_att) + sum(self.last_att)

    def progress_start(self) -> Tracker:
        """The caller's progress tracker (``progress.current``), told the total: attempts to
        run. Engines report attempt ends every ``PROGRESS_EVERY + 1``."""
        tracker = current()
        tracker.update(completed=0, total=self.planned)
        return tracker


class QueueEngine(BaseEngine):
    """One run of a queue-based policy over a workload (see module docstring)."""

    def __init__(
        self, wl: Workload, fs: FreeState, cfg: EngineConfig, model: SlowdownModel
    ) -> None:
        super().__init__(wl, fs, model, cfg.max_retries)
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
        self.heap: list[tuple[int, int, int, int, int]] = []
        self.seq = len(wl)
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
        submit = self.wl.submit_us.tolist()
        nj = len(submit)
        heap = self.heap
        ai = 0
        inf = 1 << 62
        jwait = self.jwait
        # Locality timeouts: with one wait for every job they are due in the order they are
        # made (ready time + a constant), so a FIFO holds them (a saturated replay makes one
        # per waiting attempt); per-job waits (locality_wait_spread) need a heap of their own.
        uniform = self.cfg.locality_wait_by_job is None
        timeouts: deque[tuple[int, int, int]] = deque()
        theap: list[tuple[int, int, int]] = []
        started = self.started
        tracker, ends = self.progress_start(), 0
        while ai < nj or heap or timeouts or theap:
            now = submit[ai] if ai < nj else inf
            if heap and heap[0][0] < now:
                now = heap[0][0]
            if timeouts and timeouts[0][0] < now:
                now = timeouts[0][0]
            if theap and theap[0][0] < now:
                now = theap[0][0]
            ready: list[tuple[int, int, int, int]] = []
            touched = False
            while heap and heap[0][0] == now:
                _, kind, seq, j, k = heapq.heappop(heap)
                if kind == END:
                    self._end(j, k, now, ready)
                    touched = True
                    ends += 1
                    if not ends & PROGRESS_EVERY:
                        tracker.update(completed=ends)
                else:  # READY
                    ready.append((now, seq, j, k))
            while timeouts and timeouts[0][0] == now:
                _, j, k = timeouts.popleft()
                # Only matters if the attempt still waits (it may now be placed relaxed).
                touched = touched or started[j] != k
            while theap and theap[0][0] == now:
                _, j, k = heapq.heappop(theap)
                touched = touched or started[j] != k
            while ai < nj and submit[ai] == now:
                ready.append((now, ai, ai, 0))
                ai += 1
            if len(ready) == 1 and not self.npending:
                # Fast path (most arrivals on a cluster with no queue): exactly what a pass
                # over this one attempt would do, without building queues.
                item = ready[0]
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
                    pl = self.fs.place(n, jwait[j] <= 0)
                if pl is not None:
                    self._start(item, pl, now)
                else:
                    self._enqueue(item)
                touched = False
            elif ready:
                if len(ready) > 1:
                    ready.sort()
                for item in ready:
                    self._enqueue(item)
                touched = True
            if touched and self.npending:
                free = self.fs.free_total
                # Saturated clusters free a few GPUs at a time: skip the pass cheaply when
                # no pending demand fits.
                if free and (1 in self.pending_by_n or free >= min(self.pending_by_n)):
                    self._pass(now)
            if ready:
                # Locality timeouts only for attempts the pass could not start.
                for r, _, j, k in ready:
                    if started[j] != k and jwait[j] > 0:
                        if uniform:
                            timeouts.append((r + jwait[j], j, k))
                        else:
                            heapq.heappush(theap, (r + jwait[j], j, k))
        for v in self.pending:
            for q in v.values():
                self.trace.unscheduled.extend(item[2] for item in q)
        tracker.update(completed=self.planned)
        return self.trace

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
        n = self.gpus[j]
        v = self.vc[j]
        self.used[v] -= n
        tr = self.trace
        last = self.last_att[j]
        oc = self.outcome_code[self.ptr[j] + k]
        if k < last:
            tr.outcome[row] = FAILED
            self.seq += 1
            delay = self.cfg.retry_delay_us
            if delay:
                heapq.heappush(self.heap, (now + delay, READY, self.seq, j, k + 1))
            else:
                ready.append((now, self.seq, j, k + 1))
        else:
            total = self.ptr[j + 1] - self.ptr[j]
            if k < total - 1:
                tr.truncated.add(j)
                oc = FAILED
            tr.outcome[row] = oc

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
        self.seq += 1
        heapq.heappush(self.heap, (end, END, self.seq, j, k))
