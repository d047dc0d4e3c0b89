"""Attempts without an end in jobs that ended (issue 13): one rule for every analysis.

A published-format trace written here (job log, machine list, GPU and CPU utilization) is
ingested through the real CLI, then reported and replayed. The published trace has jobs whose
status is Pass/Killed/Failed but whose attempt has ``end_time: None``; such an attempt is not
running: its run cannot be placed in time, so GPU utilization, locality, host resources, GPU
time and the replay leave it out (and say so), and the queueing cluster state holds it between
two bounds. A job without a final status ("Running" below) is still running: its last attempt
counts up to the end of the data.

The schedule, 2017-10-02 10:00-12:00 PDT, one sample per minute (120 per GPU/host); vc1 has a
quota of 100 GPUs, so no wait is fair-share. Machines m1, m3, m4 have 8 GPUs, m2 has 2.

  job  status   GPUs attempts (start-end; None = no end)              GPU util while it ran
  J1   Pass     1    10:00-10:30 m1.g0                                 60
  J2   Pass     1    10:00-None  m1.g1 (ran 10:00-10:20 by its util)   90, then 0
  J3   Running  1    11:00-None  m2.g0 (truly running)                 50
  J4   Failed   1    10:00-10:10 m2.g1 ; 10:15-None m2.g1               40 ; 80 to 10:40, then 0
  J5   Killed   16   10:00-10:20 m3+m4 ; 10:30-None m3+m4               70 ; 30 to 11:00, then 0
  J6   Killed   2    10:00-11:00 m1.g2-3                               20
  J7   Pass     1    10:00-None m1.g4 (not last) ; 11:00-11:30 m1.g4    55 to 10:45, 0 ; 65
  J8   Pass     8    submitted 10:50, 11:10-11:20 m3 (all 8)           100
Every other GPU-minute is 0. CPU: m1 70 until 10:30 then 10; m2 20; m3 and m4 40.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import pytest
from click.testing import CliRunner

from philly_analyze.cli import main
from tests.philly_files import (
    attempt,
    gpu_row,
    job,
    write_gpu_util,
    write_job_log,
    write_machine_list,
)
from tests.store_query import q

DAY = "2017-10-02"


def _hm(minute: int) -> str:
    """Minutes after 10:00 as ``HH:MM:00``."""
    return f"{10 + minute // 60:02d}:{minute % 60:02d}:00"


def _t(minute: int) -> str:
    return f"{DAY} {_hm(minute)}"


def _level(spans: Sequence[tuple[int, int, float]], minute: int) -> float:
    """The value of the span holding ``minute`` (minutes after 10:00), else 0."""
    return next((v for a, b, v in spans if a <= minute < b), 0.0)


# GPU utilization per (machine, gpu): spans (from, to, value) in minutes after 10:00.
GPU_SPANS: dict[tuple[str, int], list[tuple[int, int, float]]] = {
    ("m1", 0): [(0, 30, 60)],
    ("m1", 1): [(0, 20, 90)],
    ("m1", 2): [(0, 60, 20)],
    ("m1", 3): [(0, 60, 20)],
    ("m1", 4): [(0, 45, 55), (60, 90, 65)],
    ("m2", 0): [(60, 120, 50)],
    ("m2", 1): [(0, 10, 40), (15, 40, 80)],
    **{("m3", g): [(0, 20, 70), (30, 60, 30), (70, 80, 100)] for g in range(8)},
    **{("m4", g): [(0, 20, 70), (30, 60, 30)] for g in range(8)},
}
CPU = {"m1": [(0, 30, 70), (30, 120, 10)], "m2": [(0, 120, 20)], "m3": [(0, 120, 40)]}
CPU["m4"] = CPU["m3"]


@pytest.fixture(scope="module")
def trace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("end-rule") / "trace"
    d.mkdir()
    write_machine_list(
        d / "cluster_machine_list",
        [("m1", 8, "24GB"), ("m2", 2, "12GB"), ("m3", 8, "24GB"), ("m4", 8, "24GB")],
    )
    all8 = list(range(8))
    jobs = [
        job("J1", _t(0), [attempt(_t(0), _t(30), {"m1": [0]})]),
        job("J2", _t(0), [attempt(_t(0), "None", {"m1": [1]})]),
        job("J3", _t(60), [attempt(_t(60), None, {"m2": [0]})], status="Running"),
        job(
            "J4",
            _t(0),
            [attempt(_t(0), _t(10), {"m2": [1]}), attempt(_t(15), "None", {"m2": [1]})],
            status="Failed",
        ),
        job(
            "J5",
            _t(0),
            [
                attempt(_t(0), _t(20), {"m3": all8, "m4": all8}),
                attempt(_t(30), None, {"m3": all8, "m4": all8}),
            ],
            status="Killed",
        ),
        job("J6", _t(0), [attempt(_t(0), _t(60), {"m1": [2, 3]})], status="Killed"),
        job(
            "J7",
            _t(0),
            [attempt(_t(0), "None", {"m1": [4]}), attempt(_t(60), _t(90), {"m1": [4]})],
        ),
        job("J8", _t(50), [attempt(_t(70), _t(80), {"m3": all8})]),
    ]
    write_job_log(d / "cluster_job_log", jobs)
    rows = []
    for m in ("m1", "m2", "m3", "m4"):
        n = 2 if m == "m2" else 8
        for minute in range(120):
            vals = [f"{_level(GPU_SPANS.get((m, g), []), minute):g}" for g in range(n)]
            rows.append(gpu_row(f"{_t(minute)} PDT", m, vals))
    write_gpu_util(d / "cluster_gpu_util", rows)
    cpu = ["time,machine_id,cpu_util\n"]
    for m, spans in CPU.items():
        cpu += [f"{_t(minute)} PDT,{m},{_level(spans, minute):g}\n" for minute in range(120)]
    (d / "cluster_cpu_util").write_text("".join(cpu))
    (d.parent / "quotas.csv").write_text("vc,gpus\nvc1,100\n")
    return d


@pytest.fixture(scope="module")
def store(trace: Path) -> Path:
    s = trace.parent / "store"
    r = CliRunner().invoke(main, ["ingest", str(trace), "--store", str(s), "-q"])
    assert r.exit_code == 0, r.output
    return s


@pytest.fixture(scope="module")
def report(store: Path, trace: Path) -> dict:
    quotas = trace.parent / "quotas.csv"
    r = CliRunner().invoke(
        main,
        ["report", "--store", str(store), "--format", "json", "-q", "--vc-quotas", str(quotas)],
    )
    assert r.exit_code == 0, r.output
    return json.loads(r.output)


def _rows(doc: dict, section: str, table: str) -> list[dict]:
    return [r for r in doc[section] if r["table"] == table]


def test_ingest_timing_outcome_and_job_values(store: Path) -> None:
    rows = q(
        store,
        "SELECT job_id, attempt_idx, timing, outcome FROM attempts ORDER BY job_id, attempt_idx",
    )
    assert rows == [
        ("J1", 0, "ended", "passed"),
        ("J2", 0, "end_unknown", "passed"),  # was "running": the job passed
        ("J3", 0, "running", "running"),
        ("J4", 0, "ended", "failed"),
        ("J4", 1, "end_unknown", "failed"),
        ("J5", 0, "ended", "failed"),
        ("J5", 1, "end_unknown", "killed"),
        ("J6", 0, "ended", "killed"),
        ("J7", 0, "end_unknown", "failed"),  # a later attempt followed: not running
        ("J7", 1, "ended", "passed"),
        ("J8", 0, "ended", "passed"),
    ]
    jobs = q(
        store,
        "SELECT job_id, gpu_time_s, run_time_s, epoch(last_end) - epoch(first_start), flags "
        "FROM jobs ORDER BY job_id",
    )
    # GPU time = sum of duration x GPUs, unknown (NULL) when one attempt's duration is: J1
    # 30 min x 1 = 1800 s; J6 60 min x 2 = 7200 s; J8 10 min x 8 = 4800 s. Before, J2 and J3
    # had 0 and J4 600, J5 19,200 and J7 1800 (partial sums). J7's last attempt ended at
    # 11:30, so its run time (last end - first start) is known: 90 min = 5400 s.
    assert jobs == [
        ("J1", 1800.0, 1800.0, 1800.0, None),
        ("J2", None, None, None, ["end_unknown"]),
        ("J3", None, None, None, ["unknown_status:Running", "no_end"]),
        ("J4", None, None, None, ["end_unknown"]),
        ("J5", None, None, None, ["end_unknown"]),
        ("J6", 7200.0, 3600.0, 3600.0, None),
        ("J7", None, 5400.0, 5400.0, ["end_unknown"]),
        ("J8", 4800.0, 600.0, 600.0, None),
    ]


def test_table3_leaves_out_attempts_without_end(report: dict) -> None:
    t3 = {r["job_size"]: r for r in _rows(report, "gpu_utilization", "table3")}
    # Each job's mean over its timed attempts: J1 60 (30 min); J3 50 (running: 11:00 to the
    # last sample, 60 min); J4 40 (attempt 0 only); J5 70 (attempt 0); J6 20; J7 65 (attempt
    # 1 only); J8 100. J2 has no timed attempt: not in the table. Before the rule J2 counted
    # to 12:00 (15), J4 20.87, J5 25.45, J7 42.5: size-1 passed was mean(60, 15, 42.5) = 39.17.
    assert t3["1"]["passed"] == pytest.approx(62.5)  # mean(J1 60, J7 65)
    assert t3["1"]["unsuccessful"] == pytest.approx(40.0)
    assert t3["1"]["killed"] is None
    assert t3["1"]["all"] == pytest.approx(53.75)  # mean(60, 50, 40, 65)
    assert t3["1"]["jobs"] == 4
    assert t3["8"]["passed"] == pytest.approx(100.0)
    assert t3["16"]["killed"] == pytest.approx(70.0)
    assert t3["all"]["passed"] == pytest.approx(75.0)  # mean(60, 65, 100)
    assert t3["all"]["killed"] == pytest.approx(45.0)  # mean(J5 70, J6 20)
    assert t3["all"]["all"] == pytest.approx(405 / 7)  # mean(60, 50, 40, 70, 20, 65, 100)
    assert t3["all"]["jobs"] == 7
    minute = {r["job_size"]: r for r in _rows(report, "gpu_utilization", "table3_minute_weighted")}
    # Per GPU-minute: J1 30 x 60 + J7 30 x 65 = 3750 over 60 minutes.
    assert minute["1"]["passed"] == pytest.approx(62.5)
    # Size 1, all statuses: J1 1800 + J3 3000 + J4 400 + J7 1950 = 7150 over 130 minutes.
    assert minute["1"]["all"] == pytest.approx(7150 / 130)
    assert minute["1"]["gpu_minutes"] == 130
    notes = report["section_notes"]["gpu_utilization"]
    assert any(n.startswith("4 attempts of 4 jobs have no recorded end") for n in notes), notes


def test_table5_and_host_resources(report: dict) -> None:
    (t5,) = _rows(report, "locality", "table5")
    # J5's attempt 0 alone: 16 GPUs x 20 min at 70 on 2 servers (before: 25.45 over 2 attempts).
    assert (t5["servers"], t5["attempts"], t5["gpu_minutes"]) == (2, 1, 320)
    assert (t5["mean"], t5["p50"], t5["p95"]) == (pytest.approx(70.0), 70.0, 70.0)
    # J5's second attempt (16 GPUs, no end) is left out of Table 5, and the section says so
    # (before: no note).
    notes = report["section_notes"]["locality"]
    assert any(n.startswith("4 attempts of 4 jobs have no recorded end") for n in notes), notes
    host = {(r["metric"], r["servers"]): r for r in _rows(report, "host_resources", "host")}
    # Busy minutes: m1 [10:00, 11:30) = 90 (30 at 70 + 60 at 10 = 2700); m2 J4's 10 minutes
    # and J3 running [11:00, 12:00) = 70 at 20 = 1400; m3 J5 20 + J8 10 = 30 at 40 = 1200; m4
    # 20 at 40 = 800. All: 6100 over 210 minutes (before: 14,100 over 455 = 30.99).
    assert host[("cpu", "all")]["minutes"] == 210
    assert host[("cpu", "all")]["mean"] == pytest.approx(6100 / 210)
    assert host[("cpu", "8-GPU")]["mean"] == pytest.approx(4700 / 140)
    assert host[("cpu", "2-GPU")]["mean"] == pytest.approx(20.0)
    assert any("have no recorded end" in n for n in report["section_notes"]["host_resources"])


def test_table6_counts_jobs_with_known_gpu_time(report: dict) -> None:
    t6 = {r["status"]: r for r in _rows(report, "status", "table6")}
    # J1 and J8 passed (1800 + 4800 s), J6 killed (7200 s); J2, J4, J5, J7 have a final
    # status but unknown GPU time; J3 has no status. Before, J7 counted with 1800 s (its
    # first attempt's time missing): passed 3 of 4 jobs, 8400 of 15,600 s.
    assert (t6["passed"]["jobs"], t6["killed"]["jobs"], t6["total"]["jobs"]) == (2, 1, 3)
    assert t6["passed"]["gpu_hours"] == pytest.approx(6600 / 3600)
    assert t6["passed"]["gpu_time_pct"] == pytest.approx(100 * 6600 / 13800)
    notes = report["section_notes"]["status"]
    assert any(n.startswith("4 jobs with a final status are not counted") for n in notes), notes
    summary = {r["metric"]: r["value"] for r in report["summary"]}
    assert summary["GPU hours used"] == pytest.approx(13800 / 3600)
    assert any("leave out 5 jobs" in n for n in report["section_notes"]["summary"])


def test_cluster_state_bounds_attempts_without_end(report: dict) -> None:
    """The queueing cluster state holds an attempt without a recorded end between its two
    bounds (released at its start; held to its job's next start, else to the end of the data)
    and a wait is decided only where both give the same cause (worked out by hand):

    - J8 (8 GPUs) waited 10:50-11:10. Released at start, J5's second attempt leaves m3 and m4
      free: other. Held, J5 keeps m3 and m4, and m1 (J2's g1, J6's g2-3 to 11:00, J7's g4 to
      its retry at 11:00, then the retry) and m2 (J4's g1, J3 from 11:00) leave 5, then 6 GPUs
      free < 8: capacity. The cause depends on the unknown ends: 20 min undetermined (before,
      J5's attempt was simply left out and the wait read "other").
    - J4's retry (1 GPU) waited 10:10-10:15 and J5's retry (16 GPUs) 10:20-10:30: both bounds
      leave a placement free (m1's g5-7; m3 and m4 whole), so "other" either way.
    - J7's retry follows an attempt whose end is unknown: its wait has no known start."""
    t2 = {r["delay_type"]: r for r in _rows(report, "queueing", "table2_causes")}
    assert t2["fragmentation"]["all"] == t2["capacity"]["all"] == 0
    assert (t2["other"]["all"], t2["other"]["gpus_1"], t2["other"]["gpus_gt8"]) == (2, 1, 1)
    assert (t2["undetermined"]["all"], t2["undetermined"]["gpus_5_8"]) == (1, 1)
    paper = {r["delay_type"]: r["all"] for r in _rows(report, "queueing", "table2")}
    assert paper == {"fair_share": 0, "fragmentation": 0, "other": 2, "undetermined": 1}
    share = {r["gpu_bucket"]: r for r in _rows(report, "queueing", "wait_seconds")}["all"]
    assert share["wait_hours"] == pytest.approx(35 / 60)
    assert share["undetermined_pct"] == pytest.approx(100 * 20 / 35)
    assert share["other_pct"] == pytest.approx(100 * 15 / 35)
    notes = report["section_notes"]["queueing"]
    (note,) = [n for n in notes if n.startswith("cluster state: 4 attempts of 4 jobs")]
    # Every wait lies after 10:00, when J2's and J7's possible runs began.
    assert "3 waits (35.0 min) overlap such a possible run" in note, note
    assert "20.0 min of the waits of known demand are undetermined" in note, note
    assert any(n.startswith("1 retries follow an attempt whose end") for n in notes), notes


def test_replay_leaves_out_jobs_with_unknown_attempt_end(store: Path, trace: Path) -> None:
    quotas = trace.parent / "quotas.csv"
    r = CliRunner().invoke(
        main,
        ["replay", "--store", str(store), "--quotas", str(quotas), "--format", "json", "-q"],
    )
    assert r.exit_code == 0, r.output
    (res,) = json.loads(r.output)["results"]
    # J1, J6 and J8 replay. J2, J4, J5 and J7 have an attempt of unknown duration: replaying
    # their other attempts would change their outcome (J5 would end "failed"). J3 is running.
    assert res["metrics"]["jobs"] == 3
    notes = " ".join(res["notes"])
    assert "4 jobs not replayed: an attempt of theirs has no recorded end" in notes
    # J3, the one job left, is still running: no attempt with a duration.
    assert "1 of 8 jobs not replayed (no submit time, no GPUs, or no attempt with a" in notes
