"""The replay command end to end: real store, real CLI (CliRunner), every output format."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from philly_analyze.cli import main
from philly_analyze.store import Store
from philly_analyze.vcquota import quotas_for_store
from tests._sim_data import observed_store


def run(*args: str):
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


def test_replay_json_compares_policies_and_writes_stores(tmp_path: Path) -> None:
    store = observed_store(tmp_path / "s")
    r = run(
        "replay",
        "--store",
        str(store),
        "--policy",
        "philly,relaxed",
        "--format",
        "json",
        "--out",
        str(tmp_path / "out"),
        "-q",
    )
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert [x["policy"] for x in doc["results"]] == ["philly", "relaxed"]
    m = doc["results"][0]["metrics"]
    assert m["jobs"] == 3 and m["fidelity_queue_median_abs_err_s"] == 30.0
    assert doc["results"][0]["params"]["locality_wait_min"] == 10.0
    # Each policy's schedule is a store the report can read.
    with Store(tmp_path / "out" / "philly", read_only=True) as st:
        assert st.df("SELECT count(*) AS n FROM jobs")["n"][0] == 3
        assert st.df("SELECT DISTINCT source FROM attempts")["source"].tolist() == ["replay"]
        assert st.df("SELECT count(*) AS n FROM placements")["n"][0] == 3
        assert st.df("SELECT sum(num_gpus) AS g FROM machines")["g"][0] == 8
    assert (
        json.loads((tmp_path / "out" / "philly" / "replay.json").read_text())["policy"] == "philly"
    )
    # The quotas used (one VC on 8 GPUs: all 8) are kept where the report will find them.
    assert (tmp_path / "out" / "philly" / "vc_quotas.csv").read_text() == "vc,gpus\nv,8\n"
    with Store(tmp_path / "out" / "philly", read_only=True) as st:
        assert quotas_for_store(st) == {"v": 8}


def test_replay_csv_md_and_table(tmp_path: Path) -> None:
    store = str(observed_store(tmp_path / "s"))
    r = run("replay", "--store", store, "--policy", "philly,fifo", "--format", "csv", "-q")
    rows = list(csv.reader(io.StringIO(r.stdout)))
    assert rows[0] == ["metric", "philly", "fifo"]
    assert ["jobs", "3", "3"] in rows
    r = run("replay", "--store", store, "--policy", "philly", "--format", "md", "-q")
    assert r.stdout.splitlines()[0] == "| metric | philly |"
    assert "| fidelity_queue_median_abs_err_s | 30.0 s |" in r.stdout
    r = run("replay", "--store", store, "--policy", "philly")
    assert "policy comparison" in r.stdout and "replaying 3 jobs" in r.stderr


def test_params_and_errors(tmp_path: Path) -> None:
    store = str(observed_store(tmp_path / "s"))
    r = run(
        "replay",
        "--store",
        store,
        "--policy",
        "philly,fifo",
        "--param",
        "fifo.backfill=true",
        "--param",
        "locality_wait_min=0",
        "--format",
        "json",
        "-q",
    )
    res = {x["policy"]: x["params"] for x in json.loads(r.stdout)["results"]}
    assert res["fifo"]["backfill"] is True and res["philly"]["locality_wait_min"] == 0.0
    r = CliRunner().invoke(main, ["replay", "--store", store, "--param", "nope=1"])
    assert r.exit_code == 2 and "--param nope: no chosen policy takes 'nope'" in r.output
    r = CliRunner().invoke(main, ["replay", "--store", store, "--param", "max_retries=-1"])
    assert r.exit_code == 1 and "max_retries must be >= 0" in r.output
    r = CliRunner().invoke(main, ["replay", "--store", store, "--policy", "nosuch"])
    assert r.exit_code == 2 and "unknown policy 'nosuch'" in r.output
    r = CliRunner().invoke(main, ["replay", "--store", str(tmp_path / "missing")])
    assert r.exit_code == 1 and "no store at" in r.output
    # Writing over a store that is not a replay output is refused.
    r = CliRunner().invoke(main, ["replay", "--store", store, "--out", store, "-q"])
    assert r.exit_code == 1 and "not written by replay" in r.output


def test_every_policy_is_registered_and_muxflow_runs(tmp_path: Path) -> None:
    # The sharing policies are registered like the queue ones (no optional module): muxflow
    # runs on any store.
    store = str(observed_store(tmp_path / "s"))
    r = CliRunner().invoke(main, ["replay", "--store", store, "--policy", "muxflow", "-q"])
    assert r.exit_code == 0, r.output
    r = run("replay", "--list-policies")
    for name in ("philly", "relaxed", "fifo", "las", "srtf", "muxflow", "dedicated", "mps-naive"):
        assert f"{name}: " in r.stdout
    assert "locality_wait_min (float, default 10.0)" in r.stdout


@pytest.mark.slow
def test_real_pollux_jobs_on_the_real_cluster(reference: Path, tmp_path: Path) -> None:
    """82,247 real jobs on Philly's 552 machines: the cluster is never full, so every job
    starts at submission and utilization is the data's GPU time over the span, computed here
    straight from the CSV."""
    import numpy as np
    import pandas as pd

    store = str(tmp_path / "s")
    r = CliRunner().invoke(
        main,
        [
            "ingest",
            str(reference / "philly/pollux_philly_jobs.csv"),
            str(reference / "philly/cluster_machine_list"),
            "--store",
            store,
            "-q",
        ],
    )
    assert r.exit_code == 0, r.output
    r = run("replay", "--store", store, "--policy", "philly,relaxed", "--format", "json", "-q")
    df = pd.read_csv(reference / "philly/pollux_philly_jobs.csv")
    # Pacific wall-clock; fall-back hour read as its first occurrence, like the ingest.
    local = pd.to_datetime(df["timestamp"]).dt.tz_localize(
        "America/Los_Angeles", ambiguous=np.ones(len(df), bool), nonexistent="shift_forward"
    )
    t = (local - pd.Timestamp(0, tz="UTC")).dt.total_seconds()
    span = (t + df["duration"]).max() - t.min()
    util = 100 * (df["duration"] * df["num_gpus"]).sum() / (2490 * span)
    for res in json.loads(r.stdout)["results"]:
        m = res["metrics"]
        assert m["jobs"] == 82_247 and m["jobs_unscheduled"] == 0
        assert m["queue_p99_s"] == 0.0
        assert m["gpu_util_allocated_pct"] == pytest.approx(util, abs=1e-6)  # JSON keeps 6 decimals
