"""Byte-level checks of the synthesizer's outputs, and the published-format files read back by
the real ingest parser agree with the ground truth.

One small history (300 jobs, 8 machines, 2 days over the 2017-11-05 fall-back) is written once
per session through the real CLI.
"""

from __future__ import annotations

import gzip
import json
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

from philly_analyze.cli import main
from philly_analyze.ingest.philly import LAST_OUTCOME
from philly_analyze.store import Store

ARGS = ["--jobs", "300", "--machines", "8", "--days", "2", "--start", "2017-11-04", "--seed", "7"]


@pytest.fixture(scope="session")
def synth_out(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("synth") / "out"
    res = CliRunner().invoke(
        main, ["synth", "--out", str(out), *ARGS, "--ganglia-step", "360", "-q"]
    )
    assert res.exit_code == 0, res.output
    assert "300 jobs" in res.output
    return out


@pytest.fixture(scope="session")
def synth_store(synth_out: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    store = tmp_path_factory.mktemp("synthstore") / "store"
    names = (
        "cluster_job_log",
        "cluster_machine_list",
        "cluster_gpu_util",
        "cluster_cpu_util",
        "cluster_mem_util",
        "framework",
    )
    files = [str(synth_out / n) for n in names]
    res = CliRunner().invoke(main, ["ingest", *files, "--store", str(store), "-q", "--json"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.output)["rejected"] == 0
    return store


def _truth(out: Path, table: str) -> pd.DataFrame:
    return pd.read_parquet(out / "ground_truth" / f"{table}.parquet")


def test_machine_list_bytes(synth_out: Path) -> None:
    lines = (synth_out / "cluster_machine_list").read_text().split("\n")
    assert lines[0] == "machineId, number of GPUs, single GPU mem"
    assert lines[-1] == ""
    rows = lines[1:-1]
    assert len(rows) == 8
    assert all(re.fullmatch(r"m\d+,(2, 12|8, 24)GB", r) for r in rows)
    assert rows == sorted(rows, key=lambda r: r.split(",")[0])  # string order, like the real file
    truth = _truth(synth_out, "machines")
    assert truth.mislisted.sum() == 1  # an 8-GPU machine listed as "2, 12GB"


def test_gpu_util_bytes(synth_out: Path) -> None:
    text = (synth_out / "cluster_gpu_util").read_text()
    lines = text.split("\n")
    header = lines[0].split(",")
    assert header == ["time", "machineId"] + [f"gpu{i}_util" for i in range(8)]
    rows = [ln for ln in lines[1:] if ln]
    assert len(rows) == 8 * 2 * 1440 + 8 * 60  # 2 days + the repeated fall-back hour
    fields = [r.split(",") for r in rows]
    assert {len(f) for f in fields} == {11}
    assert all(f[-1] == "" for f in fields)  # the trailing comma
    assert all(re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d:00 P[DS]T", f[0]) for f in fields)
    # The fall-back hour appears twice, once per zone abbreviation.
    assert sum(f[0] == "2017-11-05 01:30:00 PDT" for f in fields) == 8
    assert sum(f[0] == "2017-11-05 01:30:00 PST" for f in fields) == 8
    truth = _truth(synth_out, "machines").set_index("machine_id")
    two = set(truth.index[truth.num_gpus == 2])
    for f in fields:
        if f[1] in two:
            assert f[4:10] == ["NA"] * 6
    values = [v for f in fields for v in f[2:10] if v != "NA"]
    assert all(re.fullmatch(r"\d{1,3}\.\d{1,9}", v) and 0 <= float(v) <= 100 for v in values)
    assert any(len(v.split(".")[1]) == 9 for v in values)  # nvidia-smi averaging precision
    # Offline minutes: every GPU of the machine NA.
    assert any(f[2] == "NA" for f in fields)


def test_cpu_and_mem_bytes(synth_out: Path) -> None:
    cpu = (synth_out / "cluster_cpu_util").read_text().split("\n")
    assert cpu[0] == "time,machine_id,cpu_util"
    assert all(re.fullmatch(r"[^,]+ P[DS]T,m\d+,(NA|\d+(\.\d{1,3})?)", r) for r in cpu[1:-1])
    assert any(r.endswith(",NA") for r in cpu[1:-1])
    mem = (synth_out / "cluster_mem_util").read_text().split("\n")
    assert mem[0] == "time,machine_id,mem_total,mem_free"
    assert all(
        re.fullmatch(r"[^,]+ P[DS]T,m\d+,(NA,NA|\d+\.\d,\d+(\.\d{1,4})?)", r) for r in mem[1:-1]
    )
    assert any(",0.0,0" in r for r in mem[1:-1])  # mem_total 0 after an outage


def test_job_log_quirks(synth_out: Path) -> None:
    text = (synth_out / "cluster_job_log").read_text()
    jobs = json.loads(text)
    assert len(jobs) == 300
    assert list(jobs[0])[:5] == ["status", "vc", "jobid", "submitted_time", "user"]
    assert {j["status"] for j in jobs} == {"Pass", "Killed", "Failed"}
    assert all(re.fullmatch(r"application_\d{13}_\d{4,}", j["jobid"]) for j in jobs)
    # Two cluster timestamps: the ResourceManager restarted inside the window.
    assert len({j["jobid"].split("_")[1] for j in jobs}) == 2
    no_attempts = [j for j in jobs if not j.get("attempts")]
    assert no_attempts and all(j["status"] in ("Killed", "Pass", "Failed") for j in no_attempts)
    ends = [a["end_time"] for j in jobs for a in (j.get("attempts") or [])]
    assert any(e in ("None", None, "") for e in ends)  # running at the end of the window
    gpus = [
        g for j in jobs for a in (j.get("attempts") or []) for d in a["detail"] for g in d["gpus"]
    ]
    assert all(re.fullmatch(r"gpu[0-7]", g) for g in gpus)


def test_ingested_trace_matches_ground_truth(synth_out: Path, synth_store: Path) -> None:
    with Store(synth_store, read_only=True) as s:
        jobs = s.df("SELECT job_id, status, vc, user_id, num_attempts FROM jobs ORDER BY job_id")
        att = s.df(
            "SELECT job_id, attempt_idx, epoch(start_time) AS s, epoch(end_time) AS e, outcome "
            "FROM attempts ORDER BY job_id, attempt_idx"
        )
        pl = s.df(
            "SELECT job_id, attempt_idx, machine_id, gpu_idx FROM placements "
            "ORDER BY job_id, attempt_idx, machine_id, gpu_idx"
        )
        machines = s.df("SELECT machine_id, num_gpus, listed_num_gpus FROM machines")
    tj = _truth(synth_out, "jobs").sort_values("job_id").reset_index(drop=True)
    assert list(jobs.job_id) == list(tj.job_id)
    assert list(jobs.status) == list(tj.status)
    assert list(jobs.vc) == list(tj.vc) and list(jobs.user_id) == list(tj.user_id)
    assert (jobs.num_attempts.to_numpy() == tj.num_attempts.to_numpy()).all()
    ta = _truth(synth_out, "attempts").sort_values(["job_id", "attempt_idx"]).reset_index(drop=True)
    assert len(att) == len(ta)
    ts = (ta.start_time - pd.Timestamp(0, tz="UTC")).dt.total_seconds()
    # Times in the repeated fall-back hour may be read as the first occurrence (an hour early):
    # the one ambiguity the published format cannot resolve. Everything else is exact.
    diff = att.s.to_numpy() - ts.to_numpy()
    assert set(np.unique(diff)) <= {0, -3600}
    assert (diff == 0).mean() > 0.95
    ended = ta.end_time.notna()
    assert (att.e.isna().to_numpy() == ~ended.to_numpy()).all()
    tout = ta.outcome.to_numpy().copy()
    # The published format gives a job's final status even when its last attempt was running
    # at the window's end; a job with a final status is not running (docs/analyses.md), so
    # that attempt's outcome is the one its job's status gives.
    running = tout == "running"
    status_of = dict(zip(tj.job_id, tj.status, strict=True))
    tout[running] = [LAST_OUTCOME[status_of[j]] for j in ta.job_id[running]]
    assert running.any()
    # A failed attempt whose retry was still queued at the window's end is the last one the
    # published format lists: it reads as the job's final status (the format cannot say that
    # a retry was pending). Every other outcome is exact.
    differ = att.outcome.to_numpy() != tout
    last = ta.attempt_idx.to_numpy() == ta.job_id.map(tj.set_index("job_id").num_attempts) - 1
    pending = ta.job_id.map(tj.set_index("job_id").censored).to_numpy() & (tout == "failed")
    assert not (differ & ~(last.to_numpy() & pending)).any()
    tp = (
        _truth(synth_out, "placements")
        .sort_values(["job_id", "attempt_idx", "machine_id", "gpu_idx"])
        .reset_index(drop=True)
    )
    assert (pl.machine_id.to_numpy() == tp.machine_id.to_numpy()).all()
    assert (pl.gpu_idx.to_numpy() == tp.gpu_idx.to_numpy()).all()
    # The mislisted machine: listed 2, but utilization and placements show 8 GPUs.
    tm = _truth(synth_out, "machines")
    wrong = tm.machine_id[tm.mislisted].iloc[0]
    row = machines.set_index("machine_id").loc[wrong]
    assert row.listed_num_gpus == 2 and row.num_gpus == 8


def test_ingested_util_matches_per_gpu_levels(synth_out: Path, synth_store: Path) -> None:
    """Each GPU's mean utilization over its placement equals the truth's level (per-minute
    draws are mean-preserving; long placements only, so the sampling noise is small)."""
    gt = synth_out / "ground_truth"
    with Store(synth_store, read_only=True) as s:
        got = s.df(
            """
            SELECT tp.util_level AS want, avg(g.util) AS got, count(*) AS minutes
            FROM read_parquet(?) tp JOIN read_parquet(?) ta USING (job_id, attempt_idx)
            JOIN gpu_util g ON g.machine_id = tp.machine_id AND g.gpu_idx = tp.gpu_idx
              AND g.time >= ta.start_time AND g.time < coalesce(ta.end_time, 'infinity'::TIMESTAMPTZ)
            GROUP BY ALL HAVING count(*) >= 200
            """,
            [str(gt / "placements.parquet"), str(gt / "attempts.parquet")],
        )
    assert len(got) >= 20
    err = (got.got - got.want).abs()
    assert err.mean() < 1.5 and err.max() < 6


def test_yarn_log_lines(synth_out: Path) -> None:
    files = sorted((synth_out / "yarn").iterdir())
    names = {f.name for f in files}
    assert "yarn-resourcemanager.log" in names and "yarn-resourcemanager.log.1" in names
    assert any(n.endswith(".gz") for n in names)
    text = ""
    for f in files:
        text += gzip.decompress(f.read_bytes()).decode() if f.suffix == ".gz" else f.read_text()
    line_re = re.compile(
        r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} INFO org\.apache\.hadoop\.yarn\.server\.resourcemanager\.\S+: .+"
    )
    lines = text.split("\n")
    stamped = [ln for ln in lines if re.match(r"\d{4}-", ln)]
    assert all(line_re.fullmatch(ln) for ln in stamped)
    assert "STARTUP_MSG: Starting ResourceManager" in text
    jobs = _truth(synth_out, "jobs")
    for app, vc in zip(jobs.job_id[:40], jobs.vc[:40], strict=True):
        assert f"Accepted application {app} from user: " in text
        assert f"in queue: {vc}" in text
    assert re.search(r"on host m\d+:45454, which has \d+ containers", text)
    assert re.search(r"of capacity <memory:\d+, vCores:\d+, yarn\.io/gpu: \d+>", text)
    # Placements: a container per (attempt, machine) of the truth.
    tp = _truth(synth_out, "placements")
    assert text.count("Assigned container") == len(
        tp.groupby(["job_id", "attempt_idx", "machine_id"])
    )


def test_framework_logs(synth_out: Path) -> None:
    ta = _truth(synth_out, "attempts")
    root = synth_out / "framework"
    for row in ta.itertuples():
        assert (root / str(row.job_id) / f"attempt_{row.attempt_idx}" / "stdout.txt").is_file()
    loss = _truth(synth_out, "loss")
    ran = loss[loss.attempt_idx.notna()]
    # Every epoch that ran in the window is printed with the truth's loss.
    sample = ran.groupby("job_id").head(2).head(60)
    jobs = _truth(synth_out, "jobs").set_index("job_id")
    for job_id, attempt, epoch, loss_value in zip(
        sample["job_id"], sample["attempt_idx"], sample["epoch"], sample["loss"], strict=True
    ):
        log = (root / job_id / f"attempt_{int(attempt)}" / "stdout.txt").read_text()
        fw = jobs["framework"].loc[job_id]
        if fw == "cntk":
            assert f"Finished Epoch[{epoch:2d} of" in log and f"ce = {loss_value:.8f}" in log
        elif fw == "tensorflow":
            assert f"INFO:tensorflow:loss = {loss_value:.6g}, step = {epoch * 500}" in log
        else:
            assert f"Epoch: [{epoch - 1}]" in log and f"Loss {loss_value:.4e}" in log


def test_ganglia_exports(synth_out: Path) -> None:
    root = synth_out / "ganglia" / "philly"
    hosts = sorted(p.name for p in root.iterdir())
    tm = _truth(synth_out, "machines").set_index("machine_id")
    assert hosts == sorted(tm.index)
    for h in hosts[:3]:
        names = {p.name for p in (root / h).iterdir()}
        want = {f"{m}.csv" for m in ("cpu_user", "cpu_system", "cpu_idle", "mem_total", "mem_free")}
        want |= {
            f"gpu{i}_{m}.csv"
            for i in range(tm["num_gpus"].loc[h])
            for m in ("util", "mem_util", "fb_memory")
        }
        assert names == want
    lines = (root / hosts[0] / "gpu0_util.csv").read_text().split("\n")
    assert lines[0] == "Timestamp,gpu0_util"
    # The first 6-minute step ends (and, as in RRDtool, is stamped) at 00:06.
    assert re.fullmatch(r"2017-11-04T00:06:00-07:00,[\d.]+", lines[1])
    assert all(re.fullmatch(r"\S+[-+]0[78]:00,(NaN|\d+(\.\d+)?)", ln) for ln in lines[1:-1])
    assert len(lines) - 2 == 2 * 24 * 10 + 10  # 6-minute steps over 49 hours


def test_ganglia_means_agree_with_published_util(synth_out: Path) -> None:
    """A 6-minute Ganglia value is the mean of the same minutes in cluster_gpu_util."""
    host = "m0"
    g = pd.read_csv(synth_out / "ganglia" / "philly" / host / "gpu0_util.csv")
    with open(synth_out / "cluster_gpu_util") as f:
        rows = [ln.split(",") for ln in f if ln.split(",", 2)[1] == host]
    pub = pd.DataFrame({"v": [r[2] for r in rows]})
    vals = pd.to_numeric(pub.v, errors="coerce").to_numpy()[: 6 * 20]
    want = np.nanmean(vals.reshape(20, 6), axis=1)
    got = g.iloc[:20, 1].to_numpy()
    np.testing.assert_allclose(got, want, atol=1e-3)


def test_framework_logs_parse_to_the_truth(synth_out: Path, synth_store: Path) -> None:
    """The framework-log parser finds every failed attempt's true reason and every printed
    epoch's loss."""
    ta = _truth(synth_out, "attempts")
    with Store(synth_store, read_only=True) as s:
        fails = s.df("SELECT job_id, attempt_idx, reason FROM failures")
        epochs = s.df("SELECT job_id, attempt_idx, unit, epoch, loss FROM epochs")
    failed = ta[ta.outcome == "failed"].merge(fails, on=["job_id", "attempt_idx"], how="left")
    assert len(failed) > 30
    assert (failed.reason == failed.failure_reason).all()
    # Attempts that did not fail show no failure evidence.
    others = ta[ta.outcome != "failed"].merge(fails, on=["job_id", "attempt_idx"])
    assert (others.reason == "No signature").all()
    loss = _truth(synth_out, "loss").dropna(subset=["attempt_idx"])
    assert len(epochs) == len(loss)
    got = epochs.sort_values(["job_id", "unit", "epoch"]).groupby("job_id").loss.apply(list)
    want = loss.sort_values(["job_id", "epoch"]).groupby("job_id").loss.apply(list)
    assert list(got.index) == list(want.index)
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(g, w, rtol=1e-4)
