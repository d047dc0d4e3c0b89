"""The store's tables (Parquet files under ``parquet/``, views in the catalog), which source
wins when several describe the same rows, and the helpers that shape data to a table."""

from __future__ import annotations

import pyarrow as pa

from philly_analyze.schemas.model import (
    F32,
    F64,
    I16,
    I32,
    I64,
    STR,
    STR_LIST,
    UTC_TS,
    Table,
    _c,
)

MACHINES = Table(
    "machines",
    "Servers of the cluster. The listed count comes from the machine list; observed counts "
    "from placements and utilization data. Analyses use num_gpus.",
    (
        _c(
            "machine_id",
            STR,
            "Machine id as in the trace (`m47`) or a YARN host name.",
            nullable=False,
        ),
        _c(
            "num_gpus",
            I16,
            "GPUs used by analyses and replay: the larger of listed_num_gpus and the highest GPU "
            "index any placement used + 1 (a listed count below what jobs were given is wrong).",
            derived=True,
        ),
        _c("listed_num_gpus", I16, "GPU count from the machine list (NULL if not listed)."),
        _c(
            "observed_num_gpus",
            I16,
            "Largest evidence of GPUs from data: max GPU index in placements or in utilization "
            "rows carrying a value, + 1.",
            derived=True,
        ),
        _c("gpu_mem_gb", F32, "Memory of one GPU in GB (machine list), NULL if unknown."),
        _c("rack", STR, "Rack id if known (NULL in the public trace)."),
        _c("source", STR, "Format of the source that listed the machine."),
    ),
    key=("machine_id",),
)

#: Physical-only helper: evidence of GPUs per machine from utilization data (small).
MACHINE_OBSERVATIONS = Table(
    "machine_observations",
    "Per machine, the GPUs seen reporting utilization in one source (feeds machines.observed_num_gpus).",
    (
        _c("machine_id", STR, "Machine id.", nullable=False),
        _c("observed_num_gpus", I16, "Max GPU index with a non-NA utilization value + 1."),
        _c("first_seen", UTC_TS, "First timestamp the source has for the machine."),
        _c("last_seen", UTC_TS, "Last timestamp the source has for the machine."),
        _c("source", STR, "Format of the source."),
    ),
    physical_only=True,
)

JOBS = Table(
    "jobs",
    "One row per job (YARN application). Derived columns follow the official notebook: "
    "num_gpus from the first attempt, queue delay = first start - submit, run time = last end - "
    "first start.",
    (
        _c("job_id", STR, "Application id, e.g. application_1506638472019_14199.", nullable=False),
        _c("vc", STR, "Virtual cluster (YARN queue)."),
        _c("user_id", STR, "User (hash in the public trace)."),
        _c("status", STR, "Final status: passed, killed or unsuccessful; NULL if unknown/running."),
        _c("submit_time", UTC_TS, "Submission time."),
        _c(
            "num_gpus",
            I32,
            "GPUs of the first attempt (of a source listing it twice, the earlier-starting "
            "listing, then the fewer GPUs); the requested count when the job never ran.",
        ),
        _c("num_attempts", I32, "Number of attempts.", derived=True),
        _c("first_start", UTC_TS, "Start of the first attempt.", derived=True),
        _c(
            "last_end",
            UTC_TS,
            "End of the last attempt (NULL if still running or its end is not recorded).",
            derived=True,
        ),
        _c("queue_delay_s", F64, "first_start - submit_time, seconds.", derived=True),
        _c("run_time_s", F64, "last_end - first_start, seconds.", derived=True),
        _c(
            "gpu_time_s",
            F64,
            "Sum over attempts of duration_s x num_gpus; NULL (unknown, not a partial sum) when "
            "an attempt's duration or GPU count is unknown (e.g. an attempt still running or "
            "whose end is not recorded); 0 for a job that never ran.",
            derived=True,
        ),
        _c(
            "flags",
            STR_LIST,
            "Data-quality flags, e.g. no_submit, no_end (still running), end_unknown (an "
            "attempt of a finished job has no end), no_attempts.",
        ),
        _c("source", STR, "Format of the source(s) the row came from."),
    ),
    key=("job_id",),
)

ATTEMPTS = Table(
    "attempts",
    "One row per attempt (YARN app attempt); attempt_idx is 0-based in start order.",
    (
        _c("job_id", STR, "Job id.", nullable=False),
        _c("attempt_idx", I32, "0-based attempt index.", nullable=False),
        _c("start_time", UTC_TS, "Start time (NULL if never started)."),
        _c("end_time", UTC_TS, "End time (NULL if still running or unknown)."),
        _c(
            "num_gpus",
            I32,
            "GPUs held by the attempt (sum over its machines); NULL when the source names "
            "none (a published-trace attempt whose detail lists no GPU).",
        ),
        _c("num_machines", I32, "Servers the attempt spanned."),
        _c("duration_s", F64, "end_time - start_time, seconds."),
        _c("outcome", STR, "passed, killed, failed or running (NULL if unknown)."),
        _c("source", STR, "Format of the source."),
        _c(
            "timing",
            STR,
            "What the data says of the attempt's run: `ended` (start and end known), `running` "
            "(no end, and it is the last attempt of a job without a final status), `end_unknown` "
            "(no end, but the job has a final status or a later attempt: it ended at a time the "
            "data does not give; time-based analyses leave it out, the queueing cluster state holds "
            "it between two bounds), `start_unknown` (no start, "
            "e.g. job lists). See docs/analyses.md.",
            derived=True,
        ),
    ),
    key=("job_id", "attempt_idx"),
)
#: ``attempts.timing`` values whose run is an interval the analyses can place in time (a
#: running attempt's interval reaches the end of the data).
TIMED = ("ended", "running")

PLACEMENTS = Table(
    "placements",
    "Which GPUs of which machine each attempt held.",
    (
        _c("job_id", STR, "Job id.", nullable=False),
        _c("attempt_idx", I32, "0-based attempt index.", nullable=False),
        _c("machine_id", STR, "Machine id.", nullable=False),
        _c("gpu_idx", I16, "GPU index on the machine (gpu3 -> 3); NULL if unknown."),
        _c("source", STR, "Format of the source."),
    ),
)

GPU_UTIL = Table(
    "gpu_util",
    "Per-minute utilization of each GPU (nvidia-smi utilization.gpu, percent). NA/offline "
    "minutes are absent.",
    (
        _c("time", UTC_TS, "Start of the minute, UTC.", nullable=False),
        _c("machine_id", STR, "Machine id.", nullable=False),
        _c("gpu_idx", I16, "GPU index.", nullable=False),
        _c("util", F32, "Utilization, percent 0-100."),
    ),
    partition_by_month=True,
)

#: GPU columns of the wide form of gpu_util (the published trace has gpu0_util..gpu7_util).
WIDE_GPUS = 8

GPU_UTIL_WIDE = Table(
    "gpu_util_wide",
    "Physical-only: gpu_util as the published trace has it, one row per machine and minute with "
    "one column per GPU. Storing these rows as they come is about twice as fast as unpivoting "
    "them at ingest (measured on cluster_gpu_util); the `gpu_util` view unpivots them, so query "
    "`gpu_util`.",
    (
        _c("time", UTC_TS, "Start of the minute, UTC.", nullable=False),
        _c("machine_id", STR, "Machine id.", nullable=False),
        *(
            _c(f"gpu{i}_util", F32, f"Utilization of GPU {i}, percent; NULL for NA/NaN/absent.")
            for i in range(WIDE_GPUS)
        ),
    ),
    partition_by_month=True,
    physical_only=True,
    wide_form_of="gpu_util",
)

GPU_METRICS = Table(
    "gpu_metrics",
    "Other per-GPU metrics from Ganglia (mem_util, fb_memory, temp, power, ...), long format, "
    "resampled to one row per minute like gpu_util.",
    (
        _c("time", UTC_TS, "Start of the minute, UTC.", nullable=False),
        _c("machine_id", STR, "Machine id.", nullable=False),
        _c("gpu_idx", I16, "GPU index.", nullable=False),
        _c(
            "metric",
            STR,
            "Metric name without the gpuN_ prefix, e.g. mem_util, fb_memory.",
            nullable=False,
        ),
        _c("value", F64, "Value in the metric's own units (see docs/formats.md)."),
    ),
    partition_by_month=True,
)

CPU_UTIL = Table(
    "cpu_util",
    "Per-minute CPU utilization of each server, percent.",
    (
        _c("time", UTC_TS, "Start of the minute, UTC.", nullable=False),
        _c("machine_id", STR, "Machine id.", nullable=False),
        _c("util", F32, "CPU utilization, percent 0-100."),
    ),
    partition_by_month=True,
)

MEM_UTIL = Table(
    "mem_util",
    "Per-minute host memory of each server (units as in the source; Ganglia reports KB).",
    (
        _c("time", UTC_TS, "Start of the minute, UTC.", nullable=False),
        _c("machine_id", STR, "Machine id.", nullable=False),
        _c("mem_total", F64, "Total memory."),
        _c("mem_free", F64, "Free memory."),
    ),
    partition_by_month=True,
)

HOST_METRICS = Table(
    "host_metrics",
    "Other per-server Ganglia metrics (load_one, bytes_in, disk_free, cpu_idle, ...), long "
    "format, resampled to one row per minute like cpu_util (see docs/raw-sources.md).",
    (
        _c("time", UTC_TS, "Start of the minute, UTC.", nullable=False),
        _c("machine_id", STR, "Machine id.", nullable=False),
        _c("metric", STR, "Ganglia metric name, e.g. load_one, bytes_in.", nullable=False),
        _c("value", F64, "Value in the metric's own units (as gmond reports it)."),
    ),
    partition_by_month=True,
)

SCHEDULER_EVENTS = Table(
    "scheduler_events",
    "Every state transition seen in scheduler logs.",
    (
        _c("time", UTC_TS, "When the transition was logged.", nullable=False),
        _c("job_id", STR, "Application id."),
        _c("attempt_idx", I32, "0-based attempt index (NULL for app-level events)."),
        _c("entity", STR, "app, attempt or container."),
        _c("entity_id", STR, "The full id of the entity (container_..., appattempt_...)."),
        _c("from_state", STR, "State before."),
        _c("to_state", STR, "State after."),
        _c("event", STR, "The triggering event (Hadoop 2.8+ `on event = ...`), else NULL."),
        _c("machine_id", STR, "Host for container events, if known."),
        _c("line_no", I64, "Line in the source file."),
        _c("source", STR, "Format of the source."),
    ),
)

EPOCHS = Table(
    "epochs",
    "Training progress parsed from framework logs: loss per epoch (CNTK) or per step (TF/PyTorch).",
    (
        _c("job_id", STR, "Job id.", nullable=False),
        _c("attempt_idx", I32, "0-based attempt index."),
        _c("epoch", I64, "Epoch number (or step/iteration number when unit = step)."),
        _c("unit", STR, "epoch or step."),
        _c("loss", F64, "Training loss."),
        _c("time", UTC_TS, "Timestamp of the line if the log carries one."),
        _c("line_no", I64, "Line in the source file."),
    ),
)

FAILURES = Table(
    "failures",
    "Failure evidence per attempt, classified with the signature rules (Table 7): one row per "
    "attempt whose framework logs were ingested.",
    (
        _c("job_id", STR, "Job id.", nullable=False),
        _c("attempt_idx", I32, "0-based attempt index."),
        _c("reason", STR, "Table 7 reason, e.g. 'CPU out of memory', or 'No signature'."),
        _c("categories", STR, "Comma-separated IF/AE/U categories of the reason ('-' for none)."),
        _c("signature", STR, "Id of the matching rule (NULL for No signature)."),
        _c("line_no", I64, "Line of the matching text in the log."),
        _c("message", STR, "The matching log line (as found in the log; escape before display)."),
        _c(
            "verdict",
            STR,
            "What the logs say about the attempt: failed (a rule matched), completed (the run "
            "ended normally; errors before that are benign), unmatched (error-looking lines, "
            "no rule), none (no evidence). Only failed rows carry a reason other than "
            "'No signature'. See docs/framework-logs.md.",
        ),
        _c("log_file", STR, "The log file line_no and message come from."),
    ),
)

REJECTS = Table(
    "rejects",
    "Input rows that could not be parsed; the rest of the file was kept.",
    (
        _c("source", STR, "Source name (file, or archive!member).", nullable=False),
        _c("line_no", I64, "1-based line number in the source."),
        _c("reason", STR, "Why it was rejected."),
        _c("raw", STR, "The raw line (truncated to 1000 characters)."),
    ),
)

#: ingest_log is a real DuckDB table in the catalog (metadata), not Parquet.
INGEST_LOG = Table(
    "ingest_log",
    "One row per ingested source. Re-ingesting the same content is recorded once.",
    (
        _c("source", STR, "Source name (absolute path, or archive!member).", nullable=False),
        _c(
            "sha256", STR, "SHA-256 of the source's bytes (decompressed member bytes for archives)."
        ),
        _c("format", STR, "Detected format."),
        _c("rows", I64, "Rows written, all tables."),
        _c("rejected", I64, "Rows rejected."),
        _c("ingested_at", UTC_TS, "When."),
        _c("batch_id", STR, "Id of the batch of Parquet files it produced."),
        _c("tables", STR, "JSON object: rows per table."),
        _c("provided", STR, "What this source provided for merged tables (e.g. jobs: status, vc)."),
        _c(
            "fingerprint", STR, "path|size|mtime used to skip unchanged files without reading them."
        ),
        _c("seconds", F64, "Wall time of the parse."),
    ),
)

#: Schema of the catalog's bookkeeping: the file list, the store's metadata and the raw
#: ``<table>_all`` views. The public names (the contract's tables) stay in ``main``.
INTERNAL_SCHEMA = "internal"

FILES = Table(
    "_files",
    "The live Parquet files: a view reads only files listed here, so a batch becomes visible "
    "when it is listed, all at once.",
    (
        _c("tbl", STR, "Physical table the file belongs to."),
        _c("path", STR, "Path relative to the store directory."),
        _c("batch_id", STR, "Batch that wrote it (ingest_log.batch_id)."),
        _c("source_format", STR, "Format of the source the rows came from."),
        _c("rows", I64, "Rows the file adds to its table (long rows for a wide table)."),
    ),
)

META = Table(
    "_meta",
    "Key/value metadata: `version` (store layout), `root` (the directory the views were built "
    "for: a store opened elsewhere gets its views rebuilt), `views` (version of the views' SQL).",
    (
        _c("key", STR, "Name.", nullable=False),
        _c("value", STR, "Value."),
    ),
    key=("key",),
)

TABLES: dict[str, Table] = {
    t.name: t
    for t in (
        MACHINES,
        MACHINE_OBSERVATIONS,
        JOBS,
        ATTEMPTS,
        PLACEMENTS,
        GPU_UTIL,
        GPU_UTIL_WIDE,
        GPU_METRICS,
        CPU_UTIL,
        MEM_UTIL,
        HOST_METRICS,
        SCHEDULER_EVENTS,
        EPOCHS,
        FAILURES,
        REJECTS,
    )
}
#: Tables stored as Parquet (everything but ingest_log).
PHYSICAL_TABLES = tuple(TABLES)


def logical_table(name: str) -> str:
    """The table whose rows a physical table's files hold (itself, or what it is a wide form of)."""
    return TABLES[name].wide_form_of or name


#: Columns that identify a row of a per-machine time series; a wide table has them, then its
#: value columns, and its long table has them, then an index and a value column.
SERIES_KEY = ("time", "machine_id")


def wide_value_columns(table: Table) -> list[str]:
    """The value columns of a wide table, in index order (column i holds index i)."""
    return [c.name for c in table.physical_columns if c.name not in SERIES_KEY]


#: Which source wins when several describe the same job (lower = preferred). Columns of the
#: merged ``jobs`` row are taken, one by one, from the most preferred source that has a value;
#: attempts and placements come whole from the most preferred source that has any. For time
#: series (gpu_util, cpu_util, ...), each machine's rows come from its most preferred source:
#: the published trace's per-minute files before resampled Ganglia exports.
SOURCE_PRIORITY: dict[str, int] = {
    "philly_job_log": 0,
    "yarn_rm_log": 1,
    "replay": 2,
    "job_list_csv": 3,
    "gavel_trace": 4,
    "philly_gpu_util": 0,
    "philly_cpu_util": 0,
    "philly_mem_util": 0,
    "ganglia_xml": 5,
    "ganglia_csv": 5,
    "ganglia_json": 5,
    "rrdtool_xport": 6,
    "rrdtool_dump": 6,
}
DEFAULT_SOURCE_PRIORITY = 9
#: Formats that list each job as one run (submit time, duration, GPUs), not its attempts: the
#: one attempt they give a job has no start and no end, and the job's retries are unknown.
RUN_LIST_SOURCES = ("job_list_csv", "gavel_trace")


def empty_table(table: str, physical: bool = True) -> pa.Table:
    """An empty Arrow table with the (physical) schema of ``table``."""
    t = TABLES[table]
    return (t.physical_schema if physical else t.schema).empty_table()


def conform(table: str | Table, data: pa.Table | dict[str, object]) -> pa.Table:
    """Cast ``data`` to the physical schema of ``table`` (a name of ``TABLES``, or a table such
    as an artefact's): right types, column order, missing nullable columns filled with NULL.
    Raises ``ValueError`` for unknown or missing required columns, so a parser cannot silently
    write a different shape."""
    t = TABLES[table] if isinstance(table, str) else table
    table = t.name
    if isinstance(data, dict):
        data = pa.table(data)
    names = set(data.column_names)
    unknown = names - {c.name for c in t.physical_columns}
    if unknown:
        raise ValueError(f"{table}: unknown columns {sorted(unknown)}")
    n = data.num_rows
    arrays = []
    for c in t.physical_columns:
        if c.name in names:
            col = data.column(c.name)
            if col.type != c.type:
                col = col.cast(c.type)
            arrays.append(col)
        elif c.nullable:
            arrays.append(pa.nulls(n, c.type))
        else:
            raise ValueError(f"{table}: required column {c.name!r} missing")
    return pa.Table.from_arrays(arrays, schema=t.physical_schema)


def public_tables() -> tuple[str, ...]:
    """Names in the catalog's ``main`` schema: every table with a view, and ingest_log."""
    return (*(n for n, t in TABLES.items() if not t.physical_only), INGEST_LOG.name)
