"""A fast path for the commonest lines of a YARN ResourceManager log.

Most lines of an RM log that carry state are application, attempt and container transitions
in log4j's default layout::

    2017-12-08 12:36:41,227 INFO org.apache...RMAppImpl: application_1_2 State change from NEW
    to NEW_SAVING on event = START

(one line), then audit lines, ``Assigned container``, ``Application Attempt ... is done``
and ``Accepted application`` lines. ``yarn_lines`` reads a line in several steps (the header,
the message by content, one regex per kind, a ``Fact`` object, bounds checks): 6 to 30 µs a
line by kind, measured on a shared machine; ``fast_item`` reads these with one anchored regex
and returns the fact's row directly.

It claims a line only when the slow path would give the same row: the pattern below is the
header regex and each kind's message regex with their free parts made literal and their
character classes cut to ASCII, anchored at both ends, so where it matches the slow path's
regexes match at the same places with the same groups (the logger holds no blank, ``:`` or
``=``, so no message regex can start inside it). Anything else (another layout, non-ASCII
text, an unknown state, an attempt number out of bounds, a line that names an attempt in an
application's transition, trailing blanks) returns None and goes the slow way, which reads it
or rejects it with its reason. ``tests/test_yarn_fast.py`` checks that both ways agree, on
hand-made lines and on mutated ones.
"""

from __future__ import annotations

import operator
import re

from philly_analyze.bounds import ATTEMPT
from philly_analyze.ingest.yarn_lines import (
    FACT_FIELDS,
    Fact,
    Malformed,
    audit_facts,
    bounded,
    container_gpus,
    machine_id,
    node_gpus,
    rules,
)

#: log4j's default layout: time with milliseconds, level INFO, a logger of ASCII word
#: characters and dots (``$`` for inner classes), no blank, ``:`` or ``=`` (possessive: the
#: class stops at the ``:`` that follows it).
_HEADER = (
    r"([0-9]{4}-[0-9]{2}-[0-9]{2} [0-9]{2}:[0-9]{2}:[0-9]{2},[0-9]{3}) INFO [A-Za-z0-9_.$]++: "
)
_N = "[0-9]+"
_W = "[A-Za-z0-9_]+"
#: Printable ASCII but blank and comma (inside ``[^\s,]``).
_WORD_NO_COMMA = r"[\x21-\x2b\x2d-\x7e]+"
#: ``yarn_lines``'s APP_STATE_RE, ATTEMPT_STATE_RE, CONTAINER_STATE_RE, DONE_RE and
#: ACCEPTED_RE with their optional parts fixed, after ``_HEADER``, to the end of the line.
FAST_RE = re.compile(
    _HEADER + "(?:"
    rf"(application_{_N}_{_N}) State change from ({_W}) to ({_W}) on event = ([A-Z_]+)"
    rf"|(appattempt_({_N})_({_N})_({_N})) State change from ({_W}) to ({_W}) "
    r"on event = ([A-Z_]+)"
    rf"|(container_(?:e{_N}_)?({_N})_({_N})_({_N})_{_N}) Container Transitioned from ({_W}) "
    rf"to ({_W})"
    rf"|Application Attempt (appattempt_({_N})_({_N})_({_N})) is done\. finalState=({_W})"
    rf"|Accepted application (application_{_N}_{_N}) from user: ({_WORD_NO_COMMA}), in "
    rf"queue: ({_WORD_NO_COMMA})"
    ")$"
)
#: Printable ASCII but ``>`` (inside ``[^>]``).
_RESOURCES = r"<[\x20-\x3d\x3f-\x7e]*>"
#: ``yarn_lines.ASSIGNED_RE`` with its optional part present, to the end of the line.
ASSIGNED_FAST_RE = re.compile(
    _HEADER + rf"Assigned container (container_(?:e{_N}_)?({_N})_({_N})_({_N})_{_N}) of capacity "
    rf"({_RESOURCES}) on host ({_WORD_NO_COMMA}), which has {_N} containers?, ({_RESOURCES}) "
    rf"used and ({_RESOURCES}) available after allocation$"
)
#: An audit value: a word of printable ASCII, then words of printable ASCII without "=" after
#: single blanks. No ``\s+[A-Z]+=`` starts inside it and it does not end in a blank, so
#: ``yarn_lines.AUDIT_FIELD_RE`` ends it exactly at the tab before the next ``KEY=``.
_VALUE = r"[\x21-\x7e]*+(?: [\x21-\x3c\x3e-\x7e]++)*+"
#: An RMAuditLogger line (default layout) of tab-separated ``KEY=value`` fields.
AUDIT_FAST_RE = re.compile(_HEADER + rf"((?>[A-Z]+={_VALUE})(?>\t[A-Z]+={_VALUE})*+)$")
#: Phrases ``yarn_lines.parse_message`` looks for before ``OPERATION=``: a line that holds one
#: of them is not read as an audit line there, so not here either.
_BEFORE_AUDIT = (
    "State change from",
    "Container Transitioned from",
    "Assigned container",
    "Accepted application",
)
_FIELDS_OF = operator.attrgetter(*FACT_FIELDS)
_APP_STATES = frozenset(rules()["app_states"])
_ATTEMPT_STATES = frozenset(rules()["attempt_states"])
_CONTAINER_STATES = frozenset(rules()["container_states"])
_ATTEMPT_LO, _ATTEMPT_HI = ATTEMPT.lo, ATTEMPT.hi
_ATTEMPT_MAX_DIGITS = len(str(int(ATTEMPT.hi)))


def _attempt(digits: str) -> int | None:
    """``digits`` as an attempt number when ``bounds.ATTEMPT`` holds it, else None (the slow
    path then rejects the line with the bound's reason)."""
    if len(digits) > _ATTEMPT_MAX_DIGITS:
        return None
    n = int(digits)
    return n if _ATTEMPT_LO <= n <= _ATTEMPT_HI else None


def fast_item(line: str, line_no: int) -> tuple[object, ...] | str | None:
    """A line (without NUL) of a kind above as ``yarn.py``'s chunk item: the fact's row in
    FACT_FIELDS order, then its ISO wall-clock time, None (no exact time), ``line_no`` and
    ``line``. Only the time (a ``str``) for a record that carries no fact; None when the line
    is not one of these: read it the slow way (``yarn_lines``)."""
    m = FAST_RE.match(line)
    if m is None:
        if "OPERATION=" in line:
            return _audit_item(line, line_no)
        return _assigned_item(line, line_no) if "Assigned container" in line else None
    g = m.groups()
    ts = g[0]
    iso = f"{ts[:10]}T{ts[11:19]}.{ts[20:]}"  # yarn_lines.iso_time of this layout
    if g[1] is not None:  # an application's transition
        if "appattempt_" in line or g[2] not in _APP_STATES or g[3] not in _APP_STATES:
            return None
        # fmt: off
        return ("app", g[1], g[1], None, None, g[2], g[3], g[4],
                None, None, None, None, None, None, None, None, None, None,
                iso, None, line_no, line)
        # fmt: on
    if g[5] is not None:  # an attempt's transition
        n = _attempt(g[8])
        if n is None or g[9] not in _ATTEMPT_STATES or g[10] not in _ATTEMPT_STATES:
            return None
        # fmt: off
        return ("attempt", f"application_{g[6]}_{g[7]}", g[5], n, None, g[9], g[10], g[11],
                None, None, None, None, None, None, None, None, None, None,
                iso, None, line_no, line)
        # fmt: on
    if g[12] is not None:  # a container's transition
        n = _attempt(g[15])
        if n is None or g[16] not in _CONTAINER_STATES or g[17] not in _CONTAINER_STATES:
            return None
        # fmt: off
        return ("container", f"application_{g[13]}_{g[14]}", g[12], n, g[12], g[16], g[17],
                None, None, None, None, None, None, None, None, None, None, None,
                iso, None, line_no, line)
        # fmt: on
    if g[18] is not None:  # an attempt is done (a logger may be called ...ApplicationSummary)
        n = _attempt(g[21])
        if n is None or g[22] not in _ATTEMPT_STATES or "ApplicationSummary" in line:
            return None
        fact = Fact("attempt_done", f"application_{g[19]}_{g[20]}", attempt=n, to_state=g[22])
    else:
        fact = Fact("accepted", g[23], user=g[24], queue=g[25])
    return (*_FIELDS_OF(fact), iso, None, line_no, line)


def _audit_item(line: str, line_no: int) -> tuple[object, ...] | str | None:
    """``fast_item`` of an RMAuditLogger line (``yarn_lines._audit`` by a tab split)."""
    if 'String1="' in line or any(p in line for p in _BEFORE_AUDIT):
        return None
    m = AUDIT_FAST_RE.match(line)
    if m is None:
        return None
    fields = {}
    for part in m[2].split("\t"):
        k, _, v = part.partition("=")
        fields[k] = v.strip()
    try:
        facts = audit_facts(fields)
    except Malformed:
        return None  # the slow path rejects it with the reason
    ts = m[1]
    iso = f"{ts[:10]}T{ts[11:19]}.{ts[20:]}"
    return (*_FIELDS_OF(facts[0]), iso, None, line_no, line) if facts else iso


def _assigned_item(line: str, line_no: int) -> tuple[object, ...] | None:
    """``fast_item`` of an ``Assigned container`` line (``yarn_lines._container_fact``, whose
    value checks it calls)."""
    if "State change from" in line or "Container Transitioned from" in line:
        return None  # parse_message reads these first
    m = ASSIGNED_FAST_RE.match(line)
    if m is None:
        return None
    ts, cid, c_ts, c_seq, c_n, cap, host, used, avail = m.groups()
    try:
        fact = Fact(
            "assigned",
            f"application_{c_ts}_{c_seq}",
            attempt=bounded(ATTEMPT, c_n, "container's attempt"),
            container=cid,
            host=machine_id(host),
            gpus=container_gpus(cap),
            has_cap=True,
            node_gpus=node_gpus(used, avail),
        )
    except Malformed:
        return None  # the slow path rejects it with the reason
    return (*_FIELDS_OF(fact), f"{ts[:10]}T{ts[11:19]}.{ts[20:]}", None, line_no, line)
