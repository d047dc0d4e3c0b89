"""The fast path of RM log lines (``yarn_fast.fast_item``) gives what the general reader
(``yarn_lines.split_record`` + ``parse_message``) gives, or declines the line.

Each expected row is written out by hand below (the fields of formats.md §2's lines); the
mutation test then compares the two readers on 20,000 damaged variants of those lines, and the
end-to-end test ingests logs with the fast path on and off and compares every table.
"""

from __future__ import annotations

import random
import re
from pathlib import Path

import pytest

from philly_analyze.ingest import yarn as yarn_module
from philly_analyze.ingest.yarn_fast import fast_item
from philly_analyze.ingest.yarn_lines import (
    FACT_FIELDS,
    Malformed,
    parse_message,
    split_record,
    summary_parts,
)
from philly_analyze.store import Store
from tests.cli_ingest import ingest, ok

RM = "org.apache.hadoop.yarn.server.resourcemanager"
APP = f"2021-11-23 10:06:50,210 INFO {RM}.rmapp.RMAppImpl: application_1637633166384_0001 State change from RUNNING to FINAL_SAVING on event = ATTEMPT_UNREGISTERED"
ATTEMPT = f"2021-11-23 10:06:56,705 INFO {RM}.rmapp.attempt.RMAppAttemptImpl: appattempt_1637633166384_0001_000002 State change from FINISHING to FINISHED on event = CONTAINER_FINISHED"
CONTAINER = f"2017-12-08 12:36:43,117 INFO {RM}.rmcontainer.RMContainerImpl: container_e01_1509607459303_67704_02_000001 Container Transitioned from RUNNING to COMPLETED"
DONE = f"2021-11-23 10:06:56,708 INFO {RM}.scheduler.capacity.CapacityScheduler: Application Attempt appattempt_1637633166384_0001_000001 is done. finalState=FINISHED"
ACCEPTED = f"2017-12-08 12:36:42,183 INFO {RM}.scheduler.capacity.CapacityScheduler: Accepted application application_1509607459303_67779 from user: 7c731d, in queue: a2a5c1"
AUDIT_SUBMIT = f"2017-12-08 12:36:42,179 INFO {RM}.RMAuditLogger: USER=7c731d\tIP=10.150.252.125\tOPERATION=Submit Application Request\tTARGET=ClientRMService\tRESULT=SUCCESS\tAPPID=application_1509607459303_67779\tQUEUENAME=a2a5c1"
AUDIT_FINISH = f"2021-11-23 10:06:56,710 INFO {RM}.RMAuditLogger: USER=liuxy\tOPERATION=Application Finished - Succeeded\tTARGET=RMAppManager\tRESULT=SUCCESS\tAPPID=application_1637633166384_0001"
AUDIT_OTHER = f"2017-12-08 12:36:42,179 INFO {RM}.RMAuditLogger: USER=7c731d\tIP=10.1.2.3\tOPERATION=Get Applications Request\tTARGET=ClientRMService\tRESULT=SUCCESS"
ASSIGNED = f"2017-12-08 12:36:43,402 INFO {RM}.scheduler.SchedulerNode: Assigned container container_e01_1509607459303_67704_03_000001 of capacity <memory:49152, vCores:6, yarn.io/gpu: 1> on host m15:45454, which has 8 containers, <memory:393216, vCores:48, yarn.io/gpu: 6> used and <memory:0, vCores:0, yarn.io/gpu: 2> available after allocation"
LINES = [APP, ATTEMPT, CONTAINER, DONE, ACCEPTED, AUDIT_SUBMIT, AUDIT_FINISH, AUDIT_OTHER, ASSIGNED]


def row(kind: str, **kv: object) -> tuple[object, ...]:
    """A fact row in FACT_FIELDS order from the fields given (None elsewhere)."""
    assert set(kv) <= set(FACT_FIELDS)
    return tuple(kind if f == "kind" else kv.get(f) for f in FACT_FIELDS)


def slow_item(line: str, line_no: int) -> tuple[object, ...] | str | None:
    """What ``yarn.py`` takes from ``line`` the general way, in ``fast_item``'s form; None
    for a line it does not read as a record; ``Malformed`` is raised for one it rejects."""
    rec = split_record(line)
    if rec is None:
        return None
    iso, exact, rest = rec
    facts = parse_message(rest)
    if not facts:
        return iso
    assert len(facts) == 1
    return (*(getattr(facts[0], f) for f in FACT_FIELDS), iso, exact, line_no, line)


EXPECTED = {
    APP: row(
        "app",
        app="application_1637633166384_0001",
        eid="application_1637633166384_0001",
        from_state="RUNNING",
        to_state="FINAL_SAVING",
        event="ATTEMPT_UNREGISTERED",
    ),
    ATTEMPT: row(
        "attempt",
        app="application_1637633166384_0001",
        eid="appattempt_1637633166384_0001_000002",
        attempt=2,
        from_state="FINISHING",
        to_state="FINISHED",
        event="CONTAINER_FINISHED",
    ),
    CONTAINER: row(
        "container",
        app="application_1509607459303_67704",
        eid="container_e01_1509607459303_67704_02_000001",
        attempt=2,
        container="container_e01_1509607459303_67704_02_000001",
        from_state="RUNNING",
        to_state="COMPLETED",
    ),
    DONE: row("attempt_done", app="application_1637633166384_0001", attempt=1, to_state="FINISHED"),
    ACCEPTED: row("accepted", app="application_1509607459303_67779", user="7c731d", queue="a2a5c1"),
    AUDIT_SUBMIT: row(
        "submit_req", app="application_1509607459303_67779", user="7c731d", queue="a2a5c1"
    ),
    AUDIT_FINISH: row(
        "audit_finish", app="application_1637633166384_0001", user="liuxy", to_state="FINISHED"
    ),
    ASSIGNED: row(
        "assigned",
        app="application_1509607459303_67704",
        attempt=3,
        container="container_e01_1509607459303_67704_03_000001",
        host="m15",
        gpus=1,
        has_cap=True,
        node_gpus=8,
    ),
}


@pytest.mark.parametrize("line", list(EXPECTED), ids=lambda s: s.split(": ", 1)[1][:30])
def test_fast_item_reads_the_commonest_lines_as_written(line: str) -> None:
    item = fast_item(line, 7)
    assert isinstance(item, tuple)
    iso = line[:10] + "T" + line[11:19] + "." + line[20:23]
    assert item == (*EXPECTED[line], iso, None, 7, line)
    assert item == slow_item(line, 7)


def test_an_audit_line_without_facts_gives_its_time_only() -> None:
    assert fast_item(AUDIT_OTHER, 3) == "2017-12-08T12:36:42.179"
    assert slow_item(AUDIT_OTHER, 3) == "2017-12-08T12:36:42.179"


DECLINED = [
    # unknown state, attempt number out of bounds (rejected by the slow path)
    APP.replace("FINAL_SAVING", "FINAL_SAVIN"),
    ATTEMPT.replace("_000002 State", "_99999999 State"),
    CONTAINER.replace("to COMPLETED", "to DONE"),
    DONE.replace("finalState=FINISHED", "finalState=FINISHE"),
    AUDIT_FINISH.replace("APPID=application_1637633166384_0001", "APPID=app_1"),
    ASSIGNED.replace("yarn.io/gpu: 1>", "yarn.io/gpu: 1.5>"),
    ASSIGNED.replace("yarn.io/gpu: 2>", "yarn.io/gpu: 2000>"),
    # an application's transition naming an attempt: the slow path calls it malformed
    APP.replace("RMAppImpl", "appattempt_1.RMAppImpl"),
    # trailing blank, other layouts, non-ASCII digits, a logger called ...ApplicationSummary
    APP + " ",
    APP.replace(",210 INFO", " INFO"),
    APP.replace("2021-11-23 10:06:50,210 INFO", "21/11/23 10:06:50 INFO"),
    APP.replace("_0001 State", "_000\u0663 State"),
    DONE.replace("CapacityScheduler:", "RMAppManager$ApplicationSummary:"),
    # an audit line whose value has two blanks in a row, or names an earlier key phrase; an
    # assignment without the node's resources or with a key phrase read before it
    AUDIT_SUBMIT.replace("Submit Application", "Submit  Application"),
    AUDIT_SUBMIT.replace("USER=7c731d", "USER=Assigned container"),
    ACCEPTED.replace("7c731d,", "7c731d"),
    ASSIGNED.split(", which")[0],
    ASSIGNED.replace("vCores:6,", "vCores:6, State change from,"),
]


@pytest.mark.parametrize("line", DECLINED)
def test_fast_item_declines_what_it_cannot_vouch_for(line: str) -> None:
    assert fast_item(line, 1) is None


def test_declined_lines_with_bad_values_are_rejected_by_the_slow_path() -> None:
    for line in DECLINED[:8]:
        with pytest.raises(Malformed):
            slow_item(line, 1)


_ALPHABET = ' \t=,:._$-0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefgnoprstuvwxyz\u0663\u00a0é"<>\\'


def _mutants(rng: random.Random, base: str, n: int) -> list[str]:
    out = []
    for _ in range(n):
        s = base
        for _ in range(rng.randint(1, 3)):
            i = rng.randrange(len(s) + 1)
            op = rng.random()
            c = rng.choice(_ALPHABET)
            if op < 0.4:
                s = s[:i] + c + s[i + 1 :]
            elif op < 0.7:
                s = s[:i] + c + s[i:]
            else:
                s = s[:i] + s[i + 1 :]
        out.append(s)
    return out


def test_fast_path_agrees_with_the_slow_path_on_20000_mutants() -> None:
    rng = random.Random(14)
    claimed = 0
    for base in LINES:
        for line in _mutants(rng, base, 2500):
            fast = fast_item(line, 9)
            if fast is None:
                continue
            claimed += 1
            try:
                slow = slow_item(line, 9)
            except Malformed as e:
                raise AssertionError(
                    f"fast path read a line the slow path rejects: {line!r}"
                ) from e
            assert fast == slow, line
    assert claimed > 2000  # the fast path still takes many of them (where it vouches)


def test_summary_parts_split_as_the_look_behind_regex() -> None:
    rng = random.Random(3)
    look_behind = re.compile(r"(?<!\\),")
    cases = ["a=1,b=2", "a\\,b,c", "a\\,,b", ",a,,\\,", "\\\\,x", ""]
    cases += ["".join(rng.choice("ab=,\\") for _ in range(rng.randint(0, 12))) for _ in range(3000)]
    for body in cases:
        assert summary_parts(body) == look_behind.split(body), body


def test_ingest_gives_the_same_tables_with_and_without_the_fast_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every table of the sample logs plus damaged lines, with the fast path and without."""
    sample = Path(__file__).resolve().parents[1] / "sample_data" / "yarn"
    logs = tmp_path / "logs"
    logs.mkdir()
    for f in sample.iterdir():
        (logs / f.name).write_bytes(f.read_bytes())
    extra = [*LINES, *DECLINED, "2021-11-23 99:06:50,210 INFO x.Y: " + APP.split(": ", 1)[1]]
    extra += _mutants(random.Random(5), ATTEMPT, 300)
    (logs / "yarn-resourcemanager.log.9").write_text("\n".join(extra) + "\n")
    # The damaged lines are rejects, which fail the run (exit 1); the tables are the point.
    ok(ingest(tmp_path / "fast", logs, "--max-rejects", "all"))
    monkeypatch.setattr(yarn_module, "fast_item", lambda line, line_no: None)
    ok(ingest(tmp_path / "slow", logs, "--max-rejects", "all"))
    tables = ["jobs", "attempts", "placements", "scheduler_events", "rejects"]
    with Store(tmp_path / "fast", read_only=True) as fast, Store(tmp_path / "slow") as slow:
        for t in tables:
            rows = []
            for store in (fast, slow):
                df = store.df(f"SELECT * FROM {t}").drop(columns=["batch_id"], errors="ignore")
                rows.append(sorted(map(repr, df.itertuples(index=False))))
            assert rows[0] == rows[1], t
            assert rows[0] or t == "placements", t
        assert fast.scalar("SELECT count(*) FROM rejects") > 10
