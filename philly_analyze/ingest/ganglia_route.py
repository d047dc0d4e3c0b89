"""Ganglia samples -> the store's per-minute tables, one part of the hosts and time at a time.

A run's samples (``samples.parquet``, ``ganglia_samples``) can stand for far more per-minute
rows than memory holds: two weeks of a 552-host export at a 42-minute step are 4.9M samples
but 206M per-minute rows. So the work is split into parts whose per-minute rows fit the memory
limit (``memory.py``): consecutive hosts (in name order) are grouped while their rows fit a
budget, and a host with more rows than the budget alone is cut into ranges of minutes. Each
part is resampled, its conflicts set aside (``ganglia_conflicts``) and routed to the tables
(``data/ganglia_metrics.json``; ``ganglia.py`` says which metric goes where) on its own; every
query works per host, so the parts give the same rows as one pass would. Rows the store
already holds from earlier runs are compared in the same pass (``ganglia_stored``).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import duckdb
import pyarrow as pa

from philly_analyze.ingest.ganglia_conflicts import CLASH_KEYS, KEY, Clashes, find_conflicts
from philly_analyze.ingest.ganglia_samples import metric_rules
from philly_analyze.ingest.ganglia_stored import Stored
from philly_analyze.ingest.resample import minute_span_sql, per_minute_sql
from philly_analyze.store import Batch

#: Memory per per-minute row of a part (bytes), for the part's budget: the rows are held by
#: the resampling's GROUP BY and window, by the ``pm`` table and by the Parquet writers. With
#: parts of (limit - RESERVE) / 150 rows the peak stayed under the limit from 8 MB to 2 GB.
BYTES_PER_ROW = 150
#: What DuckDB needs whatever the part's size (its threads' buffers and hash tables): at an
#: 8 MB limit, parts of 17,000 rows ran out of memory and parts of 7,500 did not.
RESERVE = 7_000_000
#: Parts are never smaller than this many rows (a tiny limit then fails with one line, rather
#: than running for hours in millions of parts).
MIN_PART_ROWS = 2_000


@dataclass
class Part:
    """Hosts resampled together, and the minutes ``lo <= m < hi`` of them (None: all)."""

    hosts: list[str]
    minutes: tuple[int, int] | None = None


def plan(con: duckdb.DuckDBPyConnection, samples: str, budget: int) -> list[Part]:
    """Parts whose estimated per-minute rows fit ``budget`` (module docstring). A sample
    counts once for every minute it touches (an over-estimate where samples overlap)."""
    first, last = minute_span_sql()
    hosts = con.execute(
        f"""SELECT machine_id, sum(l - f + 1), min(f), max(l)
            FROM (SELECT machine_id, {first} AS f, {last} AS l FROM {samples} WHERE t0 <= t1)
            GROUP BY machine_id ORDER BY machine_id"""
    ).fetchall()
    parts: list[Part] = []
    group: list[str] = []
    rows = 0
    for host, n, lo, hi in hosts:
        if group and rows + n > budget:
            parts.append(Part(group))
            group, rows = [], 0
        if n <= budget:
            group.append(host)
            rows += n
            continue
        k = math.ceil(n / budget)
        step = math.ceil((hi + 1 - lo) / k)
        parts += [Part([host], (a, min(a + step, hi + 1))) for a in range(lo, hi + 1, step)]
    if group:
        parts.append(Part(group))
    return parts


def budget_rows(limit: int) -> int:
    """Per-minute rows of one part under a memory limit of ``limit`` bytes."""
    return max(MIN_PART_ROWS, (limit - RESERVE) // BYTES_PER_ROW)


class Router:
    """Resamples and routes one Ganglia run's samples, part by part, into ``batch``."""

    def __init__(
        self,
        con: duckdb.DuckDBPyConnection,
        batch: Batch,
        fmt: str,
        sources: list[str],
        stored: Stored,
        note: Callable[[str], None],
    ):
        self.con = con
        self.batch = batch
        self.fmt = fmt
        self.sources = sources
        self.stored = stored
        self.note = note
        self.rules = metric_rules()
        self.rows: dict[str, int] = {}
        self.clashes = Clashes()

    def run(self, samples: str, limit: int) -> dict[str, int]:
        """Every part of ``samples`` (a relation of ``SAMPLE_SCHEMA`` rows); returns rows
        written per table (``rejects``: conflicts, counted as rejected)."""
        con = self.con
        con.execute(
            "CREATE TEMP TABLE obs (machine_id VARCHAR, n INTEGER, t0 TIMESTAMPTZ, t1 TIMESTAMPTZ)"
        )
        con.execute(
            "CREATE TEMP TABLE tot_last (machine_id VARCHAR, time TIMESTAMPTZ, mem_total DOUBLE)"
        )
        con.execute("CREATE TEMP TABLE part_hosts (machine_id VARCHAR)")
        con.register(
            "run_sources", pa.table({"src": range(len(self.sources)), "source": self.sources})
        )
        budget = budget_rows(limit)
        if self.stored.files:
            # Comparing with the store holds a table's new rows and the stored ones beside the
            # part's own tables: parts of a third.
            budget = max(MIN_PART_ROWS, budget // 3)
        for part in plan(con, samples, budget):
            self._part(samples, part)
        for n in self.clashes.notes(self.fmt):
            self.note(n)
        for n in self.stored.notes(self.fmt):
            self.note(n)
        self._add(
            "machine_observations",
            self.batch.copy_query(
                "machine_observations",
                con,
                "SELECT machine_id, max(n) AS observed_num_gpus, min(t0) AS first_seen, "
                "max(t1) AS last_seen, ? AS source FROM obs GROUP BY machine_id",
                [self.fmt],
            ),
        )
        rejected = self.clashes.conflicts + self.stored.conflicts
        if rejected:
            self.rows["rejects"] = rejected
        return self.rows

    def _add(self, table: str, n: int) -> None:
        self.rows[table] = self.rows.get(table, 0) + n

    def _part(self, samples: str, part: Part) -> None:
        con = self.con
        con.execute("DELETE FROM part_hosts")
        con.executemany("INSERT INTO part_hosts VALUES (?)", [[h] for h in part.hosts])
        first, last = minute_span_sql()
        mine = f"(SELECT * FROM {samples} WHERE machine_id IN (SELECT machine_id FROM part_hosts))"
        touching = mine
        if part.minutes:
            lo, hi = part.minutes
            # Conflicts are between samples of one span: look in the samples starting here;
            # resample those touching these minutes (without conflicts found in earlier parts).
            self.clashes.add(
                find_conflicts(
                    con,
                    f"(SELECT * FROM {mine} WHERE {first} >= {lo} AND {first} < {hi})",
                    self.sources,
                    self.batch,
                )
            )
            touching = f"(SELECT * FROM {mine} WHERE {last} >= {lo} AND {first} < {hi})"
        else:
            self.clashes.add(find_conflicts(con, mine, self.sources, self.batch))
        clean = f"(SELECT * FROM {touching} ANTI JOIN {CLASH_KEYS} USING ({KEY}))"
        # Temporary tables: in memory (spilled beyond the limit), never compressed into the
        # database file as persistent tables would be.
        # __month: the month partition of each row, from the naive time (year() and month() of
        # a TIMESTAMPTZ go through ICU: a third of the cost of writing the rows).
        naive = "make_timestamp(epoch_us(time))"
        con.execute(
            f"CREATE OR REPLACE TEMP TABLE pm AS SELECT *, "
            f"(year({naive}) * 100 + month({naive}))::INTEGER AS __month FROM ("
            + per_minute_sql(clean, ["machine_id", "metric"], part.minutes)
            + ")"
        )
        con.execute(
            "CREATE OR REPLACE TEMP TABLE series AS SELECT machine_id, metric, min(src) AS src "
            f"FROM {touching} GROUP BY ALL"
        )
        # GPU index and metric of each distinct gpu{i}_<m> name: the regex runs once per name,
        # not once per row (three regex calls on every row cost a third of the time).
        con.execute(
            "CREATE OR REPLACE TEMP TABLE gmap AS SELECT metric, "
            "CAST(regexp_extract(metric, ?, 1) AS SMALLINT) AS gpu_idx, "
            "regexp_extract(metric, ?, 2) AS m "
            "FROM (SELECT DISTINCT metric FROM series) WHERE regexp_matches(metric, ?)",
            [self.rules["gpu_metric_regex"]] * 3,
        )
        self._write_tables(part)
        self._observe()
        # Each table holds at least a block (256 KB) per column until dropped: under a small
        # limit, the part's tables kept until the next one is made cost as much as its rows.
        for t in ("pm", "series", "gmap"):
            con.execute(f"DROP TABLE {t}")

    def _write(self, table: str, query: str, params: list, part: Part) -> None:
        self._add(table, self.stored.write(self.con, self.batch, table, query, params, part))

    def _write_tables(self, part: Part) -> None:
        r = self.rules
        util = r["gpu_util_suffix"]
        self._write(
            "gpu_util",
            "SELECT time, machine_id, gpu_idx, value AS util, metric AS _series, __month "
            "FROM pm JOIN gmap USING (metric) WHERE m = ?",
            [util],
            part,
        )
        self._write(
            "gpu_metrics",
            "SELECT time, machine_id, gpu_idx, m AS metric, value, metric AS _series, __month "
            "FROM pm JOIN gmap USING (metric) WHERE m <> ?",
            [util],
            part,
        )
        busy_a, busy_b = r["cpu_busy_fallback"]
        idle = r["cpu_idle"]
        self._write(
            "cpu_util",
            """SELECT time, machine_id, greatest(0, least(100, coalesce(100 - idle, a + b))) AS util,
                      ? AS _series, __month
               FROM (SELECT time, machine_id, __month,
                            max(value) FILTER (WHERE metric = ?) AS idle,
                            max(value) FILTER (WHERE metric = ?) AS a,
                            max(value) FILTER (WHERE metric = ?) AS b
                     FROM pm WHERE metric IN (?, ?, ?) GROUP BY time, machine_id, __month)
               WHERE coalesce(100 - idle, a + b) IS NOT NULL""",
            [idle, idle, busy_a, busy_b, idle, busy_a, busy_b],
            part,
        )
        self._write_mem(part)
        self._write(
            "host_metrics",
            "SELECT time, machine_id, metric, value, metric AS _series, __month FROM pm "
            "ANTI JOIN gmap USING (metric) WHERE metric NOT IN (?, ?)",
            [r["mem_total"], r["mem_free"]],
            part,
        )

    def _write_mem(self, part: Part) -> None:
        """gmond sends mem_total only when it changes or every 20 min (TMAX 1200): each
        mem_free minute takes the latest mem_total at or before it, which may be in an
        earlier part of the host's time (``tot_last``)."""
        r = self.rules
        total = (
            "(SELECT machine_id, time, value AS mem_total FROM pm WHERE metric = ? AND value > 0)"
        )
        self._write(
            "mem_util",
            f"""WITH tot AS (SELECT * FROM {total}
                             UNION ALL SELECT machine_id, time, mem_total FROM tot_last),
                    fr AS (SELECT machine_id, time, value AS mem_free, __month FROM pm
                           WHERE metric = ?)
               SELECT fr.time, fr.machine_id, tot.mem_total, fr.mem_free, ? AS _series, __month
               FROM fr ASOF JOIN tot ON fr.machine_id = tot.machine_id AND fr.time >= tot.time""",
            [r["mem_total"], r["mem_free"], r["mem_free"]],
            part,
        )
        if part.minutes:
            self.con.execute(
                f"""CREATE OR REPLACE TEMP TABLE tot_last AS
                    SELECT machine_id, arg_max(time, time) AS time,
                           arg_max(mem_total, time) AS mem_total
                    FROM (SELECT * FROM {total} UNION ALL SELECT * FROM tot_last)
                    GROUP BY machine_id""",
                [r["mem_total"]],
            )

    def _observe(self) -> None:
        """Per host of the part: GPUs reporting utilization, first and last minute."""
        self.con.execute(
            """INSERT INTO obs
               SELECT pm.machine_id, coalesce(g.n, 0), min(pm.time), max(pm.time)
               FROM pm LEFT JOIN (SELECT machine_id, max(gpu_idx) + 1 AS n
                                  FROM pm JOIN gmap USING (metric)
                                  WHERE m = ? AND value IS NOT NULL GROUP BY machine_id) g
                    USING (machine_id)
               GROUP BY pm.machine_id, g.n""",
            [self.rules["gpu_util_suffix"]],
        )
