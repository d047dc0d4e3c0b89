"""Gavel job traces (``gavel_trace``): one job per line, tab-separated, in three layouts
(told apart by the number of fields, line by line):

==  ===========================================================================================
 7  ``job_type, command, num_steps_arg, needs_data_dir, total_steps, arrival_time,
    scale_factor``: the Philly-derived traces of Gavel's ``scheduler/traces/msr``
10  ``job_type, command, working_directory, num_steps_arg, needs_data_dir, total_steps,
    scale_factor, priority_weight, SLO, arrival_time``: Gavel's current ``scheduler/utils.
    parse_trace``; its ``Job.__str__`` writes ``%s\\t%s\\t%s\\t%s\\t%d\\t%d\\t%d\\t%d\\t%f``
    and the trace generators append ``\\t%d`` (the arrival), so ``SLO`` is ``-1.000000``
 9  the 10-field layout without ``working_directory`` (Gavel's 2020 ``parse_trace``)
==  ===========================================================================================

Durations are ``total_steps / throughput(job_type, scale_factor)``, the job type's isolated
throughput (the ``"null"`` entry: no co-located job) on one GPU type of a Gavel throughputs JSON
(``gavel_simulation_throughputs.json``). The JSON is either given with ``--gavel-throughputs``
or ingested in the same command as the traces (the format is grouped). The GPU type is
``--gavel-gpu``, default ``v100``: Gavel's trace generators set ``total_steps`` = duration x the
V100 isolated throughput (``scheduler/scripts/utils/generate_trace.py`` and ``generate_job`` in
``scheduler/utils.py``), so the V100 column gives back the durations a trace was made from.
A scale factor the JSON did not measure scales linearly from the largest one it did below it; a
job type it lacks gets no duration (NULL, flag ``no_throughput``, counted in a note).

Arrival seconds count from ``--origin`` (default ``timeutil.DEFAULT_ORIGIN``; the files carry no
date). The VC is the file's name (a Philly VC hash for the msr traces), the job id
``<file stem>-<line>``. ``priority_weight`` and ``SLO`` have no column in the store: jobs that set
them (weight other than 1, SLO other than -1) are counted in a note.
"""

from __future__ import annotations

import ast
import json
import math
import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from philly_analyze.bounds import DURATION_S, JOB_GPUS, RELATIVE_S, TIME, excerpt, json_int
from philly_analyze.errors import InputFormatError
from philly_analyze.ingest.formats import Format, IngestContext, SourceResult, first_line, register
from philly_analyze.ingest.joblist import stem_of, write_jobs
from philly_analyze.ingest.source import Source, file_source
from philly_analyze.progress import Tracker
from philly_analyze.store import Batch

#: Start of Gavel's throughputs JSON: {"k80": {"('ResNet-18 (batch size 16)', 1)": ...
_THROUGHPUTS_RE = re.compile(r'\s*\{\s*"(k80|p100|v100)[a-z_]*"\s*:\s*\{\s*"\(\'')
Throughputs = dict[tuple[str, int], float]


@dataclass(frozen=True)
class Layout:
    """Field positions of one trace layout."""

    needs_data_dir: int
    total_steps: int
    scale_factor: int
    arrival_time: int
    priority_weight: int | None = None
    slo: int | None = None


LAYOUTS = {
    7: Layout(needs_data_dir=3, total_steps=4, arrival_time=5, scale_factor=6),
    9: Layout(3, 4, 5, 8, priority_weight=6, slo=7),
    10: Layout(4, 5, 6, 9, priority_weight=7, slo=8),
}


@dataclass(frozen=True)
class TraceJob:
    """The fields of one trace line that the store uses."""

    job_type: str
    total_steps: float
    scale_factor: int
    arrival_s: float
    #: Whether the line sets a priority weight other than 1 or an SLO (not stored).
    scheduling_hints: bool


def parse_line(line: str) -> TraceJob | str:
    """A trace line, or why it is not one."""
    f = line.rstrip("\r\n").split("\t")
    lay = LAYOUTS.get(len(f))
    if lay is None:
        return f"expected 7, 9 or 10 tab-separated fields (Gavel traces), found {len(f)}"
    try:
        needs = int(f[lay.needs_data_dir])
        steps = float(f[lay.total_steps])
        scale = int(f[lay.scale_factor])
        arrival = float(f[lay.arrival_time])
        weight = 1.0 if lay.priority_weight is None else float(f[lay.priority_weight])
        slo = -1.0 if lay.slo is None else float(f[lay.slo])
    except ValueError as e:
        return f"not a Gavel trace line ({len(f)} fields): {excerpt(str(e))}"
    if needs not in (0, 1) or scale < 1 or not (math.isfinite(steps) and steps >= 0):
        return "needs_data_dir must be 0 or 1, scale_factor >= 1, total_steps >= 0"
    if not JOB_GPUS.ok(scale):
        return f"scale_factor: {JOB_GPUS.reason(f[lay.scale_factor])}"
    if not RELATIVE_S.ok(arrival):
        return f"arrival: {RELATIVE_S.reason(f[lay.arrival_time])}"
    return TraceJob(f[0], steps, scale, arrival, weight != 1 or slo >= 0)


def load_throughputs(data: Any, gpu: str, name: str) -> Throughputs:
    """Isolated throughputs (steps/s) per (job type, scale factor) on ``gpu`` of a Gavel
    throughputs JSON document."""
    if not isinstance(data, dict) or not isinstance(data.get(gpu), dict):
        have = ", ".join(sorted(data)) if isinstance(data, dict) else "nothing"
        raise InputFormatError(
            f"no {gpu!r} throughputs (the file has {have}); choose one with --gavel-gpu",
            source=name,
        )
    table: Throughputs = {}
    for key, val in data[gpu].items():
        try:
            job_type, scale = ast.literal_eval(key)
            if isinstance(scale, bool) or not isinstance(scale, int) or scale < 1:
                raise ValueError
            JOB_GPUS.check(scale)
        except (ValueError, SyntaxError, TypeError, RecursionError, MemoryError):
            raise InputFormatError(
                f"key {excerpt(key)} is not a ('job type', scale factor) pair with a scale "
                f"factor of 1 to {int(JOB_GPUS.hi):,} GPUs",
                source=name,
            ) from None
        alone = val.get("null") if isinstance(val, dict) else None
        if isinstance(alone, int | float) and 0 < alone < math.inf:
            table[(str(job_type), scale)] = float(alone)
    return table


def _read_json(source: Source, tracker: Tracker | None) -> Any:
    with source.open(tracker) as f:
        try:
            # Undecodable bytes can only be inside strings (job type names): replaced, not fatal.
            return json.loads(f.read().decode("utf-8", "replace"), parse_int=json_int)
        except json.JSONDecodeError as e:
            raise InputFormatError(
                f"invalid JSON: {e.msg}", source=source.name, line=e.lineno
            ) from None
        except RecursionError:
            raise InputFormatError("JSON nested too deeply", source=source.name) from None


@register
class GavelTrace(Format):
    name = "gavel_trace"
    description = "Gavel job traces (*.trace) + gavel_simulation_throughputs.json for durations"
    grouped = True

    def sniff(self, name: str, head: bytes) -> bool:
        text = head[:4096].decode("utf-8", "replace")
        if text.lstrip().startswith("{"):
            return _THROUGHPUTS_RE.match(text) is not None
        return isinstance(parse_line(first_line(head[:4096])), TraceJob)

    def session(self, batch: Batch, ctx: IngestContext) -> _GavelSession:
        return _GavelSession(batch, ctx)


@dataclass
class _GavelSession:
    batch: Batch
    ctx: IngestContext
    ids: list[str] = field(default_factory=list)
    vcs: list[str] = field(default_factory=list)
    jobs: list[TraceJob] = field(default_factory=list)
    #: (source, line) of each job, for the ones rejected when their duration is known.
    where: list[tuple[str, int]] = field(default_factory=list)
    #: Throughputs JSON files among the ingested sources: (name, document).
    documents: list[tuple[str, Any]] = field(default_factory=list)

    def feed(self, source: Source) -> SourceResult:
        if source.head.lstrip().startswith(b"{"):
            self.documents.append((source.name, _read_json(source, self.ctx.tracker)))
            return SourceResult({}, 0, "throughputs for gavel_trace durations")
        stem = stem_of(source.name)
        rejected = 0
        origin_us = self.ctx.origin.timestamp() * 1e6
        for line_no, line in source.text_lines(self.ctx.tracker):
            if not line.strip():
                continue
            job = parse_line(line)
            if isinstance(job, TraceJob) and not TIME.ok_us(origin_us + job.arrival_s * 1e6):
                job = f"arrival {TIME.reason(job.arrival_s)} (counted from --origin)"
            if isinstance(job, str):
                self.batch.reject(source.name, line_no, job, line)
                rejected += 1
                continue
            self.where.append((source.name, line_no))
            self.ids.append(f"{stem}-{line_no}")
            self.vcs.append(stem)
            self.jobs.append(job)
        return SourceResult({}, rejected, "jobs: vc, submit_time, num_gpus; attempts")

    def _throughputs(self) -> tuple[str, Throughputs]:
        """(file name, table) of the throughputs to use."""
        gpu = self.ctx.gavel_gpu
        if self.ctx.gavel_throughputs is not None:
            src = file_source(self.ctx.gavel_throughputs)
            for name, _ in self.documents:
                self.ctx.note(f"gavel_trace: {name} not used: --gavel-throughputs names {src.name}")
            # Not one of the ingested sources: no progress counted for it.
            return src.name, load_throughputs(_read_json(src, None), gpu, src.name)
        if not self.documents:
            raise InputFormatError(
                "Gavel traces need a Gavel throughputs JSON for durations "
                "(gavel_simulation_throughputs.json): give --gavel-throughputs FILE or name it "
                "in the same ingest command",
                source="gavel_trace",
            )
        if len({json.dumps(d, sort_keys=True) for _, d in self.documents}) > 1:
            names = ", ".join(n for n, _ in self.documents)
            raise InputFormatError(
                f"several different throughputs files ({names}): choose one with "
                "--gavel-throughputs",
                source="gavel_trace",
            )
        name, doc = self.documents[0]
        return name, load_throughputs(doc, gpu, name)

    def finish(self) -> dict[str, int]:
        if not self.jobs:
            return {}
        name, table = self._throughputs()
        dur: list[float | None] = []
        missing: Counter[str] = Counter()
        scaled = 0
        known: dict[tuple[str, int], tuple[float | None, bool]] = {}
        for job in self.jobs:
            key = (job.job_type, job.scale_factor)
            if key not in known:
                known[key] = _throughput(table, *key)
            thr, exact = known[key]
            if thr is None:
                missing[job.job_type] += 1
            scaled += not exact and thr is not None
            dur.append(None if thr is None else job.total_steps / thr)
        rejected = self._reject_durations(dur)
        if not self.jobs:
            return {"rejects": rejected}
        origin = np.datetime64(self.ctx.origin.replace(tzinfo=None), "us")
        arrival_us = np.round(np.array([j.arrival_s for j in self.jobs]) * 1e6)
        n = len(self.jobs)
        none: list[str | None] = [None] * n
        flags = [["no_throughput"] if d is None else None for d in dur]
        self._notes(name, scaled, missing)
        rows = write_jobs(
            self.batch,
            GavelTrace.name,
            self.ids,
            origin + arrival_us.astype("timedelta64[us]"),
            self.vcs,
            none,
            none,
            [j.scale_factor for j in self.jobs],
            dur,
            flags,
        )
        return {**rows, "rejects": rejected} if rejected else rows

    def _reject_durations(self, dur: list[float | None]) -> int:
        """Reject the jobs whose duration (steps / throughput) is beyond ``bounds.DURATION_S``
        (1e23 steps, a throughput of 1e-20): dropped from the session's lists and ``dur``."""
        bad = [i for i, d in enumerate(dur) if d is not None and not DURATION_S.ok(d)]
        for i in bad:
            name, line_no = self.where[i]
            steps = self.jobs[i].total_steps
            self.batch.reject(
                name,
                line_no,
                f"{DURATION_S.reason(dur[i])} (total_steps {steps:g} / throughput)",
                None,
            )
        if bad:
            keep = sorted(set(range(len(dur))) - set(bad))
            lists: tuple[list[Any], ...] = (self.ids, self.vcs, self.jobs, self.where, dur)
            for lst in lists:
                lst[:] = [lst[i] for i in keep]
        return len(bad)

    def _notes(self, name: str, scaled: int, missing: Counter[str]) -> None:
        gpu, shown = self.ctx.gavel_gpu, Path(name.rsplit("!", 1)[-1]).name
        self.ctx.note(
            f"gavel_trace: durations = total_steps / isolated throughput on {gpu} (--gavel-gpu) "
            f"from {shown}; arrival seconds counted from {self.ctx.origin.isoformat()} (--origin)"
            + (
                f"; {scaled:,} jobs at scale factors not measured there scaled linearly from the "
                "largest measured one"
                if scaled
                else ""
            )
        )
        if missing:
            types = ", ".join(t for t, _ in missing.most_common(3))
            more = ", ..." if len(missing) > 3 else ""
            self.ctx.note(
                f"gavel_trace: {sum(missing.values()):,} jobs of {len(missing)} job types with no "
                f"{gpu} throughput in {shown} ({types}{more}): duration unknown (NULL), flagged "
                "no_throughput"
            )
        hinted = sum(j.scheduling_hints for j in self.jobs)
        if hinted:
            self.ctx.note(
                f"gavel_trace: {hinted:,} jobs set a priority weight other than 1 or an SLO: not "
                "stored (the store has no column for them)"
            )


def _throughput(table: Throughputs, job_type: str, scale: int) -> tuple[float | None, bool]:
    """(throughput, measured exactly) of a job type at a scale factor; None if the type is
    absent. Unmeasured scales scale linearly from the largest measured one below them."""
    t = table.get((job_type, scale))
    if t is not None:
        return t, True
    measured = [s for (jt, s) in table if jt == job_type and s <= scale]
    if not measured:
        return None, False
    s0 = max(measured)
    return table[(job_type, s0)] * scale / s0, False
