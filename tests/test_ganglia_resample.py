"""The per-minute rule (resample.py), run in DuckDB on hand-made samples."""

from __future__ import annotations

import duckdb
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from philly_analyze.ingest.resample import per_minute_sql

T0 = 1507014480  # 2017-10-03 07:08:00 UTC, a minute boundary
M = 60_000_000


_CON = duckdb.connect()
_CON.execute("SET TimeZone = 'UTC'")


def run(samples: list[tuple[str, int, int, float | None]]) -> dict[tuple[str, int], float]:
    """{(series, minute start in epoch s): value} for samples (series, t0 s, t1 s, value)."""
    con = _CON.cursor()
    con.execute("CREATE OR REPLACE TEMP TABLE s (k VARCHAR, t0 BIGINT, t1 BIGINT, value DOUBLE)")
    con.executemany(
        "INSERT INTO s VALUES (?, ?, ?, ?)",
        [(k, a * 1_000_000, b * 1_000_000, v) for k, a, b, v in samples],
    )
    rows = con.execute(f"SELECT k, epoch(time)::BIGINT, value FROM ({per_minute_sql('s', ['k'])})")
    return {(k, t): v for k, t, v in rows.fetchall()}


def test_instantaneous_readings_average_within_their_minute() -> None:
    got = run([("a", T0 + 10, T0 + 10, 10.0), ("a", T0 + 50, T0 + 50, 20.0)])
    assert got == {("a", T0): 15.0}


def test_a_step_straddling_minutes_is_split_by_overlap() -> None:
    got = run([("a", T0, T0 + 60, 10.0), ("a", T0 + 30, T0 + 90, 40.0)])
    # minute T0: 10 for 60 s, 40 for 30 s -> (600 + 1200) / 90 = 20; minute T0+60: only 40.
    assert got == {("a", T0): pytest.approx(20.0), ("a", T0 + 60): 40.0}


def test_coarse_rows_fill_every_minute_they_cover() -> None:
    got = run([("a", T0, T0 + 600, 7.0)])
    assert got == {("a", T0 + 60 * i): 7.0 for i in range(10)}


def test_missing_and_duplicate_samples() -> None:
    got = run(
        [
            ("a", T0 + 5, T0 + 5, 30.0),
            ("a", T0 + 5, T0 + 5, 30.0),  # the same reading captured twice counts once
            ("a", T0 + 20, T0 + 20, 60.0),
            ("a", T0 + 40, T0 + 40, None),
            ("a", T0 + 45, T0 + 45, float("nan")),
            ("b", T0 + 70, T0 + 70, float("inf")),
        ]
    )
    assert got == {("a", T0): 45.0}


def test_times_before_1970_floor_correctly() -> None:
    got = run([("a", -90, -30, 1.0)])
    assert got == {("a", -120): 1.0, ("a", -60): 1.0}


@settings(max_examples=25, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 10_000), st.floats(0, 100)), min_size=1, max_size=30))
def test_minute_rows_come_back_unchanged(rows: list[tuple[int, float]]) -> None:
    """Samples covering exactly one minute each are already per minute: unchanged."""
    by_minute = {T0 + 60 * i: v for i, v in rows}  # last value wins per minute
    got = run([("a", t, t + 60, v) for t, v in by_minute.items()])
    assert got == {("a", t): pytest.approx(v) for t, v in by_minute.items()}
