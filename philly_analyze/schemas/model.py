"""The building blocks of the store's declarations: columns, tables, JSON fields and
artefacts, the Arrow types they use, and how an Arrow type reads back in DuckDB."""

from __future__ import annotations

from dataclasses import dataclass, field

import pyarrow as pa

UTC_TS = pa.timestamp("us", tz="UTC")

#: Final job status values (public trace: Pass -> passed, Killed -> killed, Failed -> unsuccessful).
JOB_STATUSES = ("passed", "killed", "unsuccessful")
#: Outcome of one attempt. ``failed`` attempts are retried; ``running`` had not ended in the data.
ATTEMPT_OUTCOMES = ("passed", "killed", "failed", "running")
#: Failure categories of Table 7: infrastructure, AI engine, user.
FAILURE_CATEGORIES = ("IF", "AE", "U")


@dataclass(frozen=True)
class Column:
    """One column: name, Arrow type, whether the view derives it, and what it means."""

    name: str
    type: pa.DataType
    doc: str
    derived: bool = False
    nullable: bool = True


@dataclass(frozen=True)
class Table:
    """One canonical table of the store."""

    name: str
    doc: str
    columns: tuple[Column, ...]
    #: Stored as monthly partitions (large time series).
    partition_by_month: bool = False
    #: Key columns (documentation; the views do not enforce uniqueness).
    key: tuple[str, ...] = field(default=())
    #: Physical-only: Parquet files with no view of their own (the catalog has ``<name>_all``).
    physical_only: bool = False
    #: Stored wide, read long: the files hold the rows of this (long) table, one value column
    #: per index (``wide_value_columns``), and the store's views unpivot them into it.
    wide_form_of: str | None = None

    @property
    def physical_columns(self) -> tuple[Column, ...]:
        """The stored columns (a view computes the derived ones)."""
        return tuple(c for c in self.columns if not c.derived)

    @property
    def physical_schema(self) -> pa.Schema:
        """The Arrow schema of the table's Parquet files."""
        return pa.schema([pa.field(c.name, c.type, c.nullable) for c in self.physical_columns])

    @property
    def schema(self) -> pa.Schema:
        """The Arrow schema of the table's view (derived columns included)."""
        return pa.schema([pa.field(c.name, c.type, c.nullable) for c in self.columns])

    def column(self, name: str) -> Column:
        """The column called ``name`` (KeyError if the table has none)."""
        for c in self.columns:
            if c.name == name:
                return c
        raise KeyError(f"{self.name} has no column {name!r}")


def _c(name: str, type_: pa.DataType, doc: str, **kw: bool) -> Column:
    """A column (short form used by the declarations)."""
    return Column(name, type_, doc, **kw)


STR = pa.string()
F64 = pa.float64()
F32 = pa.float32()
I64 = pa.int64()
I32 = pa.int32()
I16 = pa.int16()
STR_LIST = pa.list_(pa.string())


@dataclass(frozen=True)
class Field:
    """One top-level field of a JSON artefact: name, JSON type (``JSON_TYPES``), meaning."""

    name: str
    type: str
    doc: str
    nullable: bool = False
    #: False for a field that files written before it existed lack (read as None).
    required: bool = True


#: JSON type of a ``Field`` -> the Python types it holds (``bool`` is no integer here).
JSON_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,),
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
    "object": (dict,),
    "array": (list,),
}


@dataclass(frozen=True)
class Artifact:
    """A file of a store beside its catalog and tables, e.g. a replay's settings.

    Parquet and CSV artefacts have ``table`` (their columns, as a table has); JSON artefacts
    have ``fields`` (their top-level keys). ``Batch.write_artifact`` stages one with the
    batch's tables and ``Store.commit`` publishes them together; ``Store.read_artifact``
    reads it back conformed to this declaration."""

    name: str
    #: Path relative to the store directory.
    file: str
    doc: str
    #: The command that writes it (Markdown).
    written_by: str
    table: Table | None = None
    fields: tuple[Field, ...] = ()

    @property
    def format(self) -> str:
        """``parquet``, ``json`` or ``csv`` (from the file name)."""
        return self.file.rsplit(".", 1)[-1]

    @property
    def schema(self) -> pa.Schema:
        """The Arrow schema of a Parquet or CSV artefact."""
        if self.table is None:
            raise ValueError(f"{self.file} has fields, not columns")
        return self.table.physical_schema


def duckdb_type(type_: pa.DataType) -> str:
    """The DuckDB SQL type that reads back from Parquet for an Arrow type."""
    if pa.types.is_timestamp(type_):
        return "TIMESTAMPTZ" if type_.tz else "TIMESTAMP"
    if pa.types.is_list(type_):
        return duckdb_type(type_.value_type) + "[]"
    return {
        pa.string(): "VARCHAR",
        pa.float64(): "DOUBLE",
        pa.float32(): "FLOAT",
        pa.int64(): "BIGINT",
        pa.int32(): "INTEGER",
        pa.int16(): "SMALLINT",
        pa.bool_(): "BOOLEAN",
    }[type_]
