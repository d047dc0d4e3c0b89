"""Jobs, attempts, placements and scheduler events from the facts of a group of RM logs.

The parser (``yarn.py``) streams one row per fact (a state change, an ``Accepted application``
line, an ``ApplicationSummary``...) to Parquet. Assembly is SQL over all facts of the group, so
it does not depend on the order of files or lines (rolled logs arrive in any order, an app's
lines span files) and runs in DuckDB with bounded memory. The rules (docs/raw-sources.md):

- **submit_time**: the app leaving NEW for NEW_SAVING/SUBMITTED; else NEW_SAVING -> SUBMITTED;
  else the ``Submit Application Request`` audit line; else ApplicationSummary ``submitTime``
  (``startTime`` in Hadoop 2.7, which has no submitTime) -- those are exact epoch milliseconds.
- **status**: ``finalStatus`` FAILED/KILLED, else the final state FINISHED/FAILED/KILLED (from a
  transition, the summary's ``state`` or the ``Application Finished - X`` audit line).
- **vc, user_id**: ``Accepted application ... from user: U, in queue: Q``, else the summary, the
  submit audit line, the LeafQueue ``activated in queue`` line.
- **attempt start**: the first evidence that the attempt holds resources (see ``yarn_rm.json``);
  transitions out of NEW other than to SUBMITTED are RM-restart recoveries and give no time.
- **attempt end**: its final transition or ``Application Attempt ... is done``; the last attempt
  of an app that ended, without one, ends with the app.
- **num_gpus**: sum of ``yarn.io/gpu`` over the attempt's distinct containers (0 when the
  resources list ``yarn.io/gpu: 0``; NULL, unknown, when they name no GPU type, as an RM that
  does not schedule GPUs writes them, or when no container of it was seen with its resources);
  **num_machines**: hosts of its GPU containers (of all its containers for CPU-only attempts).
- **placements**: one row per GPU of each container, ``gpu_idx`` NULL (the RM does not know
  device indices).
- **machine_observations**: each host that ran a container, with its GPUs (used + available
  in ``Assigned container`` lines), so ``machines`` lists YARN hosts.
"""

from __future__ import annotations

from collections.abc import Iterable

from philly_analyze.ingest.yarn_lines import rules
from philly_analyze.store import sql_literal

SOURCE = "yarn_rm_log"


def _in(values: Iterable[str]) -> str:
    """A SQL ``IN`` list of our own constants (data/yarn_rm.json), never user input."""
    return "(" + ", ".join(sql_literal(v) for v in values) + ")"


def _case(expr: str, mapping: dict[str, str]) -> str:
    """A SQL ``CASE`` mapping our own constants (data/yarn_rm.json) to others; NULL otherwise."""
    whens = " ".join(f"WHEN {sql_literal(k)} THEN {sql_literal(v)}" for k, v in mapping.items())
    return f"CASE {expr} {whens} END"


def facts_with_recovery(facts: str) -> str:
    """``facts`` plus ``recovered``: transitions that replay state after an RM restart."""
    r = rules()
    # Leaving NEW other than for the submission path is a recovery (docs/raw-sources.md, RM
    # restarts): RECOVER names it. Versions that log no event leave it to the target state:
    # a live app can also go NEW -> KILLED/FAILED (killed or rejected at submission), so
    # those count as recovery only for an app the log shows being recovered.
    app_rec = (
        f"to_state NOT IN {_in(r['app_submit_states'])} AND (event = 'RECOVER' OR (event IS NULL "
        "AND (to_state NOT IN ('KILLED', 'FAILED') OR app IN "
        f"(SELECT app FROM {facts} WHERE kind = 'recovering'))))"
    )
    att_rec = (
        f"to_state NOT IN {_in(r['attempt_submit_states'])} AND "
        "(event = 'RECOVER' OR (event IS NULL AND to_state <> 'KILLED'))"
    )
    # A live container leaves NEW for ALLOCATED, RESERVED or KILLED; work-preserving recovery
    # re-reports running ones as NEW -> RUNNING.
    cont_rec = f"to_state NOT IN {_in(r['container_live_from_new'])}"
    return f"""
        SELECT *, coalesce(from_state = 'NEW' AND CASE kind
            WHEN 'app' THEN {app_rec} WHEN 'attempt' THEN {att_rec}
            WHEN 'container' THEN {cont_rec} ELSE false END, false) AS recovered
        FROM {facts}"""


def scheduler_events_sql(fr: str) -> str:
    """Every transition, with the host of container events when an assignment named it."""
    return f"""
        WITH hosts AS (SELECT container, any_value(host) AS host FROM {fr}
                       WHERE kind IN ('assigned', 'am_container') GROUP BY container)
        SELECT t AS time, app AS job_id,
               CASE WHEN kind = 'app' THEN NULL ELSE attempt - 1 END AS attempt_idx,
               kind AS entity, eid AS entity_id, from_state, to_state, event,
               hosts.host AS machine_id, line_no, {sql_literal(SOURCE)} AS source
        FROM {fr} LEFT JOIN hosts USING (container)
        WHERE kind IN ('app', 'attempt', 'container')"""


def _ranked(kinds: list[str]) -> str:
    """A BIGINT sort key: the rank of ``kind`` in ``kinds``, then the time (first wins)."""
    whens = " ".join(f"WHEN '{k}' THEN {i}" for i, k in enumerate(kinds))
    # Epoch microseconds stay below 10**16 until the year 2286: the rank decides, the time
    # only breaks ties within a rank.
    return f"(CASE kind {whens} END) * 10000000000000000 + epoch_us(t)"


def apps_sql(fr: str) -> str:
    """One row per application: submit, status, end, user, queue, flags inputs.

    One GROUP BY with few, small aggregate states (a preference is a BIGINT rank-then-time key
    for ``arg_min``), so hundreds of thousands of apps aggregate within the memory limit."""
    r = rules()
    final = _in(r["app_final_states"])
    submit_states = _in(r["app_submit_states"])
    users = ["accepted", "summary", "submit_req", "activated", "audit_finish"]
    queues = ["accepted", "summary", "activated", "submit_req"]
    # The final state: a live transition, a replayed (recovery) one, the summary, the audit.
    state_rank = (
        "(CASE WHEN kind = 'app' AND NOT recovered THEN 0 WHEN kind = 'app' THEN 1 "
        "WHEN kind = 'summary' THEN 2 ELSE 3 END) * 10000000000000000 + epoch_us(t)"
    )
    state_rows = (
        f"(kind = 'app' AND to_state IN {final}) OR (kind IN ('summary', 'audit_finish') "
        "AND to_state IS NOT NULL)"
    )
    status = (
        f"coalesce({_case('sum_final_status', r['final_status_to_status'])}, "
        f"{_case('state', r['final_state_to_status'])})"
    )
    return f"""
        WITH a AS (
            SELECT app,
                min(t) FILTER (WHERE kind = 'app' AND from_state = 'NEW'
                               AND to_state IN {submit_states}) AS submit_a,
                min(t) FILTER (WHERE kind = 'app' AND from_state = 'NEW_SAVING'
                               AND to_state = 'SUBMITTED') AS submit_b,
                min(t) FILTER (WHERE kind = 'submit_req') AS submit_c,
                min(ms1) FILTER (WHERE kind = 'summary') AS sum_submit_ms,
                min(ms2) FILTER (WHERE kind = 'summary') AS sum_start_ms,
                min(ms3) FILTER (WHERE kind = 'summary') AS sum_finish_ms,
                arg_min("user", {_ranked(users)}) FILTER (WHERE "user" IS NOT NULL
                    AND kind IN {_in(users)}) AS user_id,
                arg_min(queue, {_ranked(queues)}) FILTER (WHERE queue IS NOT NULL
                    AND kind IN {_in(queues)}) AS vc,
                arg_min(to_state, {state_rank}) FILTER (WHERE {state_rows}) AS state,
                arg_min(status, t) FILTER (WHERE kind = 'summary') AS sum_final_status,
                min(t) FILTER (WHERE kind = 'app' AND to_state IN {final}
                               AND NOT recovered) AS end_live,
                min(t) FILTER (WHERE kind = 'audit_finish') AS audit_end,
                bool_or(recovered OR kind = 'recovering') AS was_recovered
            FROM {fr}
            WHERE app IS NOT NULL AND kind IN ('app', 'accepted', 'summary', 'submit_req',
                'activated', 'audit_finish', 'recovering') GROUP BY app),
        seen AS (SELECT DISTINCT app FROM {fr} WHERE app IS NOT NULL)
        SELECT app, user_id, vc, coalesce(was_recovered, false) AS was_recovered,
               coalesce(submit_a, submit_b, submit_c, to_timestamp(sum_submit_ms / 1000.0),
                        to_timestamp(sum_start_ms / 1000.0)) AS submit_time,
               {status} AS status,
               coalesce(end_live, to_timestamp(sum_finish_ms / 1000.0), audit_end) AS app_end
        FROM seen LEFT JOIN a USING (app)"""


def containers_sql(fr: str) -> str:
    """One row per container seen with its host and resources."""
    # ``t`` stays NULL for a container the restarted RM recovered: its assignment line is the
    # re-report, not when the container started.
    return f"""
        SELECT app, attempt, container, any_value(host) AS host, max(gpus) AS gpus,
               bool_or(has_cap) AS has_cap,
               min(t) FILTER (WHERE container NOT IN (
                   SELECT container FROM {fr} WHERE kind = 'container' AND recovered)) AS t
        FROM {fr} WHERE kind IN ('assigned', 'am_container') GROUP BY app, attempt, container"""


def attempts_sql(fr: str, apps: str, conts: str) -> str:
    """Attempts (physical columns of ``attempts``), from facts, apps and containers."""
    r = rules()
    start_states = _in(r["attempt_start_states"])
    created = _in(r["attempt_created_states"])
    final = _in(r["attempt_final_states"])
    # In order: the attempt's own final state; an earlier attempt without one was retried, so
    # it failed (yarn_rm.json, _outcome); the last attempt takes the job's status; a final
    # state outside the mapping is unknown; started and not ended: running.
    outcome = f"""CASE
            WHEN final_state IN {_in(r["attempt_state_to_outcome"])}
                THEN {_case("final_state", r["attempt_state_to_outcome"])}
            WHEN x.attempt < x.last_attempt THEN 'failed'
            WHEN ap.status IS NOT NULL THEN {_case("ap.status", r["status_to_last_outcome"])}
            WHEN final_state IS NOT NULL THEN NULL
            WHEN x.start_t IS NOT NULL THEN 'running'
        END"""
    return f"""
        WITH ev AS (
            SELECT app, attempt,
                min(t) FILTER (WHERE (kind = 'attempt' AND NOT recovered
                                      AND to_state IN {start_states})
                                  OR (kind = 'container' AND NOT recovered
                                      AND to_state = 'ALLOCATED')) AS start_ev,
                min(t) FILTER (WHERE (kind = 'attempt' AND NOT recovered AND to_state IN {final})
                                  OR kind = 'attempt_done') AS end_t,
                coalesce(
                    arg_min(to_state, t) FILTER (WHERE kind = 'attempt' AND to_state IN {final}),
                    arg_min(to_state, t) FILTER (WHERE kind = 'attempt_done')) AS final_state,
                coalesce(bool_or(kind = 'attempt' AND to_state IN {created}), false)
                    AS seen_created
            FROM {fr} WHERE attempt IS NOT NULL GROUP BY app, attempt),
        -- GPUs are known only if some container's resources named a GPU type (has_cap):
        -- an RM that does not schedule GPUs lists none, which is unknown, not 0.
        c AS (
            SELECT app, attempt, min(t) AS start_c,
                   CASE WHEN bool_or(has_cap) THEN sum(gpus) END AS num_gpus,
                   CASE WHEN sum(gpus) > 0 THEN count(DISTINCT host) FILTER (WHERE gpus > 0)
                        ELSE count(DISTINCT host) END AS num_machines
            FROM {conts} GROUP BY app, attempt),
        x AS (
            SELECT ev.*, c.num_gpus, c.num_machines,
                   least(ev.start_ev, c.start_c) AS start_t,
                   max(ev.attempt) OVER (PARTITION BY ev.app) AS last_attempt
            FROM ev LEFT JOIN c USING (app, attempt))
        SELECT x.app AS job_id, x.attempt - 1 AS attempt_idx, x.start_t AS start_time,
               CASE WHEN x.attempt = x.last_attempt THEN coalesce(x.end_t, ap.app_end)
                    ELSE x.end_t END AS end_time,
               x.num_gpus, x.num_machines,
               epoch(end_time) - epoch(start_time) AS duration_s,
               {outcome} AS outcome, {sql_literal(SOURCE)} AS source
        FROM x JOIN {apps} ap USING (app)
        -- An attempt the log saw created but never launched (killed while queued) did not
        -- run: the published trace lists no attempt for such a job, and neither do we (its
        -- transitions stay in scheduler_events). An attempt whose beginning the log missed
        -- (the log starts mid-application) is kept with an unknown start.
        WHERE x.start_t IS NOT NULL OR NOT x.seen_created"""


def jobs_sql(apps: str, attempts: str) -> str:
    """Jobs (physical columns of ``jobs``) with their data-quality flags."""
    # A job's GPU demand is its first attempt's (as the published trace and the analyses'
    # buckets take it).
    return f"""
        WITH first_att AS (SELECT job_id, arg_min(num_gpus, attempt_idx) AS num_gpus,
                                  count(*) AS n FROM {attempts} GROUP BY job_id),
        j AS (
            SELECT ap.*, fa.num_gpus, coalesce(fa.n, 0) AS n_att,
                   list_filter([
                       CASE WHEN ap.submit_time IS NULL THEN 'no_submit' END,
                       CASE WHEN ap.status IS NULL THEN 'no_end' END,
                       CASE WHEN fa.n IS NULL THEN 'no_attempts' END,
                       CASE WHEN ap.was_recovered THEN 'rm_recovered' END], lambda f: f IS NOT NULL)
                   AS fl
            FROM {apps} ap LEFT JOIN first_att fa ON fa.job_id = ap.app)
        SELECT app AS job_id, vc, user_id, status, submit_time, num_gpus,
               CASE WHEN len(fl) = 0 THEN NULL ELSE fl END AS flags,
               {sql_literal(SOURCE)} AS source
        FROM j"""


def placements_sql(conts: str, attempts: str) -> str:
    """One row per GPU of each container of a known attempt (gpu_idx unknown: NULL)."""
    return f"""
        SELECT c.app AS job_id, c.attempt - 1 AS attempt_idx, c.host AS machine_id,
               NULL AS gpu_idx, {sql_literal(SOURCE)} AS source
        FROM {conts} c JOIN {attempts} a ON a.job_id = c.app AND a.attempt_idx = c.attempt - 1,
             range(c.gpus) AS r(i)
        WHERE c.gpus > 0"""


def machine_observations_sql(fr: str) -> str:
    """Every host that ran a container (so ``machines`` lists it): its GPUs, from the node's
    used + available resources in ``Assigned container`` lines (NULL when the RM does not count
    GPUs), and when it was seen."""
    return f"""
        SELECT host AS machine_id, max(node_gpus) AS observed_num_gpus, min(t) AS first_seen,
               max(t) AS last_seen, {sql_literal(SOURCE)} AS source
        FROM {fr} WHERE kind IN ('assigned', 'am_container') GROUP BY host"""


def timezone_check_sql(fr: str) -> str:
    """Median seconds between summary lines' wall-clock times (read in the user's zone) and
    the exact finishTime they report (logged a few seconds after the app finished)."""
    return f"""
        SELECT median(epoch(t) - ms3 / 1000.0), to_timestamp(median(ms3) / 1000.0), count(*)
        FROM {fr}
        WHERE kind = 'summary' AND ms3 IS NOT NULL AND NOT exact"""
