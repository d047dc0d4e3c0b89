"""The event engine for preemptive priority policies (las, srtf).

At every event timestamp (arrival, attempt end, retry, LAS demotion) the engine ranks every
active job (waiting or running) by the policy's key and admits them greedily in that order
while their GPU demand fits in the cluster's GPU count; running jobs left out are preempted
(checkpoint-restart: their remaining work is kept, no restart cost) and admitted waiting jobs
start, placed locality-first (strict placement if free, else any free GPUs, so the Tables 4/5
slowdown applies). No VC quotas. Work is measured in intrinsic time (slowdown removed), so a
job preempted and resumed on a worse placement takes longer for the rest of its run.

Cost per event is O(active jobs log active jobs): fine for what-ifs on moderately loaded
traces, slower than the queue engine on saturated ones (see docs/replay.md).
"""

from __future__ import annotations

import heapq
from bisect import bisect_left, insort
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

from philly_analyze.sim.core import BaseEngine, Trace
from philly_analyze.sim.placement import FreeState, Placement
from philly_analyze.sim.slowdown import SlowdownModel
from philly_analyze.sim.workload import Workload

#: Event kinds (at one time: attempt ends, then retries ready, then LAS demotions).
END: Final = 0
READY: Final = 1
DEMOTE: Final = 2


@dataclass
class PreemptConfig:
    """``key(engine, j, now)`` ranks job ``j`` (smaller runs first)."""

    key: Callable[[PreemptiveEngine, int, int], tuple]
    #: LAS: attained-service thresholds in GPU-microseconds (empty for srtf).
    thresholds: tuple[int, ...] = ()
    max_retries: int | None = None
    retry_delay_us: int = 0


class PreemptiveEngine(BaseEngine):
    """One run of a preemptive policy (see module docstring)."""

    def __init__(
        self, wl: Workload, fs: FreeState, cfg: PreemptConfig, model: SlowdownModel
    ) -> None:
        super().__init__(wl, fs, model, cfg.max_retries)
        self.cfg = cfg
        self.submit = wl.submit_us.tolist()
        nj = len(wl)
        #: later[ptr[j] + k]: intrinsic work of job j's attempts after k (up to its last).
        self.later = [0] * len(self.intr)
        for j in range(nj):
            acc = 0
            for x in range(self.ptr[j] + self.last_att[j], self.ptr[j] - 1, -1):
                self.later[x] = acc
                acc += self.intr[x]
        self.k = [0] * nj
        #: Remaining intrinsic work (us) of the current attempt.
        self.rem = [0] * nj
        #: Attained service, GPU-us (LAS).
        self.attained = [0] * nj
        self.version = [0] * nj
        self.ready_at = [0] * nj
        self.wkey: list[tuple] = [()] * nj
        self.waiting_gpus = 0
        #: Keys of the waiting jobs, sorted (each includes the job index: unique).
        self.wsorted: list[tuple] = []
        #: LAS queue of each job, kept current by _ready and DEMOTE events.
        self.lvl = [0] * nj
        self.waiting: set[int] = set()
        #: j -> (row, placement, start, factor)
        self.running: dict[int, tuple[int, Placement, int, float]] = {}

    # ------------------------------------------------------------------ helpers for keys
    def remaining_total(self, j: int, now: int) -> int:
        """Intrinsic work left (us): current attempt (net of running time) plus later ones."""
        rem = self.rem[j]
        run = self.running.get(j)
        if run is not None:
            rem -= round((now - run[2]) / run[3])
        return rem + self.later[self.ptr[j] + self.k[j]]

    def attained_now(self, j: int, now: int) -> int:
        """Attained service (GPU-us) of job ``j`` at ``now``, its current run included."""
        run = self.running.get(j)
        a = self.attained[j]
        return a + (now - run[2]) * self.gpus[j] if run is not None else a

    def level(self, j: int, now: int) -> int:
        """LAS queue of job ``j`` at ``now``: thresholds its attained service has passed."""
        a = self.attained_now(j, now)
        return sum(1 for t in self.cfg.thresholds if a >= t)

    # ------------------------------------------------------------------ loop
    def run(self) -> Trace:
        """Simulate the whole workload; the trace of what ran."""
        self.progress_start()
        self.loop.run(self._at)
        self.trace.unscheduled.extend(sorted(self.waiting))
        self.progress_done()
        return self.trace

    def _at(self, now: int, arrived: range) -> None:
        """Everything due at ``now`` (stale events of a job that was stopped since are
        skipped: their version is old), then one ranking and admission."""
        for _, kind, _, j, ver in self.loop.pop(now):
            if kind == READY:
                self._ready(j, now)
            elif ver == self.version[j] and j in self.running:
                if kind == END:
                    self._end(j, now)
                else:  # DEMOTE: the job's LAS queue changes; reschedule below
                    self.lvl[j] = self.level(j, now)
                    self._push_demote(j, now)
        for ai in arrived:
            self.k[ai] = 0
            self.rem[ai] = self.intr[self.ptr[ai]]
            self._ready(ai, now)
        self._schedule(now)

    def _ready(self, j: int, now: int) -> None:
        self.waiting.add(j)
        self.waiting_gpus += self.gpus[j]
        self.ready_at[j] = now
        if self.cfg.thresholds:
            self.lvl[j] = self.level(j, now)
        self.wkey[j] = k = (*self.cfg.key(self, j, now), self.submit[j], j)
        insort(self.wsorted, k)

    def _push(self, t: int, kind: int, j: int) -> None:
        self.loop.schedule(t, kind, j, self.version[j])

    def _stop(self, j: int, now: int) -> int:
        """Take j off its GPUs at ``now``; returns its trace row."""
        row, pl, start, f = self.running.pop(j)
        self.fs.release(pl)
        self.version[j] += 1
        self.attained[j] += (now - start) * self.gpus[j]
        done = round((now - start) / f)
        self.rem[j] = max(0, self.rem[j] - done)
        self.trace.cut(row, now, done)
        return row

    def _end(self, j: int, now: int) -> None:
        row = self._stop(j, now)
        k = self.k[j]
        if self.attempt_ended(j, k, row):
            self.k[j] = k + 1
            self.rem[j] = self.intr[self.ptr[j] + k + 1]
            if self.cfg.retry_delay_us:
                self._push(now + self.cfg.retry_delay_us, READY, j)
            else:
                self._ready(j, now)

    def _schedule(self, now: int) -> None:
        if not self.waiting:
            return
        if self.waiting_gpus <= self.fs.free_total:
            # Everyone fits: the greedy admission would choose every job, so no preemption;
            # start the waiting ones in rank order (placement order matters).
            for *_, j in list(self.wsorted):
                self._start(j, now)
            return
        key = self.cfg.key
        submit = self.submit
        # Waiting keys are fixed while a job waits and kept sorted (wsorted); running jobs'
        # keys may move (srtf, las demotions), so they are ranked now. Admission walks the
        # merged order and stops once the cluster is full.
        running = [(*key(self, j, now), submit[j], j) for j in self.running]
        if running and self.wsorted[0] > max(running):
            # Every running job outranks every waiting one: all stay, and the free GPUs go
            # to waiting jobs in rank order (what the merged walk below would do).
            avail = self.fs.free_total
            for *_, j in list(self.wsorted):
                if self.gpus[j] <= avail:
                    avail -= self.gpus[j]
                    self._start(j, now)
                    if avail == 0:
                        break
            return
        running.sort()
        avail = self.fs.cluster.total_gpus
        chosen: list[int] = []
        for *_, j in heapq.merge(self.wsorted, running):
            n = self.gpus[j]
            if n <= avail:
                chosen.append(j)
                avail -= n
                if avail == 0:
                    break
        keep = set(chosen)
        for j in [j for j in self.running if j not in keep]:
            row = self._stop(j, now)
            self.trace.preempted.add(row)
            self.trace.preemptions += 1
            self._ready(j, now)
        for j in chosen:
            if j in self.waiting:
                self._start(j, now)

    def _start(self, j: int, now: int) -> None:
        n = self.gpus[j]
        pl = self.fs.place_strict(n) or self.fs.place_relaxed(n)
        assert pl is not None, "admission counted the GPUs"
        self.waiting.discard(j)
        self.waiting_gpus -= n
        ws = self.wsorted
        del ws[bisect_left(ws, self.wkey[j])]
        racks = len({self.fs.rack[m] for m, _ in pl})
        f = self.model.factor(n, len(pl), racks) if len(pl) > 1 else 1.0
        end = now + round(self.rem[j] * f)
        row = self.trace.record_start(j, self.k[j], self.ready_at[j], now, end, pl, self.rem[j])
        self.running[j] = (row, pl, now, f)
        self.version[j] += 1
        self._push(end, END, j)
        self._push_demote(j, now)

    def _push_demote(self, j: int, now: int) -> None:
        """LAS: an event when running job j's attained service reaches the next threshold
        (before its end), so its queue changes exactly then."""
        th = self.cfg.thresholds
        if not th:
            return
        a = self.attained_now(j, now)
        nxt = next((t for t in th if t > a), None)
        if nxt is not None:
            n = self.gpus[j]
            t_cross = now + -(-(nxt - a) // n)
            end = self.trace.end_of(self.running[j][0])
            if t_cross < end:
                self._push(t_cross, DEMOTE, j)
