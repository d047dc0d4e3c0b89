"""Notes on the store as a whole, printed at the end of every ingest (and in the report's
summary): sources that disagree, and machines the machine list does not name.

- **Conflicts.** Two sources of equal priority that give different values for the same machine
  (GPU count, GPU memory, rack) or job (VC, user, status, submit time, GPUs). The store's views
  pick one by a total order (priority, then the later ingested batch, then the value:
  ``store._canonical_views``), so every query gives the same answer; the note says which
  values disagreed and where they came from, so the pick is not hidden.
- **Machines not in the machine list.** Hosts known only from placements or utilization, and
  listed machines whose placements used more GPUs than listed: both change the cluster the
  analyses and the replay see (``replay --machines`` chooses which machines a replay uses).
"""

from __future__ import annotations

from philly_analyze.store import Store, priority_case

#: Examples named in a note.
EXAMPLES = 3
_MACHINE_COLS = ("listed_num_gpus", "gpu_mem_gb", "rack")
_JOB_COLS = ("vc", "user_id", "status", "submit_time", "num_gpus")


def store_notes(store: Store) -> list[str]:
    """Every note on the store as a whole (empty when there is nothing to say)."""
    return [*conflict_notes(store), *unlisted_machine_notes(store)]


def _sources(store: Store) -> dict[str, str]:
    """Batch id -> the source(s) it was read from (as ``ingest_log`` names them)."""
    rows = store.con.execute(
        "SELECT batch_id, string_agg(DISTINCT source, ', ' ORDER BY source) FROM ingest_log "
        "GROUP BY batch_id"
    ).fetchall()
    return {b: s for b, s in rows}


def _conflicts(store: Store, table: str, key: str, cols: tuple[str, ...]) -> list[tuple]:
    """(key, column, [(value, batch)...]) for every column on which rows of equal source
    priority disagree, sorted; the first value listed is the one the view uses. One scan of
    the table (its keys given by more than one row only)."""
    prio = priority_case()
    per_col = " UNION ALL ".join(
        f"SELECT k, '{c}' AS col, {c}::VARCHAR AS v, _batch, _rank, source, p FROM r "
        f"WHERE {c} IS NOT NULL"
        for c in cols
    )
    rows = store.con.execute(
        f"""WITH a AS MATERIALIZED (
                SELECT {key} AS k, {", ".join(cols)}, _batch, _rank, source, {prio} AS p
                FROM ({store.ranked_sql(table)})),
            r AS (SELECT * FROM a WHERE k IN (SELECT k FROM a GROUP BY k HAVING count(*) > 1)),
            u AS ({per_col}),
            top AS (SELECT * FROM u QUALIFY p = min(p) OVER (PARTITION BY k, col))
        SELECT k, col, list((v, _batch) ORDER BY _rank DESC, source, v)
        FROM top GROUP BY k, col HAVING count(DISTINCT v) > 1 ORDER BY k, col"""
    ).fetchall()
    return [(k, col, vals) for k, col, vals in rows]


def conflict_notes(store: Store) -> list[str]:
    """One note per merged table whose sources of equal priority disagree."""
    names = _sources(store)
    notes = []
    for table, key, cols in (
        ("machines", "machine_id", _MACHINE_COLS),
        ("jobs", "job_id", _JOB_COLS),
    ):
        found = _conflicts(store, table, key, cols)
        if not found:
            continue
        n = len({k for k, _, _ in found})
        shown = []
        for k, col, vals in found[:EXAMPLES]:
            given = "; ".join(f"{v} in {names.get(b, b)}" for v, b in _distinct(vals))
            shown.append(f"{k} {col}: {given}")
        more = f"; and {len(found) - EXAMPLES:,} more" if len(found) > EXAMPLES else ""
        noun = "machines" if table == "machines" else "jobs"
        notes.append(
            f"{n:,} {noun} are given different values by sources of the same kind ("
            + "; ".join(shown)
            + f"{more}). The latest ingested source is used (the first value named); "
            "re-ingest the right one last, or --replace it"
        )
    return notes


def _distinct(vals: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """Values in order, each once (the first batch that gave it)."""
    seen: set[str] = set()
    out = []
    for v, b in vals:
        if v not in seen:
            seen.add(v)
            out.append((v, b))
    return out


def unlisted_machine_notes(store: Store) -> list[str]:
    """How many hosts and GPUs the machine list does not account for."""
    if not store.has_rows("machines") and not (
        store.has_rows("placements") or store.has_rows("machine_observations")
    ):
        return []
    row = store.con.execute(
        """SELECT count(*) FILTER (WHERE listed_num_gpus IS NOT NULL),
                  count(*) FILTER (WHERE listed_num_gpus IS NULL),
                  coalesce(sum(num_gpus) FILTER (WHERE listed_num_gpus IS NULL), 0),
                  count(*) FILTER (WHERE listed_num_gpus IS NULL AND num_gpus IS NULL),
                  count(*) FILTER (WHERE num_gpus > listed_num_gpus),
                  coalesce(sum(num_gpus - listed_num_gpus)
                           FILTER (WHERE num_gpus > listed_num_gpus), 0)
           FROM machines"""
    ).fetchall()[0]  # an aggregate: always one row
    listed, hosts, gpus, unknown, bigger, extra = (int(x) for x in row)
    notes = []
    if hosts:
        examples = [
            r[0]
            for r in store.con.execute(
                "SELECT machine_id FROM machines WHERE listed_num_gpus IS NULL "
                "ORDER BY machine_id LIMIT ?",
                [EXAMPLES],
            ).fetchall()
        ]
        sample = ", ".join(examples) + (", ..." if hosts > EXAMPLES else "")
        gpu_text = f"{gpus:,} GPUs" + (
            f"; {unknown:,} with an unknown GPU count" if unknown else ""
        )
        if listed:
            notes.append(
                f"{hosts:,} hosts ({gpu_text}) are not in the machine list and come only from "
                f"placements or utilization ({sample}); the analyses count them, `replay` "
                "uses only the listed machines unless --machines all"
            )
        else:
            notes.append(
                f"no machine list: the cluster's {hosts:,} hosts ({gpu_text}) are known only "
                f"from placements or utilization ({sample})"
            )
    if bigger:
        notes.append(
            f"{bigger:,} listed machines were given more GPUs in placements than listed "
            f"({extra:,} GPUs more): num_gpus counts them"
        )
    return notes
