"""The replay command end to end: real store, real CLI (CliRunner), every output format."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

from click.testing import CliRunner

from philly_analyze.cli import main
from philly_analyze.store import Store
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
    assert m["jobs"] == 3 and m["fidelity_queue_mae_s"] == 30.0
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


def test_replay_csv_md_and_table(tmp_path: Path) -> None:
    store = str(observed_store(tmp_path / "s"))
    r = run("replay", "--store", store, "--policy", "philly,fifo", "--format", "csv", "-q")
    rows = list(csv.reader(io.StringIO(r.stdout)))
    assert rows[0] == ["metric", "philly", "fifo"]
    assert ["jobs", "3", "3"] in rows
    r = run("replay", "--store", store, "--policy", "philly", "--format", "md", "-q")
    assert r.stdout.splitlines()[0] == "| metric | philly |"
    assert "| fidelity_queue_mae_s | 30.0 s |" in r.stdout
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
    assert r.exit_code == 2 and "no chosen policy takes parameter 'nope'" in r.output
    r = CliRunner().invoke(main, ["replay", "--store", store, "--param", "max_retries=-1"])
    assert r.exit_code == 1 and "max_retries must be >= 0" in r.output
    r = CliRunner().invoke(main, ["replay", "--store", store, "--policy", "nosuch"])
    assert r.exit_code == 1 and "unknown policy 'nosuch'" in r.output
    r = CliRunner().invoke(main, ["replay", "--store", str(tmp_path / "missing")])
    assert r.exit_code == 1 and "no store at" in r.output
    # Writing over a store that is not a replay output is refused.
    r = CliRunner().invoke(main, ["replay", "--store", store, "--out", store, "-q"])
    assert r.exit_code == 1 and "not written by replay" in r.output


def test_muxflow_needs_the_sharing_module(tmp_path: Path) -> None:
    import importlib.util

    store = str(observed_store(tmp_path / "s"))
    r = CliRunner().invoke(main, ["replay", "--store", store, "--policy", "muxflow"])
    if importlib.util.find_spec("philly_analyze.sim.sharing.policy") is None:
        assert r.exit_code == 1 and "needs the GPU-sharing simulator" in r.output
    r = run("replay", "--list-policies")
    for name in ("philly", "relaxed", "fifo", "las", "srtf"):
        assert f"{name}: " in r.stdout
    assert "locality_wait_min (float, default 10.0)" in r.stdout
