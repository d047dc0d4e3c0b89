"""Zeros where there is no data (issue 13): a value the store cannot give is absent (JSON
null, "–" in tables) and a note says why; it is never 0. One hand-made store per kind of
missing input, each ingested through the real CLI: a job list (no attempts, users, machines),
the published job log without utilization files, YARN logs without GPU resources, and
framework logs only. The replay of a job list keeps the "unknown" in its output store.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from philly_analyze.cli import main
from philly_analyze.sim.metrics import METRICS
from tests.philly_files import attempt, job, write_job_log, write_machine_list
from tests.test_yarn_ingest import app, att, attempt_run, line, submit, summary


def _ingest(store: Path, *paths: Path, tz: str = "UTC") -> None:
    r = CliRunner().invoke(
        main, ["ingest", *map(str, paths), "--store", str(store), "--timezone", tz, "-q"]
    )
    assert r.exit_code == 0, r.output


def _report(store: Path) -> dict:
    r = CliRunner().invoke(main, ["report", "--store", str(store), "--format", "json", "-q"])
    assert r.exit_code == 0, r.output
    return json.loads(r.output)


def _rows(doc: dict, section: str, table: str) -> list[dict]:
    return [r for r in doc[section] if r["table"] == table]


def _summary(doc: dict) -> dict:
    return {r["metric"]: r["value"] for r in doc["summary"]}


def _notes(doc: dict, section: str) -> str:
    return " | ".join(doc["section_notes"].get(section, []))


# --------------------------------------------------------------------------- job list
JOB_LIST = (
    "job_id,submit_time,duration_s,gpus,vc,status\n"
    "a,2017-11-01 10:00:00,3600,1,v1,Pass\n"
    "b,2017-11-01 10:05:00,1800,4,v1,Failed\n"
    "c,2017-11-01 10:10:00,7200,8,v2,Killed\n"
    "d,2017-11-01 10:20:00,600,1,v2,Pass\n"
)


@pytest.fixture(scope="module")
def job_list_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("joblist")
    (d / "jobs.csv").write_text(JOB_LIST)
    _ingest(d / "store", d / "jobs.csv")
    return d / "store"


def test_job_list_retries_are_absent_not_zero(job_list_store: Path) -> None:
    doc = _report(job_list_store)
    fig9 = {r["gpu_bucket"]: r for r in _rows(doc, "retries", "fig9")}
    # A job list gives one run per job: its retries are unknown (before: 0.00 everywhere).
    for b in ("1", "2-4", "5-8", "all"):
        assert fig9[b]["retries"] is None and fig9[b]["avg_retries"] is None, fig9[b]
    # The statuses are known: 1 GPU: a, d passed -> 0; 2-4: b failed -> 1; all: 1 of 4.
    assert (fig9["1"]["jobs"], fig9["1"]["unsuccessful_rate"]) == (2, 0.0)
    assert fig9["2-4"]["unsuccessful_rate"] == 1.0
    assert fig9["all"]["unsuccessful_rate"] == 0.25
    assert "4 jobs come from job lists" in _notes(doc, "retries")


def test_job_list_figure9_says_no_data(job_list_store: Path, tmp_path: Path) -> None:
    """Figure 9's computed bars for the average retries are absent in each of the four
    buckets (1, 2-4, 5-8, all), and the figure writes "no data" where each would be; the
    unsuccessful rates are known, so that panel has none. In the SVG each text is a comment
    beside its glyph paths."""
    r = CliRunner().invoke(
        main, ["report", "--store", str(job_list_store), "--figures", str(tmp_path), "-q"]
    )
    assert r.exit_code == 0, r.output
    svg = (tmp_path / "fig9_retries.svg").read_text()
    assert svg.count("<!-- no data -->") == 4


def test_job_list_table6_and_summary(job_list_store: Path) -> None:
    doc = _report(job_list_store)
    t6 = {r["status"]: r for r in _rows(doc, "status", "table6")}
    # GPU time = duration x GPUs, known for every job (before, none counted: no end time).
    # passed a 1 h x 1 + d 600 s x 1 = 7/6 h; unsuccessful b 0.5 h x 4 = 2 h; killed c 2 h x 8.
    assert (t6["passed"]["jobs"], t6["unsuccessful"]["jobs"], t6["killed"]["jobs"]) == (2, 1, 1)
    assert t6["passed"]["gpu_hours"] == pytest.approx(7 / 6)
    assert t6["total"]["gpu_hours"] == pytest.approx(7 / 6 + 2 + 16)
    s = _summary(doc)
    # No user column, no machine list, no end times: unknown, not 0 (or "NaT"). A job list
    # records one run per job, not its attempts (before: "attempts 4").
    assert (s["users"], s["machines"], s["GPUs"], s["last end"]) == (None, None, None, None)
    assert s["attempts"] is None
    assert s["virtual clusters"] == 2 and s["jobs"] == 4
    notes = _notes(doc, "summary")
    assert "users: unknown" in notes and "machines and GPUs: unknown" in notes
    assert "attempts: unknown (the jobs come from job lists" in notes


def test_job_list_info_users_unknown(job_list_store: Path) -> None:
    """``info``'s VC table: no job of the list records a user, so users are unknown (before:
    0 per VC); GPU hours are known (duration x GPUs): v1 a 1 h x 1 + b 0.5 h x 4 = 3, v2 c
    2 h x 8 + d 600 s x 1 = 16 1/6."""
    r = CliRunner().invoke(main, ["info", "--store", str(job_list_store), "--format", "json"])
    assert r.exit_code == 0, r.output
    vcs = {v["vc"]: v for v in json.loads(r.output)["vcs"]}
    assert (vcs["v1"]["users"], vcs["v2"]["users"]) == (None, None)
    assert vcs["v1"]["gpu_hours"] == pytest.approx(3.0)
    assert vcs["v2"]["gpu_hours"] == pytest.approx(16 + 1 / 6)
    text = CliRunner().invoke(main, ["info", "--store", str(job_list_store)]).output
    assert "users: – where no job of the VC records a user" in text


def test_replay_of_a_job_list_keeps_the_unknown(job_list_store: Path, tmp_path: Path) -> None:
    store = tmp_path / "store"
    _ingest(store, job_list_store.parent / "jobs.csv")
    ml = write_machine_list(
        tmp_path / "cluster_machine_list", [("m1", 8, "24GB"), ("m2", 8, "24GB")]
    )
    _ingest(store, ml)
    out = tmp_path / "out"
    r = CliRunner().invoke(
        main, ["replay", "--store", str(store), "--out", str(out), "--format", "json", "-q"]
    )
    assert r.exit_code == 0, r.output
    (res,) = json.loads(r.output)["results"]
    # No observed starts: the fidelity metrics are absent, and a note says why (before, this
    # checked a key no replay writes any more, so it could never fail).
    assert "fidelity_queue_median_abs_err_s" in METRICS
    assert [k for k in res["metrics"] if k.startswith("fidelity")] == []
    assert any(n.startswith("4 of 4 replayed jobs have no observed start") for n in res["notes"])
    fig9 = {r["gpu_bucket"]: r for r in _rows(_report(out), "retries", "fig9")}
    assert fig9["all"]["retries"] is None and fig9["all"]["unsuccessful_rate"] == 0.25


# --------------------------------------------------------------------------- job log, no util
def test_published_job_log_without_scheduler_log_or_utilization(tmp_path: Path) -> None:
    d = tmp_path / "trace"
    d.mkdir()
    write_machine_list(d / "cluster_machine_list", [("m1", 8, "24GB")])
    t = "2017-10-02 10:{:02d}:00"
    write_job_log(
        d / "cluster_job_log",
        [
            job("ran", t.format(0), [attempt(t.format(5), t.format(30), {"m1": [0]})]),
            job("queued", t.format(1), [], status="Killed"),
        ],
    )
    _ingest(tmp_path / "store", d, tz="America/Los_Angeles")
    doc = _report(tmp_path / "store")
    # Without a scheduler log nothing says when "queued" left the queue (before: "0 of them
    # have an end in the scheduler log and count in Table 2").
    notes = _notes(doc, "queueing")
    assert "1 jobs never started: left out of the delay percentiles and of Table 2" in notes
    assert "0 of them" not in notes
    assert not doc["gpu_utilization"] and "missing: gpu_util" in _notes(doc, "gpu_utilization")


def test_published_attempt_without_gpus_in_its_detail(tmp_path: Path) -> None:
    """An attempt whose ``detail`` names no GPU ([] here) has an unknown GPU count, not 0:
    "nogpu" passed after 30 minutes on GPUs the log does not name, so its GPU time is unknown
    and Table 6 and the summary leave it out, saying so (before: counted with 0.00 GPU
    hours). "ran" passed on 1 GPU for 25 minutes."""
    from tests.store_query import q

    d = tmp_path / "trace"
    d.mkdir()
    write_machine_list(d / "cluster_machine_list", [("m1", 8, "24GB")])
    t = "2017-10-02 10:{:02d}:00"
    write_job_log(
        d / "cluster_job_log",
        [
            job("nogpu", t.format(0), [attempt(t.format(0), t.format(30), {})]),
            job("ran", t.format(0), [attempt(t.format(5), t.format(30), {"m1": [0]})]),
        ],
    )
    _ingest(tmp_path / "store", d, tz="America/Los_Angeles")
    assert q(tmp_path / "store", "SELECT job_id, num_gpus, gpu_time_s FROM jobs ORDER BY 1") == [
        ("nogpu", None, None),
        ("ran", 1, 1500.0),
    ]
    doc = _report(tmp_path / "store")
    t6 = {r["status"]: r for r in _rows(doc, "status", "table6")}
    assert (t6["passed"]["jobs"], t6["passed"]["gpu_hours"]) == (1, pytest.approx(25 / 60))
    assert "1 jobs with a final status are not counted: their GPU time is unknown" in _notes(
        doc, "status"
    )
    assert _summary(doc)["GPU hours used"] == pytest.approx(25 / 60)
    assert "GPU hours leave out 1 jobs whose GPU time is unknown" in _notes(doc, "summary")


# --------------------------------------------------------------------------- unknown GPU time
@pytest.fixture(scope="module")
def unknown_gpu_time_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One 8-GPU machine. VC vz: Z1 (1 GPU) started at 10:00 and Z2 (1 GPU, submitted at
    10:00) at 10:30, both passed without a recorded end, so neither's GPU time is known. VC
    vy: Y1 ran 10:00-11:00 on 1 GPU (1 GPU hour)."""
    d = tmp_path_factory.mktemp("gputime")
    write_machine_list(d / "cluster_machine_list", [("m1", 8, "24GB")])
    t = "2017-10-02 {}:00"
    write_job_log(
        d / "cluster_job_log",
        [
            job("Z1", t.format("10:00"), [attempt(t.format("10:00"), None, {"m1": [0]})], vc="vz"),
            job("Z2", t.format("10:00"), [attempt(t.format("10:30"), None, {"m1": [2]})], vc="vz"),
            job("Y1", t.format("10:00"), [attempt(t.format("10:00"), t.format("11:00"),
                                                  {"m1": [1]})], vc="vy"),
        ],
    )  # fmt: skip
    _ingest(d / "store", d)
    return d / "store"


def test_vc_of_unknown_gpu_time_has_no_quota(unknown_gpu_time_store: Path) -> None:
    """vz's GPU time is unknown, so its quota cannot be inferred: it is not 0 (before: quota
    0, so Z2's 30-minute wait was all fair-share). vy gets the 8 GPUs. While Z2 waited at
    least 6 of the 8 GPUs were free: fair-share at a quota of 0, not at any quota above 1,
    so all 1,800 s are undetermined."""
    from philly_analyze.analysis.queueing import decompose_store
    from philly_analyze.store import Store
    from philly_analyze.vcquota import infer_store_quotas

    with Store(unknown_gpu_time_store, read_only=True) as st:
        assert infer_store_quotas(st) == ({"vy": 8}, ["vz"])
        per = decompose_store(st).set_index("job_id")
    assert per.loc["Z2", "wait_s"] == 1800.0
    assert per.loc["Z2", "undetermined_s"] == 1800.0
    assert per.loc["Z2", "fair_share_s"] == 0.0
    doc = _report(unknown_gpu_time_store)
    causes = {r["delay_type"]: r["all"] for r in _rows(doc, "queueing", "table2_causes")}
    assert (causes["fair_share"], causes["undetermined"]) == (0, 1)
    notes = _notes(doc, "queueing")
    assert "VCs whose quota cannot be inferred (no job of theirs that ran has a known GPU " in notes
    assert "treated as 0" not in notes


def test_info_gpu_hours_unknown_not_zero(unknown_gpu_time_store: Path) -> None:
    """``info``: vz's GPU hours are unknown (before: 0.0), vy's 1.0."""
    r = CliRunner().invoke(
        main, ["info", "--store", str(unknown_gpu_time_store), "--format", "json"]
    )
    assert r.exit_code == 0, r.output
    vcs = {v["vc"]: v for v in json.loads(r.output)["vcs"]}
    assert (vcs["vz"]["gpu_hours"], vcs["vz"]["gpu_time_unknown_jobs"]) == (None, 2)
    assert (vcs["vy"]["gpu_hours"], vcs["vy"]["gpu_time_unknown_jobs"]) == (1.0, 0)
    text = CliRunner().invoke(main, ["info", "--store", str(unknown_gpu_time_store)]).output
    assert "GPU hours leave out 2 jobs whose GPU time is unknown" in text


# --------------------------------------------------------------------------- YARN, no GPUs
def _container_without_gpus(ts: str, app_id: str, n: int, c: int, host: str) -> list[str]:
    """A Hadoop 2.x allocation: memory and vCores, no GPU resource."""
    cid = app_id.replace("application_", "container_") + f"_{n:02d}_{c:06d}"
    return [
        line(ts, "cont", f"{cid} Container Transitioned from NEW to ALLOCATED"),
        line(
            ts,
            "node",
            f"Assigned container {cid} of capacity <memory:49152, vCores:15> on host "
            f"{host}:45454, which has 1 containers, <memory:49152, vCores:15> used and "
            "<memory:0, vCores:1> available after allocation",
        ),
    ]


def test_yarn_without_gpu_resources(tmp_path: Path) -> None:
    a1 = "application_1637633166384_0001"
    lines = [
        *submit("10:00:00", a1, "liuxy", "vc1"),
        att("10:00:00,040", a1, 1, "NEW", "SUBMITTED", "START"),
        att("10:00:00,050", a1, 1, "SUBMITTED", "SCHEDULED", "ATTEMPT_ADDED"),
        *_container_without_gpus("10:00:05,000", a1, 1, 1, "m1"),
        *attempt_run("10:00:05,010", a1, 1),
        app("10:00:06,001", a1, "ACCEPTED", "RUNNING", "ATTEMPT_REGISTERED"),
        att("11:00:05,000", a1, 1, "FINISHING", "FINISHED", "CONTAINER_FINISHED"),
        app("11:00:05,002", a1, "FINISHING", "FINISHED", "ATTEMPT_FINISHED"),
        summary("11:00:05,020", a1, "FINISHED", "SUCCEEDED", 1637661600000, 1637665205002),
    ]
    (tmp_path / "rm.log").write_text("\n".join(lines) + "\n")
    _ingest(tmp_path / "store", tmp_path / "rm.log")
    doc = _report(tmp_path / "store")
    # The job passed after an hour, on a number of GPUs the log does not give: its GPU
    # time is unknown (before: Table 6 counted it with 0.00 GPU hours, and GPUs were 0).
    assert _rows(doc, "status", "table6") == []
    assert "1 jobs with a final status are not counted: their GPU time is unknown" in _notes(
        doc, "status"
    )
    s = _summary(doc)
    assert (s["machines"], s["GPUs"], s["GPU hours used"]) == (1, None, None)
    assert "GPUs leave out 1 machines whose GPU count is unknown" in _notes(doc, "summary")


def test_yarn_without_gpu_resources_waits_are_undetermined(tmp_path: Path) -> None:
    """Two apps of vc1 (quota 4 GPUs) on an RM that names no GPUs: a1 waits 5 s for its
    container, runs 10:00-11:00; a2 is submitted at 10:10 and starts at 11:00:06 when m1 is
    free again. Neither demand is known (at least 1 GPU), nor a1's GPUs while a2 waits (at
    least 1, at most any), nor m1's GPUs: at 1 GPU the cluster has none free (capacity), at
    5 GPUs vc1 is past its quota (fair-share), so every waiting moment is undetermined.
    Before, the demands counted as 0 GPUs and both waits read 100% 'other'."""
    a1, a2 = "application_1637633166384_0001", "application_1637633166384_0002"
    lines = [
        *submit("10:00:00", a1, "liuxy", "vc1"),
        att("10:00:00,040", a1, 1, "NEW", "SUBMITTED", "START"),
        att("10:00:00,050", a1, 1, "SUBMITTED", "SCHEDULED", "ATTEMPT_ADDED"),
        *_container_without_gpus("10:00:05,000", a1, 1, 1, "m1"),
        *attempt_run("10:00:05,010", a1, 1),
        app("10:00:06,001", a1, "ACCEPTED", "RUNNING", "ATTEMPT_REGISTERED"),
        *submit("10:10:00", a2, "liuxy", "vc1"),
        att("10:10:00,040", a2, 1, "NEW", "SUBMITTED", "START"),
        att("10:10:00,050", a2, 1, "SUBMITTED", "SCHEDULED", "ATTEMPT_ADDED"),
        att("11:00:05,000", a1, 1, "FINISHING", "FINISHED", "CONTAINER_FINISHED"),
        app("11:00:05,002", a1, "FINISHING", "FINISHED", "ATTEMPT_FINISHED"),
        summary("11:00:05,020", a1, "FINISHED", "SUCCEEDED", 1637661600000, 1637665205002),
        *_container_without_gpus("11:00:06,000", a2, 1, 1, "m1"),
        *attempt_run("11:00:06,010", a2, 1),
        app("11:00:07,001", a2, "ACCEPTED", "RUNNING", "ATTEMPT_REGISTERED"),
        att("11:30:05,000", a2, 1, "FINISHING", "FINISHED", "CONTAINER_FINISHED"),
        app("11:30:05,002", a2, "FINISHING", "FINISHED", "ATTEMPT_FINISHED"),
        summary("11:30:05,020", a2, "FINISHED", "SUCCEEDED", 1637662200000, 1637667005002),
    ]
    (tmp_path / "rm.log").write_text("\n".join(lines) + "\n")
    (tmp_path / "q.csv").write_text("vc,gpus\nvc1,4\n")
    _ingest(tmp_path / "store", tmp_path / "rm.log")
    args = ["report", "--store", str(tmp_path / "store"), "--format", "json", "-q"]
    r = CliRunner().invoke(
        main, [*args, "--section", "queueing", "--vc-quotas", str(tmp_path / "q.csv")]
    )
    assert r.exit_code == 0, r.output
    doc = json.loads(r.output)
    share = {x["gpu_bucket"]: x for x in _rows(doc, "queueing", "wait_seconds")}["all"]
    assert share["waiting_jobs"] == 2
    assert (share["other_pct"], share["undetermined_pct"]) == (0.0, 100.0)
    causes = {x["delay_type"]: x for x in _rows(doc, "queueing", "table2_causes")}
    assert causes["undetermined"]["gpus_unknown"] == 2 and causes["other"]["all"] == 0
    notes = _notes(doc, "queueing")
    assert "2 waits (50.2 min) are of jobs whose GPU demand is unknown" in notes, notes
    assert "2 attempts have no known GPU count" in notes, notes


# --------------------------------------------------------------------------- framework logs
def test_framework_logs_only(tmp_path: Path) -> None:
    log = tmp_path / "framework" / "application_1509485239927_0001" / "attempt_0" / "stdout.txt"
    log.parent.mkdir(parents=True)
    log.write_text(
        "11/04/2017 16:18:07: Using 1 GPU(s)\n"
        "RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB (GPU 0; 11.17 GiB total "
        "capacity; 8.91 GiB already allocated; 1.94 GiB free; 9.01 GiB reserved in total by "
        "PyTorch)\n"
    )
    _ingest(tmp_path / "store", tmp_path / "framework")
    doc = _report(tmp_path / "store")
    (oom, total) = _rows(doc, "failures", "table7")
    assert (oom["reason"], oom["trials"], oom["jobs"]) == ("GPU out of memory", 1, 1)
    # Logs alone name no user and no GPU demand (before: users 0, demand 0, RTF x demand 0).
    for col in ("users", "gpu_demand_1", "gpu_demand_2_4", "gpu_demand_gt4", "rtf_x_demand"):
        assert oom[col] is None and total[col] is None, col
    repeats = _rows(doc, "failures", "repeats")
    assert all(r["users"] is None and r["users_repeating"] is None for r in repeats)
    assert "1 failed trials have no known user" in _notes(doc, "failures")
    s = _summary(doc)
    assert (s["jobs"], s["users"], s["machines"]) == (None, None, None)


def test_failed_trial_without_recorded_end(tmp_path: Path) -> None:
    """x failed (its only attempt has no end: the job's status says it ended), y failed
    after 10 minutes; both logs say CPU out of memory. Both are trials; only y's runtime to
    failure is known: p50 10 min, 100% of the known RTF."""
    import pyarrow as pa

    from philly_analyze.analysis import run
    from philly_analyze.store import Store
    from tests.analysis_stores import Att, Job, write_store

    jobs = [
        Job("x", "v", "u1", "unsuccessful", 0, [Att(0, None, "failed", {"m0": [0]})]),
        Job("y", "v", "u2", "unsuccessful", 0, [Att(0, 10, "failed", {"m0": [1]})]),
    ]
    fails = [
        {"job_id": j, "attempt_idx": 0, "reason": "CPU out of memory", "categories": "AE,U"}
        for j in ("x", "y")
    ]
    path = write_store(
        tmp_path / "store",
        machines={"m0": 8},
        jobs=jobs,
        extra={"failures": pa.Table.from_pylist(fails)},
    )
    with Store(path, read_only=True) as s:
        sec = run(s, ["failures"])["failures"]
    oom = sec.frame("table7").set_index("reason").loc["CPU out of memory"]
    assert (oom["trials"], oom["rtf_p50_min"], oom["rtf_total_pct"]) == (2, 10.0, 100.0)
    assert any(n.startswith("1 failed trials have no recorded end") for n in sec.notes)
