"""Job lists without placements, for replaying real arrival patterns at full scale.

- ``job_list_csv``: a CSV with a header naming at least a submit time, a duration and a GPU
  count, e.g. the Pollux artifact's ``philly.csv`` (``timestamp,duration,num_gpus,gpu_time,
  cluster``: 82,247 real Philly jobs). Recognised column names (case-insensitive):
  submit ``timestamp|submit_time|submitted_time``, duration (s) ``duration|duration_s``,
  GPUs ``num_gpus|gpus``, VC ``cluster|vc``, user ``user|user_id``, id ``job_id|jobid|id``,
  status ``status``. Naive times are wall-clock in ``--timezone``. Without an id column a job
  is ``<file stem>-<line>``.
- ``gavel_trace``: Gavel's per-VC ``.trace`` files (7 tab-separated fields: job type,
  command, step flag, needs-data-dir, total steps, arrival seconds, scale factor = GPUs).
  Durations are ``total_steps / throughput(job type, scale factor)`` from Gavel's
  ``gavel_simulation_throughputs.json``, which must be ingested in the same command (the
  format is grouped: traces and throughputs meet in one session). Throughputs are those of
  ``GAVEL_WORKER`` (P100: the closest Gavel worker type to the 24 GB P40s that hold 74% of
  Philly's GPUs); scale factors Gavel did not measure scale linearly from the largest one it
  did. Arrival seconds count from ``GAVEL_EPOCH``, a fixed, arbitrary origin (the files carry
  none). The VC is the file's name (a Philly VC hash).
Each job gets one attempt with its duration and no start (the data has none), so queueing
delay is unknown until replayed.
"""

from __future__ import annotations

import ast
import csv
import json
import re
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from philly_analyze.errors import InputFormatError
from philly_analyze.ingest.formats import Format, IngestContext, SourceResult, register
from philly_analyze.ingest.source import Source
from philly_analyze.schemas import UTC_TS
from philly_analyze.store import Batch
from philly_analyze.timeutil import localize_naive

COLUMNS: dict[str, tuple[str, ...]] = {
    "submit": ("timestamp", "submit_time", "submitted_time"),
    "duration": ("duration", "duration_s"),
    "gpus": ("num_gpus", "gpus"),
    "vc": ("cluster", "vc"),
    "user": ("user", "user_id"),
    "job_id": ("job_id", "jobid", "id"),
    "status": ("status",),
}
REQUIRED = ("submit", "duration", "gpus")
STATUS_MAP = {
    "pass": "passed",
    "passed": "passed",
    "killed": "killed",
    "failed": "unsuccessful",
    "unsuccessful": "unsuccessful",
}
LAST_OUTCOME = {"passed": "passed", "killed": "killed", "unsuccessful": "failed"}
GAVEL_WORKER = "p100"
GAVEL_EPOCH = datetime(2017, 10, 1, tzinfo=UTC)
#: Start of Gavel's throughputs JSON: {"k80": {"('ResNet-18 (batch size 16)', 1)": ...
_THROUGHPUTS_RE = re.compile(r'\s*\{\s*"(k80|p100|v100)[a-z_]*"\s*:\s*\{\s*"\(\'')


def _header_map(line: str) -> dict[str, int] | None:
    fields = [f.strip().lower() for f in next(csv.reader([line]), [])]
    found: dict[str, int] = {}
    for key, names in COLUMNS.items():
        for i, f in enumerate(fields):
            if f in names:
                found[key] = i
                break
    return found if all(k in found for k in REQUIRED) else None


def _stem(name: str) -> str:
    base = Path(name.split("!")[-1]).name
    return base.split(".")[0] or base


def _write(
    batch: Batch,
    fmt: str,
    ids: list[str],
    submit_utc: np.ndarray,
    vc: list[str | None],
    user: list[str | None],
    status: list[str | None],
    gpus: list[int],
    dur: list[float],
) -> dict[str, int]:
    ts = pa.array(submit_utc.astype("datetime64[us]"), pa.timestamp("us")).cast(UTC_TS)
    n = len(ids)
    rows = {
        "jobs": batch.write(
            "jobs",
            {
                "job_id": ids,
                "vc": pa.array(vc, pa.string()),
                "user_id": pa.array(user, pa.string()),
                "status": pa.array(status, pa.string()),
                "submit_time": ts,
                "num_gpus": pa.array(gpus, pa.int32()),
                # One run per job: its attempts (and so its retries) are not recorded.
                "flags": pa.array([["attempts_unknown"]] * n, pa.list_(pa.string())),
                "source": [fmt] * n,
            },
        ),
        "attempts": batch.write(
            "attempts",
            {
                "job_id": ids,
                "attempt_idx": pa.array(np.zeros(n, np.int32)),
                "num_gpus": pa.array(gpus, pa.int32()),
                "duration_s": pa.array(dur, pa.float64()),
                "outcome": pa.array([LAST_OUTCOME.get(s or "") for s in status], pa.string()),
                "source": [fmt] * n,
            },
        ),
    }
    return rows


# --------------------------------------------------------------------------- CSV job lists
@register
class JobListCsv(Format):
    name = "job_list_csv"
    description = (
        "job list CSV (submit time, duration, GPUs[, VC, user, id]), e.g. Pollux's philly.csv"
    )

    def sniff(self, name: str, head: bytes) -> bool:
        line = head.split(b"\n", 1)[0].decode("utf-8", "replace").strip()
        return "," in line and _header_map(line) is not None

    def session(self, batch: Batch, ctx: IngestContext) -> _CsvSession:
        return _CsvSession(batch, ctx)


@dataclass
class _CsvSession:
    batch: Batch
    ctx: IngestContext

    def feed(self, source: Source) -> SourceResult:
        cols: dict[str, int] | None = None
        ids: list[str] = []
        naive: list[str] = []
        vc: list[str | None] = []
        user: list[str | None] = []
        status: list[str | None] = []
        gpus: list[int] = []
        dur: list[float] = []
        rejected = 0
        stem = _stem(source.name)
        for line_no, line in source.text_lines(self.ctx.tracker):
            if cols is None:
                cols = _header_map(line)
                if cols is None:
                    raise InputFormatError(
                        "header names no submit time, duration and GPU columns",
                        source=source.name,
                        line=line_no,
                    )
                continue
            if not line.strip():
                continue
            row = next(csv.reader([line]))
            try:
                t = row[cols["submit"]].strip().replace("T", " ")
                np.datetime64(t.replace(" ", "T"), "s")
                d = float(row[cols["duration"]])
                g = int(float(row[cols["gpus"]]))
                if d < 0 or g < 0 or not np.isfinite(d):
                    raise ValueError("negative or non-finite duration or GPUs")
            except (ValueError, IndexError) as e:
                self.batch.reject(source.name, line_no, f"bad row: {e}", line)
                rejected += 1
                continue

            def opt(key: str, row: list[str] = row, cols: dict[str, int] = cols) -> str | None:
                i = cols.get(key)
                v = row[i].strip() if i is not None and i < len(row) else ""
                return v or None

            ids.append(opt("job_id") or f"{stem}-{line_no}")
            naive.append(t.replace(" ", "T"))
            vc.append(opt("vc"))
            user.append(opt("user"))
            s = opt("status")
            status.append(STATUS_MAP.get(s.lower()) if s else None)
            gpus.append(g)
            dur.append(d)
        utc, _ = localize_naive(np.array(naive, dtype="datetime64[s]"), self.ctx.timezone)
        rows = _write(self.batch, JobListCsv.name, ids, utc, vc, user, status, gpus, dur)
        return SourceResult(rows, rejected, "jobs: vc, user_id, submit_time, num_gpus; attempts")

    def finish(self) -> dict[str, int]:
        return {}


# --------------------------------------------------------------------------- Gavel traces
def _is_gavel_line(line: str) -> bool:
    f = line.rstrip("\r\n").split("\t")
    if len(f) != 7:
        return False
    try:
        int(f[4])
        float(f[5])
        int(f[6])
    except ValueError:
        return False
    return True


@register
class GavelTrace(Format):
    name = "gavel_trace"
    description = "Gavel job traces (*.trace) + gavel_simulation_throughputs.json for durations"
    grouped = True

    def sniff(self, name: str, head: bytes) -> bool:
        text = head[:4096].decode("utf-8", "replace")
        if text.lstrip().startswith("{"):
            return _THROUGHPUTS_RE.match(text) is not None
        return _is_gavel_line(text.split("\n", 1)[0])

    def session(self, batch: Batch, ctx: IngestContext) -> _GavelSession:
        return _GavelSession(batch, ctx)


@dataclass
class _GavelSession:
    batch: Batch
    ctx: IngestContext
    jobs: list[tuple[str, str, float, str, int, int]] = field(default_factory=list)
    throughputs: dict[tuple[str, int], float] | None = None
    rejected: int = 0

    def feed(self, source: Source) -> SourceResult:
        if source.head.lstrip().startswith(b"{"):
            self._load_throughputs(source)
            return SourceResult({}, 0, "throughputs for gavel_trace durations")
        stem = _stem(source.name)
        rejected = 0
        for line_no, line in source.text_lines(self.ctx.tracker):
            if not line.strip():
                continue
            if not _is_gavel_line(line):
                self.batch.reject(source.name, line_no, "expected 7 tab-separated fields", line)
                rejected += 1
                continue
            f = line.rstrip("\r\n").split("\t")
            self.jobs.append((f"{stem}-{line_no}", stem, float(f[5]), f[0], int(f[4]), int(f[6])))
        return SourceResult({}, rejected, "jobs: vc, submit_time, num_gpus; attempts")

    def _load_throughputs(self, source: Source) -> None:
        with source.open(self.ctx.tracker) as f:
            try:
                data: Any = json.loads(f.read())
            except json.JSONDecodeError as e:
                raise InputFormatError(
                    f"invalid JSON: {e.msg}", source=source.name, line=e.lineno
                ) from None
        if GAVEL_WORKER not in data:
            raise InputFormatError(f"no {GAVEL_WORKER!r} throughputs", source=source.name)
        table: dict[tuple[str, int], float] = {}
        for key, val in data[GAVEL_WORKER].items():
            job_type, scale = ast.literal_eval(key)
            alone = val.get("null") if isinstance(val, dict) else None
            if isinstance(alone, int | float) and alone > 0:
                table[(str(job_type), int(scale))] = float(alone)
        self.throughputs = table

    def _throughput(self, job_type: str, scale: int) -> float | None:
        assert self.throughputs is not None
        t = self.throughputs.get((job_type, scale))
        if t is not None:
            return t
        measured = [s for (jt, s) in self.throughputs if jt == job_type and s <= scale]
        if not measured:
            return None
        s0 = max(measured)
        return self.throughputs[(job_type, s0)] * scale / s0

    def finish(self) -> dict[str, int]:
        if not self.jobs:
            return {}
        if self.throughputs is None:
            raise InputFormatError(
                "Gavel traces need Gavel's gavel_simulation_throughputs.json for durations: "
                "name it in the same ingest command",
                source="gavel_trace",
            )
        ids, vc, submit, gpus, dur = [], [], [], [], []
        for jid, stem, arrival, job_type, steps, scale in self.jobs:
            thr = self._throughput(job_type, scale)
            if thr is None:
                self.batch.reject(stem, None, f"no throughput for {job_type!r}", jid)
                continue
            ids.append(jid)
            vc.append(stem)
            submit.append(arrival)
            gpus.append(scale)
            dur.append(steps / thr)
        epoch = np.datetime64(GAVEL_EPOCH.replace(tzinfo=None), "us")
        utc = epoch + np.round(np.asarray(submit) * 1e6).astype("timedelta64[us]")
        none: list[str | None] = [None] * len(ids)
        return _write(self.batch, GavelTrace.name, ids, utc, vc, none, none, gpus, dur)
