"""What the replay engines share: the ``Trace`` they write (one row per started attempt) and
``BaseEngine``, their state: the workload as Python lists, the event loop
(``sim.events``), the free GPUs (``sim.placement``), the locality slowdown model, and the rule
for how an attempt ends (a failed one before the job's last is retried; the last one keeps its
observed outcome). The queue engine (``sim.engine``) and the preemptive engine
(``sim.preemptive``) only add how they choose what runs.
"""

from __future__ import annotations

import struct
from array import array
from dataclasses import dataclass, field
from typing import Final

import numpy as np

from philly_analyze.progress import NullTracker, Tracker, current
from philly_analyze.sim.events import EventLoop
from philly_analyze.sim.placement import FreeState, Placement
from philly_analyze.sim.slowdown import SlowdownModel
from philly_analyze.sim.workload import FAILED, Workload

#: The failed outcome's code as a C static when compiled (an imported name is a dict lookup
#: at every use, twice per attempt end).
_FAILED: Final = FAILED

#: Progress is reported every 8,192 attempt ends (a bit mask: one AND per end).
PROGRESS_EVERY: Final = 8191

#: Fields of a trace row, in order (``Trace.columns``).
ROW_FIELDS: Final = ("job", "attempt", "ready", "start", "end", "servers", "intrinsic")
#: What the trace's ``rows`` array holds per row: the row's fields, then its first placement
#: segment (server, GPU count, and the GPU index when it is one GPU, else -1).
RECORD_FIELDS: Final = (*ROW_FIELDS, "server0", "gpus0", "gpu0")
_W: Final = len(RECORD_FIELDS)
#: A row record and a further placement segment, packed as the trace's arrays hold them.
PACK_ROW: Final = struct.Struct(f"={_W}q").pack
PACK_SEG: Final = struct.Struct("=3q").pack


@dataclass
class Trace:
    """What an engine did: one row per started attempt (or preempted segment), kept in flat
    machine-integer arrays (a million-job replay has over a million rows: tuples and lists per
    row took ~0.5 kB each).

    Row ``i`` is ``rows[10 i : 10 i + 10] = (job, attempt, ready, start, end, servers,
    intrinsic, server0, gpus0, gpu0)`` where ``intrinsic`` is the useful work (us) done in
    that row. Its placement is its first segment (server ``server0``, ``gpus0`` GPUs) and then
    the further segments of the row in ``seg`` (row, server, GPUs; three integers each, in
    order). The GPU index of a one-GPU first segment is ``gpu0``; the GPU indices of every
    other segment follow one another in ``seg_gpus``. So a start on one server records one
    packed record, and one on one GPU nothing else (most starts: a call per array appended
    to was a fifth of a saturated replay). ``outcome[i]`` is the replayed outcome code
    (workload codes, -1 unknown); ``segments`` and ``placements`` give the placements whole."""

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
        return len(self.rows) // _W

    def reserve(self, rows: int) -> None:
        """Room for ``rows`` outcomes (-1) at once, so that recording a start need not append
        one (``record_start``); ``trim`` drops what is left over."""
        if len(self.outcome) < rows:
            self.outcome.frombytes(b"\xff" * (rows - len(self.outcome)))

    def trim(self) -> None:
        """Drop the outcomes ``reserve`` made room for beyond the rows recorded."""
        del self.outcome[len(self) :]

    def record_start(
        self, j: int, k: int, ready: int, now: int, end: int, pl: Placement, intr: int
    ) -> int:
        """Append a started row; returns its index."""
        row = len(self)
        m0, g0 = pl[0]
        n0 = len(g0)
        # Packed to bytes: array.extend of a tuple converts item by item, three times slower.
        self.rows.frombytes(
            PACK_ROW(j, k, ready, now, end, len(pl), intr, m0, n0, g0[0] if n0 == 1 else -1)
        )
        if n0 > 1:
            self.seg_gpus.extend(g0)
        for i in range(1, len(pl)):
            m, g = pl[i]
            self.seg.frombytes(PACK_SEG(row, m, len(g)))
            self.seg_gpus.extend(g)
        if len(self.outcome) == row:
            self.outcome.append(-1)
        return row

    def end_of(self, row: int) -> int:
        """The end time of a row."""
        return self.rows[_W * row + 4]

    def cut(self, row: int, end: int, intrinsic: int) -> None:
        """End a row early (preemption) with the useful work it did."""
        self.rows[_W * row + 4] = end
        self.rows[_W * row + 6] = intrinsic

    def columns(self) -> np.ndarray:
        """The rows as a (7, rows) int64 array (``ROW_FIELDS``), without a copy."""
        return np.frombuffer(self.rows, np.int64).reshape(-1, _W).T[: len(ROW_FIELDS)]

    def segments(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Placement segments as arrays, in row order and each row's in order: (row, server,
        GPUs), and every GPU index in order."""
        rec = np.frombuffer(self.rows, np.int64).reshape(-1, _W)
        more = np.frombuffer(self.seg, np.int64).reshape(-1, 3)
        nrec = len(rec)
        # A row's first segment, then its further ones (stable: they keep their order).
        key = np.concatenate([np.arange(nrec) * 2, more[:, 0] * 2 + 1])
        order = np.argsort(key, kind="stable")
        row = (key // 2)[order]
        server = np.concatenate([rec[:, 7], more[:, 1]])[order]
        n = np.concatenate([rec[:, 8], more[:, 2]])[order]
        gpu0 = np.concatenate([rec[:, 9], np.full(len(more), -1, np.int64)])[order]
        gpus = np.empty(int(n.sum()), np.int16)
        first = np.cumsum(n) - n
        inline = gpu0 >= 0
        from_rec = np.zeros(len(gpus), bool)
        from_rec[first[inline]] = True
        gpus[from_rec] = gpu0[inline]
        gpus[~from_rec] = np.frombuffer(self.seg_gpus, np.int16)
        return row, server, n, gpus

    def placements(self) -> list[Placement]:
        """Each row's placement as ``[(server, [gpu indices])]`` (for checks; slow)."""
        out: list[Placement] = [[] for _ in range(len(self))]
        row, server, n, gpus = self.segments()
        at = 0
        for r, m, k in zip(row.tolist(), server.tolist(), n.tolist(), strict=True):
            out[r].append((m, gpus[at : at + k].tolist()))
            at += k
        return out


def intrinsic_durations(wl: Workload, model: SlowdownModel) -> np.ndarray:
    """Attempt durations with the observed placement's slowdown taken out (int us)."""
    if not model.enabled or not (wl.att_servers > 1).any():
        return wl.att_dur_us.copy()
    n = np.repeat(wl.num_gpus, wl.num_attempts)
    pairs, inv = np.unique(np.stack([n, wl.att_servers]), axis=1, return_inverse=True)
    f = np.array([model.factor(int(g), int(s)) if s > 0 else 1.0 for g, s in pairs.T])
    return np.round(wl.att_dur_us / f[inv.ravel()]).astype(np.int64)


class BaseEngine:
    """State both replay engines share (module docstring). ``first_seq``: where the event
    loop's sequence numbers start."""

    def __init__(
        self,
        wl: Workload,
        fs: FreeState,
        model: SlowdownModel,
        max_retries: int | None,
        first_seq: int = 0,
    ) -> None:
        self.wl = wl
        self.fs = fs
        self.model = model
        self.trace = Trace()
        self.loop: EventLoop[int] = EventLoop(wl.submit_us.tolist(), first_seq=first_seq)
        self.intr: list[int] = intrinsic_durations(wl, model).tolist()
        self.ptr: list[int] = wl.att_ptr.tolist()
        self.outcome_code: list[int] = wl.att_outcome.tolist()
        self.gpus: list[int] = wl.num_gpus.tolist()
        counts = np.diff(wl.att_ptr) - 1
        #: Index of each job's last attempt to run (max_retries cuts the data's list short).
        self.last_att: list[int] = (
            counts if max_retries is None else np.minimum(counts, max_retries)
        ).tolist()
        #: Progress: the caller's tracker and the attempt ends so far (set by ``run``).
        self.tracker: Tracker = NullTracker()
        self.ends = 0

    def run(self) -> Trace:
        """Simulate the whole workload; the trace of what ran."""
        raise NotImplementedError

    @property
    def planned(self) -> int:
        """Attempts the engine will run if every job starts."""
        return len(self.last_att) + sum(self.last_att)

    def progress_start(self) -> None:
        """Take the caller's progress tracker (``progress.current``) and tell it the total:
        attempts to run. Ends are reported every ``PROGRESS_EVERY + 1``."""
        self.tracker, self.ends = current(), 0
        self.tracker.update(completed=0, total=self.planned)

    def progress_done(self) -> None:
        """The run is over: every planned attempt is accounted for."""
        self.tracker.update(completed=self.planned)

    def attempt_ended(self, j: int, k: int, row: int) -> bool:
        """Record how job ``j``'s attempt ``k`` (trace row ``row``) ended; True when a retry
        follows. An attempt before the job's last to run failed (the data's failed attempts,
        replayed); the last keeps the data's outcome, unless ``max_retries`` cut the job's
        attempts short (then it failed, and the job is flagged)."""
        self.ends += 1
        if not self.ends & PROGRESS_EVERY:
            self.tracker.update(completed=self.ends)
        tr = self.trace
        if k < self.last_att[j]:
            tr.outcome[row] = _FAILED
            return True
        oc = self.outcome_code[self.ptr[j] + k]
        if k < self.ptr[j + 1] - self.ptr[j] - 1:
            tr.truncated.add(j)
            oc = _FAILED
        tr.outcome[row] = oc
        return False
