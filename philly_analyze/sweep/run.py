"""``run_sweep``: expand a sweep, skip the runs already done, execute the rest (local pool or
Ray), and write the runs table, the summary, the figures and a report."""

from __future__ import annotations

import os
import pickle
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa

from philly_analyze.errors import UsageError, UserError, did_you_mean
from philly_analyze.progress import NullTracker, Tracker
from philly_analyze.sweep.inputs import (
    InputHandle,
    ShippedInputs,
    StorePath,
    SweepInputs,
    read_inputs,
)
from philly_analyze.sweep.results import RunsTable, flatten, prepare_out
from philly_analyze.sweep.spec import SweepSpec, Task

STORE_MODES = ("auto", "ship", "shared")
#: Inputs up to this size (pickled) are shipped to workers by default; larger ones are read
#: by each worker from the store path. 512 MB is far above a 100k-job trace (~10 MB) and well
#: below Ray's default object store (30% of a node's memory).
DEFAULT_SHIP_LIMIT_MB = 512.0
SUMMARY_FILE = "summary.parquet"
FIGURES_DIR = "figures"
REPORT_FILE = "report.md"


@dataclass
class SweepResult:
    """What a sweep did. ``runs``: this sweep's rows of the runs table (all its tasks,
    including those done by an earlier invocation); ``summary``: long summary over seeds."""

    spec: SweepSpec
    runs: pd.DataFrame
    summary: pd.DataFrame
    executed: int
    skipped: int
    seconds: float
    executor: str
    store_mode: str
    #: Seconds to connect to (or start) Ray, not included in ``seconds``.
    startup_seconds: float
    inputs_id: str
    out: Path | None = None
    figures: list[Path] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    #: The metrics asked for (``metrics=``), former names mapped to current ones.
    metrics: list[str] = field(default_factory=list)

    @property
    def failed(self) -> pd.DataFrame:
        """The failed runs (policy, parameters, seed, error)."""
        return self.runs[self.runs["status"] != "ok"]


def run_sweep(
    store: str | os.PathLike[str],
    policies: str | Sequence[str],
    params: Mapping[str, Any] | None = None,
    seeds: int | Sequence[int] = 1,
    *,
    out: str | os.PathLike[str] | None = None,
    ray: str | None = None,
    workers: int | None = None,
    racks: int | None = None,
    machines: str | None = None,
    quotas: str | os.PathLike[str] | None = None,
    jitter_s: float = 0.0,
    store_mode: str = "auto",
    ship_limit_mb: float = DEFAULT_SHIP_LIMIT_MB,
    confidence: float = 0.95,
    metrics: Sequence[str] | None = None,
    figures: bool = True,
    imports: Sequence[str] = (),
    progress: Tracker | None = None,
    log: Callable[[str], None] | None = None,
) -> SweepResult:
    """Run every (policy, parameter values, seed) replay of ``store`` once.

    ``params``: ``KEY`` or ``POLICY.KEY`` -> values (see ``SweepSpec.build``). ``out``: a
    directory for runs.parquet, summary.parquet, figures/ and report.md; re-running into it
    skips the runs already there (failed ones are retried); None keeps everything in memory.
    ``ray``: a Ray address (``host:port``, ``ray://...``, ``auto``, or ``local`` to start a
    private instance); None runs on ``workers`` local processes (default: one per core).
    ``jitter_s``: move each job's submission by up to this many seconds, drawn from the seed
    (so that seeds matter to deterministic policies). ``store_mode``: ``ship`` the loaded
    inputs to workers, have them read the ``shared`` store path, or ``auto`` (ship up to
    ``ship_limit_mb``). ``metrics``: those to plot (default: every metric that varies);
    ``figures=False`` skips drawing. ``machines``: as ``replay --machines`` (None: its
    default). A run's own failure is recorded in its row, never raised."""
    from philly_analyze.sweep.summary import seed_invariant, summarize

    say = log or (lambda _m: None)
    if store_mode not in STORE_MODES:
        raise UserError(f"store mode must be one of {', '.join(STORE_MODES)}, got {store_mode!r}")
    if not 0 < confidence < 1:
        raise UserError(f"confidence must be between 0 and 1, got {confidence}")
    spec = SweepSpec.build(policies, params, seeds, jitter_s=jitter_s, imports=imports)
    check_metric_names(metrics, spec)
    inputs = read_inputs(store, racks, quotas, machines)
    tasks = spec.tasks(inputs.identity)
    out_path = Path(out) if out is not None else None
    if out_path is not None:
        prepare_out(out_path, _spec_doc(spec, store, racks, quotas, inputs, tasks, machines))
    table = RunsTable(out_path)
    done = table.done()
    todo = [t for t in tasks if t.run_id not in done]
    for line in spec.describe():
        say(line)
    handle, mode = _handle(inputs, store, racks, store_mode, ship_limit_mb, machines)
    run = _Execution(inputs, tasks, table, progress or NullTracker(), say)
    whole = run.execute(todo, handle, mode, ray, workers)
    runs = _this_sweep(whole, tasks)
    summary = summarize(runs, confidence)
    result = SweepResult(
        spec, runs, summary, len(todo), len(tasks) - len(todo), run.seconds, run.where, mode,
        run.startup, inputs.identity, out_path,
    )  # fmt: skip
    result.metrics, result.notes = resolve_metrics(metrics, list(dict.fromkeys(summary["metric"])))
    result.notes += [
        f"{pol}: every seed gave the same metrics (the policy uses no randomness); "
        "--jitter SECONDS perturbs arrivals per seed"
        for pol in seed_invariant(summary)
    ]
    if out_path is not None:
        _write_outputs(result, out_path, figures, result.metrics or None, confidence)
    return result


def resolve_metrics(
    requested: Sequence[str] | None, present: list[str]
) -> tuple[list[str], list[str]]:
    """The metric names a user asked for, with former names (``sim.metrics.METRIC_ALIASES``)
    mapped to the current ones; and a note for each former or unknown name."""
    from philly_analyze.sim.metrics import METRIC_ALIASES

    out: list[str] = []
    notes: list[str] = []
    unknown: list[str] = []
    for name in requested or ():
        new = METRIC_ALIASES.get(name)
        if new is not None:
            notes.append(f"metric {name!r} is now called {new!r} (the old name is deprecated)")
            name = new
        if name not in present:
            unknown.append(f"no metric {name!r}{did_you_mean(name, present)}")
            continue
        if name not in out:
            out.append(name)
    if unknown and present:  # with no run done, there is nothing to say a name is wrong
        raise UsageError(f"--metric: {'; '.join(unknown)}; the metrics: {', '.join(present)}")
    return out, notes + unknown


def check_metric_names(requested: Sequence[str] | None, spec: SweepSpec) -> None:
    """Before any run: refuse a ``--metric`` no chosen policy reports, when that is known
    (the built-in queue policies report ``sim.metrics.METRICS``; the sharing policies and
    imported ones may report more, checked against the runs by ``resolve_metrics``)."""
    from philly_analyze.sim.metrics import METRICS
    from philly_analyze.sim.policies import BUILTIN_MODULES, get_policy

    if spec.imports or any(
        type(get_policy(p)).__module__ not in BUILTIN_MODULES for p in spec.policies
    ):
        return
    resolve_metrics(requested, [*METRICS])  # raises UsageError for a name it lacks


class _Execution:
    """Runs the tasks left to do on the chosen executor, filing each result in the table."""

    def __init__(
        self,
        inputs: SweepInputs,
        tasks: list[Task],
        table: RunsTable,
        tracker: Tracker,
        say: Callable[[str], None],
    ) -> None:
        self.inputs, self.table, self.tracker, self.say = inputs, table, tracker, say
        self.by_id = {t.run_id: t for t in tasks}
        self.total = len(tasks)
        self.failed = 0
        self.where = ""
        self.seconds = self.startup = 0.0

    def on_row(self, result: dict[str, Any]) -> None:
        self.table.add(flatten(self.by_id[result["run_id"]], self.inputs.identity, result))
        self.failed += result["status"] != "ok"
        self.tracker.advance(1)
        self.tracker.describe(f"sweep ({self.failed} failed)" if self.failed else "sweep")

    def execute(
        self, todo: list[Task], handle: InputHandle, mode: str, ray: str | None, workers: int | None
    ) -> pa.Table:
        """Run ``todo``; returns the whole runs table (merged and written even when
        interrupted: what finished is kept, and the next invocation resumes from it)."""
        from philly_analyze.sweep import executors

        workers = workers or executors.default_workers()
        self.tracker.update(completed=0, total=len(todo))
        t0 = time.perf_counter()
        session = None
        try:
            if ray is not None:
                session = executors.RaySession.connect(ray, local_cpus=workers)
                self.startup = time.perf_counter() - t0
                t0 += self.startup
                self.where = f"Ray at {ray} ({session.cpus()} CPUs)"
                self.say(_plan(self.total, len(todo), self.where, mode, self.inputs))
                if todo:
                    h = session.put(self.inputs) if mode == "ship" else handle
                    session.run(h, todo, self.on_row)
            else:
                n = min(workers, len(todo)) if todo else workers
                self.where = f"{n} local worker{'s' if n != 1 else ''}"
                self.say(_plan(self.total, len(todo), self.where, mode, self.inputs))
                if todo:
                    executors.run_local(handle, todo, n, self.on_row)
        finally:
            if session is not None:
                session.close()
            whole = self.table.close()
        self.seconds = time.perf_counter() - t0
        return whole


def _this_sweep(whole: pa.Table, tasks: list[Task]) -> pd.DataFrame:
    """This sweep's rows of the whole table, in the sweep's order (policies as given)."""
    pos = {t.run_id: i for i, t in enumerate(tasks)}
    mine = whole.filter(pa.array([r in pos for r in whole.column("run_id").to_pylist()]))
    df = _drop_empty(mine.to_pandas(types_mapper=_types))
    df = df.iloc[np.argsort([pos[r] for r in df["run_id"]], kind="stable")]
    return df.reset_index(drop=True)


def _write_outputs(
    result: SweepResult, out: Path, figures: bool, metrics: list[str] | None, confidence: float
) -> None:
    import pyarrow.parquet as pq

    from philly_analyze.sweep.figures import plot_sweep
    from philly_analyze.sweep.report import write_report

    pq.write_table(pa.Table.from_pandas(result.summary, preserve_index=False), out / SUMMARY_FILE)
    ok = result.summary[result.summary["runs"] > 0]
    if figures and len(ok):
        result.figures = plot_sweep(ok, result.spec.swept(), out / FIGURES_DIR, metrics, confidence)
    write_report(result, out / REPORT_FILE, confidence, metrics)


def _types(t: pa.DataType) -> Any:
    # Nullable integers stay integers in pandas (counts with a null would become floats).
    return pd.Int64Dtype() if pa.types.is_integer(t) else None


def _drop_empty(df: pd.DataFrame) -> pd.DataFrame:
    """Columns that only other sweeps in the same output filled (e.g. another policy's
    metrics) are all-null here: drop them."""
    from philly_analyze.sweep.results import FIXED

    empty = [c for c in df.columns if c not in FIXED and df[c].isna().all()]
    return df.drop(columns=empty)


def _handle(
    inputs: SweepInputs,
    store: Any,
    racks: int | None,
    mode: str,
    limit_mb: float,
    machines: str | None = None,
) -> tuple[InputHandle, str]:
    if mode == "auto":
        size = len(pickle.dumps(inputs, protocol=pickle.HIGHEST_PROTOCOL)) / 1e6
        mode = "ship" if size <= limit_mb else "shared"
    if mode == "ship":
        return ShippedInputs(inputs), mode
    path = str(Path(store).resolve())
    return StorePath(path, racks, inputs.quotas, inputs.identity, machines), mode


def _plan(total: int, todo: int, where: str, mode: str, inputs: SweepInputs) -> str:
    done = total - todo
    how = "inputs shipped to workers" if mode == "ship" else "workers read the store path"
    return (
        f"{total} runs ({done} already done, {todo} to run) on {where}; {how}; "
        f"{len(inputs.workload):,} jobs, {inputs.cluster.total_gpus:,} GPUs, inputs {inputs.identity}"
    )


def _spec_doc(
    spec: SweepSpec,
    store: Any,
    racks: int | None,
    quotas: Any,
    inputs: SweepInputs,
    tasks: list[Task],
    machines: str | None = None,
) -> dict[str, Any]:
    return {
        "store": str(Path(store).resolve()),
        "inputs_id": inputs.identity,
        "racks": racks,
        "machines": machines,
        "quotas": str(quotas) if quotas is not None else None,
        "policies": spec.policies,
        "grid": spec.grid,
        "seeds": spec.seeds,
        "jitter_s": spec.jitter_s,
        "imports": list(spec.imports),
        "run_ids": [t.run_id for t in tasks],
    }
