"""Invariants of every policy's schedule, on random workloads (hypothesis), checked from the
output tables alone (what a store reader sees), not from engine internals."""

from __future__ import annotations

import numpy as np
import pyarrow.compute as pc
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from philly_analyze.locality import fits_strict
from philly_analyze.sim import Cluster, Workload, simulate
from philly_analyze.sim.placement import FreeState


@st.composite
def workloads(draw):
    cluster = Cluster.from_counts(
        {2: draw(st.integers(0, 3)), 8: draw(st.integers(1, 3))}, racks=draw(st.integers(1, 2))
    )
    n = draw(st.integers(1, 30))
    total = cluster.total_gpus
    jobs = []
    for i in range(n):
        g = draw(st.sampled_from([1, 2, 4, 8, 16]).filter(lambda x: x <= total))
        durs = [draw(st.integers(1, 100)) * 1_000_000 for _ in range(draw(st.integers(1, 3)))]
        outs = ["failed"] * (len(durs) - 1) + [
            draw(st.sampled_from(["passed", "killed", "failed"]))
        ]
        jobs.append((f"j{i}", draw(st.integers(0, 100)) * 1_000_000, f"v{i % 3}", g, durs, outs))
    wl = Workload.from_columns(
        *[list(x) for x in zip(*jobs, strict=True)][:5], outcomes=[j[5] for j in jobs]
    )
    return wl, cluster


def _df(table):
    """A DataFrame with timestamps as int64 microseconds (exact, tz-free comparisons)."""
    import pyarrow as pa

    cols = {
        n: (c.cast(pa.int64()) if pa.types.is_timestamp(c.type) else c)
        for n, c in zip(table.column_names, table.columns, strict=True)
    }
    return pa.table(cols).to_pandas()


def _intervals_ok(placements, attempts) -> None:
    """No GPU is held by two attempts at once; gangs are all-or-nothing."""
    a = _df(attempts)
    p = _df(placements).merge(a, on=["job_id", "attempt_idx"])
    # Gang: an attempt holds exactly num_gpus GPUs, all from its start to its end.
    per = p.groupby(["job_id", "attempt_idx"]).size()
    want = a.set_index(["job_id", "attempt_idx"])["num_gpus"]
    assert (per.reindex(want.index).fillna(0) == want).all()
    for (_m, _g), grp in p.groupby(["machine_id", "gpu_idx"]):
        s = grp.sort_values("start_time")
        assert (s["start_time"].iloc[1:].to_numpy() >= s["end_time"].iloc[:-1].to_numpy()).all()


def _peak_usage(attempts) -> int:
    return _peak_usage_df(_df(attempts))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(workloads(), st.sampled_from(["philly", "relaxed", "fifo", "las", "srtf"]))
def test_schedule_invariants(wc, policy):
    wl, cluster = wc
    res = simulate(wl, cluster, policy, params={"slowdown": True})
    att, pl, jobs = res.attempts, res.placements, res.jobs
    # Never more GPUs in use than exist.
    assert _peak_usage(att) <= cluster.total_gpus
    _intervals_ok(pl, att)
    # Every job finishes exactly once: one final attempt, after every other of its attempts.
    a = _df(att)
    assert jobs.num_rows == len(wl)
    assert set(a["job_id"]) == set(wl.job_ids)
    last = a.sort_values("start_time").groupby("job_id").tail(1)
    assert len(last) == len(wl)
    assert (last["outcome"].isin(["passed", "killed", "failed"])).all()
    nonlast = a.drop(last.index)
    assert nonlast["outcome"].isin(["failed", "killed"]).all()
    # Attempts of a job never overlap.
    for _, g in a.sort_values("start_time").groupby("job_id"):
        assert (g["start_time"].iloc[1:].to_numpy() >= g["end_time"].iloc[:-1].to_numpy()).all()
    # No job starts before it was submitted.
    m = a.merge(_df(jobs)[["job_id", "submit_time"]], on="job_id")
    assert (m["start_time"] >= m["submit_time"]).all()
    if policy not in ("las", "srtf"):
        assert res.metrics["preemptions"] == 0
    _waiting_ok(res, a, policy)


def _waiting_ok(res, a, policy: str) -> None:
    """The true waiting causes add up to each attempt's wait (from its submit, or from the
    end of the job's previous row: retries and preemptions requeue at once), the metrics are
    their totals, and each engine waits only for the causes it can have: philly and relaxed
    start whatever the quota and a placement allow (never ``other``); las and srtf have no
    quotas and start every job whose GPUs are free (only ``capacity``)."""
    a = a.sort_values(["job_id", "start_time"]).merge(
        _df(res.jobs)[["job_id", "submit_time"]], on="job_id"
    )
    prev_end = a.groupby("job_id")["end_time"].shift()
    ready = prev_end.fillna(a["submit_time"]).astype("int64")
    want = ((a["start_time"] - ready) / 1e6).to_numpy()
    w = _df(res.waiting)
    got = w.groupby(["job_id", "attempt_idx"])["seconds"].sum()
    got = got.reindex(list(zip(a["job_id"], a["attempt_idx"], strict=True))).fillna(0.0)
    assert np.allclose(got.to_numpy(), want), (got.to_numpy(), want)
    # One row per (attempt, cause), inside the wait: start <= end, seconds <= end - start.
    assert not w.duplicated(["job_id", "attempt_idx", "cause"]).any()
    assert (w["seconds"] <= (w["end"] - w["start"]) / 1e6 + 1e-9).all()
    for cause in ("fair_share", "fragmentation", "capacity", "other"):
        total = float(w.loc[w["cause"] == cause, "seconds"].sum())
        assert res.metrics[f"{cause}_delay_s"] == pytest.approx(total)
    allowed = {
        "philly": {"fair_share", "fragmentation", "capacity"},
        "relaxed": {"fair_share", "capacity"},
        "las": {"capacity"},
        "srtf": {"capacity"},
        "fifo": {"fragmentation", "capacity", "other"},
    }[policy]
    assert set(w["cause"]) <= allowed, (policy, set(w["cause"]))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(workloads(), st.lists(st.integers(0, 20), min_size=3, max_size=3))
def test_quotas_respected_without_borrowing(wc, q):
    wl, cluster = wc
    quotas = {f"v{i}": q[i] for i in range(3)}
    res = simulate(wl, cluster, "philly", quotas, {"borrow": False})
    a = _df(res.attempts).merge(_df(res.jobs)[["job_id", "vc"]], on="job_id")
    for vc, g in a.groupby("vc"):
        assert _peak_usage_df(g) <= quotas[vc]
    # Jobs larger than their VC's quota can never start; they are reported, not lost.
    too_big = sum(1 for j in range(len(wl)) if wl.num_gpus[j] > quotas[wl.vc_names[wl.vc[j]]])
    assert res.metrics["jobs_unscheduled"] == too_big
    flags = res.jobs.column("flags").to_pylist()
    assert sum(1 for f in flags if f and "unscheduled" in f) == too_big


def _peak_usage_df(a) -> int:
    ev = sorted(
        # Ends sort before starts at the same time (negative delta first).
        [(t, -g) for t, g in zip(a["end_time"], a["num_gpus"], strict=True)]
        + [(t, g) for t, g in zip(a["start_time"], a["num_gpus"], strict=True)]
    )
    cur = peak = 0
    for _, d in ev:
        cur += d
        peak = max(peak, cur)
    return peak


@settings(max_examples=30, deadline=None)
@given(workloads(), st.sampled_from(["las", "srtf"]))
def test_preemptive_work_is_conserved(wc, policy):
    """With the slowdown off, a job's segments add up to exactly its attempts' durations."""
    wl, cluster = wc
    res = simulate(wl, cluster, policy, params={"slowdown": False})
    got = pc.sum(res.attempts.column("duration_s")).as_py()
    assert abs(got - wl.att_dur_us.sum() / 1e6) < 1e-3 * len(res.attempts)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.sampled_from([2, 4, 8]), min_size=1, max_size=8),
    st.integers(1, 3),
    st.lists(st.tuples(st.integers(1, 24), st.booleans()), max_size=12),
)
def test_free_state_matches_fits_strict(sizes, racks, ops):
    """The incremental free-GPU structure answers exactly what locality.fits_strict does."""
    cluster = Cluster.build([f"m{i}" for i in range(len(sizes))], sizes, racks)
    fs = FreeState(cluster)
    held = []
    for n, release in ops:
        if release and held:
            fs.release(held.pop(0))
        free = fs.free_array()
        for k in range(1, 25):
            assert fs.fits(k, relaxed=False) == fits_strict(free, cluster.gpus, k, cluster.rack)
        pl = fs.place_strict(n)
        assert (pl is not None) == fits_strict(free, cluster.gpus, n, cluster.rack)
        if pl is not None:
            assert sum(len(g) for _, g in pl) == n
            assert len({int(cluster.rack[m]) for m, _ in pl}) == 1
            held.append(pl)
    assert int(np.sum(fs.free_array())) == fs.free_total
