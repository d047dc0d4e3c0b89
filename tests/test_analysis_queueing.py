"""Queueing delay and its decomposition on stores whose answer is worked out by hand."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from philly_analyze.analysis import run
from philly_analyze.analysis.common import Context, Scope
from philly_analyze.analysis.queueing import decompose, decompose_store
from philly_analyze.locality import fits_strict, fits_strict_headroom
from philly_analyze.store import Store
from tests.analysis_stores import Att, Job, write_store

E8 = list(range(8))
QUOTAS = {"a": 8, "b": 24, "c": 1}


def _scenario(path: Path) -> Path:
    """Machines m0, m1, m2 (8 GPUs), s0, s1 (2 GPUs); times in minutes.

    Background (no wait): ja1 a/8 GPUs m0 [0,60); jb1 b/4 m1 [0,30); jb2 b/2 s0 [0,90);
    jc1 c/1 m2 [0,40).
    Waiting jobs (quotas a=8, b=24, c=1):
    - jwa a/2 GPUs, submit 10, runs m0 [60,70): a holds 8 the whole wait, 8+2 > 8 -> 50 min
      fair-share (a placement was free on m2 all along: quota decides).
    - jwb b/16 GPUs, submit 20, runs m1+m2 [45,80): b holds 6 then 2, +16 <= 24 -> quota
      left. Free GPUs in the cluster: [20,25) m1 4 + m2 7 + s1 2 = 13 < 16 and [25,30)
      4 + 7 + 1 (jr's retry on s1) = 12 < 16 -> capacity; [30,35) m1 8 + m2 7 + s1 1 = 16 and
      [35,40) 17: enough, but one wholly free 8-GPU server (m1) -> fragmentation; [40,45) m1
      and m2 -> fits. So 10 min capacity + 10 min fragmentation + 5 min other.
    - jcc c/8 GPUs, submit 0, runs m0 [70,100): c's quota is 1 < 8, so every minute is
      fair-share (70 min), including [0,30) and [45,70) where no 8-GPU server was free
      either: when both hold, fair-share wins.
    - jo b/1 GPU, submit 50, runs s1 [55,56): b holds 18, +1 <= 24; s1 free -> 5 min other.
    - jr b/1 GPU: attempt 0 s1 [0,10) failed, attempt 1 s1 [25,35): retry wait [10,25) with
      b at 6 (+1 <= 24) and s1 free -> 15 min other; first start 0 = submit (no delay).
    """
    jobs = [
        Job("ja1", "a", "u1", "passed", 0, [Att(0, 60, "passed", {"m0": E8})]),
        Job("jb1", "b", "u2", "passed", 0, [Att(0, 30, "passed", {"m1": [0, 1, 2, 3]})]),
        Job("jb2", "b", "u2", "passed", 0, [Att(0, 90, "passed", {"s0": [0, 1]})]),
        Job("jc1", "c", "u3", "killed", 0, [Att(0, 40, "killed", {"m2": [0]})]),
        Job("jwa", "a", "u1", "passed", 10, [Att(60, 70, "passed", {"m0": [0, 1]})]),
        Job("jwb", "b", "u2", "passed", 20, [Att(45, 80, "passed", {"m1": E8, "m2": E8})]),
        Job("jcc", "c", "u3", "passed", 0, [Att(70, 100, "passed", {"m0": E8})]),
        Job("jo", "b", "u4", "passed", 50, [Att(55, 56, "passed", {"s1": [0]})]),
        Job(
            "jr",
            "b",
            "u4",
            "passed",
            0,
            [Att(0, 10, "failed", {"s1": [1]}), Att(25, 35, "passed", {"s1": [1]})],
        ),
    ]
    machines = {"m0": 8, "m1": 8, "m2": 8, "s0": 2, "s1": 2}
    return write_store(path, machines=machines, jobs=jobs)


@pytest.fixture(scope="module")
def scenario(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _scenario(tmp_path_factory.mktemp("q") / "store")


def test_decomposition_by_hand(scenario: Path) -> None:
    with Store(scenario, read_only=True) as s:
        per = decompose_store(s, QUOTAS).set_index("job_id")
    expect = {  # fair_share_s, fragmentation_s, capacity_s, other_s, cause
        "jwa": (50 * 60, 0, 0, 0, "fair_share"),
        # ties between fragmentation and capacity go to fragmentation (listed first)
        "jwb": (0, 10 * 60, 10 * 60, 5 * 60, "fragmentation"),
        "jcc": (70 * 60, 0, 0, 0, "fair_share"),
        "jo": (0, 0, 0, 5 * 60, "other"),
        "jr": (0, 0, 0, 15 * 60, "other"),
        "ja1": (0, 0, 0, 0, "none"),
    }
    for job, (fair, frag, cap, other, cause) in expect.items():
        row = per.loc[job]
        assert row["fair_share_s"] == pytest.approx(fair), job
        assert row["fragmentation_s"] == pytest.approx(frag), job
        assert row["capacity_s"] == pytest.approx(cap), job
        assert row["other_s"] == pytest.approx(other), job
        assert row["cause"] == cause, job
    # The paper's view: jwb's 20 min of fragmentation + capacity beat its 5 min of other.
    assert per.loc["jwb", "cause_paper"] == "fragmentation"
    assert per.loc["jo", "cause_paper"] == "other"
    # jr waited only for its retry: 0 before the first start, 15 min after the failure.
    assert per.loc["jr", "queue_delay_s"] == 0
    assert per.loc["jr", "retry_wait_s"] == pytest.approx(900)
    assert per.loc["jwb", "gpu_bucket"] == ">8"
    # Two-way reading (other counts as fragmentation): jo and jr become fragmentation.
    assert per.loc["jo", "cause_two_way"] == "fragmentation"
    assert per.loc["jwa", "cause_two_way"] == "fair_share"
    assert per.loc["ja1", "cause_two_way"] == "none"
    assert len(per) == 9  # every started job, joinable on job_id


def test_table2_counts(scenario: Path) -> None:
    with Store(scenario, read_only=True) as s:
        rep = run(s, ["queueing"], vc_quotas=QUOTAS)
    t2 = rep["queueing"].frame("table2").set_index("delay_type")
    # fair-share: jwa (2-4), jcc (5-8); fragmentation: jwb (>8); other: jo, jr (1 GPU).
    assert t2.loc[
        "fair_share", ["gpus_1", "gpus_2_4", "gpus_5_8", "gpus_gt8"]
    ].to_numpy().tolist() == [
        0,
        1,
        1,
        0,
    ]
    assert t2.loc[
        "fragmentation", ["gpus_1", "gpus_2_4", "gpus_5_8", "gpus_gt8"]
    ].to_numpy().tolist() == [
        0,
        0,
        0,
        1,
    ]
    assert t2.loc["other", "gpus_1"] == 2
    assert t2.loc["fair_share", "paper_gpus_2_4"] == 5168  # the paper's count beside ours
    secs = rep["queueing"].frame("wait_seconds").set_index("gpu_bucket")
    # All waiting: 50 + 25 + 70 + 5 + 15 = 165 min; fair-share 120 min = 72.73%.
    assert secs.loc["all", "wait_hours"] == pytest.approx(165 / 60)
    assert secs.loc["all", "fair_share_pct"] == pytest.approx(100 * 120 / 165)
    assert secs.loc["all", "fragmentation_pct"] == pytest.approx(100 * 10 / 165)
    assert secs.loc["all", "capacity_pct"] == pytest.approx(100 * 10 / 165)
    assert secs.loc["all", "other_pct"] == pytest.approx(100 * 25 / 165)
    causes = rep["queueing"].frame("table2_causes").set_index("delay_type")
    assert causes["all"].to_dict() == {
        "fair_share": 2,
        "fragmentation": 1,
        "capacity": 0,
        "other": 2,
        "undetermined": 0,  # complete data: every moment decided
    }
    assert secs.loc["all", "undetermined_pct"] == 0.0


def test_delay_percentiles_keep_zero_delays(scenario: Path) -> None:
    with Store(scenario, read_only=True) as s:
        rep = run(s, ["queueing"], vc_quotas=QUOTAS)
    d = rep["queueing"].frame("delay_by_vc").set_index(["vc", "gpu_bucket"])
    # VC b jobs' first-start delays (minutes): jb1 0, jb2 0, jwb 25, jo 5, jr 0.
    row = d.loc[[("b", "all")]].iloc[0]
    assert row["jobs"] == 5 and row["waiting_jobs"] == 2
    assert row["mean_min"] == pytest.approx(6.0)
    assert row["p50_min"] == pytest.approx(0.0)  # sorted 0,0,0,5,25: median 0
    # numpy linear p90: position 0.9 * 4 = 3.6 -> 5 + 0.6 * (25 - 5) = 17
    assert row["p90_min"] == pytest.approx(17.0)
    att = rep["queueing"].frame("delay_by_attempt").set_index(["wait", "gpu_bucket"])
    assert att.loc[("retry", "all"), "attempts"] == 1
    assert att.loc[("retry", "all"), "mean_min"] == pytest.approx(15.0)


def test_scope_keeps_whole_cluster_state(scenario: Path) -> None:
    """--vc b reports only b's jobs, but a's and c's jobs still occupy the cluster."""
    with Store(scenario, read_only=True) as s:
        per = decompose_store(s, QUOTAS, Scope(vcs=("b",))).set_index("job_id")
    assert set(per.index) == {"jb1", "jb2", "jwb", "jo", "jr"}
    assert per.loc["jwb", "fragmentation_s"] == pytest.approx(600)
    assert per.loc["jwb", "capacity_s"] == pytest.approx(600)
    assert per.loc["jwb", "other_s"] == pytest.approx(300)


def test_missing_quota_is_zero_and_noted(scenario: Path) -> None:
    with Store(scenario, read_only=True) as s:
        rep = run(s, ["queueing"], vc_quotas={"a": 8, "b": 24})
        per = decompose_store(s, {"a": 8, "b": 24}).set_index("job_id")
    assert any("without a quota" in n and "c" in n for n in rep["queueing"].notes)
    assert per.loc["jcc", "cause"] == "fair_share"


def test_quota_file_and_inferred(scenario: Path, tmp_path: Path) -> None:
    qf = tmp_path / "q.csv"
    qf.write_text("vc,gpus\na,8\nb,24\nc,1\n")
    with Store(scenario, read_only=True) as s:
        from_file = decompose_store(s, str(qf))
        inferred = run(s, ["queueing"])
    assert from_file.set_index("job_id").loc["jwb", "cause"] == "fragmentation"
    assert any("inferred" in n for n in inferred["queueing"].notes)


def test_racks_make_fragmentation(tmp_path: Path) -> None:
    """Two wholly free 8-GPU servers in different racks do not fit a 16-GPU job when racks
    are known (fragmentation 10 min); with racks unknown they do (other 10 min)."""
    jobs = [Job("j16", "x", "u", "passed", 0, [Att(10, 20, "passed", {"r1": E8, "r2": E8})])]
    for racks, kind in (({"r1": "A", "r2": "B"}, "fragmentation"), (None, "other")):
        p = write_store(tmp_path / f"s{kind}", machines={"r1": 8, "r2": 8}, jobs=jobs, racks=racks)
        with Store(p, read_only=True) as s:
            row = decompose_store(s, {"x": 100}).set_index("job_id").loc["j16"]
        assert row[f"{kind}_s"] == pytest.approx(600)
        assert row["cause"] == kind


def test_paper_view_sums_fragmentation_and_capacity(tmp_path: Path) -> None:
    """The paper's Table 2 view picks the largest of fair-share, fragmentation + capacity and
    other; it is not the four-way main cause renamed. Two 4-GPU servers m0, m1; quotas a=4,
    b=8; w (a, 4 GPUs) is submitted at 0 and starts at 45 on m0:
      [0,20)  a0 (a, 4 GPUs) holds m0: a at 4 + 4 > 4            -> fair-share 20 min
      [20,35) b1 on m0, b2 on m1: quota left, 0 GPUs free         -> capacity 15 min
      [35,45) b3 on m0 0-1, b4 on m1 0-1: 4 free as 2 + 2          -> fragmentation 10 min
    Four ways, fair-share (20 min) leads; the paper's two ways, fragmentation (25 min)."""
    q4 = [0, 1, 2, 3]
    jobs = [
        Job("a0", "a", "u", "passed", 0, [Att(0, 20, "passed", {"m0": q4})]),
        Job("b2", "b", "u", "passed", 0, [Att(0, 35, "passed", {"m1": q4})]),
        Job("b1", "b", "u", "passed", 20, [Att(20, 35, "passed", {"m0": q4})]),
        Job("b3", "b", "u", "passed", 35, [Att(35, 45, "passed", {"m0": [0, 1]})]),
        Job("b4", "b", "u", "passed", 35, [Att(35, 45, "passed", {"m1": [0, 1]})]),
        Job("w", "a", "u", "passed", 0, [Att(45, 55, "passed", {"m0": q4})]),
    ]
    path = write_store(tmp_path / "s", machines={"m0": 4, "m1": 4}, jobs=jobs)
    quotas = {"a": 4, "b": 8}
    with Store(path, read_only=True) as s:
        row = decompose_store(s, quotas).set_index("job_id").loc["w"]
        rep = run(s, ["queueing"], vc_quotas=quotas)
    secs = [row[f"{c}_s"] for c in ("fair_share", "capacity", "fragmentation", "other")]
    assert secs == [pytest.approx(x * 60) for x in (20, 15, 10, 0)]
    assert (row["cause"], row["cause_paper"], row["cause_two_way"]) == (
        "fair_share",
        "fragmentation",
        "fragmentation",
    )
    paper = rep["queueing"].frame("table2").set_index("delay_type")["gpus_2_4"].to_dict()
    four = rep["queueing"].frame("table2_causes").set_index("delay_type")["gpus_2_4"].to_dict()
    assert paper == {"fair_share": 0, "fragmentation": 1, "other": 0, "undetermined": 0}
    assert four == {
        "fair_share": 1,
        "fragmentation": 0,
        "capacity": 0,
        "other": 0,
        "undetermined": 0,
    }


def test_fits_strict_headroom_matches_fits_strict() -> None:
    rng = np.random.default_rng(5)
    for _ in range(400):
        m = int(rng.integers(1, 7))
        size = rng.choice([2, 4, 8], m)
        free = np.array([int(rng.integers(0, s + 1)) for s in size])
        rack = rng.integers(0, 3, m) if rng.random() < 0.5 else None
        largest = int(size.max())
        whole = (free == size) & (size == largest)
        best = (
            int(whole.sum())
            if rack is None
            else int(np.bincount(rack[whole], minlength=3).max(initial=0))
        )
        for n in range(0, 33):
            assert bool(fits_strict_headroom(free.max(), best, largest, n)) == fits_strict(
                free, size, n, rack
            ), (free, size, rack, n)


# ----------------------------------------------------------------- brute force comparison
@st.composite
def workloads(draw: st.DrawFn) -> tuple[dict[str, int], dict[str, str] | None, list[Job], dict]:
    sizes = draw(st.lists(st.sampled_from([2, 8]), min_size=1, max_size=4))
    machines = {f"m{i}": s for i, s in enumerate(sizes)}
    racks = (
        {m: draw(st.sampled_from(["A", "B"])) for m in machines} if draw(st.booleans()) else None
    )
    jobs = []
    for k in range(draw(st.integers(1, 8))):
        vc = draw(st.sampled_from(["a", "b"]))
        submit = draw(st.integers(0, 30))
        atts = []
        t0 = submit
        for _ in range(draw(st.integers(1, 2))):
            start = t0 + draw(st.integers(0, 20))
            end = start + draw(st.integers(1, 25))
            gpus: dict[str, list[int]] = {}
            for m in draw(st.lists(st.sampled_from(list(machines)), min_size=1, max_size=2)):
                gpus[m] = list(range(draw(st.integers(1, machines[m]))))
            atts.append(Att(start, end, "failed", gpus))
            t0 = end
        jobs.append(Job(f"j{k}", vc, "u", "passed", submit, atts))
    quotas = {"a": draw(st.integers(0, 12)), "b": draw(st.integers(0, 12))}
    return machines, racks, jobs, quotas


def _brute(machines, racks, jobs, quotas) -> dict[str, tuple[float, float, float, float]]:
    """Minute by minute: rebuild free GPUs and VC usage, classify each waiting minute
    (fair-share, fragmentation, capacity, other)."""
    names = list(machines)
    size = np.array([machines[m] for m in names])
    rack = None
    if racks:
        codes = {r: i for i, r in enumerate(sorted(set(racks.values())))}
        rack = np.array([codes[racks[m]] for m in names])
    runs = [(j.vc, a) for j in jobs for a in j.attempts]
    out = {}
    for j in jobs:
        tot = [0.0, 0.0, 0.0, 0.0]
        prev = j.submit
        for a in j.attempts:
            n = sum(len(g) for g in a.gpus.values())
            for minute in range(int(prev), int(a.start)):
                busy = np.zeros(len(names), int)
                used = 0
                for vc, r in runs:
                    if r.start <= minute < r.end:
                        for m, g in r.gpus.items():
                            busy[names.index(m)] += len(g)
                        if vc == j.vc:
                            used += sum(len(g) for g in r.gpus.values())
                free = np.clip(size - busy, 0, size)
                if used + n > quotas[j.vc]:
                    tot[0] += 60
                elif free.sum() < n:
                    tot[2] += 60
                elif not fits_strict(free, size, n, rack):
                    tot[1] += 60
                else:
                    tot[3] += 60
            prev = a.end
        out[j.job_id] = (tot[0], tot[1], tot[2], tot[3])
    return out


@settings(
    max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(w=workloads())
def test_sweep_matches_brute_force(tmp_path_factory: pytest.TempPathFactory, w) -> None:
    machines, racks, jobs, quotas = w
    path = write_store(
        tmp_path_factory.mktemp("h") / "s", machines=machines, jobs=jobs, racks=racks
    )
    with Store(path, read_only=True) as s, Context(s, vc_quotas=quotas) as ctx:
        per = decompose(ctx).set_index("job_id")
    for job_id, expect in _brute(machines, racks, jobs, quotas).items():
        row = per.loc[job_id]
        got = tuple(row[f"{k}_s"] for k in ("fair_share", "fragmentation", "capacity", "other"))
        assert got == pytest.approx(expect), job_id


def test_job_ended_in_queue_counts_with_scheduler_log(tmp_path: Path) -> None:
    """q1 (a/4 GPUs) is submitted at 10 and killed in the queue at 40 (the RM log's KILLED
    transition); b1 holds all of m0 [0,60). Quota a=100 is not the limit; the cluster has 0
    free GPUs < 4 -> 30 min capacity. It counts in Table 2, not in the delay percentiles."""
    import pyarrow as pa

    from tests.analysis_stores import t

    jobs = [
        Job("b1", "a", "u", "passed", 0, [Att(0, 60, "passed", {"m0": E8})]),
        Job("q1", "a", "u", "killed", 10, [], num_gpus=4),
    ]
    ev = {
        "time": pa.array([t(10), t(40)], pa.timestamp("us", tz="UTC")),
        "job_id": ["q1", "q1"],
        "entity": ["app", "app"],
        "from_state": ["NEW", "ACCEPTED"],
        "to_state": ["SUBMITTED", "KILLED"],
    }
    p = write_store(tmp_path / "s", machines={"m0": 8}, jobs=jobs, extra={"scheduler_events": ev})
    with Store(p, read_only=True) as s:
        per = decompose_store(s, {"a": 100}).set_index("job_id")
        rep = run(s, ["queueing"], vc_quotas={"a": 100})
    q = per.loc["q1"]
    assert not q["started"] and q["wait_s"] == pytest.approx(1800)
    assert q["capacity_s"] == pytest.approx(1800) and q["cause"] == "capacity"
    t2 = rep["queueing"].frame("table2").set_index("delay_type")
    assert t2.loc["fragmentation", "gpus_2_4"] == 1  # the paper's fragmentation holds capacity
    t2c = rep["queueing"].frame("table2_causes").set_index("delay_type")
    assert t2c.loc["capacity", "gpus_2_4"] == 1
    d = rep["queueing"].frame("delay_by_vc").set_index(["vc", "gpu_bucket"])
    assert d.loc[("all", "all"), "jobs"] == 1  # only b1 started
    att = rep["queueing"].frame("delay_by_attempt").set_index(["wait", "gpu_bucket"])
    assert att.loc[("unstarted", "all"), "mean_min"] == pytest.approx(30)
    assert any("1 of them have an end in the scheduler log" in n for n in rep["queueing"].notes)


# ------------------------------------------------------------------------ incomplete data
def _scheduler_log(ends: dict[str, tuple[float, float]]) -> dict:
    """The RM log's submit and KILLED transitions of jobs that ended in the queue."""
    import pyarrow as pa

    from tests.analysis_stores import t

    times, ids, froms, tos = [], [], [], []
    for job_id, (submit, end) in ends.items():
        times += [t(submit), t(end)]
        ids += [job_id, job_id]
        froms += ["NEW", "ACCEPTED"]
        tos += ["SUBMITTED", "KILLED"]
    return {
        "time": pa.array(times, pa.timestamp("us", tz="UTC")),
        "job_id": ids,
        "entity": ["app"] * len(ids),
        "from_state": froms,
        "to_state": tos,
    }


def test_unknown_demand_is_not_zero_gpus(tmp_path: Path) -> None:
    """Jobs that ended in the queue before any attempt, GPU demand unknown (at least 1 GPU,
    at most any number). m0 (8 GPUs) is held by b1 [0,60), m1 (2 GPUs) by z1 [0,80), so 0
    GPUs are free until 60. Quotas a=100, z=2.
    - q1 (a) waits [10,40): a uses 0 of 100. At 1 GPU capacity (0 free), at 101 GPUs
      fair-share: the data cannot tell -> 30 min undetermined.
    - q2 (z) waits [10,40): z holds 2 of its 2: even 1 GPU is past the quota -> 30 min
      fair-share, decided.
    - q3 (a) waits [60,70): m0 free: at 1 GPU other, at 9 capacity, at 101 fair-share ->
      10 min undetermined.
    Before, an unknown demand counted as 0 GPUs: all three read 'other' (70 min)."""
    jobs = [
        Job("b1", "b", "u", "passed", 0, [Att(0, 60, "passed", {"m0": E8})]),
        Job("z1", "z", "u", "passed", 0, [Att(0, 80, "passed", {"m1": [0, 1]})]),
        Job("q1", "a", "u", "killed", 10, []),
        Job("q2", "z", "u", "killed", 10, []),
        Job("q3", "a", "u", "killed", 60, []),
    ]
    ev = _scheduler_log({"q1": (10, 40), "q2": (10, 40), "q3": (60, 70)})
    p = write_store(
        tmp_path / "s", machines={"m0": 8, "m1": 2}, jobs=jobs, extra={"scheduler_events": ev}
    )
    quotas = {"a": 100, "b": 100, "z": 2}
    with Store(p, read_only=True) as s:
        per = decompose_store(s, quotas).set_index("job_id")
        rep = run(s, ["queueing"], vc_quotas=quotas)
    cols = [f"{c}_s" for c in ("fair_share", "fragmentation", "capacity", "other")]
    assert per.loc["q1", [*cols, "undetermined_s"]].to_numpy().tolist() == [0, 0, 0, 0, 1800]
    assert per.loc["q2", [*cols, "undetermined_s"]].to_numpy().tolist() == [1800, 0, 0, 0, 0]
    assert per.loc["q3", [*cols, "undetermined_s"]].to_numpy().tolist() == [0, 0, 0, 0, 600]
    assert per.loc[["q1", "q2", "q3"], "cause"].tolist() == [
        "undetermined",
        "fair_share",
        "undetermined",
    ]
    t2 = rep["queueing"].frame("table2").set_index("delay_type")["gpus_unknown"].to_dict()
    assert t2 == {"fair_share": 1, "fragmentation": 0, "other": 0, "undetermined": 2}
    notes = " ".join(rep["queueing"].notes)
    assert "3 waits (1.2 h) are of jobs whose GPU demand is unknown" in notes, notes
    assert "40.0 min of them undetermined" in notes, notes


def test_attempt_without_end_bounds_the_cluster_state(tmp_path: Path) -> None:
    """m0, m1 (8 GPUs); quotas a=b=100 (never the limit). e1 (a, killed) started at 20 on all
    of m0 and has no recorded end: it held m0 from 20 for a time the data does not give. x1
    (b) holds m1's g0-6 [0,40).
    - w8 (a, 8 GPUs) waits [10,40), starts on m1 at 40. [10,20): m0 free in every reading:
      10 min other. [20,40): e1 released -> m0 free, other; e1 still holding -> 1 GPU free
      (m1's g7) < 8, capacity: 20 min undetermined, and the job's main cause too (its other
      10 min could be outweighed).
    - w1 (b, 1 GPU) waits [30,35) and runs on m1's g7 [35,38): g7 is free whatever e1 did:
      5 min other, although e1's possible run overlaps it.
    Before, e1 was left out of the cluster state and w8 read 30 min 'other'."""
    jobs = [
        Job("e1", "a", "u", "killed", 20, [Att(20, None, "killed", {"m0": E8})]),
        Job("x1", "b", "u", "passed", 0, [Att(0, 40, "passed", {"m1": list(range(7))})]),
        Job("w8", "a", "u", "passed", 10, [Att(40, 50, "passed", {"m1": E8})]),
        Job("w1", "b", "u", "passed", 30, [Att(35, 38, "passed", {"m1": [7]})]),
    ]
    p = write_store(tmp_path / "s", machines={"m0": 8, "m1": 8}, jobs=jobs)
    quotas = {"a": 100, "b": 100}
    with Store(p, read_only=True) as s:
        per = decompose_store(s, quotas).set_index("job_id")
        rep = run(s, ["queueing"], vc_quotas=quotas)
    cols = [f"{c}_s" for c in ("fair_share", "fragmentation", "capacity", "other")]
    assert per.loc["w8", [*cols, "undetermined_s"]].to_numpy().tolist() == [0, 0, 0, 600, 1200]
    assert per.loc["w1", [*cols, "undetermined_s"]].to_numpy().tolist() == [0, 0, 0, 300, 0]
    assert (per.loc["w8", "cause"], per.loc["w1", "cause"]) == ("undetermined", "other")
    notes = rep["queueing"].notes
    (note,) = [n for n in notes if n.startswith("cluster state: 1 attempts of 1 jobs")]
    assert "2 waits (25.0 min) overlap such a possible run" in note, note
    assert "20.0 min of the waits of known demand are undetermined" in note, note


def test_main_cause_kept_only_when_undetermined_seconds_cannot_change_it() -> None:
    """The main cause is decided when the leader keeps the lead with every undetermined
    second given to a rival (ties go to the earlier cause, as without undetermined seconds)."""
    import pandas as pd

    from philly_analyze.analysis.queueing import _main_cause

    rows = [  # fair_share, other, undetermined -> cause
        (10, 5, 4, "fair_share"),  # 10 > 5 + 4
        (10, 5, 5, "fair_share"),  # 10 = 5 + 5, fair-share first
        (5, 10, 5, "undetermined"),  # 10 = 5 + 5, but fair-share would win the tie
        (5, 10, 4, "other"),
        (0, 0, 10, "undetermined"),
        (0, 0, 0, "none"),
    ]
    per = pd.DataFrame(
        [(fs, o, u) for fs, o, u, _ in rows],
        columns=["fair_share_s", "other_s", "undetermined_s"],
    )
    waited = per.sum(axis=1) > 0
    got = _main_cause(per, {"fair_share": ("fair_share",), "other": ("other",)}, waited)
    assert got.tolist() == [r[-1] for r in rows]


@st.composite
def incomplete_workloads(draw: st.DrawFn) -> tuple[dict[str, int], list[Job], dict, dict]:
    """Like ``workloads``, with attempts whose end is unknown (in killed jobs: any attempt,
    the last one included) and jobs that ended in the queue with an unknown demand."""
    sizes = draw(st.lists(st.sampled_from([2, 8]), min_size=1, max_size=3))
    machines = {f"m{i}": s for i, s in enumerate(sizes)}
    jobs, queued = [], {}
    for k in range(draw(st.integers(1, 6))):
        vc = draw(st.sampled_from(["a", "b"]))
        submit = draw(st.integers(0, 30))
        if draw(st.integers(0, 4)) == 0:
            queued[f"q{k}"] = (submit, submit + draw(st.integers(1, 30)))
            jobs.append(Job(f"q{k}", vc, "u", "killed", submit, []))
            continue
        atts, t0 = [], submit
        for _ in range(draw(st.integers(1, 2))):
            start = t0 + draw(st.integers(0, 20))
            dur = draw(st.integers(1, 25))
            gpus: dict[str, list[int]] = {}
            for m in draw(st.lists(st.sampled_from(list(machines)), min_size=1, max_size=2)):
                gpus[m] = list(range(draw(st.integers(1, machines[m]))))
            unknown = draw(st.integers(0, 3)) == 0
            atts.append(Att(start, None if unknown else start + dur, "failed", gpus))
            t0 = start + dur
        jobs.append(Job(f"j{k}", vc, "u", "killed", submit, atts))
    quotas = {"a": draw(st.integers(0, 12)), "b": draw(st.integers(0, 12))}
    return machines, jobs, quotas, queued


def _brute_possible(machines, jobs, quotas, queued) -> dict[str, list[float]]:
    """Minute by minute, every state the data allows: each attempt whose end is unknown holds
    or not (independently: it may have ended at any minute from its start to its job's next
    start, or to the end), and an unknown demand is any of 1..N GPUs (N beyond every quota
    and the cluster). A minute's cause is the one every choice gives, else undetermined."""
    import itertools

    names = list(machines)
    size = np.array([machines[m] for m in names])
    big = int(size.sum()) + max(quotas.values()) + 1
    runs = []  # (vc, start, latest end, gpus, end known)
    for j in jobs:
        for i, a in enumerate(j.attempts):
            nxt = j.attempts[i + 1].start if i + 1 < len(j.attempts) else 1 << 30
            runs.append((j.vc, a.start, a.end if a.end is not None else nxt, a.gpus, a.end))

    def cause(busy: np.ndarray, used: int, n: int, q: int) -> int:
        free = np.clip(size - busy, 0, size)
        if used + n > q:
            return 0
        if free.sum() < n:
            return 2
        return 1 if not fits_strict(free, size, n, None) else 3

    out = {}
    for j in jobs:
        tot = [0.0] * 5
        if j.job_id in queued:
            waits = [(*queued[j.job_id], None)]
        else:
            waits, prev = [], j.submit
            for a in j.attempts:
                if prev is not None:
                    waits.append((prev, a.start, sum(len(g) for g in a.gpus.values())))
                prev = a.end
        for lo, hi, n in waits:
            for minute in range(int(lo), int(hi)):
                busy, used, maybe = np.zeros(len(names), int), 0, []
                for vc, s, e, g, known in runs:
                    if not s <= minute < e:
                        continue
                    if known is None:
                        maybe.append((vc, g))
                        continue
                    for m, idx in g.items():
                        busy[names.index(m)] += len(idx)
                    used += sum(len(x) for x in g.values()) if vc == j.vc else 0
                seen = set()
                for pick in itertools.product((0, 1), repeat=len(maybe)):
                    b2, u2 = busy.copy(), used
                    for (vc, g), on in zip(maybe, pick, strict=True):
                        if on:
                            for m, idx in g.items():
                                b2[names.index(m)] += len(idx)
                            u2 += sum(len(x) for x in g.values()) if vc == j.vc else 0
                    for nn in [n] if n is not None else range(1, big + 1):
                        seen.add(cause(b2, u2, nn, quotas[j.vc]))
                tot[seen.pop() if len(seen) == 1 else 4] += 60
        out[j.job_id] = tot
    return out


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(w=incomplete_workloads())
def test_undetermined_matches_every_possible_state(
    tmp_path_factory: pytest.TempPathFactory, w
) -> None:
    """The two-bound computation against an enumeration of every state the data allows."""
    machines, jobs, quotas, queued = w
    extra = {"scheduler_events": _scheduler_log(queued)} if queued else None
    path = write_store(
        tmp_path_factory.mktemp("u") / "s", machines=machines, jobs=jobs, extra=extra
    )
    with Store(path, read_only=True) as s, Context(s, vc_quotas=quotas) as ctx:
        per = decompose(ctx).set_index("job_id")
    kinds = ("fair_share", "fragmentation", "capacity", "other", "undetermined")
    for job_id, expect in _brute_possible(machines, jobs, quotas, queued).items():
        if job_id not in per.index:
            assert sum(expect) == 0, job_id
            continue
        got = [per.loc[job_id, f"{k}_s"] for k in kinds]
        assert got == pytest.approx(expect), (job_id, got, expect)
