"""The SQL time parser of the CSV copy (csvcopy.parsed_time_cte): exact results and strictness."""

from __future__ import annotations

import datetime as dt

import duckdb
import pytest

from philly_analyze.ingest.csvcopy import parsed_time_cte

UTC = dt.UTC


def parse(text: str, zone: str = "America/Los_Angeles") -> dt.datetime | None:
    con = duckdb.connect()
    con.execute("SET TimeZone = 'UTC'")
    q = f"WITH raw AS (SELECT ?::VARCHAR AS time), {parsed_time_cte('raw', False)} SELECT __utc FROM parsed"
    params = [text] + [zone] * (q.count("?") - 1)
    rows = con.execute(q, params).fetchall()
    return rows[0][0] if rows else None


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2017-10-03 00:08:00 PDT", dt.datetime(2017, 10, 3, 7, 8, tzinfo=UTC)),
        ("2017-11-05 01:08:00 PDT", dt.datetime(2017, 11, 5, 8, 8, tzinfo=UTC)),
        ("2017-11-05 01:08:00 PST", dt.datetime(2017, 11, 5, 9, 8, tzinfo=UTC)),
        ("2017-12-01 10:00:00 UTC", dt.datetime(2017, 12, 1, 10, 0, tzinfo=UTC)),
        ("2017-12-01 10:00:00 GMT", dt.datetime(2017, 12, 1, 10, 0, tzinfo=UTC)),
        ("2017-12-01 10:00:00", dt.datetime(2017, 12, 1, 18, 0, tzinfo=UTC)),  # zone option
    ],
)
def test_known_forms(text: str, expected: dt.datetime) -> None:
    assert parse(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        "2017-10-03 00:08:00 XYZ",  # unknown zone: the cast alone would ignore it
        "2017-10-03 00:08:00XPDT",  # no space before the zone
        "2017-10-03 00:08:00 +07",
        "2017-10-03 00:08:00 PDTX",
        "2017-10-03 00:08 PDT",
        "2017-02-30 00:08:00 PDT",
        "yesterday",
        "",
    ],
)
def test_everything_else_is_unparsable(text: str) -> None:
    assert parse(text) is None
