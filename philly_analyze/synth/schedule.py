"""Scheduling the synthetic jobs: start times, placements and the true cause of every wait.

``Scheduler`` is the small interface the synthesizer needs. ``BuiltinScheduler`` is a compact
Philly-like scheduler used until the replay engine (``philly_analyze.sim``) provides its
``philly`` policy:

- event heap (arrivals, attempt ends, retries, user cancellations, locality relaxation), never a
  fixed time step; all events of one second are applied before one scheduling pass;
- per-VC guaranteed quotas (``philly_analyze.vcquota.infer_quotas`` from each VC's offered GPU
  time); a VC may borrow idle GPUs beyond its quota while a reserve stays free for the others;
- gang scheduling with the locality constraint of ``philly_analyze.locality``: a job that fits
  on one server gets one server (best fit: the fullest server that still has room), a larger
  job whole 8-GPU servers in one rack; after ``relax_after_s`` of waiting, any free GPUs
  (fewest servers first);
- failed attempts are retried after a short delay, ahead of later submissions of their VC.

The true cause of each waiting second (``split_causes``, for every scheduler) is decided from
the schedule by the one definition of ``philly_analyze.waitcause``: ``fair_share`` when
starting the job would have exceeded its VC's quota, else ``capacity`` (fewer GPUs free in the
whole cluster than the job needs), else ``fragmentation`` (enough free, but no placement
meeting the constraint), else ``other``. Each wait yields one row per cause (its pieces of one
cause merged: first moment, end of the last piece, total seconds).
"""

from __future__ import annotations

import bisect
import heapq
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from philly_analyze.synth.calibration import Calibration
from philly_analyze.synth.cluster import SynthCluster
from philly_analyze.synth.workload import A_FAILED, Workload
from philly_analyze.vcquota import infer_quotas
from philly_analyze.waitcause import (
    CAUSES,  # noqa: F401 (re-exported: the codes of Schedule.wait_cause)
    build_steps,
    server_events,
    sorted_unique,
    split_waits,
    step_index,
    usage_steps,
)

ARRIVE, END, CANCEL, RELAX = 1, 0, 2, 3


@dataclass
class SchedulerParams:
    """Knobs of the built-in scheduler (values and reasons: data file, ``[scheduler]``)."""

    #: Wait after which a job accepts any free GPUs.
    relax_after_s: int = 1800
    #: Jobs looked at per VC queue in one pass.
    scan_depth: int = 24
    #: Share of the cluster's GPUs that borrowing VCs must leave free.
    borrow_reserve: float = 0.05
    #: Delay before a failed attempt's retry is queued, seconds (low, high).
    retry_delay_s: tuple[int, int] = (5, 120)

    @classmethod
    def from_calibration(cls, cal: Calibration) -> SchedulerParams:
        s = cal.section("scheduler")
        lo, hi = cal.section("retries")["retry_delay_seconds"]
        return cls(
            relax_after_s=int(s["relax_after_minutes"] * 60),
            scan_depth=int(s["scan_depth"]),
            borrow_reserve=float(s["borrow_reserve"]),
            retry_delay_s=(int(lo), int(hi)),
        )


@dataclass
class Schedule:
    """What scheduling decided. Attempt arrays are aligned with the workload's attempts."""

    att_start: np.ndarray  # int64 s, -1 = never started (before the window end)
    att_end: np.ndarray  # int64 s when the attempt ended (may pass the window's end)
    pl_offsets: np.ndarray  # int64 (A+1): placements of attempt a are [off[a], off[a+1])
    pl_machine: np.ndarray  # int32 machine index
    pl_gpu: np.ndarray  # int16 GPU index
    cancelled: np.ndarray  # bool per job: killed by the user while queued
    cancel_time: np.ndarray  # int64 s per job (-1)
    #: Waiting per attempt and cause: job, attempt_idx (the attempt waited for), first moment
    #: of that cause, end of its last piece, its total seconds, cause code (``CAUSES``).
    wait_job: np.ndarray
    wait_attempt: np.ndarray
    wait_start: np.ndarray
    wait_end: np.ndarray
    wait_seconds: np.ndarray
    wait_cause: np.ndarray
    quotas: dict[str, int] = field(default_factory=dict)
    scheduler: str = ""


class Scheduler(Protocol):
    """Turns a workload into a schedule on a cluster."""

    name: str

    def run(self, wl: Workload, cluster: SynthCluster, horizon: int, seed: int) -> Schedule: ...


def vc_quotas(wl: Workload, cluster: SynthCluster) -> dict[str, int]:
    """VC quotas proportional to each VC's nodes (``Workload.vc_nodes``), summing to the
    cluster's GPUs (``vcquota.infer_quotas``'s rounding); VCs without nodes get none (they run
    only on borrowed GPUs)."""
    return infer_quotas(
        {v: float(n) for v, n in zip(wl.vc_names, wl.vc_nodes, strict=True)}, cluster.total_gpus
    )


class BuiltinScheduler:
    """The interim Philly-like scheduler (module docstring)."""

    name = "builtin"

    def __init__(self, params: SchedulerParams | None = None):
        self.params = params or SchedulerParams()

    def run(self, wl: Workload, cluster: SynthCluster, horizon: int, seed: int) -> Schedule:
        quotas = vc_quotas(wl, cluster)
        q = [quotas.get(v, 0) for v in wl.vc_names]
        sim = _Sim(wl, cluster, q, horizon, self.params, np.random.default_rng(seed))
        sim.loop()
        return sim.result(quotas, self.name)


class _Sim:
    def __init__(
        self,
        wl: Workload,
        cluster: SynthCluster,
        quota: list[int],
        horizon: int,
        p: SchedulerParams,
        rng: np.random.Generator,
    ):
        self.wl, self.cl, self.quota, self.horizon, self.p = wl, cluster, quota, horizon, p
        self.gpus = wl.gpus.tolist()
        self.vc = wl.vc.tolist()
        self.first = wl.first_attempt.tolist()
        self.natt = wl.num_attempts.tolist()
        self.dur = wl.att_duration.tolist()
        self.failed = (wl.att_outcome == A_FAILED).tolist()
        self.size = cluster.gpus.tolist()
        self.largest = cluster.largest
        self.rack = cluster.rack.tolist()
        m = cluster.num_machines
        self.free = list(self.size)
        self.free_np = np.array(self.size, dtype=np.int16)
        self.free_idx = [list(range(s)) for s in self.size]
        self.levels: list[set[int]] = [set() for _ in range(self.largest + 1)]
        for i in range(m):
            self.levels[self.size[i]].add(i)
        self.total_free = sum(self.size)
        self.reserve = int(p.borrow_reserve * self.total_free)
        self.usage = [0] * len(wl.vc_names)
        self.queues: list[list[tuple[int, int]]] = [[] for _ in wl.vc_names]
        self.queued_at: dict[int, int] = {}
        self.next_att = [0] * len(self.gpus)
        self.started = [False] * len(self.gpus)
        n_att = len(self.dur)
        self.att_start = np.full(n_att, -1, dtype=np.int64)
        self.placement: list[list[tuple[int, int]] | None] = [None] * n_att
        self.cancel_time = np.full(len(self.gpus), -1, dtype=np.int64)
        self.waits: list[tuple[int, int, int, int]] = []  # job, attempt, start, end
        self.heap: list[tuple[int, int, int, int]] = []
        self.seq = 0
        self.rng = rng
        lo, hi = p.retry_delay_s
        self.retry_delay = rng.integers(lo, hi + 1, size=n_att).tolist()
        submit = wl.submit.tolist()
        # The scheduler sees a job once its submission is processed (startup).
        arrive = (wl.submit + wl.startup).tolist()
        self.key = arrive
        pat = wl.patience.tolist()
        withdraw = wl.withdraw.tolist()
        for j, t in enumerate(submit):
            if withdraw[j] >= 0:
                # Held and killed before it could be scheduled: no attempts, no wait cause.
                self.cancel_time[j] = t + withdraw[j]
                continue
            self.push(arrive[j], ARRIVE, j)
            if pat[j] >= 0:
                self.push(max(t + pat[j], arrive[j]), CANCEL, j)

    def push(self, t: int, kind: int, j: int) -> None:
        self.seq += 1
        heapq.heappush(self.heap, (t, kind, self.seq, j))

    # ------------------------------------------------------------------ event loop
    def loop(self) -> None:
        heap = self.heap
        while heap and heap[0][0] < self.horizon:
            t = heap[0][0]
            full = False
            fresh: list[int] = []
            while heap and heap[0][0] == t:
                _, kind, _, j = heapq.heappop(heap)
                if kind == END:
                    full |= self.end(t, j)
                elif kind == ARRIVE:
                    self.enqueue(t, j)
                    fresh.append(j)
                elif kind == CANCEL:
                    self.cancel(t, j)
                elif kind == RELAX and j in self.queued_at:
                    fresh.append(j)
            if self.total_free:
                if full:
                    self.full_pass(t)
                else:
                    for j in fresh:
                        if j in self.queued_at:
                            self.try_start(t, j, borrow_ok=True)
        for j, since in self.queued_at.items():
            self.waits.append((j, self.next_att[j], since, self.horizon))

    def enqueue(self, t: int, j: int) -> None:
        self.queued_at[j] = t
        bisect.insort(self.queues[self.vc[j]], (self.key[j], j))
        self.push(t + self.p.relax_after_s, RELAX, j)

    def cancel(self, t: int, j: int) -> None:
        if self.started[j] or j not in self.queued_at:
            return
        since = self.queued_at.pop(j)
        self.queues[self.vc[j]].remove((self.key[j], j))
        self.waits.append((j, 0, since, t))
        self.cancel_time[j] = t

    def end(self, t: int, a: int) -> bool:
        pl = self.placement[a]
        assert pl is not None
        j = int(self.wl.att_job[a])
        for m, g in pl:
            self._release(m, g)
        v = self.vc[j]
        self.usage[v] -= self.gpus[j]
        if self.failed[a] and self.next_att[j] < self.natt[j]:
            self.push(t + self.retry_delay[a], ARRIVE, j)
        return True

    def full_pass(self, t: int) -> None:
        order = sorted(
            (u / max(self.quota[v], 1), v) for v, u in enumerate(self.usage) if self.queues[v]
        )
        for borrow in (False, True):
            for _, v in order:
                for _, j in list(self.queues[v][: self.p.scan_depth]):
                    if not self.total_free:
                        return
                    self.try_start(t, j, borrow_ok=borrow)

    def try_start(self, t: int, j: int, borrow_ok: bool) -> bool:
        n = self.gpus[j]
        if n > self.total_free:
            return False
        v = self.vc[j]
        if self.usage[v] + n > self.quota[v] and (
            not borrow_ok or self.total_free - n < self.reserve
        ):
            return False
        relaxed = t - self.queued_at[j] >= self.p.relax_after_s
        pl = self.place(n, relaxed)
        if pl is None:
            return False
        a = self.first[j] + self.next_att[j]
        self.waits.append((j, self.next_att[j], self.queued_at.pop(j), t))
        self.queues[v].remove((self.key[j], j))
        self.next_att[j] += 1
        self.started[j] = True
        self.att_start[a] = t
        self.placement[a] = pl
        self.usage[v] += n
        self.push(t + self.dur[a], END, a)
        return True

    # ------------------------------------------------------------------ placement
    def _take(self, m: int, k: int) -> list[tuple[int, int]]:
        f = self.free[m]
        self.levels[f].discard(m)
        self.free[m] = f - k
        self.free_np[m] = f - k
        self.levels[f - k].add(m)
        self.total_free -= k
        idx = self.free_idx[m]
        got, self.free_idx[m] = idx[:k], idx[k:]
        return [(m, g) for g in got]

    def _release(self, m: int, g: int) -> None:
        f = self.free[m]
        self.levels[f].discard(m)
        self.free[m] = f + 1
        self.free_np[m] = f + 1
        self.levels[f + 1].add(m)
        self.total_free += 1
        bisect.insort(self.free_idx[m], g)

    def place(self, n: int, relaxed: bool) -> list[tuple[int, int]] | None:
        largest = self.largest
        if n <= largest:
            # Like YARN's node heartbeats: any server with room, in random order.
            cand = np.flatnonzero(self.free_np >= n)
            if len(cand):
                return self._take(int(cand[int(self.rng.integers(len(cand)))]), n)
            if not relaxed:
                return None
            return self._spread(n)
        need = -(-n // largest)
        by_rack: dict[int, list[int]] = {}
        for m in self.levels[largest]:
            by_rack.setdefault(self.rack[m], []).append(m)
        fits = [(len(ms), r) for r, ms in by_rack.items() if len(ms) >= need]
        if fits:
            _, r = min(fits)
            ms = sorted(by_rack[r])[:need]
            out: list[tuple[int, int]] = []
            left = n
            for m in ms:
                k = min(largest, left)
                out += self._take(m, k)
                left -= k
            return out
        return self._spread(n) if relaxed else None

    def _spread(self, n: int) -> list[tuple[int, int]]:
        """Any free GPUs, fewest servers first (fullest-free servers first)."""
        out: list[tuple[int, int]] = []
        left = n
        for k in range(self.largest, 0, -1):
            for m in sorted(self.levels[k]):
                take = min(k, left)
                out += self._take(m, take)
                left -= take
                if not left:
                    return out
        raise AssertionError("spread called without enough free GPUs")

    # ------------------------------------------------------------------ result
    def result(self, quotas: dict[str, int], name: str) -> Schedule:
        n_att = len(self.dur)
        counts = np.array([0 if p is None else len(p) for p in self.placement], dtype=np.int64)
        off = np.zeros(n_att + 1, dtype=np.int64)
        np.cumsum(counts, out=off[1:])
        flat = [x for p in self.placement if p for x in p]
        pl = np.array(flat, dtype=np.int64).reshape(-1, 2)
        w = np.array(self.waits, dtype=np.int64).reshape(-1, 4)
        started = self.att_start >= 0
        att_end = np.where(started, self.att_start + np.asarray(self.dur), -1)
        job, att, ws, we, secs, cause = split_causes(
            w, self.att_start, att_end, off, pl[:, 0], self.wl, self.cl, self.quota
        )
        started = self.att_start >= 0
        return Schedule(
            att_start=self.att_start,
            att_end=att_end,
            pl_offsets=off,
            pl_machine=pl[:, 0].astype(np.int32),
            pl_gpu=pl[:, 1].astype(np.int16),
            cancelled=self.cancel_time >= 0,
            cancel_time=self.cancel_time,
            wait_job=job,
            wait_attempt=att,
            wait_start=ws,
            wait_end=we,
            wait_seconds=secs,
            wait_cause=cause,
            quotas=quotas,
            scheduler=name,
        )


def split_causes(
    waits: np.ndarray,
    att_start: np.ndarray,
    att_end: np.ndarray,
    pl_offsets: np.ndarray,
    pl_machine: np.ndarray,
    wl: Workload,
    cluster: SynthCluster,
    quota: list[int],
) -> tuple[np.ndarray, ...]:
    """Each wait ``(job, attempt, start, end)`` (seconds) split by cause from the schedule:
    attempts ``[att_start, att_end)`` (-1: never started) on the machines of their placements
    (``pl_offsets``/``pl_machine``, one entry per GPU). Returns (job, attempt, first, last,
    seconds, cause code), one row per wait and cause that took time, sorted."""
    counts = np.diff(pl_offsets)
    pl_att = np.repeat(np.arange(len(counts)), counts)
    seg, gpus = np.unique(
        np.stack([pl_att, pl_machine.astype(np.int64)]), axis=1, return_counts=True
    )
    no_end = np.iinfo(np.int64).max
    held = (att_start >= 0) & ((att_end < 0) | (att_end > att_start))
    times = sorted_unique(np.r_[att_start[held], att_end[held & (att_end >= 0)]])
    s_idx = step_index(times, att_start)
    e_idx = np.where(att_end >= 0, step_index(times, att_end), no_end)
    ev = server_events(seg[1], s_idx[seg[0]], e_idx[seg[0]], gpus)
    steps = build_steps(times, cluster.gpus.astype(np.int64), cluster.rack, *ev)
    att_vc = wl.vc[wl.att_job]
    att_gpus = wl.gpus[wl.att_job].astype(np.int64)

    def usage(v: int) -> np.ndarray:
        sel = (att_vc == v) & held
        ended = sel & (att_end >= 0)
        d = np.r_[att_gpus[sel], -att_gpus[ended]]
        return usage_steps(steps, np.r_[s_idx[sel], e_idx[ended]], d)

    job = waits[:, 0]
    split = split_waits(
        steps,
        wl.vc[job],
        wl.gpus[job].astype(np.int64),
        waits[:, 2],
        waits[:, 3],
        usage,
        dict(enumerate(quota)),
        with_bounds=True,
    )
    assert split.first is not None and split.last is not None
    r, c = np.nonzero(split.us > 0)
    order = np.lexsort((c, waits[r, 1], job[r]))
    r, c = r[order], c[order]
    return (
        job[r],
        waits[r, 1].astype(np.int32),
        split.first[r, c],
        split.last[r, c],
        split.us[r, c].astype(np.float64),
        c.astype(np.int8),
    )


#: Scheduler names accepted by ``get_scheduler`` (and ``synth --scheduler``).
SCHEDULERS = ("philly", "builtin")


def get_scheduler(name: str, cal: Calibration) -> Scheduler:
    """``philly``: the replay engine's ``philly`` policy (``synth.replay_sched``); ``builtin``:
    the compact scheduler of this module (the only one with impatient users)."""
    if name == "philly":
        from philly_analyze.synth.replay_sched import ReplayScheduler

        return ReplayScheduler(cal.section("scheduler", "philly").get("params", {}))
    if name == "builtin":
        return BuiltinScheduler(SchedulerParams.from_calibration(cal))
    raise ValueError(f"unknown scheduler {name!r}; choose from {', '.join(SCHEDULERS)}")
