"""YARN RM logs end to end: the real CLI on generated logs shaped like formats.md §2.

Expected times are worked out by hand: 2021-11-23 is PST (UTC-8) in Los Angeles, so
10:00:05,000 local is 18:00:05.000Z.
"""

from __future__ import annotations

import gzip
import json
from datetime import UTC, datetime
from pathlib import Path

import pandas as pd
from click.testing import CliRunner, Result

from philly_analyze.cli import main
from philly_analyze.store import Store

RM = "org.apache.hadoop.yarn.server.resourcemanager"
CLS = {
    "app": "rmapp.RMAppImpl",
    "att": "rmapp.attempt.RMAppAttemptImpl",
    "cont": "rmcontainer.RMContainerImpl",
    "node": "scheduler.SchedulerNode",
    "cs": "scheduler.capacity.CapacityScheduler",
    "audit": "RMAuditLogger",
    "sum": "RMAppManager$ApplicationSummary",
}
A1 = "application_1637633166384_0001"
A2 = "application_1637633166384_0002"


def line(ts: str, cls: str, msg: str) -> str:
    return f"2021-11-23 {ts} INFO {RM}.{CLS[cls]}: {msg}"


def app(ts: str, app_id: str, a: str, b: str, ev: str) -> str:
    return line(ts, "app", f"{app_id} State change from {a} to {b} on event = {ev}")


def att(ts: str, app_id: str, n: int, a: str, b: str, ev: str) -> str:
    aid = app_id.replace("application_", "appattempt_") + f"_{n:06d}"
    return line(ts, "att", f"{aid} State change from {a} to {b} on event = {ev}")


def container(ts: str, app_id: str, n: int, c: int, host: str, gpus: int) -> list[str]:
    cid = app_id.replace("application_", "container_") + f"_{n:02d}_{c:06d}"
    return [
        line(ts, "cont", f"{cid} Container Transitioned from NEW to ALLOCATED"),
        line(
            ts,
            "node",
            f"Assigned container {cid} of capacity <memory:49152, vCores:15, yarn.io/gpu: "
            f"{gpus}> on host {host}:45454, which has 1 containers, <memory:49152, vCores:15, "
            f"yarn.io/gpu: {gpus}> used and <memory:0, vCores:1, yarn.io/gpu: {8 - gpus}> "
            "available after allocation",
        ),
    ]


def submit(ts: str, app_id: str, user: str, queue: str) -> list[str]:
    return [
        app(ts + ",000", app_id, "NEW", "NEW_SAVING", "START"),
        app(ts + ",010", app_id, "NEW_SAVING", "SUBMITTED", "APP_NEW_SAVED"),
        line(
            ts + ",020",
            "cs",
            f"Accepted application {app_id} from user: {user}, in queue: {queue}",
        ),
        app(ts + ",030", app_id, "SUBMITTED", "ACCEPTED", "APP_ACCEPTED"),
    ]


def attempt_run(ts: str, app_id: str, n: int, ev_from: str = "SUBMITTED") -> list[str]:
    return [
        att(ts, app_id, n, "SCHEDULED", "ALLOCATED_SAVING", "CONTAINER_ALLOCATED"),
        att(ts, app_id, n, "ALLOCATED_SAVING", "ALLOCATED", "ATTEMPT_NEW_SAVED"),
        att(ts, app_id, n, "ALLOCATED", "LAUNCHED", "LAUNCHED"),
        att(ts, app_id, n, "LAUNCHED", "RUNNING", "REGISTERED"),
    ]


def summary(ts: str, app_id: str, state: str, final: str, submit_ms: int, finish_ms: int) -> str:
    return line(
        ts,
        "sum",
        f"appId={app_id},name=resnet\\, v2,user=liuxy,queue=vc1,state={state},trackingUrl=...,"
        f"submitTime={submit_ms},startTime={submit_ms},launchTime={submit_ms},"
        f"finishTime={finish_ms},finalStatus={final},memorySeconds=1,vcoreSeconds=1,"
        "applicationType=YARN",
    )


def gpu_app_lines() -> list[str]:
    """A1: one attempt on 8 GPUs (m47, m48) that succeeds; A2 (interleaved): two attempts
    on 2 GPUs, both fail."""
    a1 = [
        *submit("10:00:00", A1, "liuxy", "vc1"),
        att("10:00:00,040", A1, 1, "NEW", "SUBMITTED", "START"),
        att("10:00:00,050", A1, 1, "SUBMITTED", "SCHEDULED", "ATTEMPT_ADDED"),
        *container("10:00:05,000", A1, 1, 1, "m1", 0),
        *attempt_run("10:00:05,010", A1, 1),
        app("10:00:06,001", A1, "ACCEPTED", "RUNNING", "ATTEMPT_REGISTERED"),
        *container("10:00:07,000", A1, 1, 2, "m47", 4),
        *container("10:00:07,000", A1, 1, 3, "m48", 4),
    ]
    a2 = [
        *submit("10:00:01", A2, "bob", "vc2"),
        att("10:00:01,500", A2, 1, "NEW", "SUBMITTED", "START"),
        att("10:00:01,600", A2, 1, "SUBMITTED", "SCHEDULED", "ATTEMPT_ADDED"),
        *container("10:10:00,000", A2, 1, 1, "m47", 2),
        *attempt_run("10:10:00,100", A2, 1),
        app("10:10:01,000", A2, "ACCEPTED", "RUNNING", "ATTEMPT_REGISTERED"),
        att("10:30:00,000", A2, 1, "RUNNING", "FAILED", "CONTAINER_FINISHED"),
        line(
            "10:30:00,001",
            "cs",
            f"Application Attempt {A2.replace('application_', 'appattempt_')}_000001 is done. "
            "finalState=FAILED",
        ),
        app("10:30:00,002", A2, "RUNNING", "ACCEPTED", "ATTEMPT_FAILED"),
        att("10:30:00,003", A2, 2, "NEW", "SUBMITTED", "START"),
        att("10:30:00,004", A2, 2, "SUBMITTED", "SCHEDULED", "ATTEMPT_ADDED"),
        *container("10:30:10,000", A2, 2, 1, "m48", 2),
        *attempt_run("10:30:10,100", A2, 2),
        app("10:30:11,000", A2, "ACCEPTED", "RUNNING", "ATTEMPT_REGISTERED"),
        att("10:45:00,000", A2, 2, "RUNNING", "FAILED", "CONTAINER_FINISHED"),
        app("10:45:00,100", A2, "RUNNING", "FINAL_SAVING", "ATTEMPT_FAILED"),
        app("10:45:00,200", A2, "FINAL_SAVING", "FAILED", "APP_UPDATE_SAVED"),
        # 2021-11-23T18:00:01Z = 1637690401 s; 18:45:00.200Z = 1637693100.2 s.
        summary("10:45:00,300", A2, "FAILED", "FAILED", 1637690401000, 1637693100200),
    ]
    a1_end = [
        app("11:00:00,000", A1, "RUNNING", "FINAL_SAVING", "ATTEMPT_UNREGISTERED"),
        app("11:00:00,100", A1, "FINAL_SAVING", "FINISHING", "APP_UPDATE_SAVED"),
        att("11:00:04,000", A1, 1, "RUNNING", "FINAL_SAVING", "UNREGISTERED"),
        att("11:00:04,100", A1, 1, "FINAL_SAVING", "FINISHING", "ATTEMPT_UPDATE_SAVED"),
        att("11:00:05,000", A1, 1, "FINISHING", "FINISHED", "CONTAINER_FINISHED"),
        app("11:00:05,002", A1, "FINISHING", "FINISHED", "ATTEMPT_FINISHED"),
        line(
            "11:00:05,010",
            "audit",
            f"USER=liuxy\tOPERATION=Application Finished - Succeeded\tTARGET=RMAppManager\t"
            f"RESULT=SUCCESS\tAPPID={A1}",
        ),
        # 2021-11-23T18:00:00Z = 1637690400 s; 19:00:05.002Z = 1637694005.002 s.
        summary("11:00:05,020", A1, "FINISHED", "SUCCEEDED", 1637690400000, 1637694005002),
    ]
    # Interleave the two apps line by line, as a busy RM does.
    mixed: list[str] = []
    for i in range(max(len(a1), len(a2))):
        mixed += a1[i : i + 1] + a2[i : i + 1]
    return sorted(mixed, key=lambda ln: ln[:23]) + a1_end


def ingest(store: Path, *paths: Path, args: tuple[str, ...] = ()) -> Result:
    r = CliRunner().invoke(
        main, ["ingest", *map(str, paths), "--store", str(store), "--json", *args]
    )
    return r


def ts(s: str) -> pd.Timestamp:
    return pd.Timestamp(s, tz="UTC")


def frames(store: Path) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    with Store(store, read_only=True) as s:
        return (
            s.df("SELECT * FROM jobs ORDER BY job_id"),
            s.df("SELECT * FROM attempts ORDER BY job_id, attempt_idx"),
            s.df("SELECT * FROM placements ORDER BY job_id, attempt_idx, machine_id"),
        )


def test_gpu_jobs_attempts_placements(tmp_path: Path, store_dir: Path) -> None:
    log = tmp_path / "yarn-yarn-resourcemanager-rm1.log"
    log.write_text("\n".join(gpu_app_lines()) + "\n")
    r = ingest(store_dir, log)
    assert r.exit_code == 0, r.output
    jobs, atts, pl = frames(store_dir)
    j = jobs.set_index("job_id")
    assert j.loc[A1, ["vc", "user_id", "status"]].to_numpy().tolist() == ["vc1", "liuxy", "passed"]
    assert j.loc[A1, "submit_time"] == ts("2021-11-23 18:00:00")
    assert j.loc[A1, "num_gpus"] == 8 and j.loc[A1, "num_attempts"] == 1
    assert j.loc[A2, ["vc", "user_id", "status"]].to_numpy().tolist() == [
        "vc2",
        "bob",
        "unsuccessful",
    ]
    assert j.loc[A2, "submit_time"] == ts("2021-11-23 18:00:01")
    assert j.loc[A2, "num_attempts"] == 2
    assert pd.isna(j["flags"].loc[A1]) and pd.isna(j["flags"].loc[A2])
    a = atts.set_index(["job_id", "attempt_idx"])
    # A1: first evidence of resources = AM container allocated at 10:00:05,000.
    assert a.loc[(A1, 0), "start_time"] == ts("2021-11-23 18:00:05")
    assert a.loc[(A1, 0), "end_time"] == ts("2021-11-23 19:00:05")
    assert a.loc[(A1, 0), ["num_gpus", "num_machines", "outcome"]].to_numpy().tolist() == [
        8,
        2,
        "passed",
    ]
    assert a.loc[(A1, 0), "duration_s"] == 3600.0
    assert a.loc[(A2, 0), "start_time"] == ts("2021-11-23 18:10:00")
    assert a.loc[(A2, 0), "end_time"] == ts("2021-11-23 18:30:00")
    assert a.loc[(A2, 1), "start_time"] == ts("2021-11-23 18:30:10")
    assert a.loc[(A2, 1), "end_time"] == ts("2021-11-23 18:45:00")
    assert a.loc[(A2, 0), "outcome"] == "failed" and a.loc[(A2, 1), "outcome"] == "failed"
    assert a.loc[(A2, 1), ["num_gpus", "num_machines"]].to_numpy().tolist() == [2, 1]
    got = pl.groupby(["job_id", "attempt_idx", "machine_id"]).size().to_dict()
    assert got == {(A1, 0, "m47"): 4, (A1, 0, "m48"): 4, (A2, 0, "m47"): 2, (A2, 1, "m48"): 2}
    assert pl["gpu_idx"].isna().all()
    with Store(store_dir, read_only=True) as s:
        ev = s.df("SELECT * FROM scheduler_events")
        machines = s.df("SELECT * FROM machines ORDER BY machine_id")
    n_transitions = sum(
        1 for ln in gpu_app_lines() if "State change from" in ln or "Container Transitioned" in ln
    )
    assert len(ev) == n_transitions
    cont = ev[(ev.entity == "container") & (ev.entity_id.str.endswith("_0001_01_000002"))]
    assert cont["machine_id"].tolist() == ["m47"]
    fin = ev[(ev.job_id == A1) & (ev.entity == "app") & (ev.to_state == "FINAL_SAVING")]
    assert fin["event"].tolist() == ["ATTEMPT_UNREGISTERED"]
    # Every host that ran a container, with its GPUs (used + available): 8 each.
    assert machines[["machine_id", "num_gpus"]].values.tolist() == [
        ["m1", 8],
        ["m47", 8],
        ["m48", 8],
    ]
    out = json.loads(r.stdout)
    assert {s["format"] for s in out["sources"]} == {"yarn_rm_log"}


def test_rolled_files_in_any_order_give_the_same_result(tmp_path: Path) -> None:
    lines = gpu_app_lines()
    whole = tmp_path / "whole" / "rm.log"
    whole.parent.mkdir()
    whole.write_text("\n".join(lines) + "\n")
    rolled = tmp_path / "rolled"
    rolled.mkdir()
    cut1, cut2 = len(lines) // 3, 2 * len(lines) // 3
    # log4j rolls: .log.2 oldest, .log newest. Compressed .2, given newest first.
    with gzip.open(rolled / "yarn-rm.log.2.gz", "wt") as f:
        f.write("\n".join(lines[:cut1]) + "\n")
    (rolled / "yarn-rm.log.1").write_text("\n".join(lines[cut1:cut2]) + "\n")
    (rolled / "yarn-rm.log").write_text("\n".join(lines[cut2:]) + "\n")
    r1 = ingest(tmp_path / "s1", whole)
    r2 = ingest(
        tmp_path / "s2",
        rolled / "yarn-rm.log",
        rolled / "yarn-rm.log.2.gz",
        rolled / "yarn-rm.log.1",
    )
    assert r1.exit_code == 0 and r2.exit_code == 0, r2.output
    for a, b in zip(frames(tmp_path / "s1"), frames(tmp_path / "s2"), strict=True):
        pd.testing.assert_frame_equal(a, b)
    with Store(tmp_path / "s2", read_only=True) as s:
        log = s.df("SELECT source, tables, provided FROM ingest_log ORDER BY source")
    assert len(log) == 3
    per_file = [json.loads(t)["scheduler_events"] for t in log["tables"]]
    assert sum(per_file) == len(
        [ln for ln in lines if "State change" in ln or "Transitioned" in ln]
    )


def test_log_starting_and_ending_mid_application(tmp_path: Path, store_dir: Path) -> None:
    """formats.md's 2018 lines: submission seen, the log ends while the attempt runs; the 2021
    lines: the log starts when the app is finishing (its submission is before the log)."""
    lines = [
        "2018-12-16 14:36:35 INFO  RMAppImpl:779 - application_1544960128505_0001 State change "
        "from NEW to NEW_SAVING",
        "2018-12-16 14:36:35 INFO  CapacityScheduler:744 - Accepted application "
        "application_1544960128505_0001 from user: arttsiom.chuiko, in queue: default",
        "2018-12-16 14:36:55 INFO  RMAppAttemptImpl:809 - appattempt_1544960128505_0001_000001 "
        "State change from SUBMITTED to SCHEDULED",
        "2018-12-16 14:36:56 INFO  RMContainerImpl:422 - container_1544960128505_0001_01_000001 "
        "Container Transitioned from NEW to ALLOCATED",
        "2018-12-16 14:36:56 INFO  SchedulerNode:152 - Assigned container "
        "container_1544960128505_0001_01_000001 of capacity <memory:2048, vCores:1> on host "
        "192.168.100.73:55741, which has 1 containers, <memory:2048, vCores:1> used and "
        "<memory:2048, vCores:7> available after allocation",
    ]
    log = tmp_path / "rm.log"
    log.write_text("\n".join(lines) + "\n")
    assert ingest(store_dir, log).exit_code == 0
    jobs, atts, pl = frames(store_dir)
    j = jobs.iloc[0]
    # 2018-12-16 is PST: 14:36:35 -> 22:36:35Z.
    assert j.submit_time == ts("2018-12-16 22:36:35")
    assert (j.vc, j.user_id) == ("default", "arttsiom.chuiko")
    assert pd.isna(j.status) and list(j["flags"]) == ["no_end"]
    a = atts.iloc[0]
    assert a.start_time == ts("2018-12-16 22:36:56") and pd.isna(a.end_time)
    # <memory:2048, vCores:1>: an RM that schedules no GPUs, so the count is unknown.
    assert (a.outcome, a.num_machines) == ("running", 1) and pd.isna(a.num_gpus)
    assert pl.empty  # no GPU known to be held


def test_rm_restart_mid_file(tmp_path: Path, store_dir: Path) -> None:
    """A1 runs, the RM restarts and recovers it (Hadoop 2.8+ logs RECOVER), A1 finishes; a new
    app of the restarted RM (new cluster timestamp) runs after."""
    b1 = "application_1637690000000_0001"
    lines = [
        *submit("10:00:00", A1, "liuxy", "vc1"),
        att("10:00:00,040", A1, 1, "NEW", "SUBMITTED", "START"),
        att("10:00:00,050", A1, 1, "SUBMITTED", "SCHEDULED", "ATTEMPT_ADDED"),
        *container("10:00:05,000", A1, 1, 2, "m47", 4),
        *attempt_run("10:00:05,010", A1, 1),
        line("10:20:00,000", "cs", "SHUTDOWN_MSG: "),
        "/************************************************************",
        "SHUTDOWN_MSG: Shutting down ResourceManager at rm1/10.0.0.1",
        line("10:21:00,000", "cs", "STARTUP_MSG: "),
        "/************************************************************",
        "STARTUP_MSG: Starting ResourceManager",
        "STARTUP_MSG:   host = rm1/10.0.0.1",
        line("10:21:05,000", "app", f"Recovering app: {A1} with 1 attempts and final state = null"),
        app("10:21:05,100", A1, "NEW", "ACCEPTED", "RECOVER"),
        att("10:21:05,200", A1, 1, "NEW", "LAUNCHED", "RECOVER"),
        # work-preserving recovery re-reports the container on its node
        line(
            "10:21:06,000",
            "cont",
            f"{A1.replace('application_', 'container_')}_01_000002 "
            "Container Transitioned from NEW to RUNNING",
        ),
        *container("10:21:06,000", A1, 1, 2, "m47", 4)[1:],
        att("10:21:07,000", A1, 1, "LAUNCHED", "RUNNING", "REGISTERED"),
        app("10:21:07,100", A1, "ACCEPTED", "RUNNING", "ATTEMPT_REGISTERED"),
        *submit("10:30:00", b1, "carol", "vc3"),
        att("11:00:05,000", A1, 1, "FINISHING", "FINISHED", "CONTAINER_FINISHED"),
        app("11:00:05,002", A1, "FINISHING", "FINISHED", "ATTEMPT_FINISHED"),
    ]
    log = tmp_path / "rm.log"
    log.write_text("\n".join(lines) + "\n")
    r = ingest(store_dir, log)
    assert r.exit_code == 0
    jobs, atts, pl = frames(store_dir)
    j = jobs.set_index("job_id")
    assert j.loc[A1, "submit_time"] == ts("2021-11-23 18:00:00")  # not the recovery time
    assert j.loc[A1, "status"] == "passed" and list(j["flags"].loc[A1]) == ["rm_recovered"]
    a = atts.set_index(["job_id", "attempt_idx"])
    assert a.loc[(A1, 0), "start_time"] == ts("2021-11-23 18:00:05")
    assert a.loc[(A1, 0), "end_time"] == ts("2021-11-23 19:00:05")
    assert a.loc[(A1, 0), "num_gpus"] == 4  # the re-reported container counted once
    assert len(pl[pl.job_id == A1]) == 4
    assert list(j["flags"].loc[b1]) == ["no_end", "no_attempts"]
    notes = json.loads(r.stdout)["notes"]
    assert any("1 ResourceManager start" in n for n in notes)


def test_kill_while_queued(tmp_path: Path, store_dir: Path) -> None:
    lines = [
        *submit("10:00:00", A1, "liuxy", "vc1"),
        att("10:00:00,040", A1, 1, "NEW", "SUBMITTED", "START"),
        att("10:00:00,050", A1, 1, "SUBMITTED", "SCHEDULED", "ATTEMPT_ADDED"),
        app("10:05:00,000", A1, "ACCEPTED", "KILLING", "KILL"),
        att("10:05:00,001", A1, 1, "SCHEDULED", "KILLED", "KILL"),
        app("10:05:00,002", A1, "KILLING", "FINAL_SAVING", "ATTEMPT_KILLED"),
        app("10:05:00,003", A1, "FINAL_SAVING", "KILLED", "APP_UPDATE_SAVED"),
    ]
    log = tmp_path / "rm.log"
    log.write_text("\n".join(lines) + "\n")
    assert ingest(store_dir, log).exit_code == 0
    jobs, atts, _ = frames(store_dir)
    # The attempt was created and killed before it launched: it did not run, so like the
    # published trace the store has no attempt row for it (its transitions are still events).
    assert jobs.iloc[0].status == "killed" and list(jobs.iloc[0]["flags"]) == ["no_attempts"]
    assert atts.empty
    assert pd.isna(jobs.iloc[0].first_start) and jobs.iloc[0].num_attempts == 0


def _on_fall_back_day(app: str, t: str, a: str, b: str) -> str:
    """An RMAppImpl state change on 2021-11-07, when Los Angeles repeats 01:00-01:59."""
    return f"2021-11-07 {t} INFO {RM}.rmapp.RMAppImpl: {app} State change from {a} to {b}"


def test_fall_back_hour_is_read_in_log_order(tmp_path: Path, store_dir: Path) -> None:
    """2021-11-07 01:00-01:59 happens twice in Los Angeles (PDT, then PST)."""
    aid = "application_1636200000000_0001"

    def at(t: str, a: str, b: str) -> str:
        return _on_fall_back_day(aid, t, a, b)

    lines = [
        at("01:30:00,000", "NEW", "NEW_SAVING"),  # first pass: 08:30Z (PDT)
        at("01:50:00,000", "NEW_SAVING", "SUBMITTED"),  # 08:50Z
        at("01:10:00,000", "SUBMITTED", "ACCEPTED"),  # clock fell back: 09:10Z (PST)
        at("02:05:00,000", "ACCEPTED", "KILLED"),  # 10:05Z
    ]
    log = tmp_path / "rm.log"
    log.write_text("\n".join(lines) + "\n")
    assert ingest(store_dir, log).exit_code == 0
    assert _event_times(store_dir, "line_no") == [
        ts("2021-11-07 08:30"),
        ts("2021-11-07 08:50"),
        ts("2021-11-07 09:10"),
        ts("2021-11-07 10:05"),
    ]


def _event_times(store_dir: Path, order: str) -> list[object]:
    """scheduler_events times, ordered by the column ``order`` (a literal of the test)."""
    with Store(store_dir, read_only=True) as s:
        return s.df(f"SELECT time FROM scheduler_events ORDER BY {order}")["time"].tolist()


def test_rolled_file_that_begins_inside_the_repeated_hour(tmp_path: Path, store_dir: Path) -> None:
    """rm.log.1 ends in the first 01:xx (PDT); rm.log begins in the second (PST), with no
    earlier line of its own to say so: the hour-long jump its first-occurrence reading would
    need to reach 02:05 tells it is the second."""
    aid = "application_1636200000000_0002"

    def at(t: str, a: str, b: str) -> str:
        return _on_fall_back_day(aid, t, a, b)

    (tmp_path / "rm.log.1").write_text(at("01:40:00,000", "NEW", "NEW_SAVING") + "\n")
    (tmp_path / "rm.log").write_text(
        "\n".join(
            [
                at("01:20:00,000", "NEW_SAVING", "SUBMITTED"),  # second pass: 09:20Z (PST)
                at("01:45:00,000", "SUBMITTED", "ACCEPTED"),  # 09:45Z
                at("02:05:00,000", "ACCEPTED", "KILLED"),  # 10:05Z
            ]
        )
        + "\n"
    )
    assert ingest(store_dir, tmp_path / "rm.log", tmp_path / "rm.log.1").exit_code == 0
    assert _event_times(store_dir, "time") == [
        ts("2021-11-07 08:40"),
        ts("2021-11-07 09:20"),
        ts("2021-11-07 09:45"),
        ts("2021-11-07 10:05"),
    ]


def test_yarn_and_published_trace_are_one_job(tmp_path: Path, store_dir: Path) -> None:
    job_log = tmp_path / "cluster_job_log"
    job_log.write_text(
        json.dumps(
            [
                {
                    "status": "Pass",
                    "vc": "6214e9",
                    "jobid": A1,
                    "attempts": [
                        {
                            "start_time": "2021-11-23 10:00:05",
                            "end_time": "2021-11-23 11:00:05",
                            "detail": [
                                {"ip": "m47", "gpus": [f"gpu{i}" for i in range(4)]},
                                {"ip": "m48", "gpus": [f"gpu{i}" for i in range(4)]},
                            ],
                        }
                    ],
                    "submitted_time": "2021-11-23 10:00:00",
                    "user": "ab12cd",
                }
            ]
        )
    )
    rm = tmp_path / "rm.log"
    rm.write_text("\n".join(gpu_app_lines()) + "\n")
    assert ingest(store_dir, job_log, rm).exit_code == 0
    with Store(store_dir, read_only=True) as s:
        jobs = s.df("SELECT * FROM jobs WHERE job_id = ?", [A1])
        atts = s.df("SELECT * FROM attempts WHERE job_id = ?", [A1])
        pl = s.df("SELECT * FROM placements WHERE job_id = ?", [A1])
        log = s.df("SELECT format, provided FROM ingest_log ORDER BY format")
    assert len(jobs) == 1
    j = jobs.iloc[0]
    # Columns from the preferred source (the published trace), the job known to both.
    assert (j.vc, j.user_id, j.status, j.source) == (
        "6214e9",
        "ab12cd",
        "passed",
        "philly_job_log,yarn_rm_log",
    )
    assert len(atts) == 1 and atts.iloc[0].source == "philly_job_log"
    assert sorted(pl.gpu_idx.tolist()) == [0, 0, 1, 1, 2, 2, 3, 3]  # the trace knows indices
    provided = dict(zip(log.format, log.provided, strict=True))
    assert provided["philly_job_log"].startswith("jobs: vc, user_id, status, submit_time")
    assert provided["yarn_rm_log"].startswith("jobs: submit_time, vc, user_id, status; attempts")
    assert "placements" in provided["yarn_rm_log"]


def test_reingest_is_idempotent(tmp_path: Path, store_dir: Path) -> None:
    log = tmp_path / "rm.log"
    log.write_text("\n".join(gpu_app_lines()) + "\n")
    assert ingest(store_dir, log).exit_code == 0
    before = frames(store_dir)
    r = ingest(store_dir, log)
    assert json.loads(r.stdout)["sources"][0]["status"] == "skipped"
    for a, b in zip(before, frames(store_dir), strict=True):
        pd.testing.assert_frame_equal(a, b)
    assert datetime(2021, 11, 23, tzinfo=UTC) < before[0].submit_time.min()


def _published_and_rm(seed: int, n_jobs: int) -> tuple[list[dict], list[str]]:
    """The same jobs as a Philly job log and as RM log lines (docs/raw-sources.md, "For
    writers of these formats"). Times in Los Angeles wall clock, whole seconds."""
    import random

    rng = random.Random(seed)
    base = pd.Timestamp("2017-10-03 08:00:00")
    jobs: list[dict] = []
    lines: list[tuple[pd.Timestamp, str]] = []

    def at(t: pd.Timestamp, cls: str, msg: str) -> None:
        lines.append((t, f"{t:%Y-%m-%d %H:%M:%S},000 INFO {RM}.{CLS[cls]}: {msg}"))

    for j in range(n_jobs):
        aid = f"application_1506638472019_{j + 1:04d}"
        ids = aid.removeprefix("application_")
        submit = base + pd.Timedelta(seconds=rng.randrange(0, 36000))
        status = rng.choice(["Pass", "Pass", "Killed", "Failed"])
        n_att = rng.choice([1, 1, 2]) if status != "Killed" else 1
        gpus = rng.choice([1, 2, 4, 8, 16])
        vc, user = f"vc{rng.randrange(3)}", f"u{rng.randrange(5)}"
        at(submit, "app", f"{aid} State change from NEW to NEW_SAVING on event = START")
        at(submit, "cs", f"Accepted application {aid} from user: {user}, in queue: {vc}")
        t = submit + pd.Timedelta(seconds=rng.randrange(1, 3600))
        attempts = []
        for n in range(1, n_att + 1):
            start, end = t, t + pd.Timedelta(seconds=rng.randrange(60, 7200))
            hosts = [f"m{h}" for h in rng.sample(range(100), max(1, gpus // 8))]
            detail = []
            for c, host in enumerate(hosts, 1):
                g = min(gpus, 8)
                detail.append({"ip": host, "gpus": [f"gpu{i}" for i in range(g)]})
                cid = f"container_{ids}_{n:02d}_{c:06d}"
                at(start, "cont", f"{cid} Container Transitioned from NEW to ALLOCATED")
                at(
                    start,
                    "node",
                    f"Assigned container {cid} of capacity <memory:1, vCores:1, yarn.io/gpu: {g}>"
                    f" on host {host}:45454, which has 1 containers, <memory:1, vCores:1, "
                    f"yarn.io/gpu: {g}> used and <memory:1, vCores:1, yarn.io/gpu: {8 - g}> "
                    "available after allocation",
                )
            last = n == n_att
            final = {"Pass": "FINISHED", "Killed": "KILLED", "Failed": "FAILED"}[status]
            att_final = (
                final if last and final != "FINISHED" else ("FINISHED" if last else "FAILED")
            )
            aname = f"appattempt_{ids}_{n:06d}"
            at(end, "att", f"{aname} State change from RUNNING to {att_final}")
            attempts.append(
                {
                    "start_time": f"{start:%Y-%m-%d %H:%M:%S}",
                    "end_time": f"{end:%Y-%m-%d %H:%M:%S}",
                    "detail": detail,
                }
            )
            t = end + pd.Timedelta(seconds=rng.randrange(1, 60))
        at(end, "app", f"{aid} State change from FINAL_SAVING to {final}")
        jobs.append(
            {
                "status": status,
                "vc": vc,
                "jobid": aid,
                "attempts": attempts,
                "submitted_time": f"{submit:%Y-%m-%d %H:%M:%S}",
                "user": user,
            }
        )
    return jobs, [ln for _, ln in sorted(lines, key=lambda x: x[0])]


def test_rm_log_gives_what_the_published_trace_says(tmp_path: Path) -> None:
    jobs, lines = _published_and_rm(seed=7, n_jobs=40)
    (tmp_path / "cluster_job_log").write_text(json.dumps(jobs))
    (tmp_path / "rm.log").write_text("\n".join(lines) + "\n")
    assert ingest(tmp_path / "pub", tmp_path / "cluster_job_log").exit_code == 0
    assert ingest(tmp_path / "raw", tmp_path / "rm.log").exit_code == 0
    pub, raw = frames(tmp_path / "pub"), frames(tmp_path / "raw")
    cols = ["job_id", "vc", "user_id", "status", "submit_time", "num_gpus", "num_attempts"]
    pd.testing.assert_frame_equal(pub[0][cols], raw[0][cols])
    acols = ["job_id", "attempt_idx", "start_time", "end_time", "num_gpus", "num_machines"]
    acols += ["duration_s", "outcome"]
    pd.testing.assert_frame_equal(pub[1][acols], raw[1][acols])
    # The RM never knows GPU indices: compare GPUs per job, attempt and machine.
    keys = ["job_id", "attempt_idx", "machine_id"]
    assert pub[2].groupby(keys).size().to_dict() == raw[2].groupby(keys).size().to_dict()
