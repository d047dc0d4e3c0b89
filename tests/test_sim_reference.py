"""A brute-force reference simulator, written from the rules in sim/engine.py's docstring
without its data structures (per-demand classes, free-GPU buckets, pass skipping, fast
path): every event time rescans every pending attempt and decides placements from numpy
arrays with ``locality.fits_strict``. The fast engine must agree event for event.

The rules it follows: per VC, attempts in (ready, sequence) order; an attempt that cannot
start (quota or placement) holds back the later attempts of the same GPU demand in that VC
for the rest of the phase (first come, first served per demand); relaxed placement once the
attempt's own job has waited its locality wait; borrowing up to the VC's cap."""

from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from philly_analyze.locality import fits_strict, servers_needed
from philly_analyze.sim.cluster import Cluster
from philly_analyze.sim.engine import EngineConfig, QueueEngine
from philly_analyze.sim.placement import FreeState
from philly_analyze.sim.slowdown import SlowdownModel
from philly_analyze.sim.workload import Workload


def ref_place(free, size, rack, free_gpus, n, relaxed):
    """Placement by the documented rules, or None."""
    if n > free.sum():
        return None
    largest = int(size.max())
    choice = None
    if fits_strict(free, size, n, rack):
        if n <= largest:
            ok = np.flatnonzero(free >= n)
            i = ok[np.lexsort((ok, free[ok]))[0]]
            choice = [(int(i), n)]
        else:
            k = servers_needed(n, largest)
            whole = (free == size) & (size == largest)
            racks = sorted(
                (int(whole[rack == r].sum()), r)
                for r in np.unique(rack)
                if whole[rack == r].sum() >= k
            )
            r = racks[0][1]
            servers = np.flatnonzero(whole & (rack == r))[:k]
            choice = [
                (int(s), largest if x < k - 1 else n - largest * (k - 1))
                for x, s in enumerate(servers)
            ]
    elif relaxed:
        order = sorted(np.flatnonzero(free > 0), key=lambda i: (-free[i], i))
        choice, left = [], n
        for i in order:
            take = min(int(free[i]), left)
            choice.append((int(i), take))
            left -= take
            if left == 0:
                break
    if choice is None:
        return None
    out = []
    for i, take in choice:
        gpus = sorted(free_gpus[i])[:take]
        free_gpus[i] -= set(gpus)
        free[i] -= take
        out.append((i, gpus))
    return out


def reference(wl: Workload, cluster: Cluster, cfg: EngineConfig, model: SlowdownModel):
    size = cluster.gpus.copy()
    rack = cluster.rack.copy()
    free = size.copy()
    free_gpus = [set(range(s)) for s in size]
    N = len(wl)
    vc = wl.vc.tolist() if cfg.quotas is not None else [0] * N
    used: dict[int, int] = {}
    pending: list[dict[str, int]] = []  # ready, seq, j, k
    ends = []  # (end, start_counter, j, k, placement)
    arrivals = list(range(N))
    out = []
    counter = 0
    ptr = wl.att_ptr
    last = [
        int(ptr[j + 1] - ptr[j] - 1)
        if cfg.max_retries is None
        else min(int(ptr[j + 1] - ptr[j] - 1), cfg.max_retries)
        for j in range(N)
    ]
    waits = cfg.locality_wait_by_job or [cfg.locality_wait_us] * N
    timeouts: list[int] = []

    def try_start(p, now, limit):
        nonlocal counter
        j = p["j"]
        n = int(wl.num_gpus[j])
        v = vc[j]
        if limit is not None and used.get(v, 0) + n > limit[v]:
            return "quota"
        pl = ref_place(free, size, rack, free_gpus, n, now >= p["ready"] + waits[j])
        if pl is None:
            return "place"
        intr = int(wl.att_dur_us[ptr[j] + p["k"]])
        racks = len({int(rack[m]) for m, _ in pl})
        f = model.factor(n, len(pl), racks) if len(pl) > 1 else 1.0
        end = now + round(intr * f)
        counter += 1
        ends.append((end, counter, j, p["k"], pl))
        used[v] = used.get(v, 0) + n
        out.append((j, p["k"], p["ready"], now, end, tuple((m, tuple(g)) for m, g in pl)))
        pending.remove(p)
        return "started"

    while arrivals or ends or pending:
        times = [e[0] for e in ends] + [int(wl.submit_us[a]) for a in arrivals[:1]]
        times += [t for t in timeouts]
        if not times:
            break  # pending forever (unscheduled)
        now = min(times)
        timeouts = [t for t in timeouts if t > now]
        for e in sorted([e for e in ends if e[0] == now], key=lambda e: e[1]):
            ends.remove(e)
            _, c, j, k, pl = e
            for m, gpus in pl:
                free[m] += len(gpus)
                free_gpus[m] |= set(gpus)
            used[vc[j]] -= int(wl.num_gpus[j])
            if k < last[j]:
                pending.append({"ready": now, "seq": N + c, "j": j, "k": k + 1})
        while arrivals and int(wl.submit_us[arrivals[0]]) == now:
            j = arrivals.pop(0)
            pending.append({"ready": now, "seq": j, "j": j, "k": 0})
        if cfg.quotas is None:
            held: set[int] = set()
            for p in sorted(pending, key=lambda p: (p["ready"], p["seq"])):
                n = int(wl.num_gpus[p["j"]])
                if n in held:
                    continue
                r = try_start(p, now, None)
                if r != "started":
                    if cfg.hol_blocking:
                        break
                    held.add(n)
        else:
            q = cfg.quotas
            phases: list[list[int] | None] = [q]  # None: no limit
            if cfg.borrow:
                phases.append(cfg.borrow_cap)
            for limit in phases:
                vcs = sorted(
                    {vc[p["j"]] for p in pending},
                    key=lambda v: (used.get(v, 0) / q[v] if q[v] else float(1 << 62), v),
                )
                for v in vcs:
                    held = set()
                    for p in sorted(
                        [p for p in pending if vc[p["j"]] == v],
                        key=lambda p: (p["ready"], p["seq"]),
                    ):
                        n = int(wl.num_gpus[p["j"]])
                        if n not in held and try_start(p, now, limit) != "started":
                            held.add(n)
        timeouts += [
            p["ready"] + waits[p["j"]]
            for p in pending
            if waits[p["j"]] > 0 and p["ready"] + waits[p["j"]] > now
        ]
    return sorted(out, key=lambda r: (r[3], r[0], r[1]))


def fast(wl, cluster, cfg, model):
    tr = QueueEngine(wl, FreeState(cluster), cfg, model).run()
    rows = [
        (j, k, ready, start, end, tuple((m, tuple(g)) for m, g in pl))
        for (j, k, ready, start, end, _, _), pl in zip(
            tr.columns().T.tolist(), tr.placements(), strict=True
        )
    ]
    return sorted(rows, key=lambda r: (r[3], r[0], r[1]))


@st.composite
def scenario(draw):
    racks = draw(st.integers(1, 3))
    shape = {2: draw(st.integers(0, 4)), 8: draw(st.integers(1, 4))}
    cluster = Cluster.from_counts(shape, racks=racks)
    nj = draw(st.integers(1, 25))
    nvc = draw(st.integers(1, 3))
    total = cluster.total_gpus
    jobs = []
    for i in range(nj):
        n = draw(st.sampled_from([1, 1, 2, 3, 4, 8, 12, 16]).filter(lambda g: g <= total))
        nat = draw(st.integers(1, 3))
        durs = [draw(st.integers(0, 50)) * 1_000_000 for _ in range(nat)]
        jobs.append(
            (
                f"j{i:02d}",
                draw(st.integers(0, 60)) * 1_000_000,
                f"vc{draw(st.integers(0, nvc - 1))}",
                n,
                durs,
            )
        )
    wl = Workload.from_columns(
        [j[0] for j in jobs],
        [j[1] for j in jobs],
        [j[2] for j in jobs],
        [j[3] for j in jobs],
        [j[4] for j in jobs],
    )
    mode = draw(st.sampled_from(["philly", "philly_noborrow", "fifo", "fifo_backfill", "relaxed"]))
    wait = 0 if mode == "relaxed" else draw(st.sampled_from([0, 5, 20])) * 1_000_000
    quotas = None
    cap = None
    per_job = None
    if mode.startswith("philly") or mode == "relaxed":
        quotas = [draw(st.integers(0, total)) for _ in wl.vc_names]
        if draw(st.booleans()):
            extra = draw(st.integers(0, total))
            cap = [q + extra for q in quotas]
        if mode != "relaxed" and draw(st.booleans()):
            per_job = [draw(st.integers(0, 40)) * 1_000_000 for _ in range(nj)]
    cfg = EngineConfig(
        quotas=quotas,
        borrow=mode != "philly_noborrow",
        borrow_cap=cap,
        hol_blocking=mode == "fifo",
        locality_wait_us=wait,
        locality_wait_by_job=per_job,
        max_retries=draw(st.sampled_from([None, 0, 1])),
    )
    model = SlowdownModel(cluster.largest, enabled=draw(st.booleans()), rack_slowdown=1.5)
    return wl, cluster, cfg, model


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenario())
def test_fast_engine_agrees_with_reference_event_for_event(sc):
    wl, cluster, cfg, model = sc
    assert fast(wl, cluster, cfg, model) == reference(wl, cluster, cfg, model)


def test_reference_agrees_on_a_busy_workload():
    """A larger fixed case with real queueing (hundreds of waits) under philly rules."""
    rng = np.random.default_rng(7)
    n = 300
    cluster = Cluster.from_counts({2: 6, 8: 5}, racks=2)
    g = rng.choice([1, 1, 1, 2, 4, 8, 16], n)
    wl = Workload.from_columns(
        [f"j{i:03d}" for i in range(n)],
        np.sort(rng.integers(0, 3600, n) * 1_000_000).tolist(),
        rng.choice(["a", "b", "c"], n).tolist(),
        g.tolist(),
        [[int(x) * 1_000_000 for x in rng.integers(30, 900, rng.integers(1, 3))] for _ in range(n)],
    )
    cfg = EngineConfig(quotas=[20, 20, 14], borrow=True, locality_wait_us=300_000_000)
    model = SlowdownModel(cluster.largest)
    got = fast(wl, cluster, cfg, model)
    assert sum(1 for r in got if r[3] > r[2]) > 100  # it really queued
    assert got == reference(wl, cluster, cfg, model)
    # Per-job locality waits (0 to 20 minutes) and a borrowing cap of 6 GPUs beyond quota.
    cfg.locality_wait_by_job = (rng.integers(0, 1200, n) * 1_000_000).tolist()
    cfg.borrow_cap = [26, 26, 20]
    got = fast(wl, cluster, cfg, model)
    assert sum(1 for r in got if r[3] > r[2]) > 100
    assert got == reference(wl, cluster, cfg, model)
