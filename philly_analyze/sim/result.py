"""``ReplayResult``: a simulated schedule as canonical store tables, its metrics and the true
waiting causes; ``write_result_store`` publishes it as a store (``report --store OUT`` works),
its other files declared in ``schemas.ARTIFACTS``.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from philly_analyze import schemas
from philly_analyze.errors import UserError
from philly_analyze.sim.cluster import Cluster
from philly_analyze.sim.core import Trace
from philly_analyze.sim.metrics import cluster_steps, compute_metrics, waiting_causes
from philly_analyze.sim.workload import NO_VC, Workload
from philly_analyze.vcquota import quota_table
from philly_analyze.waitcause import CAUSES, WaitSplit

if TYPE_CHECKING:  # the store (and duckdb) is imported only by what writes one
    from philly_analyze.store import EncodedTable

SOURCE = "replay"
#: Whether ``build_result`` encodes the tables for a store (``encoding_for_store``).
_ENCODE: ContextVar[bool] = ContextVar("replay_encode_tables", default=False)
#: Job status from the outcome of its last attempt (None, no outcome, has no status).
STATUS_OF_OUTCOME: dict[str | None, str] = {
    "passed": "passed",
    "killed": "killed",
    "failed": "unsuccessful",
}


@dataclass
class ReplayResult:
    """One policy's replay.

    ``jobs``/``attempts``/``placements``/``machines``: Arrow tables conforming to
    ``philly_analyze.schemas`` (physical schemas, source ``replay``). ``waiting``: the true
    waiting causes (``schemas.WAITING``: one row per attempt that waited and cause). ``metrics``:
    the flat comparison dict (``metrics.METRICS``). ``per_vc``: per-VC jobs, mean queueing
    delay, mean JCT, service ratio. ``quotas``: the VC quotas used ({} without quotas).
    ``artifacts``: other files of the store a policy adds (``schemas.ARTIFACTS`` name ->
    data; the sharing policies' ``sharing.json`` and time series)."""

    policy: str
    params: dict[str, Any]
    seed: int
    jobs: pa.Table
    attempts: pa.Table
    placements: pa.Table
    machines: pa.Table
    waiting: pa.Table
    metrics: dict[str, Any]
    per_vc: pa.Table
    quotas: dict[str, int] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    #: Why a metric reads as it does (metric key -> explanation), printed under the comparison
    #: table: e.g. ``dedicated`` leaves every job unscheduled when there are no training GPUs.
    footnotes: dict[str, str] = field(default_factory=dict)
    #: Wall seconds of the simulation itself (not part of metrics: not deterministic).
    seconds: float = 0.0
    artifacts: dict[str, Any] = field(default_factory=dict)
    #: Tables already encoded as the store's files (``encoding_for_store``), by name; used by
    #: ``write_result_store`` only while the table is still the one encoded.
    encoded: dict[str, EncodedTable] = field(default_factory=dict, repr=False, compare=False)

    def settings(self) -> dict[str, Any]:
        """What is needed to reproduce this run (written as ``replay.json``)."""
        return {
            "policy": self.policy,
            "params": self.params,
            "seed": self.seed,
            "quotas": self.quotas,
        }


def _ts(us: np.ndarray) -> pa.Array:
    return pa.array(np.asarray(us, dtype=np.int64), pa.int64()).cast(schemas.UTC_TS)


def build_result(
    trace: Trace,
    wl: Workload,
    cluster: Cluster,
    quota_by_vc: list[int] | None,
    *,
    policy: str,
    params: dict[str, Any],
    seed: int,
    notes: list[str],
) -> ReplayResult:
    """Turn an engine trace into tables and metrics (vectorised)."""
    rows = _Rows(trace)
    # Strings: made once, then taken by index in Arrow (not one Python object per row).
    ids = pa.array(wl.job_ids, pa.string())
    gpus = wl.num_gpus[rows.job]
    seg_row, seg_server, seg_gpus, pl_gpu = trace.segments()

    encode = _ENCODE.get()

    def tables() -> tuple[pa.Table, pa.Table, pa.Table, dict[str, EncodedTable]]:
        placements = _placements_table(rows, ids, cluster, seg_row, seg_server, seg_gpus, pl_gpu)
        made = {
            "jobs": _jobs_table(rows, trace, wl, ids),
            "attempts": _attempts_table(rows, ids, gpus),
            "placements": placements,
        }
        encoded: dict[str, EncodedTable] = {}
        if encode:
            from philly_analyze.store import encode_table

            encoded = {t: encode_table(t, d) for t, d in made.items()}
        # The tables the bytes are of (conformed again by encode_table: the same rows).
        made.update({t: e.data for t, e in encoded.items()})
        return made["attempts"], made["placements"], made["jobs"], encoded

    # The tables are made (and, for a store, encoded: ``encoding_for_store``) in a thread
    # while this one splits the waits: both are mostly Arrow and numpy work, which release
    # the GIL. Neither changes what the other reads.
    with ThreadPoolExecutor(1, thread_name_prefix="replay-tables") as pool:
        made = pool.submit(tables)
        # True waiting causes.
        row_vc = wl.vc[rows.job] if quota_by_vc is not None else np.zeros(len(rows), np.int64)
        qarr = np.asarray(quota_by_vc, dtype=np.int64) if quota_by_vc is not None else None
        steps, s_idx, e_idx = cluster_steps(
            cluster.gpus, cluster.rack, rows.start, rows.end, seg_row, seg_server, seg_gpus
        )
        split = waiting_causes(steps, rows.ready, rows.start, s_idx, e_idx, row_vc, gpus, qarr)
        waiting = _waiting_table(split, ids, rows.job, rows.att_idx)
        attempts, placements, jobs, encoded = made.result()
    ran = rows.ran
    metrics, per_vc = compute_metrics(
        submit=wl.submit_us[ran],
        first_start=rows.first_start,
        last_end=rows.last_end,
        run_vc=wl.vc[ran],
        row_gpus=gpus,
        row_start=rows.start,
        row_end=rows.end,
        row_intrinsic=rows.intrinsic,
        wait_us=split.us,
        total_gpus=cluster.total_gpus,
        unscheduled=len(trace.unscheduled),
        preemptions=trace.preemptions,
        obs_start=wl.obs_start_us[ran],
    )
    res = ReplayResult(
        policy,
        dict(params),
        seed,
        jobs,
        attempts,
        placements,
        cluster.to_machines_table(),
        waiting,
        metrics,
        _per_vc_table(per_vc, wl, quota_by_vc),
        _quotas_by_name(wl, quota_by_vc),
        list(notes),
    )
    res.encoded = encoded
    return res


@contextmanager
def encoding_for_store() -> Iterator[None]:
    """Within it, ``build_result`` also encodes the jobs, attempts and placements tables as
    the store's Parquet files (``store.encode_table``), in its second thread while it splits
    the waits, and ``write_result_store`` stages those bytes: at a million jobs ~1.6 s of
    encoding leaves the writing's wall time on 2 cores. For callers that will write the
    result (the CLI's ``--out``); others (sweeps) would only pay the encoding."""
    token = _ENCODE.set(True)
    try:
        yield
    finally:
        _ENCODE.reset(token)


class _Rows:
    """A trace's rows as arrays (``Trace.columns``), with each row's attempt index in the
    output (its rank among its job's rows, which are in start order), its outcome code, and
    per job that ran (``ran``, ascending): first start, last end and last row."""

    def __init__(self, trace: Trace) -> None:
        nrow = len(trace)
        self.job, _, self.ready, self.start, self.end, self.servers, self.intrinsic = (
            trace.columns()
        )
        order = np.lexsort((self.start, self.job))
        sj = self.job[order]
        first_of = np.r_[True, sj[1:] != sj[:-1]] if nrow else np.zeros(0, bool)
        group_start = (
            np.maximum.accumulate(np.where(first_of, np.arange(nrow), 0)) if nrow else first_of
        )
        self.att_idx = np.empty(nrow, np.int64)
        self.att_idx[order] = np.arange(nrow) - group_start
        codes = np.asarray(trace.outcome, dtype=np.int64)
        codes = np.where(codes < 0, len(schemas.ATTEMPT_OUTCOMES), codes)
        if trace.preempted:
            killed = schemas.ATTEMPT_OUTCOMES.index("killed")
            codes[np.fromiter(trace.preempted, np.int64, len(trace.preempted))] = killed
        #: Outcome code per row: ``schemas.ATTEMPT_OUTCOMES`` index, its length = unknown.
        self.outcome = codes
        self.ran = sj[first_of] if nrow else np.zeros(0, np.int64)
        gs = np.flatnonzero(first_of)
        ge = np.r_[gs[1:], nrow] - 1 if nrow else gs
        self.first_start = self.start[order][gs]
        self.last_end = self.end[order][ge]
        self.last_row = order[ge]

    def __len__(self) -> int:
        return len(self.job)


def _attempts_table(rows: _Rows, ids: pa.Array, gpus: np.ndarray) -> pa.Table:
    outcome = pa.array([*schemas.ATTEMPT_OUTCOMES, None], pa.string()).take(rows.outcome)
    return schemas.conform(
        "attempts",
        {
            "job_id": ids.take(rows.job),
            "attempt_idx": pa.array(rows.att_idx, pa.int32()),
            "start_time": _ts(rows.start),
            "end_time": _ts(rows.end),
            "num_gpus": pa.array(gpus, pa.int32()),
            "num_machines": pa.array(rows.servers, pa.int32()),
            "duration_s": pa.array((rows.end - rows.start) / 1e6, pa.float64()),
            "outcome": outcome,
            "source": _source(len(rows)),
        },
    )


def _placements_table(
    rows: _Rows,
    ids: pa.Array,
    cluster: Cluster,
    seg_row: np.ndarray,
    seg_server: np.ndarray,
    seg_gpus: np.ndarray,
    pl_gpu: np.ndarray,
) -> pa.Table:
    """One row per GPU of every placement segment."""
    pl_row = np.repeat(seg_row, seg_gpus)
    pl_machine = np.repeat(seg_server, seg_gpus)
    return schemas.conform(
        "placements",
        {
            "job_id": ids.take(rows.job[pl_row]),
            "attempt_idx": pa.array(rows.att_idx[pl_row], pa.int32()),
            "machine_id": pa.array(cluster.machine_ids, pa.string()).take(pl_machine),
            "gpu_idx": pa.array(pl_gpu, pa.int16()),
            "source": _source(len(pl_row)),
        },
    )


def _jobs_table(rows: _Rows, trace: Trace, wl: Workload, ids: pa.Array) -> pa.Table:
    """Every input job: its status from its last replayed attempt's outcome (the input's
    when unknown; none when it never started), the input's flags and the replay's own.
    Columns are taken from small arrays of names by index in Arrow (a million jobs: no
    object array per column)."""
    replayed = [*dict.fromkeys(v for v in STATUS_OF_OUTCOME.values()), None]
    # Per outcome code (its last value: unknown): the status it gives, as an index into
    # ``replayed``; -1 keeps the input's status.
    of_outcome = np.array(
        [
            replayed.index(STATUS_OF_OUTCOME[o]) if o in STATUS_OF_OUTCOME else -1
            for o in [*schemas.ATTEMPT_OUTCOMES, None]
        ],
        np.int64,
    )
    code = np.full(len(wl), -1, np.int64)
    code[rows.ran] = of_outcome[rows.outcome[rows.last_row]]
    # The input's flags (e.g. attempts_unknown of job-list jobs) and the replay's own.
    flags: list[list[str] | None] = [list(f) if f else None for f in wl.flags] or [None] * len(wl)
    for j in trace.unscheduled:
        flags[j] = [*(flags[j] or []), "unscheduled"]
        code[j] = len(replayed) - 1  # no status
    for j in trace.truncated:
        flags[j] = [*(flags[j] or []), "max_retries"]
    given = pa.array(wl.status, pa.string()) if wl.status else pa.nulls(len(wl), pa.string())
    status = pc.if_else(
        pa.array(code >= 0), pa.array(replayed, pa.string()).take(np.maximum(code, 0)), given
    )
    vc_names = pa.array(_vc_names(wl), pa.string())
    user_names = pa.array([*wl.user_names, None], pa.string())
    return schemas.conform(
        "jobs",
        {
            "job_id": ids,
            "vc": vc_names.take(np.where(wl.vc < 0, len(wl.vc_names), wl.vc)),
            "user_id": user_names.take(np.where(wl.user < 0, len(wl.user_names), wl.user)),
            "status": status,
            "submit_time": _ts(wl.submit_us),
            "num_gpus": pa.array(wl.num_gpus, pa.int32()),
            "flags": pa.array(flags, pa.list_(pa.string())),
            "source": _source(len(wl)),
        },
    )


def _vc_names(wl: Workload) -> np.ndarray:
    """VC name per VC index (None for jobs without one), then None (index -1)."""
    return np.array([*(n if n != NO_VC else None for n in wl.vc_names), None], dtype=object)


def _per_vc_table(
    per_vc: dict[int, dict[str, float]], wl: Workload, quota_by_vc: list[int] | None
) -> pa.Table:
    vc_names = _vc_names(wl)
    return pa.table(
        {
            "vc": pa.array([vc_names[v] for v in per_vc], pa.string()),
            "quota": [quota_by_vc[v] if quota_by_vc is not None else None for v in per_vc],
            **{k: [d[k] for d in per_vc.values()] for k in next(iter(per_vc.values()), {})},
        }
    )


def _quotas_by_name(wl: Workload, quota_by_vc: list[int] | None) -> dict[str, int]:
    if quota_by_vc is None:
        return {}
    return {
        wl.vc_names[v]: int(q)
        for v, q in enumerate(quota_by_vc)
        if v < len(wl.vc_names) and wl.vc_names[v] != NO_VC
    }


def _source(n: int) -> pa.Array:
    return pa.repeat(pa.scalar(SOURCE, pa.string()), n)


def _waiting_table(
    split: WaitSplit, ids: pa.Array, job: np.ndarray, att_idx: np.ndarray
) -> pa.Table:
    """One row per (row that waited, cause), in row order then ``CAUSES`` order."""
    assert split.first is not None and split.last is not None
    r, c = np.nonzero(split.us > 0)
    return pa.Table.from_arrays(
        [
            ids.take(job[r]),
            pa.array(att_idx[r], pa.int32()),
            _ts(split.first[r, c]),
            _ts(split.last[r, c]),
            pa.array(split.us[r, c] / 1e6, pa.float64()),
            pa.array(np.asarray(CAUSES, dtype=object)[c], pa.string()),
        ],
        schema=schemas.WAITING.schema,
    )


def write_result_store(result: ReplayResult, path: str | Path) -> Path:
    """Write a replay as a new store at ``path``: its tables (jobs, attempts, placements,
    machines) and, in the same batch, its files (``schemas.ARTIFACTS``): ``replay.json``
    (policy, params, seed, quotas), ``vc_quotas.csv`` (the quotas, read back by
    ``vcquota.quotas_for_store``), ``waiting.parquet`` (true causes) and the policy's own
    (``result.artifacts``). Replaces only a store that replay wrote. Returns the store path."""
    from philly_analyze.store import Store, has_artifact, is_store  # (duckdb: when writing)

    p = Path(path)
    if is_store(p):
        if not has_artifact(p, schemas.REPLAY_SETTINGS.name):
            raise UserError(
                "is a store not written by replay; choose another --out (replay never adds "
                "to an existing store)",
                source=str(p),
            )
        shutil.rmtree(p)
    files: dict[str, Any] = {schemas.REPLAY_SETTINGS.name: result.settings()}
    if result.quotas:
        files[schemas.VC_QUOTAS.name] = quota_table(result.quotas)
    files[schemas.WAITING.name] = result.waiting
    files.update(result.artifacts)
    with Store(p) as store, store.batch() as b:
        # The Parquet files are encoded at the same time (Batch.write_many: ~1 s less wall
        # time at a million jobs on 2 cores).
        tables: dict[str, pa.Table | EncodedTable] = {"machines": result.machines}
        for name in ("jobs", "attempts", "placements"):
            data, enc = getattr(result, name), result.encoded.get(name)
            tables[name] = enc if enc is not None and enc.data is data else data
        rows = b.write_many(tables, files)
        store.commit(
            b,
            [
                {
                    "source": f"replay:{result.policy}",
                    "format": SOURCE,
                    "rows": sum(rows.values()),
                    "rejected": 0,
                    "tables": rows,
                    "provided": "jobs; attempts; placements; machines",
                }
            ],
            source_format=SOURCE,
        )
    return p
