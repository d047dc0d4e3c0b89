"""The line grammar of YARN ResourceManager logs (formats.md §2).

A line is a log4j record: a timestamp, a level, a logger and a message. The layouts met in
practice differ only before the message, so the logger is not parsed; messages are found by
content:

- ``2021-11-23 10:06:50,210 INFO org.apache...rmapp.RMAppImpl: MSG`` (default layout),
- ``2018-12-16 14:36:35 INFO  RMAppImpl:779 - MSG`` (short class, no milliseconds),
- ``... INFO  rmapp.RMAppImpl (RMAppImpl.java:handle(912)) - MSG``,
- ``17/06/21 16:10:13 INFO rmapp.RMAppImpl: MSG`` (Hadoop's console layout),
- the same wrapped in the record of Microsoft's 2017 logging pipeline:
  ``252826:e,06/21/2017 16:10:13,yarn resourcemanager,DefaultTag,Pid="5156" Tid="39272"
  TS="0x01D2EAA8DD060D14" String1="17/06/21 16:10:13 INFO rmapp.RMAppImpl: MSG"``. ``TS`` is a
  Windows FILETIME (100 ns ticks since 1601-01-01 UTC): an exact UTC time, used instead of the
  zone-less wall clock.

Lines without a timestamp (stack traces, the STARTUP_MSG banner, wrapped long messages) are
continuation lines and are ignored. A line that carries one of the messages below but does not
parse (truncated, unknown state) is rejected with its line number.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

from philly_analyze.bounds import (
    ATTEMPT,
    MACHINE_GPUS,
    MAX_INT_DIGITS,
    TIME,
    Bound,
    OutOfRange,
    excerpt,
)

_TS = (
    r"(?P<ts>\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}:\d{2}(?:[,.]\d{1,6})?"
    r"|\d{2}/\d{2}/\d{2} \d{2}:\d{2}:\d{2}(?:[,.]\d{1,6})?)"
)
HEADER_RE = re.compile(_TS + r"\s+(?:TRACE|DEBUG|INFO|WARN|WARNING|ERROR|FATAL)\s+(?P<rest>.*)")
#: A line that starts like a timestamp (used to tell a bad time from a continuation line).
TS_LIKE_RE = re.compile(r"\d{2,4}[-/]\d{2}[-/]\d{2}[ T]\d{1,2}:")
WRAPPED_RE = re.compile(
    r'(?:\d+:)?[A-Za-z],\d{2}/\d{2}/\d{4} \d{2}:\d{2}:\d{2},.*?String1="(?P<inner>.*)"\s*$'
)
FILETIME_RE = re.compile(r'\bTS="0x(?P<ft>[0-9A-Fa-f]{1,16})"')
#: FILETIME ticks (100 ns) between 1601-01-01 and 1970-01-01.
FILETIME_EPOCH_TICKS = 116_444_736_000_000_000

APP_ID = r"application_\d+_\d+"
ATTEMPT_ID = r"appattempt_(?P<a_ts>\d+)_(?P<a_seq>\d+)_(?P<a_n>\d+)"
CONTAINER_ID = r"container_(?:e\d+_)?(?P<c_ts>\d+)_(?P<c_seq>\d+)_(?P<c_n>\d+)_\d+"
_EVENT = r"(?:\s+on\s+event\s*=\s*(?P<event>[A-Z_]+))?\s*$"

#: A line can only matter if it contains one of these (``has_key_phrase`` checks them).
KEY_PHRASES = (
    "State change from",
    "Container Transitioned from",
    "Assigned container",
    "Accepted application",
    "OPERATION=",
    "ApplicationSummary",
    "is done. finalState",
    "Storing attempt",
    "Recovering app",
    "activated in queue",
    "Starting ResourceManager",
)


def has_key_phrase(line: str) -> bool:
    """Cheap pre-filter: whether ``line`` contains one of ``KEY_PHRASES``. A chain of ``in``
    tests is about three times faster than one regex alternation over the same phrases."""
    return (
        "State change from" in line
        or "Container Transitioned from" in line
        or "Assigned container" in line
        or "Accepted application" in line
        or "OPERATION=" in line
        or "ApplicationSummary" in line
        or "is done. finalState" in line
        or "Storing attempt" in line
        or "Recovering app" in line
        or "activated in queue" in line
        or "Starting ResourceManager" in line
    )


APP_STATE_RE = re.compile(
    rf"\b(?P<id>{APP_ID}) State change from (?P<from>\w+) to (?P<to>\w+){_EVENT}"
)
ATTEMPT_STATE_RE = re.compile(
    rf"\b(?P<id>{ATTEMPT_ID}) State change from (?P<from>\w+) to (?P<to>\w+){_EVENT}"
)
CONTAINER_STATE_RE = re.compile(
    rf"\b(?P<id>{CONTAINER_ID}) Container Transitioned from (?P<from>\w+) to (?P<to>\w+)\s*$"
)
ACCEPTED_RE = re.compile(
    rf"Accepted application (?P<app>{APP_ID}) from user: (?P<user>[^\s,]+),? "
    r"in queue: (?P<queue>[^\s,]+)"
)
ACTIVATED_RE = re.compile(
    rf"Application (?P<app>{APP_ID}) from user: (?P<user>\S+) activated in queue: (?P<queue>\S+)"
)
ASSIGNED_RE = re.compile(
    rf"Assigned container (?P<id>{CONTAINER_ID}) of capacity (?P<cap><[^>]*>) "
    r"on host (?P<host>[^\s,]+),"
    r"(?: which has \d+ containers?, (?P<used><[^>]*>) used and (?P<avail><[^>]*>) available)?"
)
STORING_RE = re.compile(
    rf"Storing attempt: AppId: {APP_ID} AttemptId: {ATTEMPT_ID} MasterContainer: Container: "
    rf"\[ContainerId: (?P<id>{CONTAINER_ID}),.*?NodeId: (?P<host>[^\s,]+),"
    r".*?Resource: (?P<cap><[^>]*>)"
)
DONE_RE = re.compile(rf"Application Attempt {ATTEMPT_ID} is done\. finalState=(?P<state>\w+)")
RECOVERING_RE = re.compile(rf"Recovering app(?:lication)?:? (?P<app>{APP_ID})")
AUDIT_FIELD_RE = re.compile(r"\b(?P<k>[A-Z]+)=(?P<v>.*?)(?=\s+[A-Z]+=|\s*$)")
SUMMARY_RE = re.compile(r"ApplicationSummary: (?P<body>appId=.*)$")
GPU_RE = re.compile(r"yarn\.io/gpu\s*:\s*(\d+)(?![\d.])")
CAPACITY_RE = re.compile(r"<memory:\s*\d+.*>")
PORT_RE = re.compile(r":\d+$")
APP_ID_RE = re.compile(APP_ID + "$")


@cache
def rules() -> dict[str, Any]:
    """The state machines and mappings of ``data/yarn_rm.json``."""
    text = resources.files("philly_analyze").joinpath("data/yarn_rm.json").read_text()
    return json.loads(text)


@cache
def _state_sets() -> dict[str, frozenset[str]]:
    r = rules()
    return {
        "app": frozenset(r["app_states"]),
        "attempt": frozenset(r["attempt_states"]),
        "container": frozenset(r["container_states"]),
    }


class Malformed(ValueError):
    """A line that carries a known message but does not parse."""


@dataclass(slots=True)
class Fact:
    """One piece of evidence from one line (columns of the session's fact table)."""

    kind: str
    app: str | None = None
    #: The full id of the entity of a transition (appattempt_..., container_...).
    eid: str | None = None
    attempt: int | None = None
    container: str | None = None
    from_state: str | None = None
    to_state: str | None = None
    event: str | None = None
    host: str | None = None
    gpus: int | None = None
    has_cap: bool | None = None
    #: GPUs of the node (used + available after an assignment), when the RM counts GPUs.
    node_gpus: int | None = None
    user: str | None = None
    queue: str | None = None
    status: str | None = None
    ms1: int | None = None
    ms2: int | None = None
    ms3: int | None = None


FACT_FIELDS = tuple(Fact.__slots__)


def split_record(line: str) -> tuple[str, int | None, str] | None:
    """``(iso wall-clock time, exact UTC epoch µs or None, rest of the line)`` of a log4j
    record, unwrapping the Microsoft record; None for a continuation line."""
    exact: int | None = None
    if 'String1="' in line:
        w = WRAPPED_RE.match(line)
        if w is not None:
            ft = FILETIME_RE.search(line, 0, w.start("inner"))
            if ft is not None:
                exact = (int(ft.group("ft"), 16) - FILETIME_EPOCH_TICKS) // 10
            line = w.group("inner")
    m = HEADER_RE.match(line)
    if m is None:
        return None
    return iso_time(m.group("ts")), exact, m.group("rest")


def iso_time(ts: str) -> str:
    """A log4j timestamp as ISO 8601 (``17/06/21 16:10:13`` -> ``2017-06-21T16:10:13``)."""
    if ts[2] == "/":  # yy/MM/dd: Hadoop's console layout, years 2000-2099
        return f"20{ts[0:2]}-{ts[3:5]}-{ts[6:8]}T{ts[9:]}".replace(",", ".")
    return (ts[:10] + "T" + ts[11:]).replace(",", ".")


def machine_id(host: str) -> str:
    """YARN NodeId -> machine id: drop the port (``m47:45454`` -> ``m47``)."""
    return PORT_RE.sub("", host)


def container_gpus(cap: str) -> int | None:
    """GPUs of a container's capacity; None when the resources name no GPU type (an RM that
    does not schedule GPUs: the count is unknown, not 0; a GPU-aware RM lists
    ``yarn.io/gpu: 0`` for CPU-only containers)."""
    if not CAPACITY_RE.fullmatch(cap):
        raise Malformed(f"unparsable resource {excerpt(cap)}")
    g = GPU_RE.search(cap)
    if g is None and "yarn.io/gpu" in cap:  # -1, inf, 1.5: not "an RM that counts no GPUs"
        raise Malformed(f"yarn.io/gpu in {excerpt(cap)} is not a whole number")
    return bounded(MACHINE_GPUS, g.group(1), "yarn.io/gpu") if g else None


def bounded(bound: Bound, digits: str, what: str) -> int:
    """``digits`` as an int inside ``bound``; ``Malformed`` (the line is rejected) outside."""
    # Plain ASCII digits inside the bound, the usual case, without Bound.int_of's regex.
    if len(digits) <= MAX_INT_DIGITS and digits.isascii() and digits.isdigit():
        n = int(digits)
        if bound.lo <= n <= bound.hi:
            return n
    try:
        return bound.int_of(digits)
    except OutOfRange as e:
        raise Malformed(f"{what}: {e}") from None


def _check_state(entity: str, *states: str) -> None:
    known = _state_sets()[entity]
    for s in states:
        if s not in known:
            raise Malformed(f"unknown {entity} state {excerpt(s)} (truncated line?)")


def _app_of(ts: str, seq: str) -> str:
    return f"application_{ts}_{seq}"


def parse_message(rest: str) -> list[Fact]:
    """Facts of one record's message (after the header). Empty for messages that carry no
    application state; ``Malformed`` for a known message that does not parse."""
    if "State change from" in rest:
        return _state_change(rest)
    if "Container Transitioned from" in rest:
        m = CONTAINER_STATE_RE.search(rest)
        if m is None:
            raise Malformed("malformed container transition")
        _check_state("container", m["from"], m["to"])
        return [
            Fact(
                "container",
                _app_of(m["c_ts"], m["c_seq"]),
                eid=m["id"],
                attempt=bounded(ATTEMPT, m["c_n"], "container's attempt"),
                container=m["id"],
                from_state=m["from"],
                to_state=m["to"],
            )
        ]
    if "Assigned container" in rest:
        m = ASSIGNED_RE.search(rest)
        if m is None:
            raise Malformed("malformed 'Assigned container' line")
        return [_container_fact("assigned", m)]
    if "Accepted application" in rest:
        m = ACCEPTED_RE.search(rest)
        if m is None:
            raise Malformed("malformed 'Accepted application' line")
        return [Fact("accepted", m["app"], user=m["user"], queue=m["queue"])]
    if "OPERATION=" in rest:
        return _audit(rest)
    if "ApplicationSummary" in rest:
        return _summary(rest)
    if "is done. finalState" in rest:
        m = DONE_RE.search(rest)
        if m is None:
            raise Malformed("malformed 'Application Attempt ... is done' line")
        _check_state("attempt", m["state"])
        app = _app_of(m["a_ts"], m["a_seq"])
        return [
            Fact(
                "attempt_done",
                app,
                attempt=bounded(ATTEMPT, m["a_n"], "attempt"),
                to_state=m["state"],
            )
        ]
    if "Storing attempt" in rest:
        m = STORING_RE.search(rest)
        if m is None:
            raise Malformed("malformed 'Storing attempt' line")
        return [_container_fact("am_container", m)]
    if "Recovering app" in rest:
        m = RECOVERING_RE.search(rest)
        return [Fact("recovering", m["app"])] if m else []
    if "activated in queue" in rest:
        m = ACTIVATED_RE.search(rest)
        return [Fact("activated", m["app"], user=m["user"], queue=m["queue"])] if m else []
    if "Starting ResourceManager" in rest:
        return [Fact("rm_start")]
    return []


def _state_change(rest: str) -> list[Fact]:
    m = None if "appattempt_" in rest else APP_STATE_RE.search(rest)
    if m is not None:
        _check_state("app", m["from"], m["to"])
        return [
            Fact(
                "app",
                m["id"],
                eid=m["id"],
                from_state=m["from"],
                to_state=m["to"],
                event=m["event"],
            )
        ]
    m = ATTEMPT_STATE_RE.search(rest)
    if m is not None:
        _check_state("attempt", m["from"], m["to"])
        app = _app_of(m["a_ts"], m["a_seq"])
        return [
            Fact(
                "attempt",
                app,
                eid=m["id"],
                attempt=bounded(ATTEMPT, m["a_n"], "attempt"),
                from_state=m["from"],
                to_state=m["to"],
                event=m["event"],
            )
        ]
    if "application_" in rest or "appattempt_" in rest:
        raise Malformed("malformed state change")
    return []  # state changes of other entities: not ours


def _node_gpus(m: re.Match[str]) -> int | None:
    """A node's GPUs from ``<...> used and <...> available``; None if the RM counts no GPUs."""
    if "used" not in m.groupdict() or m["used"] is None:
        return None
    return node_gpus(m["used"], m["avail"])


def node_gpus(used_text: str, avail_text: str) -> int | None:
    """A node's GPUs from the resources it has used and available; None if they name none."""
    used, avail = GPU_RE.search(used_text), GPU_RE.search(avail_text)
    if used is None or avail is None:
        return None
    n = bounded(MACHINE_GPUS, used[1], "GPUs used") + bounded(MACHINE_GPUS, avail[1], "available")
    return bounded(MACHINE_GPUS, str(n), "GPUs of the node (used + available)")


def _container_fact(kind: str, m: re.Match[str]) -> Fact:
    return Fact(
        kind,
        _app_of(m["c_ts"], m["c_seq"]),
        attempt=bounded(ATTEMPT, m["c_n"], "container's attempt"),
        container=m["id"],
        host=machine_id(m["host"]),
        gpus=container_gpus(m["cap"]),
        has_cap=True,
        node_gpus=_node_gpus(m),
    )


def _audit(rest: str) -> list[Fact]:
    return audit_facts({m["k"]: m["v"].strip() for m in AUDIT_FIELD_RE.finditer(rest)})


def audit_facts(fields: dict[str, str]) -> list[Fact]:
    """Facts of an RMAuditLogger line's ``KEY=value`` fields; ``Malformed`` for a bad APPID."""
    op = fields.get("OPERATION")
    app = fields.get("APPID")
    r = rules()
    if op is None or app is None:
        return []
    if not APP_ID_RE.match(app):
        raise Malformed(f"malformed APPID {excerpt(app)}")
    if op == r["audit_submit_operation"]:
        return [Fact("submit_req", app, user=fields.get("USER"), queue=fields.get("QUEUENAME"))]
    state = r["audit_finish_operations"].get(op)
    if state is not None:
        return [Fact("audit_finish", app, user=fields.get("USER"), to_state=state)]
    return []


#: The keys of an ApplicationSummary line that are read.
_SUMMARY_KEYS = (
    "appId",
    "state",
    "user",
    "queue",
    "finalStatus",
    "submitTime",
    "startTime",
    "finishTime",
)


def summary_parts(body: str) -> list[str]:
    """``body`` split at the commas that no backslash escapes (what ``re.split(r"(?<!\\\\),",
    body)`` gives), by ``str.split`` and a re-join after each piece that ends in a backslash:
    the regex's look-behind cost 14 µs a line, this 3 µs."""
    if "\\" not in body:
        return body.split(",")
    parts: list[str] = []
    for piece in body.split(","):
        # The comma before ``piece`` followed the last character read so far.
        if parts and parts[-1].endswith("\\"):
            parts[-1] += "," + piece
        else:
            parts.append(piece)
    return parts


def _summary(rest: str) -> list[Fact]:
    m = SUMMARY_RE.search(rest)
    if m is None:
        raise Malformed("malformed ApplicationSummary line")
    raw: dict[str, str] = {}
    for part in summary_parts(m["body"]):
        k, sep, v = part.partition("=")
        if sep:
            raw[k.strip()] = v
    # Values unescaped only for the keys read (of some twenty).
    kv = {k: raw[k].replace("\\,", ",").strip() for k in _SUMMARY_KEYS if k in raw}
    app = kv.get("appId", "")
    if not APP_ID_RE.match(app):
        raise Malformed(f"ApplicationSummary without a valid appId ({excerpt(app)})")
    state = kv.get("state")
    if state is not None:
        _check_state("app", state)

    def ms(key: str) -> int | None:
        v = kv.get(key)
        if v is None or v in ("", "0", "-1", "N/A"):
            return None
        if not (v.isascii() and v.isdigit()):
            raise Malformed(f"ApplicationSummary {key}={excerpt(v)} is not epoch milliseconds")
        if len(v) > 16 or not TIME.ok_us(int(v) * 1000):
            raise Malformed(f"ApplicationSummary {key}: {TIME.reason(v)}")
        return int(v)

    return [
        Fact(
            "summary",
            app,
            user=kv.get("user"),
            queue=kv.get("queue"),
            to_state=state,
            status=kv.get("finalStatus"),
            ms1=ms("submitTime"),
            ms2=ms("startTime"),
            ms3=ms("finishTime"),
        )
    ]
