"""The sharing policies through the replay registry and CLI, on a real store."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from click.testing import CliRunner

from philly_analyze.cli import main
from philly_analyze.store import Store

T0 = datetime(2017, 10, 2, 0, 0, tzinfo=UTC)


def busy_store(path: Path, jobs: int = 120) -> Path:
    """Two 8-GPU servers and ``jobs`` one- and two-GPU jobs of 2-4 hours arriving over two
    hours: far more work than 16 GPUs run at once, so jobs queue."""
    rng = np.random.default_rng(0)
    submit = np.sort(rng.uniform(0, 7200, jobs))
    dur = rng.uniform(7200, 14400, jobs)
    gpus = rng.choice([1, 1, 1, 2], jobs)
    ids = [f"job{i:04d}" for i in range(jobs)]
    with Store(path) as st, st.batch() as b:
        b.write(
            "machines",
            {
                "machine_id": ["m1", "m2"],
                "listed_num_gpus": pa.array([8, 8], pa.int16()),
                "source": ["x", "x"],
            },
        )
        b.write(
            "jobs",
            {
                "job_id": ids,
                "vc": ["vc1" if i % 2 else "vc2" for i in range(jobs)],
                "status": ["passed"] * jobs,
                "submit_time": [T0 + timedelta(seconds=float(s)) for s in submit],
                "num_gpus": pa.array(gpus, pa.int32()),
                "source": ["philly_job_log"] * jobs,
            },
        )
        b.write(
            "attempts",
            {
                "job_id": ids,
                "attempt_idx": pa.array([0] * jobs, pa.int32()),
                "start_time": [T0 + timedelta(seconds=float(s)) for s in submit],
                "end_time": [
                    T0 + timedelta(seconds=float(s + d)) for s, d in zip(submit, dur, strict=True)
                ],
                "num_gpus": pa.array(gpus, pa.int32()),
                "duration_s": dur,
                "outcome": ["passed"] * jobs,
                "source": ["philly_job_log"] * jobs,
            },
        )
        st.commit(
            b, [{"source": "hand", "format": "philly_job_log"}], source_format="philly_job_log"
        )
    return path


def run(*args: str):
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


def test_offline_frame_sums_attempt_durations() -> None:
    from philly_analyze.sim.sharing.replay import offline_frame
    from philly_analyze.sim.workload import Workload

    wl = Workload.from_columns(
        ["a", "b"],
        [60_000_000, 0],
        ["v", "v"],
        [1, 2],
        [[120_000_000, 60_000_000], [30_000_000]],
    )
    frame, origin = offline_frame(wl)
    assert origin == 0
    got = dict(zip(frame["job_id"], frame["work_minutes"], strict=True))
    assert got == {"a": 3.0, "b": 0.5}  # (120 + 60) s, 30 s
    assert dict(zip(frame["job_id"], frame["submit"], strict=True)) == {"a": 1.0, "b": 0.0}


@pytest.fixture(scope="module")
def replayed(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict, Path]:
    tmp = tmp_path_factory.mktemp("sharing")
    store = busy_store(tmp / "s")
    r = run(
        "replay",
        "--store",
        str(store),
        "--policy",
        "philly,dedicated,muxflow,mps-naive",
        "--format",
        "json",
        "--out",
        str(tmp / "out"),
        "--param",
        "online_gpus=16",
        "-q",
    )
    assert r.exit_code == 0, r.output
    return {x["policy"]: x for x in json.loads(r.stdout)["results"]}, tmp / "out"


def test_sharing_policies_are_compared_with_philly(replayed: tuple[dict, Path]) -> None:
    res, _ = replayed
    mux, ded = res["muxflow"]["metrics"], res["dedicated"]["metrics"]
    assert mux["jobs"] == ded["jobs"] == 120
    # The inference fleet adds capacity: jobs wait less than on the 16 training GPUs alone.
    assert mux["queue_mean_s"] < 0.7 * ded["queue_mean_s"]
    assert mux["philly_jct_mean_s"] == pytest.approx(res["philly"]["metrics"]["jct_mean_s"])
    assert mux["jct_mean_vs_philly"] == pytest.approx(
        mux["jct_mean_s"] / res["philly"]["metrics"]["jct_mean_s"], rel=1e-4
    )
    assert mux["gpu_util_online"] > ded["gpu_util_online"] + 0.2
    assert mux["slo_violation_fraction"] < mux["slo_violation_budget"]
    assert res["mps-naive"]["metrics"]["outage_minutes"] >= mux["outage_minutes"]


def test_sharing_schedule_is_a_store_the_report_side_can_read(replayed: tuple[dict, Path]) -> None:
    res, out = replayed
    with Store(out / "muxflow", read_only=True) as st:
        jobs = st.df("SELECT count(*) AS n, count(last_end) AS done FROM jobs")
        assert jobs["n"][0] == 120
        att = st.df("SELECT outcome, count(*) AS n FROM attempts GROUP BY outcome")
        outcomes = dict(zip(att["outcome"], att["n"], strict=True))
        assert outcomes.get("killed", 0) == res["muxflow"]["metrics"]["evictions"]
        machines = st.df("SELECT machine_id, num_gpus FROM machines ORDER BY machine_id")
        assert machines["machine_id"].tolist() == ["m1", "m2", "online-00000", "online-00001"]
        pl = st.df("SELECT count(*) AS n, count(DISTINCT machine_id) AS m FROM placements")
        assert pl["m"][0] == 4
        # No GPU holds two attempts at once.
        overlap = st.df(
            "SELECT count(*) AS n FROM placements p JOIN attempts a USING (job_id, attempt_idx) "
            "JOIN placements q ON p.machine_id = q.machine_id AND p.gpu_idx = q.gpu_idx "
            "JOIN attempts b ON q.job_id = b.job_id AND q.attempt_idx = b.attempt_idx "
            "WHERE (p.job_id, p.attempt_idx) <> (q.job_id, q.attempt_idx) "
            "AND a.start_time < coalesce(b.end_time, 'infinity'::TIMESTAMPTZ) "
            "AND b.start_time < coalesce(a.end_time, 'infinity'::TIMESTAMPTZ)"
        )
        assert overlap["n"][0] == 0


def test_paper_scenario_through_the_registry() -> None:
    from philly_analyze.sim.sharing.replay import run_scenario

    res = run_scenario("muxflow", "paper", {"online_gpus": 40}, seed=1)
    assert res.metrics["online_gpus"] == 40
    assert any("paper utilization: before 26%, after 76%" in n for n in res.notes)
    assert res.jobs.num_rows > 0 and res.placements.num_rows > 0


def test_a_policy_that_runs_nothing_still_gives_tables() -> None:
    """dedicated in the paper scenario: no training GPUs, so no job ever starts."""
    from philly_analyze.sim.sharing.replay import run_scenario

    res = run_scenario("dedicated", "paper", {"online_gpus": 16}, seed=0)
    assert res.attempts.num_rows == 0 and res.placements.num_rows == 0
    assert res.jobs.num_rows > 0 and res.metrics["jobs"] == 0
    assert res.metrics["gpu_util_online"] == pytest.approx(0.25, abs=0.08)


def test_bad_sharing_params_are_user_errors(tmp_path: Path) -> None:
    store = busy_store(tmp_path / "s", jobs=5)
    r = CliRunner().invoke(
        main, ["replay", "--store", str(store), "--policy", "muxflow", "--param", "disable=nope"]
    )
    assert r.exit_code == 1 and "unknown mechanism" in r.output
    r = CliRunner().invoke(
        main, ["replay", "--store", str(store), "--policy", "muxflow", "--param", "scenario=x"]
    )
    assert r.exit_code == 1 and "unknown scenario" in r.output


def test_replay_scenario_paper_from_the_cli(tmp_path: Path) -> None:
    r = run(
        "replay",
        "--policy",
        "dedicated,muxflow",
        "--scenario",
        "paper",
        "--param",
        "online_gpus=50",
        "--format",
        "json",
        "--out",
        str(tmp_path / "o"),
        "-q",
    )
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    res = {x["policy"]: x["metrics"] for x in doc["results"]}
    assert res["dedicated"]["online_gpus"] == res["muxflow"]["online_gpus"] == 50
    assert res["muxflow"]["gpu_util_online"] > res["dedicated"]["gpu_util_online"] + 0.3
    assert doc["cluster"] == {"machines": 7, "gpus": 50}  # online-00000..06, the last has 2
    assert (tmp_path / "o" / "muxflow" / "sharing.json").exists()
    with Store(tmp_path / "o" / "muxflow", read_only=True) as st:
        assert st.df("SELECT count(*) AS n FROM attempts")["n"][0] == res["muxflow"]["attempts"]
    # A queue policy cannot run a scenario: a usage error.
    r = CliRunner().invoke(main, ["replay", "--policy", "philly", "--scenario", "paper"])
    assert r.exit_code == 2 and "needs a sharing policy" in r.output


def test_dedicated_without_training_gpus_says_why_no_job_started() -> None:
    """The paper scenario has no training GPUs: dedicated (no sharing) starts no job. The
    comparison table marks jobs_unscheduled with a footnote saying so, and shows fractions
    as percentages like the other utilizations (not 0.253 beside 96.9%)."""
    r = run(
        "replay", "--policy", "dedicated,muxflow", "--scenario", "paper", "--param",
        "online_gpus=16", "--param", "minutes=120", "--format", "md", "-q",
    )  # fmt: skip
    assert r.exit_code == 0, r.output
    lines = r.stdout.splitlines()
    row = next(ln for ln in lines if ln.startswith("| jobs_unscheduled |"))
    assert row.split("|")[2].strip().endswith("[1]")  # dedicated's cell, not muxflow's
    note = next(ln for ln in lines if ln.startswith("[1] dedicated jobs_unscheduled:"))
    assert "run no training" in note and "ordinary_gpus 0" in note
    util = next(ln for ln in lines if ln.startswith("| gpu_util_online |"))
    assert all(c.strip().endswith("%") for c in util.split("|")[2:4])
    doc = json.loads(
        run(
            "replay",
            "--policy",
            "dedicated",
            "--scenario",
            "paper",
            "--param",
            "online_gpus=16",
            "--param",
            "minutes=120",
            "--format",
            "json",
            "-q",
        ).stdout
    )
    assert "run no training" in doc["results"][0]["footnotes"]["jobs_unscheduled"]
    assert doc["results"][0]["metrics"]["minutes"] == 120  # the short run asked for
