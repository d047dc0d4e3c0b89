"""The canonical store's tables: one definition of every column, its Arrow type and meaning.

Every parser writes Arrow tables with exactly these schemas (``conform`` enforces it), the
store derives its DuckDB views from them, and the docs table in ``docs/store.md`` is generated
from ``TABLES``. Times are always ``timestamp[us, tz=UTC]``.

Physical vs canonical: each ingest batch writes *physical* Parquet files per table. The
canonical views (``jobs``, ``attempts``, ...) merge physical rows from several sources; see
``philly_analyze.store`` for the merge rules. Columns marked ``derived`` are not stored but
computed by the view.

The declarations live in modules of this package (``model``: columns, tables, fields and
artefacts as types; ``tables``: the store's tables and source priorities; ``artifacts``: the
other files of a store; ``docs``: the Markdown of ``docs/store.md``); every name is
re-exported here, so ``from philly_analyze.schemas import X`` is the way to use them.
"""

from __future__ import annotations

from philly_analyze.schemas.artifacts import (
    ARTIFACTS,
    REPLAY_SETTINGS,
    SHARING,
    SHARING_TIMESERIES,
    VC_QUOTAS,
    WAITING,
)
from philly_analyze.schemas.docs import (
    markdown,
)
from philly_analyze.schemas.model import (
    ATTEMPT_OUTCOMES,
    F32,
    F64,
    FAILURE_CATEGORIES,
    I16,
    I32,
    I64,
    JOB_STATUSES,
    JSON_TYPES,
    STR,
    STR_LIST,
    UTC_TS,
    Artifact,
    Column,
    Field,
    Table,
    duckdb_type,
)
from philly_analyze.schemas.tables import (
    ATTEMPTS,
    CPU_UTIL,
    DEFAULT_SOURCE_PRIORITY,
    EPOCHS,
    FAILURES,
    FILES,
    GPU_METRICS,
    GPU_UTIL,
    GPU_UTIL_WIDE,
    HOST_METRICS,
    INGEST_LOG,
    INTERNAL_SCHEMA,
    JOBS,
    MACHINE_OBSERVATIONS,
    MACHINES,
    MEM_UTIL,
    META,
    PHYSICAL_TABLES,
    PLACEMENTS,
    REJECTS,
    RUN_LIST_SOURCES,
    SCHEDULER_EVENTS,
    SERIES_KEY,
    SOURCE_PRIORITY,
    TABLES,
    TIMED,
    WIDE_GPUS,
    conform,
    empty_table,
    logical_table,
    public_tables,
    wide_value_columns,
)

__all__ = [
    "ARTIFACTS",
    "ATTEMPTS",
    "ATTEMPT_OUTCOMES",
    "CPU_UTIL",
    "DEFAULT_SOURCE_PRIORITY",
    "EPOCHS",
    "F32",
    "F64",
    "FAILURES",
    "FAILURE_CATEGORIES",
    "FILES",
    "GPU_METRICS",
    "GPU_UTIL",
    "GPU_UTIL_WIDE",
    "HOST_METRICS",
    "I16",
    "I32",
    "I64",
    "INGEST_LOG",
    "INTERNAL_SCHEMA",
    "JOBS",
    "JOB_STATUSES",
    "JSON_TYPES",
    "MACHINES",
    "MACHINE_OBSERVATIONS",
    "MEM_UTIL",
    "META",
    "PHYSICAL_TABLES",
    "PLACEMENTS",
    "REJECTS",
    "REPLAY_SETTINGS",
    "RUN_LIST_SOURCES",
    "SCHEDULER_EVENTS",
    "SERIES_KEY",
    "SHARING",
    "SHARING_TIMESERIES",
    "SOURCE_PRIORITY",
    "STR",
    "STR_LIST",
    "TABLES",
    "TIMED",
    "UTC_TS",
    "VC_QUOTAS",
    "WAITING",
    "WIDE_GPUS",
    "Artifact",
    "Column",
    "Field",
    "Table",
    "conform",
    "duckdb_type",
    "empty_table",
    "logical_table",
    "markdown",
    "public_tables",
    "wide_value_columns",
]
