"""The RM log line grammar on the real lines quoted in formats.md §2, and broken variants."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
from click.testing import CliRunner, Result

from philly_analyze.cli import main
from philly_analyze.ingest.yarn_lines import Malformed, machine_id, parse_message, split_record
from philly_analyze.store import Store

# Verbatim from ../shared/reference/formats.md §2 (tabs of the RMAuditLogger line included).
F_APP_NEW = (
    "2018-12-16 14:36:35 INFO  RMAppImpl:779 - application_1544960128505_0001 State change "
    "from NEW to NEW_SAVING"
)
F_ACCEPTED = (
    "2018-12-16 14:36:35 INFO  CapacityScheduler:744 - Accepted application "
    "application_1544960128505_0001 from user: arttsiom.chuiko, in queue: default"
)
F_ATTEMPT = (
    "2018-12-16 14:36:55 INFO  RMAppAttemptImpl:809 - appattempt_1544960128505_0001_000001 "
    "State change from SUBMITTED to SCHEDULED"
)
F_CONTAINER = (
    "2018-12-16 14:36:56 INFO  RMContainerImpl:422 - container_1544960128505_0001_01_000001 "
    "Container Transitioned from NEW to ALLOCATED"
)
F_ASSIGNED = (
    "2018-12-16 14:36:56 INFO  SchedulerNode:152 - Assigned container "
    "container_1544960128505_0001_01_000001 of capacity <memory:2048, vCores:1> on host "
    "192.168.100.73:55741, which has 1 containers, <memory:2048, vCores:1> used and "
    "<memory:2048, vCores:7> available after allocation"
)
RM = "org.apache.hadoop.yarn.server.resourcemanager"
F_FINAL_SAVING = (
    f"2021-11-23 10:06:50,210 INFO {RM}.rmapp.RMAppImpl: application_1637633166384_0001 State "
    "change from RUNNING to FINAL_SAVING on event = ATTEMPT_UNREGISTERED"
)
F_ATT_FINISHED = (
    f"2021-11-23 10:06:56,705 INFO {RM}.rmapp.attempt.RMAppAttemptImpl: "
    "appattempt_1637633166384_0001_000001 State change from FINISHING to FINISHED on event = "
    "CONTAINER_FINISHED"
)
F_DONE = (
    f"2021-11-23 10:06:56,708 INFO {RM}.scheduler.capacity.CapacityScheduler: Application "
    "Attempt appattempt_1637633166384_0001_000001 is done. finalState=FINISHED"
)
F_AUDIT = (
    f"2021-11-23 10:06:56,710 INFO {RM}.RMAuditLogger: USER=liuxy\tOPERATION=Application "
    "Finished - Succeeded\tTARGET=RMAppManager\tRESULT=SUCCESS\t"
    "APPID=application_1637633166384_0001"
)
F_SUMMARY = (
    f"2021-11-23 10:06:56,714 INFO {RM}.RMAppManager$ApplicationSummary: "
    "appId=application_1637633166384_0001,name=grep-search,user=liuxy,queue=default,"
    "state=FINISHED,trackingUrl=...,submitTime=1637633189105,startTime=1637633189231,"
    "launchTime=1637633189779,finishTime=1637633210210,finalStatus=SUCCEEDED,"
    "memorySeconds=120884,vcoreSeconds=87,applicationType=MAPREDUCE"
)
F_2016 = (
    f"2016-07-07 09:18:18,201 INFO {RM}.rmcontainer.RMContainerImpl: "
    "container_1467850995136_39055_01_013533 Container Transitioned from RUNNING to COMPLETED"
)


def _one(line: str) -> dict:
    rec = split_record(line)
    assert rec is not None
    facts = parse_message(rec[2])
    assert len(facts) == 1
    f = facts[0]
    return {k: getattr(f, k) for k in f.__slots__ if getattr(f, k) is not None} | {
        "_time": rec[0],
        "_exact": rec[1],
    }


def test_short_class_layout_lines() -> None:
    assert _one(F_APP_NEW) == {
        "kind": "app",
        "app": "application_1544960128505_0001",
        "eid": "application_1544960128505_0001",
        "from_state": "NEW",
        "to_state": "NEW_SAVING",
        "_time": "2018-12-16T14:36:35",
        "_exact": None,
    }
    acc = _one(F_ACCEPTED)
    assert (acc["kind"], acc["user"], acc["queue"]) == ("accepted", "arttsiom.chuiko", "default")
    att = _one(F_ATTEMPT)
    assert (att["kind"], att["app"], att["attempt"], att["to_state"]) == (
        "attempt",
        "application_1544960128505_0001",
        1,
        "SCHEDULED",
    )
    c = _one(F_CONTAINER)
    assert (c["kind"], c["container"], c["attempt"], c["to_state"]) == (
        "container",
        "container_1544960128505_0001_01_000001",
        1,
        "ALLOCATED",
    )
    a = _one(F_ASSIGNED)
    assert (a["kind"], a["host"], a.get("gpus"), a["has_cap"], a["attempt"]) == (
        "assigned",
        "192.168.100.73",
        None,  # <memory:2048, vCores:1> names no GPU type: unknown, not 0
        True,
        1,
    )


def test_fully_qualified_layout_lines() -> None:
    fs = _one(F_FINAL_SAVING)
    assert (fs["to_state"], fs["event"], fs["_time"]) == (
        "FINAL_SAVING",
        "ATTEMPT_UNREGISTERED",
        "2021-11-23T10:06:50.210",
    )
    af = _one(F_ATT_FINISHED)
    assert (af["kind"], af["from_state"], af["to_state"], af["event"]) == (
        "attempt",
        "FINISHING",
        "FINISHED",
        "CONTAINER_FINISHED",
    )
    done = _one(F_DONE)
    assert (done["kind"], done["attempt"], done["to_state"]) == ("attempt_done", 1, "FINISHED")
    audit = _one(F_AUDIT)
    assert (audit["kind"], audit["user"], audit["to_state"]) == (
        "audit_finish",
        "liuxy",
        "FINISHED",
    )
    s = _one(F_SUMMARY)
    assert (s["user"], s["queue"], s["to_state"], s["status"]) == (
        "liuxy",
        "default",
        "FINISHED",
        "SUCCEEDED",
    )
    assert (s["ms1"], s["ms2"], s["ms3"]) == (1637633189105, 1637633189231, 1637633210210)
    old = _one(F_2016)
    assert (old["app"], old["attempt"], old["from_state"], old["to_state"]) == (
        "application_1467850995136_39055",
        1,
        "RUNNING",
        "COMPLETED",
    )


def test_gpu_resources_and_hadoop3_container_ids() -> None:
    line = (
        "2021-03-01 08:00:00,001 INFO org.apache.hadoop.yarn.server.resourcemanager.scheduler."
        "SchedulerNode: Assigned container container_e07_1614585600000_0042_02_000003 of "
        "capacity <memory:49152, vCores:15, yarn.io/gpu: 4> on host m47:45454, which has 2 "
        "containers, <memory:98304, vCores:30, yarn.io/gpu: 8> used and <memory:0, vCores:2, "
        "yarn.io/gpu: 0> available after allocation"
    )
    a = _one(line)
    assert (a["app"], a["attempt"], a["host"], a["gpus"]) == (
        "application_1614585600000_0042",
        2,
        "m47",
        4,
    )


def test_microsoft_wrapper_uses_the_exact_filetime() -> None:
    line = (
        '252826:e,06/21/2017 16:10:13,yarn resourcemanager,DefaultTag,Pid="5156" Tid="39272" '
        'TS="0x01D2EAA8DD060D14" String1="17/06/21 16:10:13 INFO rmapp.RMAppImpl: '
        'application_1497832133857_0330 State change from NEW to NEW_SAVING"'
    )
    f = _one(line)
    # 0x01D2EAA8DD060D14 100-ns ticks since 1601 = 2017-06-21 16:10:13.073230 UTC
    # (1498061413.073230 s since 1970; the app's summary says startTime=1498061413073).
    assert f["_exact"] == 1498061413073230
    assert f["_time"] == "2017-06-21T16:10:13"
    assert (f["app"], f["to_state"]) == ("application_1497832133857_0330", "NEW_SAVING")


def test_continuation_lines_are_not_records() -> None:
    assert split_record("\tat org.apache.hadoop.ipc.Server$Handler.run(Server.java:2217)") is None
    assert split_record("STARTUP_MSG: Starting ResourceManager") is None
    assert split_record("") is None


@pytest.mark.parametrize(
    ("line", "reason"),
    [
        (F_APP_NEW[:-4], "unknown app state 'NEW_SA'"),  # truncated mid-state
        (F_ASSIGNED[:140], "malformed 'Assigned container' line"),  # cut before the host
        (F_SUMMARY.replace("appId=application_1637633166384_0001", "appId=app"), "valid appId"),
        (F_SUMMARY.replace("finishTime=1637633210210", "finishTime=soon"), "epoch milli"),
        (F_FINAL_SAVING.replace(" on event = ATTEMPT_UNREGISTERED", " on eve"), "malformed"),
        (F_ATTEMPT.replace("SCHEDULED", "SCHEDULD"), "unknown attempt state 'SCHEDULD'"),
    ],
)
def test_broken_known_messages_are_malformed(line: str, reason: str) -> None:
    rec = split_record(line)
    assert rec is not None
    with pytest.raises(Malformed, match=reason):
        parse_message(rec[2])


def test_unrelated_messages_give_nothing() -> None:
    rec = split_record(
        "2021-11-23 10:06:50,210 INFO org.apache.hadoop.yarn.server.resourcemanager.rmnode."
        "RMNodeImpl: m47:45454 Node Transitioned from NEW to RUNNING"
    )
    assert rec is not None and parse_message(rec[2]) == []


def test_machine_ids_drop_the_port() -> None:
    assert machine_id("m47:45454") == "m47"
    assert machine_id("192.168.100.73:55741") == "192.168.100.73"
    assert machine_id("m47") == "m47"


def _ingest(store: Path, path: Path, *args: str) -> Result:
    return CliRunner().invoke(main, ["ingest", str(path), "--store", str(store), "--json", *args])


def _frames(store: Path) -> tuple[pd.DataFrame, pd.DataFrame]:
    with Store(store, read_only=True) as s:
        return s.df("SELECT * FROM jobs"), s.df("SELECT * FROM attempts")


def _ts(s: str) -> pd.Timestamp:
    return pd.Timestamp(s, tz="UTC")


def test_summary_epochs_are_exact_and_a_wrong_zone_is_noticed(
    tmp_path: Path, store_dir: Path
) -> None:
    log = tmp_path / "rm.log"
    log.write_text("\n".join([F_FINAL_SAVING, F_ATT_FINISHED, F_DONE, F_AUDIT, F_SUMMARY]) + "\n")
    r = _ingest(store_dir, log)
    assert r.exit_code == 0
    jobs, atts = _frames(store_dir)
    j = jobs.iloc[0]
    # submitTime=1637633189105 ms = 2021-11-23 02:06:29.105Z (exact, whatever the zone).
    assert j.submit_time == _ts("2021-11-23 02:06:29.105")
    assert j.status == "passed" and pd.isna(j["flags"])
    a = atts.iloc[0]
    assert pd.isna(a.start_time) and a.outcome == "passed"
    # The lines' wall clock is UTC+8 (finishTime 02:06:50.210Z is logged at 10:06:50,210):
    # read in Los Angeles (UTC-8) they are 16 h late; the note says so.
    notes = json.loads(r.stdout)["notes"]
    assert any("+16.0 h" in n and "UTC+8" in n for n in notes), notes
    r2 = _ingest(tmp_path / "s2", log, "--timezone", "Asia/Shanghai")
    _, atts2 = _frames(tmp_path / "s2")
    assert atts2.iloc[0].end_time == _ts("2021-11-23 02:06:56.705")
    assert not any("off the exact" in n for n in json.loads(r2.stdout)["notes"])


def test_prefilter_knows_every_key_phrase() -> None:
    from philly_analyze.ingest.yarn_lines import KEY_PHRASES, has_key_phrase

    assert all(has_key_phrase(f"x {p} y") for p in KEY_PHRASES)
    assert not has_key_phrase("2021-11-23 10:00:00,000 INFO x.LeafQueue: assignedContainer ...")
