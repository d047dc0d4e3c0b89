"""One rule for turning metric samples into one row per minute, for every metric source.

A *sample* is a value that describes a span of time ``[t0, t1)`` (epoch microseconds, UTC):

- an **instantaneous** reading has ``t0 == t1`` (gmond/gmetad XML: the value gmond measured at
  ``LOCALTIME - TN``);
- a **consolidated** value covers the step that *ends* at its timestamp: RRDtool stores and
  exports (``rrdtool xport``/``dump``, and ganglia-web's CSV/JSON, which run ``rrdtool xport``)
  label each row with the end of its step, so a row ``t`` with step ``s`` is ``[t - s, t)``.

The value of minute ``[m, m + 60 s)`` is the mean of the samples that overlap it, each weighted by
the seconds of overlap; an instantaneous sample weighs one second and belongs to the minute
containing it. Consequences:

- 15 s gmetad rows, 10 s gmond readings: the mean of the four (six) values of the minute;
- 60 s rows: exactly one row per minute, value unchanged (row ``10:01:00`` is minute ``10:00``);
- coarse rows (a 600 s RRA): each of the ten minutes gets the row's average (upsampling by
  repetition; a note tells the user);
- a step straddling a minute boundary is split by overlap.

Minutes with no sample are absent (no interpolation, no fill), like NA minutes in the published
trace. Missing values (NaN, null) are dropped before resampling. Exact duplicates (same series,
same ``t0``/``t1``, e.g. one gmetad dump captured twice) count once.

How it is computed: a minute that only one sample touches has that sample's value, whatever
the overlap; only minutes touched by several samples need the weighted mean, a GROUP BY over
(series, minute). Each sample's minutes that no other sample of its series touches (found
from its neighbours in time order) are written straight out; the rest go through the GROUP BY.
Coarse or aligned rows (60 s, 360 s, 2520 s steps) then skip the GROUP BY, whose size was what
ran out of memory on two weeks of a 552-host export (206M per-minute rows); 15 s readings,
four to a minute, all go through it, as before. ``minutes`` restricts the result to a range
of minutes, so a long history can be resampled a part at a time (``ganglia_route``).
"""

from __future__ import annotations

from collections.abc import Sequence

#: Microseconds per minute.
MINUTE_US = 60_000_000
#: Weight (seconds) of an instantaneous sample.
INSTANT_WEIGHT_S = 1.0


def minute_span_sql(m: int = MINUTE_US) -> tuple[str, str]:
    """SQL of a sample's first and last minute (epoch minutes; an instantaneous sample has
    one). floor() on doubles: exact for epoch microseconds (< 2**53), correct before 1970."""
    first = f"CAST(floor(t0 / {m}.0) AS BIGINT)"
    last = f"CASE WHEN t1 = t0 THEN {first} ELSE CAST(floor((t1 - 1) / {m}.0) AS BIGINT) END"
    return first, last


def per_minute_sql(
    samples: str, keys: Sequence[str], minutes: tuple[int, int] | None = None
) -> str:
    """SQL for the per-minute resampling of ``samples``.

    ``samples`` is a relation (table name or parenthesised query) with BIGINT columns ``t0``,
    ``t1`` (epoch microseconds, ``t0 <= t1``), a DOUBLE ``value`` and the series ``keys``. The
    result has ``time`` (TIMESTAMPTZ, start of the minute), the keys and ``value`` (DOUBLE).
    With ``minutes = (lo, hi)`` (epoch minutes) only the minutes ``lo <= m < hi`` are given;
    ``samples`` must then hold every sample touching them (it may hold others)."""
    k = ", ".join(keys)
    m = MINUTE_US
    first, last = minute_span_sql(m)
    lo, hi = (f"{minutes[0]}", f"{minutes[1] - 1}") if minutes else ("f", "l")

    def span(a: str, b: str) -> str:  # minutes a..b of a sample, inside the window
        return f"unnest(range(greatest({a}, {lo}), least({b}, {hi}) + 1))"

    order = f"PARTITION BY {k} ORDER BY f, l, t0, t1"
    return f"""
    WITH s AS MATERIALIZED (
        SELECT {k}, t0, t1, any_value(value) AS value, {first} AS f, {last} AS l
        FROM {samples}
        WHERE value IS NOT NULL AND isfinite(value) AND t0 <= t1
        GROUP BY ALL),
    -- series with a sample over several minutes; in the others (15 s readings, 60 s rows)
    -- every sample is one piece of one minute, straight to the GROUP BY as it always was
    wide AS (SELECT {k} FROM s GROUP BY ALL HAVING max(l - f) > 0),
    -- a..b: the sample's minutes no other sample touches (samples before it in this order
    -- end by max(l) of them, samples after it start at the next f or later)
    x AS (
        SELECT *,
               greatest(f, coalesce(max(l) OVER (
                   {order} ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING), f - 1) + 1) AS a,
               least(l, coalesce(lead(f) OVER ({order}), l + 1) - 1) AS b
        FROM (SELECT * FROM s SEMI JOIN wide USING ({k}))),
    own AS (SELECT {k}, {span("a", "b")} AS minute, value FROM x WHERE a <= b),
    shared AS (
        SELECT {k}, t0, t1, value, f AS minute FROM (SELECT * FROM s ANTI JOIN wide USING ({k}))
        WHERE f BETWEEN {lo} AND {hi}
        UNION ALL
        SELECT {k}, t0, t1, value, {span("f", "l")} AS minute FROM x WHERE a > b
        UNION ALL
        SELECT {k}, t0, t1, value, {span("f", "a - 1")} AS minute FROM x WHERE a <= b AND f < a
        UNION ALL
        SELECT {k}, t0, t1, value, {span("b + 1", "l")} AS minute FROM x WHERE a <= b AND b < l),
    pieces AS (
        SELECT {k}, minute, value,
               CASE WHEN t1 = t0 THEN {INSTANT_WEIGHT_S}
                    ELSE (least(t1, (minute + 1) * {m}) - greatest(t0, minute * {m})) / 1e6
               END AS w
        FROM shared)
    SELECT to_timestamp(minute * 60) AS time, {k}, value FROM own
    UNION ALL
    SELECT to_timestamp(minute * 60) AS time, {k}, sum(value * w) / sum(w) AS value
    FROM pieces WHERE w > 0 GROUP BY {k}, minute"""
