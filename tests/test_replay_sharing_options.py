"""What the former ``python -m philly_analyze.sim.sharing`` did, through ``philly-analyze
replay``: ablations and parameter sweeps on the paper scenario (``--ablate``, ``--vary``) and
figures (``--figures``); the training GPUs of a sharing replay are placed by the one placement
rule; and ``synth --scheduler builtin`` is a deprecated spelling of ``philly``."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path

import pyarrow as pa
import pytest
from click.testing import CliRunner

from philly_analyze.cli import main
from philly_analyze.store import Store
from tests.test_sharing_policy import T0

#: A small paper scenario: 20 online GPUs for one day (a few seconds per run).
SMALL = ("--scenario", "paper", "--param", "online_gpus=20")
PNG = b"\x89PNG\r\n\x1a\n"


def run(*args: str):
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


def _json(*args: str) -> dict:
    r = run("replay", *args, "--format", "json", "-q")
    assert r.exit_code == 0, r.output
    return json.loads(r.stdout)


@pytest.fixture(scope="module")
def muxflow_alone() -> dict:
    """``replay --policy muxflow`` on the small scenario: what the experiments' rows of the
    unchanged model must reproduce."""
    return _json("--policy", "muxflow", *SMALL)["results"][0]["metrics"]


def test_minutes_sets_the_length_of_the_paper_scenario(muxflow_alone: dict) -> None:
    """`--param minutes=N` with `--scenario paper`: the run lasts N minutes, and so do the
    offline arrivals (fewer jobs than the day's); without it, the scenario's day (1,440)."""
    assert muxflow_alone["minutes"] == 1440
    r = run("replay", "--policy", "muxflow", *SMALL, "--param", "minutes=90", "--format", "json")
    assert r.exit_code == 0, r.output
    short = json.loads(r.stdout)["results"][0]
    assert short["metrics"]["minutes"] == 90
    assert short["metrics"]["offline_jobs"] < muxflow_alone["offline_jobs"]
    assert any("synthetic offline jobs over 90 minutes" in n for n in short["notes"])
    # The experiments take it too.
    doc = _json("--ablate", *SMALL, "--param", "minutes=30")
    assert doc["rows"][0]["offline_work_gpu_hours"] < muxflow_alone["offline_work_gpu_hours"]


def test_ablate_switches_each_mechanism_off_beside_the_baselines(muxflow_alone: dict) -> None:
    doc = _json("--ablate", *SMALL)
    assert (doc["scenario"], doc["online_gpus"], doc["seed"]) == ("paper", 20, 0)
    rows = {r["variant"]: r for r in doc["rows"]}
    assert list(rows) == [
        "muxflow",
        "muxflow - memory_limit",
        "muxflow - launch_limit",
        "muxflow - monitor",
        "muxflow - dynamic_sm",
        "muxflow - matching",
        "muxflow - mixed_errors",
        "muxflow - launch_limit - monitor",
        "mps-naive",
        "dedicated",
    ]
    # The first row is muxflow itself: the same run as the replay of the policy.
    for key in ("gpu_util_online", "slo_violation_fraction", "offline_work_gpu_hours"):
        assert rows["muxflow"][key] == pytest.approx(muxflow_alone[key], abs=1e-4)
    # Each switch does what it says: no dynamic SM, no SM restarts; without mixed error
    # handling errors reach the online service; dedicated shares nothing.
    assert rows["muxflow - dynamic_sm"]["sm_restarts"] == 0 < rows["muxflow"]["sm_restarts"]
    assert rows["muxflow - mixed_errors"]["outage_minutes"] > rows["muxflow"]["outage_minutes"]
    assert rows["muxflow - mixed_errors"]["evictions_error_signal"] == 0
    assert rows["dedicated"]["offline_work_gpu_hours"] == 0
    assert rows["mps-naive"]["slo_violation_fraction"] > rows["muxflow"]["slo_violation_fraction"]


def test_vary_runs_one_model_parameter_over_values(muxflow_alone: dict, tmp_path: Path) -> None:
    doc = _json("--policy", "muxflow", "--vary", "sm.threshold=0.1,0.3", *SMALL)
    assert doc["param"] == "sm.threshold"
    rows = {r["sm.threshold"]: r for r in doc["rows"]}
    assert list(rows) == [0.1, 0.3]
    # 0.1 is the model file's value: the plain replay; a threshold of 0.3 (six 5% steps)
    # moves shares less often.
    assert rows[0.1]["gpu_util_online"] == pytest.approx(muxflow_alone["gpu_util_online"])
    assert rows[0.3]["sm_restarts"] < rows[0.1]["sm_restarts"]
    r = run(
        "replay",
        "--policy",
        "muxflow",
        "--vary",
        "sm.threshold=0.1,0.3",
        *SMALL,
        "--format",
        "md",
        "--figures",
        str(tmp_path),
        "-q",
    )
    assert r.exit_code == 0, r.output
    assert r.stdout.splitlines()[0].startswith("| sm.threshold | gpu_util_online |")
    assert (tmp_path / "muxflow_sweep_sm_threshold.png").read_bytes()[:8] == PNG


def test_figures_of_the_paper_scenario_and_of_ablations(tmp_path: Path) -> None:
    r = run("replay", "--policy", "dedicated,muxflow", *SMALL, "--figures", str(tmp_path), "-q")
    assert r.exit_code == 0, r.output
    r = run("replay", "--ablate", *SMALL, "--figures", str(tmp_path), "-q")
    assert r.exit_code == 0, r.output
    for name in ("muxflow_paper_day", "muxflow_paper_slowdown", "muxflow_ablation"):
        assert (tmp_path / f"{name}.png").read_bytes()[:8] == PNG


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--ablate",), "add --scenario"),
        (("--ablate", "--vary", "sm.step=0.1", "--scenario", "paper"), "choose one"),
        (("--ablate", "--policy", "las", "--scenario", "paper"), "no --policy"),
        (("--vary", "sm.step=0.1", "--scenario", "paper"), "one sharing policy"),
        (("--vary", "sm.step", "--policy", "muxflow", "--scenario", "paper"), "PARAM=V1,V2"),
        (("--ablate", "--scenario", "paper", "--out", "x"), "no --out"),
        (("--policy", "philly", "--figures", "figs"), "sharing --policy"),
    ],
)
def test_experiment_options_are_usage_errors_when_misused(args: tuple, message: str) -> None:
    r = CliRunner().invoke(main, ["replay", *args])
    assert r.exit_code == 2 and message in r.output, r.output


def _fragmenting_store(path: Path) -> Path:
    """Two 8-GPU servers filled by 16 one-GPU jobs at 0 s; then jobs 3 and 4 (server m1) and
    12 and 13 (m2) end alternately (100, 200, 300, 400 s); at 500 s a two-GPU job arrives:
    each server then has two GPUs free."""
    n = 17
    ids = [f"j{i:02d}" for i in range(n)]
    submit = [0.0] * 16 + [500.0]
    ends = {3: 100.0, 12: 200.0, 4: 300.0, 13: 400.0}
    dur = [ends.get(i, 50_000.0) for i in range(16)] + [100.0]
    gpus = [1] * 16 + [2]
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
                "vc": ["vc1"] * n,
                "status": ["passed"] * n,
                "submit_time": [T0 + timedelta(seconds=x) for x in submit],
                "num_gpus": pa.array(gpus, pa.int32()),
                "source": ["philly_job_log"] * n,
            },
        )
        b.write(
            "attempts",
            {
                "job_id": ids,
                "attempt_idx": pa.array([0] * n, pa.int32()),
                "num_gpus": pa.array(gpus, pa.int32()),
                "duration_s": dur,
                "outcome": ["passed"] * n,
                "source": ["philly_job_log"] * n,
            },
        )
        st.commit(
            b, [{"source": "hand", "format": "philly_job_log"}], source_format="philly_job_log"
        )
    return path


@pytest.mark.parametrize("policy", ["dedicated", "muxflow"])
def test_training_gpus_of_a_sharing_replay_follow_the_placement_rule(
    policy: str, tmp_path: Path
) -> None:
    """The two-GPU job of ``_fragmenting_store`` runs on one server: training GPUs are placed
    locality-first (``sim.placement``), as by every policy, not wherever GPUs were freed
    last. (No inference fleet, online_gpus=0: only the training GPUs run jobs.)"""
    store = _fragmenting_store(tmp_path / "s")
    r = run(
        "replay",
        "--store",
        str(store),
        "--policy",
        policy,
        "--param",
        "online_gpus=0",
        "--param",
        "compare_philly=false",
        "--out",
        str(tmp_path / "out"),
        "-q",
    )
    assert r.exit_code == 0, r.output
    with Store(tmp_path / "out", read_only=True) as st:
        pl = st.df(
            "SELECT machine_id, gpu_idx FROM placements WHERE job_id = 'j16' ORDER BY gpu_idx"
        )
        start = st.scalar("SELECT epoch_us(start_time) FROM attempts WHERE job_id = 'j16'")
    assert pl["machine_id"].tolist() == ["m1", "m1"]  # the lowest-index server with room
    assert pl["gpu_idx"].tolist() == [3, 4]  # the GPUs jobs 3 and 4 freed
    assert start == int(T0.timestamp() * 1e6) + 500_000_000  # at once: two GPUs were free


def test_synth_builtin_scheduler_is_a_deprecated_spelling_of_philly(tmp_path: Path) -> None:
    common = ["synth", "--jobs", "60", "--machines", "4", "--days", "1", "--seed", "2"]
    common += ["--formats", "philly-jobs"]
    a = CliRunner().invoke(main, [*common, "--out", str(tmp_path / "a"), "-q"])
    b = CliRunner().invoke(main, [*common, "--out", str(tmp_path / "b"), "--scheduler", "builtin"])
    assert a.exit_code == 0 and b.exit_code == 0, b.output
    assert "deprecated --scheduler builtin" in b.stderr
    for f in sorted((tmp_path / "a").rglob("*")):
        if f.is_file():
            assert f.read_bytes() == (tmp_path / "b" / f.relative_to(tmp_path / "a")).read_bytes()
