"""The runs table: one row per run, kept on disk as runs arrive so that a sweep can resume.

Layout of ``--out DIR``::

    sweep.json          what the latest sweep asked for (policies, grid, seeds, inputs)
    runs.parquet        every run ever done here: one row each (columns below)
    parts/*.parquet     rows of a sweep in progress (or interrupted): merged into runs.parquet
                        when it ends, read back by the next sweep if it never ended
    summary.parquet     the latest sweep's summary across seeds (long: one row per metric)
    figures/            each metric against each swept parameter (PNG + SVG)
    report.md           summary table and figures

Columns of ``runs.parquet``: ``run_id, inputs_id, policy, seed, jitter_s``, one
``param_<name>`` per parameter a sweep set (null: the policy does not take it; a value set to
None is written ``none``, which makes the column text), ``status`` (ok / failed), ``error``, every metric
of the replay's comparison table (``sim.metrics.METRICS`` first, then policy-specific ones such
as MuxFlow's), and, not deterministic, ``sim_seconds, run_seconds, worker, finished_at``;
then ``params_json`` (every parameter, defaults filled) and ``traceback`` (failed runs).
"""

from __future__ import annotations

import json
import math
import os
import uuid
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from philly_analyze.errors import UserError
from philly_analyze.sweep.spec import NONE_VALUE, PARAM_PREFIX, Task

RUNS_FILE = "runs.parquet"
PARTS_DIR = "parts"
SPEC_FILE = "sweep.json"
SPEC_KIND = "philly-analyze sweep"
KEY_COLUMNS = ("run_id", "inputs_id", "policy", "seed", "jitter_s")
STATUS_COLUMNS = ("status", "error")
#: Columns that differ from run to run of the same task (never compared).
TIMING_COLUMNS = ("sim_seconds", "run_seconds", "worker", "finished_at")
TAIL_COLUMNS = ("params_json", "traceback")
FIXED = set(KEY_COLUMNS + STATUS_COLUMNS + TIMING_COLUMNS + TAIL_COLUMNS)


def flatten(task: Task, inputs_id: str, result: dict[str, Any]) -> dict[str, Any]:
    """The table row of one run: the task's settings and the worker's result."""
    row: dict[str, Any] = {
        "run_id": task.run_id,
        "inputs_id": inputs_id,
        "policy": task.policy,
        "seed": task.seed,
        "jitter_s": task.jitter_s,
    }
    # A null would read as "the policy does not take it": a None setting is spelled out.
    row.update({PARAM_PREFIX + k: NONE_VALUE if v is None else v for k, v in task.given.items()})
    row["status"], row["error"] = result["status"], result["error"]
    for k, v in result["metrics"].items():
        if isinstance(v, float) and math.isnan(v):
            v = None  # missing is null in Parquet, not NaN
        row[k if k not in FIXED else f"metric_{k}"] = v
    for k in TIMING_COLUMNS:
        row[k] = result[k]
    row["params_json"] = json.dumps(task.params, sort_keys=True)
    row["traceback"] = result["traceback"]
    return row


def _metric_order(names: Iterable[str]) -> list[str]:
    from philly_analyze.sim.metrics import METRICS

    names = list(names)
    return [k for k in METRICS if k in names] + [k for k in names if k not in METRICS]


def build_table(rows: Sequence[dict[str, Any]]) -> pa.Table:
    """Rows -> an Arrow table with the documented column order; each column's type is
    inferred from its values (ints stay int64 unless a float appears; all-null metric
    columns are float64), rows sorted by (inputs, policy, parameters, seed)."""
    seen: list[str] = []
    for r in rows:
        seen += [k for k in r if k not in seen]
    params = sorted(k for k in seen if k.startswith(PARAM_PREFIX))
    metrics = _metric_order(k for k in seen if k not in FIXED and k not in params)
    order = [*KEY_COLUMNS, *params, *STATUS_COLUMNS, *metrics, *TIMING_COLUMNS, *TAIL_COLUMNS]
    rows = sorted(rows, key=lambda r: _sort_key(r, params))
    cols: dict[str, pa.Array] = {}
    for name in order:
        values = [r.get(name) for r in rows]
        cols[name] = _column(name, values, name in metrics)
    return pa.table(cols)


def _column(name: str, values: list[Any], metric: bool) -> pa.Array:
    if name == "finished_at":
        return pa.array(values, pa.timestamp("us", tz="UTC"))
    if name in ("sim_seconds", "run_seconds", "jitter_s"):
        return pa.array(values, pa.float64())
    try:
        arr = pa.array(values)
    except (pa.ArrowInvalid, pa.ArrowTypeError):  # mixed kinds (e.g. 1 and "a"): as text
        arr = pa.array([None if v is None else str(v) for v in values], pa.string())
    if pa.types.is_null(arr.type):
        arr = pa.array(values, pa.float64() if metric else pa.string())
    return arr


def _sort_key(row: dict[str, Any], params: list[str]) -> tuple[Any, ...]:
    def k(v: Any) -> tuple[int, Any]:
        if v is None:
            return (0, 0)
        if isinstance(v, bool | int | float):
            return (1, float(v))
        return (2, str(v))

    return (
        row.get("inputs_id") or "",
        row.get("policy") or "",
        *(k(row.get(p)) for p in params),
        row.get("seed", 0),
        row.get("run_id"),
    )


def _write_atomic(table: pa.Table, path: Path) -> None:
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex[:8]}.tmp")
    pq.write_table(table, tmp, compression="zstd")
    os.replace(tmp, path)


class RunsTable:
    """The runs of an output directory: those already there, and new ones as they arrive.

    ``add`` appends a row; rows are written to ``parts/`` at most every ``flush_every``
    seconds (and by ``flush``), so an interrupted sweep loses at most that much work.
    ``close`` merges everything into ``runs.parquet``. Without a directory it only keeps
    the rows in memory."""

    def __init__(self, out: Path | None, flush_every: float = 2.0):
        self.out = out
        self.flush_every = flush_every
        self.rows: dict[str, dict[str, Any]] = {}
        self._unflushed: list[dict[str, Any]] = []
        self._last_flush = 0.0
        if out is not None:
            for path in [out / RUNS_FILE, *sorted((out / PARTS_DIR).glob("*.parquet"))]:
                if path.exists():
                    for r in _read_rows(path):
                        self._keep(r)

    def _keep(self, row: dict[str, Any]) -> None:
        # A later result of the same run (a failed run retried) replaces the earlier one.
        self.rows[row["run_id"]] = row

    def done(self) -> set[str]:
        """Run ids with a successful result (failed runs are run again)."""
        return {k for k, r in self.rows.items() if r.get("status") == "ok"}

    def add(self, row: dict[str, Any]) -> None:
        import time

        self._keep(row)
        if self.out is None:
            return
        self._unflushed.append(row)
        now = time.monotonic()
        if now - self._last_flush >= self.flush_every:
            self.flush()
            self._last_flush = now

    def flush(self) -> None:
        """Write the rows not yet on disk as one part file."""
        if self.out is None or not self._unflushed:
            return
        parts = self.out / PARTS_DIR
        parts.mkdir(parents=True, exist_ok=True)
        _write_atomic(build_table(self._unflushed), parts / f"{uuid.uuid4().hex}.parquet")
        self._unflushed = []

    def close(self) -> pa.Table:
        """Merge everything into ``runs.parquet`` (then drop the parts); the whole table."""
        table = build_table(list(self.rows.values()))
        if self.out is not None:
            _write_atomic(table, self.out / RUNS_FILE)
            self._unflushed = []
            for p in (self.out / PARTS_DIR).glob("*.parquet"):
                p.unlink()
            if (self.out / PARTS_DIR).exists():
                (self.out / PARTS_DIR).rmdir()
        return table


def _read_rows(path: Path) -> list[dict[str, Any]]:
    try:
        t = pq.read_table(path)
    except (OSError, pa.ArrowInvalid) as e:
        raise UserError(f"cannot read earlier sweep results: {e}", source=str(path)) from None
    from philly_analyze.sim.metrics import METRIC_ALIASES

    rows = t.to_pylist()
    for r in rows:
        for old, new in METRIC_ALIASES.items():  # written by an older version: current name
            if old in r:
                r[new] = r.pop(old)
    for r in rows:  # a row from a part holds every column of that part: drop the empty ones
        for k in [k for k, v in r.items() if v is None and k not in FIXED]:
            del r[k]
    return rows


def prepare_out(out: Path, spec_doc: dict[str, Any]) -> None:
    """Create ``out`` or check that it is a sweep output; record the sweep's settings."""
    if out.exists() and not out.is_dir():
        raise UserError("is a file; --out needs a directory", source=str(out))
    if out.exists() and any(out.iterdir()):
        marker = out / SPEC_FILE
        try:
            kind = json.loads(marker.read_text()).get("kind") if marker.exists() else None
        except (OSError, json.JSONDecodeError, AttributeError):
            kind = None
        if kind != SPEC_KIND:
            raise UserError(
                "exists and is not a sweep output (no sweep.json); choose a new or empty directory",
                source=str(out),
            )
    out.mkdir(parents=True, exist_ok=True)
    tmp = out / f".{SPEC_FILE}.tmp"
    tmp.write_text(json.dumps({"kind": SPEC_KIND, **spec_doc}, indent=2, default=str) + "\n")
    os.replace(tmp, out / SPEC_FILE)
