"""A fast path for the commonest lines of a YARN ResourceManager log.

Most lines of an RM log that carry state are application, attempt and container transitions
in log4j's default layout::

    2017-12-08 12:36:41,227 INFO org.apache...RMAppImpl: application_1_2 State change from NEW
    to NEW_SAVING on event = START

(one line). ``yarn_lines`` reads them in several steps (the header, the message by content,
one regex per kind, a ``Fact`` object, bounds checks); that cost about 25 µs per line.
``fast_row`` reads such a line with one anchored regex and returns the fact's row directly.

It claims a line only when the slow path would give the same row: the pattern below is the
header regex and the kind's message regex with their free parts made literal, anchored at both
ends, so where it matches the slow path's regexes match at the same places with the same
groups (the logger holds no space, so no message regex can start inside it). Anything else
(another layout, an unknown state, an attempt number out of bounds, a line that names an
attempt in an application's transition, trailing blanks) returns None and goes the slow way,
which reads it or rejects it with its reason. ``tests/test_yarn_fast.py`` checks that both
ways agree, on hand-made lines and on mutated ones.
"""

from __future__ import annotations

import re
from functools import cache

from philly_analyze.bounds import ATTEMPT
from philly_analyze.ingest.yarn_lines import APP_ID, CONTAINER_ID, FACT_FIELDS, rules

#: The message regexes of ``yarn_lines`` (APP_STATE_RE, ATTEMPT_STATE_RE, CONTAINER_STATE_RE)
#: with their optional parts fixed, after a default-layout header whose logger has no blank.
FAST_RE = re.compile(
    r"(\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2},\d{3}) INFO [\w.$]+: (?:"
    rf"({APP_ID}) State change from (\w+) to (\w+) on event = ([A-Z_]+)"
    r"|(appattempt_(\d+)_(\d+)_(\d+)) State change from (\w+) to (\w+) on event = ([A-Z_]+)"
    rf"|({CONTAINER_ID.replace('?P<c_ts>', '').replace('?P<c_seq>', '').replace('?P<c_n>', '')})"
    r" Container Transitioned from (\w+) to (\w+)"
    r")$"
)
_NONE_TAIL = (None,) * (len(FACT_FIELDS) - 8)
_ATTEMPT_MAX_DIGITS = len(str(int(ATTEMPT.hi)))


@cache
def _states() -> tuple[frozenset[str], frozenset[str], frozenset[str]]:
    r = rules()
    return (
        frozenset(r["app_states"]),
        frozenset(r["attempt_states"]),
        frozenset(r["container_states"]),
    )


def _attempt(digits: str) -> int | None:
    """``digits`` as an attempt number when ``bounds.ATTEMPT`` holds it, else None (the slow
    path then rejects the line with the bound's reason)."""
    if len(digits) > _ATTEMPT_MAX_DIGITS:
        return None
    n = int(digits)
    return n if ATTEMPT.lo <= n <= ATTEMPT.hi else None


def fast_row(line: str) -> tuple[str, tuple[object, ...]] | None:
    """``(ISO wall-clock time, the fact's row in FACT_FIELDS order)`` of a default-layout
    application/attempt/container transition line, or None: read ``line`` the slow way."""
    m = FAST_RE.match(line)
    if m is None:
        return None
    g = m.groups()
    ts = g[0]
    iso = (ts[:10] + "T" + ts[11:]).replace(",", ".")  # yarn_lines.iso_time of this layout
    app_states, attempt_states, container_states = _states()
    if g[1] is not None:  # an application
        if "appattempt_" in line or g[2] not in app_states or g[3] not in app_states:
            return None
        return iso, ("app", g[1], g[1], None, None, g[2], g[3], g[4], *_NONE_TAIL)
    if g[5] is not None:  # an attempt
        n = _attempt(g[8])
        if n is None or g[9] not in attempt_states or g[10] not in attempt_states:
            return None
        app = f"application_{g[6]}_{g[7]}"
        return iso, ("attempt", app, g[5], n, None, g[9], g[10], g[11], *_NONE_TAIL)
    # a container: CONTAINER_ID's groups are c_ts, c_seq, c_n
    n = _attempt(g[15])
    if n is None or g[16] not in container_states or g[17] not in container_states:
        return None
    app = f"application_{g[13]}_{g[14]}"
    return iso, ("container", app, g[12], n, g[12], g[16], g[17], None, *_NONE_TAIL)
