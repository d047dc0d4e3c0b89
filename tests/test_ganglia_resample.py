"""The per-minute rule (resample.py), run in DuckDB on hand-made samples."""

from __future__ import annotations

import itertools

import duckdb
import pyarrow as pa
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


def reference(samples: list[tuple[str, int, int, float]]) -> dict[tuple[str, int], float]:
    """The rule written out minute by minute in Python (module docstring of resample.py):
    each minute's value is the mean of the samples touching it, weighted by seconds of
    overlap (an instantaneous sample weighs 1 s); the same sample twice counts once."""
    sums: dict[tuple[str, int], list[float]] = {}
    for k, a, b, v in set(samples):
        if a == b:
            pieces = [(a // 60 * 60, 1.0)]
        else:
            start = a // 60 * 60
            pieces = [(t, float(min(b, t + 60) - max(a, t))) for t in range(start, b, 60) if t < b]
        for t, w in pieces:
            acc = sums.setdefault((k, t), [0.0, 0.0])
            acc[0] += v * w
            acc[1] += w
    return {key: s / w for key, (s, w) in sums.items()}


def run_window(
    samples: list[tuple[str, int, int, float]], minutes: tuple[int, int] | None = None
) -> dict[tuple[str, int], float]:
    """``run``, restricted to the minutes lo <= m < hi (epoch minutes) when given; the samples
    go in as one Arrow table (row-by-row inserts made the property test take minutes)."""
    con = _CON.cursor()
    k, a, b, v = zip(*samples, strict=True)
    con.register(
        "s",
        pa.table(
            {
                "k": pa.array(k, pa.string()),
                "t0": pa.array([x * 1_000_000 for x in a], pa.int64()),
                "t1": pa.array([x * 1_000_000 for x in b], pa.int64()),
                "value": pa.array(v, pa.float64()),
            }
        ),
    )
    sql = per_minute_sql("s", ["k"], minutes=minutes)
    rows = con.execute(f"SELECT k, epoch(time)::BIGINT, value FROM ({sql})").fetchall()
    return {(k, t): v for k, t, v in rows}


def test_one_sample_per_minute_keeps_its_value_exactly() -> None:
    """A minute only one sample touches gets its value itself, even when the sample covers
    part of the minute (no v * w / w rounding)."""
    v = 0.1 + 0.2
    got = run([("a", T0 + 15, T0 + 75, v), ("a", T0 + 600, T0 + 2520, 1 / 3)])
    assert got[("a", T0)] == v and got[("a", T0 + 60)] == v
    assert {t for (_, t) in got} == {T0, T0 + 60, *range(T0 + 600, T0 + 2520, 60)}
    assert all(got[("a", t)] == 1 / 3 for t in range(T0 + 600, T0 + 2520, 60))


def test_neighbours_overlapping_by_one_instant_share_that_minute() -> None:
    # A 10-minute row, a reading at its first second and one inside it; a second series alone.
    got = run(
        [
            ("a", T0, T0 + 600, 10.0),
            ("a", T0, T0, 40.0),
            ("a", T0 + 300, T0 + 300, 70.0),
            ("b", T0 + 300, T0 + 300, 5.0),
        ]
    )
    # minute T0: 10 for 60 s and 40 for 1 s -> 640 / 61; minute T0+300: (600 + 70) / 61.
    assert got[("a", T0)] == pytest.approx(640 / 61)
    assert got[("a", T0 + 300)] == pytest.approx(670 / 61)
    assert got[("a", T0 + 60)] == 10.0 and got[("a", T0 + 540)] == 10.0
    assert got[("b", T0 + 300)] == 5.0 and len(got) == 11


_sample = st.tuples(
    st.sampled_from(["a", "b"]),
    st.integers(0, 1200),
    st.sampled_from([0, 0, 15, 45, 60, 60, 90, 360, 600]),
    st.integers(0, 100).map(float),
)


@settings(max_examples=60, deadline=None)
@given(st.lists(_sample, min_size=1, max_size=25), st.integers(0, 25), st.integers(6, 20))
def test_the_sql_follows_the_rule_whole_and_by_windows(
    raw: list[tuple[str, int, int, float]], cut: int, width: int
) -> None:
    """Random mixes of instantaneous readings, aligned and straddling steps, coarse rows and
    overlaps: the SQL gives the rule's values, and resampling by windows of minutes gives the
    same rows as resampling at once. (Samples of one series and span with different values
    are conflicts, set aside before resampling: one value per span here.)"""
    spans = {(k, a, d): v for k, a, d, v in raw}
    samples = [(k, T0 + a, T0 + a + d, v) for (k, a, d), v in spans.items()]
    want = reference(samples)
    got = run_window(samples)
    assert got.keys() == want.keys()
    assert all(got[key] == pytest.approx(want[key], rel=1e-9) for key in want)
    m0 = T0 // 60
    bounds = [m0 - 1, m0 + cut, *range(m0 + cut + width, m0 + 40, width), m0 + 40]
    pieces: dict = {}
    for lo, hi in itertools.pairwise(bounds):
        part = run_window(samples, (lo, hi))
        assert all(lo <= t // 60 < hi for _, t in part)
        pieces.update(part)
    assert pieces.keys() == got.keys()
    assert all(pieces[key] == pytest.approx(got[key], rel=1e-12) for key in got)
