"""Why a job waited: one definition of the causes of a waiting moment, shared by the report
(``analysis.queueing``, rebuilt from a store), the replay's metrics and waiting table
(``sim.result``) and the synthesizer's ground truth (``synth.schedule``).

A moment during which a job of VC ``v`` waited for an attempt of ``n`` GPUs is

1. **fair_share** when ``used(v) + n > quota(v)``: starting it would take the VC past its
   quota (this includes being at or over it);
2. otherwise **capacity** when fewer than ``n`` GPUs were free in the whole cluster (for
   example because other VCs borrowed the idle quota): no placement of any shape existed;
3. otherwise **fragmentation** when ``n`` GPUs were free but no placement meeting the locality
   constraint (``locality.fits_strict``) was;
4. otherwise **other**: quota left and a placement free, yet the job waited (scheduler
   latency, jobs ahead of it in a head-of-line queue, work the data does not show).

Without quotas (``quota`` None) no moment is fair-share.

**Incomplete data** (the report; the replay and the synthesizer know every holding and demand
and never pass these). What the cluster held is then known only between two bounds: the
least (``steps``/``usage``: an attempt whose end the data does not give released at its start,
an attempt whose GPU count is unknown holding 1) and the most (``MostHeld``: the first held
to its job's next attempt or the end of the data, the second holding any number); and a
waiting job's demand may be unknown (``UNKNOWN_DEMAND``: at least 1 GPU, at most any number).
Each of the three conditions above only grows with what is held and with the demand, and the
first that holds wins, so from the least to the most the cause can only move up the order
other, fragmentation, capacity, fair_share: where the least (with the least demand) and the
most (with the most) give the same cause, every state in between gives it too, and that is the
cause; where they differ the moment is **undetermined** (``UNDETERMINED``): the data cannot
tell. With an unknown demand that leaves fair_share when ``used(v) + 1 > quota(v)`` (and,
without quotas, capacity when no GPU is free), and undetermined otherwise: under quota with no
GPU free, a demand beyond the VC's remaining quota would make the moment fair-share, one
within it capacity.

The cluster's state is a step function over its change points (attempt starts and ends):
``Steps`` keeps, per step, the free GPUs of the whole cluster, the most free GPUs on one server
and the most wholly free largest-size servers in one rack (with these two,
``locality.fits_strict_headroom`` decides the constraint for any demand). ``build_steps``
computes them from per-server changes without a Python loop over events: a change moves a
server across free-count levels, so ``+1/-1`` per level crossed, summed per step and
accumulated, counts the servers with at least ``L`` free GPUs.

``split_waits`` measures each waiting interval ``[a, b)``: per cause, its microseconds, the
first moment and the end of the last moment of that cause. Consecutive pieces of one cause are
merged (a wait that alternates between causes 1,000 times still yields at most four numbers
per cause), and the totals are exact integrals of the step functions (prefix sums over the
runs of equal cause, integer microseconds).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

import numpy as np

from philly_analyze.locality import fits_strict_headroom

#: The causes of a moment the data describes completely (the replay's and the synthesizer's
#: ground truth; their codes are the indexes).
CAUSES: tuple[str, ...] = ("fair_share", "fragmentation", "capacity", "other")
FAIR_SHARE, FRAGMENTATION, CAPACITY, OTHER = range(4)
#: A moment whose cause the data cannot tell (module docstring): code 4, after ``CAUSES``.
UNDETERMINED = 4
#: The report's causes: ``CAUSES`` and undetermined (``split_waits`` with ``most``).
REPORT_CAUSES: tuple[str, ...] = (*CAUSES, "undetermined")
#: The paper's Table 2 has two causes; ours map onto them like this (docs/analyses.md): an
#: undetermined moment may be either of them (or other), so it stays apart.
PAPER_CAUSE: dict[str, str] = {
    "fair_share": "fair_share",
    "fragmentation": "fragmentation",
    "capacity": "fragmentation",
    "other": "other",
    "undetermined": "undetermined",
}
#: ``split_waits``' demand of a job whose GPU count the data does not give.
UNKNOWN_DEMAND = -1
#: An unknown GPU count at its largest: beyond any quota and any free count. Small enough that
#: usage sums of millions of them stay exact in float64 (``usage_steps``' bincount).
UNBOUNDED = 1 << 31
_NO_END = np.iinfo(np.int64).max
#: Quotas below this compare with integer usage exactly as integers (``_with_quota``).
_EXACT = 1 << 53


@dataclass
class Steps:
    """The cluster state as step functions: step ``j`` covers ``[bounds[j], bounds[j+1])``
    (epoch microseconds); step 0 is "before every change" (nothing running) and the last step
    runs on past its bound."""

    bounds: np.ndarray
    free_total: np.ndarray
    max_free: np.ndarray
    whole: np.ndarray
    largest: int

    @property
    def steps(self) -> int:
        return len(self.bounds) - 1

    def fits(self, n: int) -> np.ndarray:
        """Per step: whether a placement of ``n`` GPUs meeting the locality constraint is
        free."""
        return fits_strict_headroom(self.max_free, self.whole, self.largest, n)

    def locality_causes(self, n: int, lo: int = 0, hi: int | None = None) -> np.ndarray:
        """Per step of ``[lo, hi)``: the cause of a waiting moment when the quota is not the
        limit (capacity, fragmentation or other), as int8 codes into ``CAUSES``."""
        sl = slice(lo, hi)
        out = np.full(len(self.free_total[sl]), OTHER, np.int8)
        fits = fits_strict_headroom(self.max_free[sl], self.whole[sl], self.largest, n)
        out[~fits] = FRAGMENTATION
        out[self.free_total[sl] < n] = CAPACITY
        return out

    def index(self, t: np.ndarray) -> np.ndarray:
        """The step holding each time ``t``."""
        return np.clip(np.searchsorted(self.bounds, t, side="right") - 1, 0, self.steps - 1)


def step_index(times: np.ndarray, t: np.ndarray) -> np.ndarray:
    """The step that begins at each change time ``t`` (``t`` among ``times``, sorted)."""
    return np.searchsorted(times, t) + 1


def build_steps(
    times: np.ndarray,
    sizes: np.ndarray,
    rack: np.ndarray,
    mi: np.ndarray,
    tidx: np.ndarray,
    delta: np.ndarray,
    busy_after: np.ndarray,
) -> Steps:
    """The state over ``times`` (sorted, unique: every change point, plus any time the caller
    needs covered) from per-server changes: server ``mi`` (index into ``sizes``/``rack``)
    changes by ``delta`` GPUs to ``busy_after`` booked at the start of step ``tidx``
    (``step_index`` of the change's time; ``server_events`` makes these rows). A server booked
    beyond its size counts as 0 free. ``rack``: integer rack code per server (all equal when
    racks are unknown)."""
    times = np.asarray(times, np.int64)
    sizes = np.asarray(sizes, np.int64)
    largest = int(sizes.max()) if len(sizes) else 0
    bounds = (
        np.concatenate([[times[0] - 1], times, [times[-1] + 1]])
        if len(times)
        else (np.array([0, 1], np.int64))
    )
    n_steps = len(bounds) - 1
    tidx = np.asarray(tidx, np.int64)
    mi = np.asarray(mi, np.int64)
    size = sizes[mi]
    busy_after = np.asarray(busy_after, np.int64)
    after = np.clip(size - busy_after, 0, size)
    before = np.clip(size - (busy_after - np.asarray(delta, np.int64)), 0, size)

    def accumulate(idx: np.ndarray, d: np.ndarray, start: int) -> np.ndarray:
        steps = np.bincount(idx, weights=d, minlength=n_steps).astype(np.int64)
        steps[0] += start
        return np.cumsum(steps)

    free_total = accumulate(tidx, (after - before).astype(np.float64), int(sizes.sum()))
    # The most free GPUs on one server: the highest level L with a server at >= L free.
    max_free = np.zeros(n_steps, np.int64)
    for lv in range(1, largest + 1):
        d = (after >= lv).astype(np.int64) - (before >= lv).astype(np.int64)
        nz = d != 0
        at_least = accumulate(tidx[nz], d[nz].astype(np.float64), int((sizes >= lv).sum()))
        max_free[at_least > 0] = lv
    # Wholly free servers of the largest size, per rack; then the best rack.
    big = size == largest
    dw = ((after == size) & big).astype(np.int64) - ((before == size) & big).astype(np.int64)
    nz = np.flatnonzero(dw != 0)
    rack = np.asarray(rack, np.int64)
    ev_rack = rack[mi[nz]]
    order = np.argsort(ev_rack, kind="stable")
    cuts: np.ndarray | list[int] = (
        np.searchsorted(ev_rack[order], np.unique(rack)) if len(rack) else []
    )
    whole = np.zeros(n_steps, np.int64)
    for r, lo, hi in zip(np.unique(rack).tolist(), cuts, [*cuts[1:], len(order)], strict=True):
        sel = nz[order[lo:hi]]
        n0 = int(((rack == r) & (sizes == largest)).sum())
        whole = np.maximum(whole, accumulate(tidx[sel], dw[sel].astype(np.float64), n0))
    return Steps(bounds, free_total, max_free, whole, largest)


def sorted_unique(x: np.ndarray) -> np.ndarray:
    """``np.unique`` of an int array by sorting (numpy 2's hash-based ``unique`` took 4 s
    where this takes 0.2 s on 2.7M event times)."""
    s = np.sort(np.asarray(x, np.int64))
    return s[np.r_[True, s[1:] != s[:-1]]] if len(s) else s


def server_events(
    mi: np.ndarray, start: np.ndarray, end: np.ndarray, count: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Per-server changes for ``build_steps`` from holdings: server ``mi`` holds ``count``
    GPUs over ``[start, end)`` (``end`` ``None``-like = ``np.iinfo(int64).max``: to the end).
    Returns (mi, t, delta, busy_after), one row per (server, time) with a non-zero change,
    sorted by server then time. Holdings whose end is not after their start hold nothing."""
    mi, start, end, count = (np.asarray(x, np.int64) for x in (mi, start, end, count))
    keep = end > start
    if not keep.all():  # (a replay's rows all hold: no copies of millions of them)
        mi, start, end, count = mi[keep], start[keep], end[keep], count[keep]
    ended = end != _NO_END
    if ended.all():
        m, tt = np.concatenate([mi, mi]), np.concatenate([start, end])
        d = np.concatenate([count, -count])
    else:
        m = np.concatenate([mi, mi[ended]])
        tt = np.concatenate([start, end[ended]])
        d = np.concatenate([count, -count[ended]])
    if len(m) == 0:
        return m, tt, d, d.copy()
    m, tt, d = _summed_by_server_time(m, tt, d)
    total = np.cumsum(d)
    # Running sum per server: subtract what the servers before it added.
    srv_first = np.flatnonzero(np.r_[True, m[1:] != m[:-1]]) if len(m) else np.zeros(0, int)
    offset = np.repeat(total[srv_first] - d[srv_first], np.diff(np.r_[srv_first, len(m)]))
    total -= offset
    return m, tt, d, total


def _summed_by_server_time(
    m: np.ndarray, tt: np.ndarray, d: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The changes ``d`` summed per (server ``m``, time ``tt``), ordered by server then time,
    sums of 0 left out. When server, time and change fit in one int64 (a replay's do: 10 bits
    of server, 46 of microseconds, 5 of change), that number is sorted and taken apart again:
    a sort of 5M integers instead of an argsort and three gathers (3.9 s to 1 s at a million
    jobs); the pairs are told apart by its upper bits and only the sums are decoded (a third
    as many: fewer passes over fresh memory). Otherwise one key (server, time) is argsorted,
    or both are lexsorted."""
    t0, span = int(tt.min()), int(tt.max() - tt.min()) + 1
    low = int(np.abs(d).max()).bit_length() + 1
    limit = int(np.iinfo(np.int64).max)
    if (int(m.max()) + 1) * span < limit >> low:
        bias = 1 << (low - 1)
        # ((m * span + tt - t0) << low) | (d + bias), built in place: 0 <= d + bias < 2**low.
        packed = m * span
        packed += tt
        packed -= t0
        packed <<= low
        packed += d
        packed += bias
        packed.sort()
        d = packed & ((1 << low) - 1)
        d -= bias
        packed >>= low  # the (server, time) key
        key: np.ndarray | None = packed
    else:
        # Not a stable sort (2.6x faster on 5M keys): equal keys are summed, in any order.
        fits = int(m.max()) < limit // span
        order = np.argsort(m * span + (tt - t0)) if fits else np.lexsort((tt, m))
        m, tt, d = m[order], tt[order], d[order]
        key = m * span + (tt - t0) if fits else None
    if key is not None:
        first = np.flatnonzero(np.r_[True, key[1:] != key[:-1]])
    else:
        first = np.flatnonzero(np.r_[True, (m[1:] != m[:-1]) | (tt[1:] != tt[:-1])])
    d = np.add.reduceat(d, first)
    nz = np.flatnonzero(d)
    d = d[nz]
    if key is not None:
        m, tt = np.divmod(key[first[nz]], span)
        tt += t0
    else:
        m, tt = m[first[nz]], tt[first[nz]]
    return m, tt, d


def usage_steps(steps: Steps, tidx: np.ndarray, delta: np.ndarray) -> np.ndarray:
    """GPUs held per step by holdings that change by ``delta`` at the start of steps
    ``tidx`` (``step_index``)."""
    per = np.bincount(tidx, weights=np.asarray(delta, np.float64), minlength=steps.steps)
    return np.cumsum(per.astype(np.int64))


@dataclass
class WaitSplit:
    """Per waiting interval and cause (columns in ``causes`` order: ``CAUSES``, or
    ``REPORT_CAUSES`` when ``split_waits`` was given ``most``): ``us`` the microseconds of that
    cause; ``first``/``last`` (when asked for) the first moment of that cause and the end of
    its last piece, epoch microseconds (meaningless where ``us`` is 0)."""

    us: np.ndarray
    first: np.ndarray | None = None
    last: np.ndarray | None = None
    causes: tuple[str, ...] = CAUSES

    def seconds(self) -> np.ndarray:
        return self.us / 1e6


#: A VC's key (its name, or its index in an array of VCs).
K = TypeVar("K", bound=Hashable)


@dataclass
class MostHeld(Generic[K]):
    """The most the cluster can have held, for ``split_waits`` (module docstring, *Incomplete
    data*): ``steps`` over the same change points as the least, ``usage(key)`` a VC's GPUs per
    step; either None where it equals the least."""

    steps: Steps | None = None
    usage: Callable[[K], np.ndarray] | None = None


class _Locality:
    """``Steps.locality_causes`` per demand, over the union of the spans asked for so far."""

    def __init__(self, steps: Steps):
        self.steps = steps
        self.done: dict[int, tuple[int, int, np.ndarray]] = {}

    def codes(self, nv: int, lo: int, hi: int) -> np.ndarray:
        base = self.done.get(nv)
        if base is None or base[0] > lo or base[1] < hi:
            lo2, hi2 = (lo, hi) if base is None else (min(lo, base[0]), max(hi, base[1]))
            base = self.done[nv] = (lo2, hi2, self.steps.locality_causes(nv, lo2, hi2))
        return base[2][lo - base[0] : hi - base[0]]


def _with_quota(codes: np.ndarray, used: np.ndarray | None, nv: int, q: float) -> np.ndarray:
    """``codes`` with fair_share where ``used + nv > q`` (a new array: ``codes`` may be a
    cached one)."""
    if used is None:
        return codes
    if used.dtype.kind in "iu" and math.isfinite(q) and abs(q) < _EXACT:
        # Integer GPUs: used + nv > q <=> used > floor(q) - nv, compared without converting
        # a million steps to float per (VC, demand) (a third of split_waits' time).
        out = codes.copy()
        out[used > math.floor(q) - nv] = FAIR_SHARE
        return out
    return np.where(used + nv > q, np.int8(FAIR_SHARE), codes)


def split_waits(
    steps: Steps,
    key: np.ndarray,
    n: np.ndarray,
    a: np.ndarray,
    b: np.ndarray,
    usage: Callable[[K], np.ndarray],
    quota: Mapping[K, float | None] | None,
    with_bounds: bool = False,
    most: MostHeld[K] | None = None,
) -> WaitSplit:
    """Split waiting intervals ``[a, b)`` (epoch microseconds; empty or reversed intervals
    count 0) of jobs of VC ``key`` needing ``n`` GPUs by cause. ``usage(key)``: the VC's GPUs
    held per step (called once per VC that waited); ``quota``: GPUs per VC (missing VCs have
    quota 0; a VC mapped to None has a quota the data cannot give: at 0 every moment of its
    waits is fair-share, at an unbounded quota none is, so with ``most`` all of them are
    undetermined), None for no quotas (never fair-share).

    ``most`` (incomplete data, module docstring): ``steps``/``usage`` are the least held,
    ``most`` the most, ``n`` may be ``UNKNOWN_DEMAND``; a moment whose cause differs between
    the two is undetermined, and the columns are ``REPORT_CAUSES``. Without it, ``CAUSES``."""
    a = np.asarray(a, np.int64)
    b = np.asarray(b, np.int64)
    n = np.asarray(n, np.int64)
    causes = CAUSES if most is None else REPORT_CAUSES
    if most is None and (n == UNKNOWN_DEMAND).any():
        raise ValueError("an unknown demand needs the bounds of incomplete data (most=)")
    rows = len(a)
    us = np.zeros((rows, len(causes)), np.int64)
    first = np.zeros((rows, len(causes)), np.int64) if with_bounds else None
    last = np.zeros((rows, len(causes)), np.int64) if with_bounds else None
    pos = np.flatnonzero(b > a)
    if len(pos) == 0:
        return WaitSplit(us, first, last, causes)
    key = np.asarray(key)[pos]
    n = n[pos]
    ja = steps.index(a[pos])  # the steps holding each wait's first and last moment
    jb = steps.index(b[pos] - 1)
    least = _Locality(steps)
    most_loc = _Locality(most.steps) if most is not None and most.steps is not None else least
    for k in _unique(key):
        in_k = np.flatnonzero(key == k)
        used = usage(k) if quota is not None else None
        used_most = used
        if most is not None and most.usage is not None and quota is not None:
            used_most = most.usage(k)
        qk = quota.get(k, 0) if quota is not None else np.inf
        if qk is None and most is None:
            raise ValueError("an unknown quota needs the bounds of incomplete data (most=)")
        q = np.inf if qk is None else float(qk)
        for nv in np.unique(n[in_k]).tolist():
            sel = in_k[n[in_k] == nv]
            lo, hi = int(ja[sel].min()), int(jb[sel].max()) + 1
            n_least = 1 if nv == UNKNOWN_DEMAND else nv
            codes = _with_quota(least.codes(n_least, lo, hi), _span(used, lo, hi), n_least, q)
            if qk is None:
                codes = np.full(len(codes), UNDETERMINED, np.int8)
            elif most is not None:
                if nv == UNKNOWN_DEMAND:
                    # Any number of GPUs: past every quota, or (no quotas) beyond every free
                    # count; only a moment with that cause already at 1 GPU is decided.
                    top = CAPACITY if quota is None else FAIR_SHARE
                    codes = np.where(codes == top, codes, np.int8(UNDETERMINED))
                elif most_loc is not least or used_most is not used:
                    up = _with_quota(most_loc.codes(nv, lo, hi), _span(used_most, lo, hi), nv, q)
                    codes = np.where(codes == up, codes, np.int8(UNDETERMINED))
            idx = pos[sel]
            runs = _Runs(steps.bounds, lo, codes)
            runs.measure(a[idx], b[idx], ja[sel] - lo, jb[sel] - lo, idx, us, first, last)
    return WaitSplit(us, first, last, causes)


def _span(x: np.ndarray | None, lo: int, hi: int) -> np.ndarray | None:
    return None if x is None else x[lo:hi]


def seconds_where(steps: Steps, on: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Microseconds of each interval ``[a, b)`` spent in steps where ``on`` (bool per step)."""
    a = np.asarray(a, np.int64)
    b = np.asarray(b, np.int64)
    us = np.zeros((len(a), 2), np.int64)
    pos = np.flatnonzero(b > a)
    if len(pos):
        ja, jb = steps.index(a[pos]), steps.index(b[pos] - 1)
        runs = _Runs(steps.bounds, 0, np.asarray(on, np.int8))
        runs.measure(a[pos], b[pos], ja, jb, pos, us, None, None)
    return us[:, 1]


def _unique(key: np.ndarray) -> list[Any]:  # the keys' type is not in the array's
    return sorted(set(key.tolist()), key=str)


class _Runs:
    """A cause per step over steps ``lo..``, as runs of one cause."""

    def __init__(self, bounds: np.ndarray, lo: int, codes: np.ndarray):
        change = np.flatnonzero(codes[1:] != codes[:-1]) + 1
        self.rs = np.r_[0, change]  # first step of each run (from lo)
        self.rb = bounds[lo + self.rs]  # run starts (the first run of step 0 runs back)
        self.rc = codes[self.rs]
        self.re = np.r_[self.rb[1:], _NO_END]  # run ends (no wait passes the last one)
        self.length = np.r_[np.diff(self.rb), 0]

    def measure(
        self,
        a: np.ndarray,
        b: np.ndarray,
        ja: np.ndarray,
        jb: np.ndarray,
        idx: np.ndarray,
        us: np.ndarray,
        first: np.ndarray | None,
        last: np.ndarray | None,
    ) -> None:
        """Fill rows ``idx`` of the outputs for waits ``[a, b)`` whose first and last moments
        lie in steps ``ja``/``jb`` (counted from ``lo``)."""
        rb, rc, n_runs = self.rb, self.rc, len(self.rs)
        ia = np.searchsorted(self.rs, ja, side="right") - 1
        ib = np.searchsorted(self.rs, jb, side="right") - 1
        # The same for every cause: each wait's first and last run, their causes, and the
        # part of them inside the wait.
        ca, cb = rc[ia], rc[ib]
        part_a, part_b = a - rb[ia], b - rb[ib]
        for c in np.flatnonzero(np.bincount(rc, minlength=us.shape[1])).tolist():
            on = rc == c
            prefix = np.zeros(n_runs + 1, np.int64)  # time of cause c before each run
            np.cumsum(np.where(on, self.length, 0), out=prefix[1:])
            at_b = prefix[ib]
            at_b[cb == c] += part_b[cb == c]
            at_a = prefix[ia]
            at_a[ca == c] += part_a[ca == c]
            us[idx, c] = at_b - at_a
            if first is None or last is None:
                continue
            # The runs of cause c: the first at or after each wait's first run, the last at
            # or before its last run (none between them: k0 > k1).
            runs_c = np.flatnonzero(on)
            k0 = np.searchsorted(runs_c, ia)
            k1 = np.searchsorted(runs_c, ib, side="right") - 1
            ok = k0 <= k1
            j0 = runs_c[np.minimum(k0, len(runs_c) - 1)]
            j1 = runs_c[np.maximum(k1, 0)]
            # j0 == ia: from a itself (step 0 also runs back before its bound).
            first[idx, c] = np.where(ok, np.where(j0 == ia, a, rb[j0]), 0)
            last[idx, c] = np.where(ok, np.minimum(b, self.re[j1]), 0)
