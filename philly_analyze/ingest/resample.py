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
"""

from __future__ import annotations

from collections.abc import Sequence

#: Microseconds per minute.
MINUTE_US = 60_000_000
#: Weight (seconds) of an instantaneous sample.
INSTANT_WEIGHT_S = 1.0


def per_minute_sql(samples: str, keys: Sequence[str]) -> str:
    """SQL for the per-minute resampling of ``samples``.

    ``samples`` is a relation (table name or parenthesised query) with BIGINT columns ``t0``,
    ``t1`` (epoch microseconds, ``t0 <= t1``), a DOUBLE ``value`` and the series ``keys``. The
    result has ``time`` (TIMESTAMPTZ, start of the minute), the keys and ``value`` (DOUBLE)."""
    k = ", ".join(keys)
    m = MINUTE_US
    # floor() on doubles: exact for epoch microseconds (< 2**53) and correct before 1970.
    first = f"CAST(floor(t0 / {m}.0) AS BIGINT)"
    last = f"CAST(floor((t1 - 1) / {m}.0) AS BIGINT)"
    return f"""
    WITH s AS (
        SELECT {k}, t0, t1, any_value(value) AS value FROM {samples}
        WHERE value IS NOT NULL AND isfinite(value) AND t0 <= t1
        GROUP BY ALL),
    pieces AS (
        -- instantaneous, or within one minute: one piece (the common case, no unnest)
        SELECT {k}, {first} AS minute, value,
               CASE WHEN t1 = t0 THEN {INSTANT_WEIGHT_S} ELSE (t1 - t0) / 1e6 END AS w
        FROM s WHERE t1 = t0 OR {first} = {last}
        UNION ALL
        -- spanning several minutes: one piece per minute, weighted by the overlap
        SELECT {k}, minute, value,
               (least(t1, (minute + 1) * {m}) - greatest(t0, minute * {m})) / 1e6 AS w
        FROM (SELECT *, unnest(range({first}, {last} + 1)) AS minute
              FROM s WHERE t1 > t0 AND {first} <> {last}))
    SELECT to_timestamp(minute * 60) AS time, {k}, sum(value * w) / sum(w) AS value
    FROM pieces WHERE w > 0 GROUP BY {k}, minute"""
