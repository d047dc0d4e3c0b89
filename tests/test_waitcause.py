"""The causes of waiting (``philly_analyze.waitcause``): the cluster-state sweep and the split
of waits by cause, on hand-made step functions and against brute force on random ones."""

from __future__ import annotations

import numpy as np
import pytest

from philly_analyze.waitcause import (
    CAUSES,
    REPORT_CAUSES,
    UNKNOWN_DEMAND,
    MostHeld,
    Steps,
    build_steps,
    server_events,
    split_waits,
    step_index,
)

S = 1_000_000


def _hand_steps() -> tuple[Steps, np.ndarray]:
    """Two 4-GPU servers. Change points 0, 10, 20, 30, 40 s; step 0 is before 0 (all free).

    step   span       free  max_free  whole  used(v)
    0      (..,0)     8     4         2      0
    1      [0,10)     0     0         0      4
    2      [10,20)    4     2         0      2
    3      [20,30)    4     4         1      2
    4      [30,40)    2     2         0      2
    5      [40,..)    8     4         2      0
    """
    times = np.array([0, 10, 20, 30, 40]) * S
    bounds = np.r_[times[0] - 1, times, times[-1] + 1]
    steps = Steps(
        bounds,
        free_total=np.array([8, 0, 4, 4, 2, 8]),
        max_free=np.array([4, 0, 2, 4, 2, 4]),
        whole=np.array([2, 0, 0, 1, 0, 2]),
        largest=4,
    )
    return steps, np.array([0, 4, 2, 2, 2, 0])


def _table(split, row: int) -> dict[str, tuple[float, float, float]]:
    return {
        c: (split.us[row, i] / S, split.first[row, i] / S, split.last[row, i] / S)
        for i, c in enumerate(CAUSES)
        if split.us[row, i] > 0
    }


def test_split_by_hand() -> None:
    steps, used = _hand_steps()
    a = np.array([5, 0, -5, 7]) * S
    b = np.array([45, 35, 3, 7]) * S
    n = np.array([4, 2, 1, 1])
    split = split_waits(steps, np.zeros(4, int), n, a, b, lambda v: used, {0: 6}, with_bounds=True)
    # n=4, quota 6, [5,45):
    #   [5,10) used 4+4 = 8 > 6 -> fair_share 5 s
    #   [10,20) 2+4 <= 6, 4 free, most on one server 2 -> fragmentation 10 s
    #   [20,30) a wholly free server -> other 10 s
    #   [30,40) 2 free < 4 -> capacity 10 s
    #   [40,45) everything free -> other 5 s: merged with [20,30) into one row of 15 s
    #   from 20 to 45 (end - start = 25 > 15: capacity came in between)
    assert _table(split, 0) == {
        "fair_share": (5, 5, 10),
        "fragmentation": (10, 10, 20),
        "capacity": (10, 30, 40),
        "other": (15, 20, 45),
    }
    # n=2 over [0,35): [0,10) 4+2 <= 6 but 0 free -> capacity 10 s; then a server with 2
    # free all along -> other 25 s.
    assert _table(split, 1) == {"capacity": (10, 0, 10), "other": (25, 10, 35)}
    # n=1 over [-5,3): before the first change everything is free (other 5 s), then 0 free.
    assert _table(split, 2) == {"other": (5, -5, 0), "capacity": (3, 0, 3)}
    # An empty wait counts nothing.
    assert split.us[3].sum() == 0
    # No quotas: row 0's fair-share moment [5,10) had 0 free GPUs -> capacity; the rest as
    # above: fragmentation 10, capacity 5 + 10, other 15.
    none = split_waits(steps, np.zeros(1, int), n[:1], a[:1], b[:1], lambda v: used, None)
    assert none.us[0].tolist() == [0, 10 * S, 15 * S, 15 * S]


def _brute_split(codes: np.ndarray, bounds: np.ndarray, a: int, b: int):
    """Every step's piece of [a, b) on its own, then summed per cause: us, first, last."""
    us = [0] * 4
    first: list[int | None] = [None] * 4
    last: list[int | None] = [None] * 4
    edges = [*bounds[:-1].tolist(), None]
    for j, c in enumerate(codes.tolist()):
        lo = -(1 << 62) if j == 0 else edges[j]
        hi = (1 << 62) if j == len(codes) - 1 else edges[j + 1]
        s, e = max(a, lo), min(b, hi)
        if e > s:
            us[c] += e - s
            first[c] = s if first[c] is None else first[c]
            last[c] = e
    return us, first, last


@pytest.mark.parametrize("seed", range(6))
def test_merged_pieces_keep_totals(seed: int) -> None:
    """Random step functions that change cause often: the merged rows' microseconds equal the
    sum of the unmerged per-step pieces, cause by cause, and each wait's causes add up to its
    length; first/last are the first piece's start and the last piece's end."""
    rng = np.random.default_rng(seed)
    k = int(rng.integers(1, 60))
    times = np.unique(rng.integers(0, 10_000, k))
    bounds = np.r_[times[0] - 1, times, times[-1] + 1]
    n_steps = len(bounds) - 1
    steps = Steps(
        bounds,
        free_total=rng.integers(0, 9, n_steps),
        max_free=rng.integers(0, 5, n_steps),
        whole=rng.integers(0, 3, n_steps),
        largest=4,
    )
    steps.max_free = np.minimum(steps.max_free, steps.free_total)
    used = {v: rng.integers(0, 8, n_steps) for v in range(3)}
    quota = {0: 3, 1: 6, 2: 0}
    rows = 300
    vc = rng.integers(0, 3, rows)
    n = rng.integers(1, 9, rows)
    a = rng.integers(-500, 10_500, rows)
    b = a + rng.integers(-10, 6_000, rows)
    split = split_waits(steps, vc, n, a, b, lambda v: used[v], quota, with_bounds=True)
    assert split.first is not None and split.last is not None  # with_bounds
    for r in range(rows):
        codes = steps.locality_causes(int(n[r]))
        codes = np.where(used[vc[r]] + n[r] > quota[vc[r]], 0, codes)
        us, first, last = _brute_split(codes, bounds, int(a[r]), int(b[r]))
        assert split.us[r].tolist() == us, r
        assert split.us[r].sum() == max(int(b[r] - a[r]), 0)
        for c in range(4):
            if us[c]:
                assert (split.first[r, c], split.last[r, c]) == (first[c], last[c]), (r, c)


@pytest.mark.parametrize("seed", range(8))
def test_build_steps_matches_brute_force(seed: int) -> None:
    """Random holdings (some overbooking a server) on servers of 2, 4 and 8 GPUs in racks:
    free GPUs, most free on one server and most wholly free largest servers in one rack,
    at every step, against a recount of every holding."""
    rng = np.random.default_rng(seed)
    m = int(rng.integers(1, 7))
    sizes = rng.choice([2, 4, 8], m)
    rack = rng.integers(0, 3, m)
    h = int(rng.integers(0, 40))
    mi = rng.integers(0, m, h)
    start = rng.integers(0, 100, h)
    end = start + rng.integers(-3, 40, h)
    end[rng.random(h) < 0.1] = np.iinfo(np.int64).max  # no end: held to the end
    count = np.array([int(rng.integers(1, sizes[i] + 2)) for i in mi], dtype=np.int64)
    ev = server_events(mi, start, end, count)
    times = np.unique(np.r_[ev[1], 0, 150])
    steps = build_steps(times, sizes, rack, ev[0], step_index(times, ev[1]), ev[2], ev[3])
    largest = int(sizes.max())
    for j in range(steps.steps):
        t = steps.bounds[j]
        busy = np.zeros(m, np.int64)
        for i, s, e, c in zip(mi, start, end, count, strict=True):
            if s <= t < e:
                busy[i] += c
        free = np.clip(sizes - busy, 0, sizes)
        whole = (free == sizes) & (sizes == largest)
        best = max(int((whole & (rack == r)).sum()) for r in range(3))
        got = (steps.free_total[j], steps.max_free[j], steps.whole[j])
        assert got == (free.sum(), free.max(), best), (seed, j)


# ------------------------------------------------------------------------ incomplete data
def _secs(split, row: int) -> dict[str, float]:
    return {c: split.us[row, i] / S for i, c in enumerate(split.causes) if split.us[row, i]}


def test_unknown_demand_decides_only_what_any_demand_gives() -> None:
    """The hand steps, VC quota 6, a job of unknown demand (at least 1 GPU, at most any):
    step 1 [0,10) used 4, 0 free: 1 GPU is capacity (4 + 1 <= 6), 3 GPUs fair-share (4 + 3 >
    6): undetermined. Quota 4 there: 4 + 1 > 4, fair-share whatever the demand. Steps 2-5:
    GPUs free and quota left: 1 GPU waits for "other", more for fragmentation, capacity or
    fair-share: undetermined. Without quotas, step 1 (0 free) is capacity for any demand.
    (Before, an unknown demand was taken as 0 GPUs: never fair-share, capacity or
    fragmentation, so every such moment read "other".)"""
    steps, used = _hand_steps()
    vc = np.zeros(3, int)
    n = np.full(3, UNKNOWN_DEMAND)
    a, b = np.array([0, 0, 0]) * S, np.array([10, 10, 40]) * S
    most: MostHeld[int] = MostHeld()  # nothing else unknown: the most held is the least
    split = split_waits(steps, vc, n, a, b, lambda v: used, {0: 6}, most=most)
    assert split.causes == REPORT_CAUSES
    assert _secs(split, 0) == {"undetermined": 10}
    assert _secs(split, 2) == {"undetermined": 40}
    at_quota = split_waits(steps, vc, n, a, b, lambda v: used, {0: 4}, most=most)
    # quota 4: fair-share wherever used(v) >= 4, i.e. step 1 only.
    assert _secs(at_quota, 0) == {"fair_share": 10}
    assert _secs(at_quota, 2) == {"fair_share": 10, "undetermined": 30}
    free = split_waits(steps, vc, n, a, b, lambda v: used, None, most=most)
    assert _secs(free, 0) == {"capacity": 10}
    assert _secs(free, 2) == {"capacity": 10, "undetermined": 30}
    # Without the bounds an unknown demand is refused, never guessed.
    with pytest.raises(ValueError, match="unknown demand"):
        split_waits(steps, vc, n, a, b, lambda v: used, {0: 6})


def test_two_bounds_of_the_cluster_state() -> None:
    """The hand steps as the least held (servers A and B); the most adds an attempt of VC 1
    whose end is unknown, holding all of server A (4 GPUs) from 20 s on. In the least, A is
    the wholly free server of step 3 and holds step 4's 2 free GPUs; so in the most:

    step   span      free  max_free  whole  used(VC 1)
    3      [20,30)   0     0         0      4
    4      [30,40)   0     0         0      4
    5      [40,..)   4     4         1      4
    (steps 0-2 as the least). Quotas VC 0 = 6, VC 1 = 4. Waits:
    - 2 GPUs, VC 0, [20,45): least other throughout; most capacity (0 free) on [20,40), other
      on [40,45): 20 s undetermined, 5 s other;
    - 1 GPU, VC 1, [20,45): least other; most 4 + 1 > 4, fair-share: 25 s undetermined;
    - 4 GPUs, VC 0, [10,20), before the attempt began: fragmentation in both (4 free as 2 + 2);
    - 1 GPU, VC 0, [40,45): one server has 4 free in both: 5 s other."""
    steps, used = _hand_steps()
    most_steps = Steps(
        steps.bounds,
        free_total=np.array([8, 0, 4, 0, 0, 4]),
        max_free=np.array([4, 0, 2, 0, 0, 4]),
        whole=np.array([2, 0, 0, 0, 0, 1]),
        largest=4,
    )
    usage = {0: used, 1: np.zeros(6, int)}
    usage_most = {0: used, 1: np.array([0, 0, 0, 4, 4, 4])}
    most: MostHeld[int] = MostHeld(most_steps, lambda v: usage_most[v])
    vc = np.array([0, 1, 0, 0])
    n = np.array([2, 1, 4, 1])
    a = np.array([20, 20, 10, 40]) * S
    b = np.array([45, 45, 20, 45]) * S
    split = split_waits(steps, vc, n, a, b, lambda v: usage[v], {0: 6, 1: 4}, most=most)
    assert _secs(split, 0) == {"other": 5, "undetermined": 20}
    assert _secs(split, 1) == {"undetermined": 25}
    assert _secs(split, 2) == {"fragmentation": 10}
    assert _secs(split, 3) == {"other": 5}
    # Quota 0 for VC 0: fair-share at both bounds, whatever the cluster held.
    zero = split_waits(steps, vc, n, a, b, lambda v: usage[v], {0: 0, 1: 4}, most=most)
    assert _secs(zero, 0) == {"fair_share": 25}
    # The same waits without bounds: the four causes, as the replay computes them.
    plain = split_waits(steps, vc, n, a, b, lambda v: usage[v], {0: 6, 1: 4})
    assert plain.causes == CAUSES and plain.us.shape == (4, 4)
    assert _secs(plain, 0) == {"other": 25}
