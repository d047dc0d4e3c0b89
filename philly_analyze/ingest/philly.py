"""The five files of the published Philly trace (msr-fiddle/philly-traces).

- ``cluster_machine_list``: CSV with a space after every comma (``m0,2, 12GB``).
- ``cluster_job_log``: one JSON array of ~117k jobs (1+ GB), parsed by ``philly_joblog``.
- ``cluster_gpu_util``, ``cluster_cpu_util``, ``cluster_mem_util``: per-minute CSVs with
  ``PDT``/``PST`` time suffixes, ``NA`` for offline, and (gpu) a trailing comma on every data
  row. Read by DuckDB with declared columns (see ``csvcopy``).

The format classes of all five stay here (their module decides their place in detection
order, ``formats.FORMAT_MODULES``); ``LAST_OUTCOME``, ``STATUS_MAP`` and ``iter_json_array``
are re-exported for the modules and tests that import them from here.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import pyarrow as pa

from philly_analyze import schemas
from philly_analyze.bounds import GPU_MEM_GB, MACHINE_GPUS, excerpt
from philly_analyze.errors import InputFormatError
from philly_analyze.ingest.csvcopy import CsvSpec, copy_csv, header_fields
from philly_analyze.ingest.formats import (
    Format,
    IngestContext,
    SourceResult,
    csv_fields,
    first_line,
    register,
)
from philly_analyze.ingest.philly_joblog import (
    FORMAT_NAME,
    LAST_OUTCOME,
    STATUS_MAP,
    JobLogSession,
    iter_json_array,
)
from philly_analyze.ingest.source import Source
from philly_analyze.store import Batch, connect, sql_literal

__all__ = [
    "LAST_OUTCOME",
    "STATUS_MAP",
    "PhillyCpuUtil",
    "PhillyGpuUtil",
    "PhillyJobLog",
    "PhillyMachineList",
    "PhillyMemUtil",
    "iter_json_array",
]


# --------------------------------------------------------------------------- machine list
@register
class PhillyMachineList(Format):
    name = "philly_machine_list"
    description = "Philly cluster_machine_list (CSV: machineId, number of GPUs, single GPU mem)"

    def sniff(self, name: str, head: bytes) -> bool:
        """A header starting ``machineId, number of GPUs`` (any case)."""
        fields = [f.strip().lower() for f in first_line(head).split(",")]
        return fields[:2] == ["machineid", "number of gpus"]

    def session(self, batch: Batch, ctx: IngestContext) -> _MachineListSession:
        """A session writing ``machines`` rows."""
        return _MachineListSession(batch, ctx)


@dataclass
class _MachineListSession:
    """Reads machine lists: one ``machines`` row per good line, a reject per bad one."""

    batch: Batch
    ctx: IngestContext

    def feed(self, source: Source) -> SourceResult:
        """Read one machine list (the first line is its header)."""
        ids: list[str] = []
        gpus: list[int] = []
        mem: list[float | None] = []
        rejected = 0
        for line_no, line in source.text_lines(self.ctx.tracker):
            if line_no == 1 or not line.strip():
                continue
            try:
                row = [c.strip() for c in csv_fields(line, skipinitialspace=True)]
                if len(row) != 3:
                    raise ValueError(f"expected 3 fields, found {len(row)}")
                mid, n_text, m = row
                if not mid:
                    raise ValueError("empty machine id")
                count = MACHINE_GPUS.int_of(n_text)
                mem_gb = None
                if m:
                    mem_gb = GPU_MEM_GB.check(float(m.upper().removesuffix("GB")), shown=m)
            except ValueError as e:
                self.batch.reject(source.name, line_no, str(e), line)
                rejected += 1
                continue
            ids.append(mid)
            gpus.append(count)
            mem.append(mem_gb)
        n = self.batch.write(
            "machines",
            {
                "machine_id": ids,
                "listed_num_gpus": pa.array(gpus, pa.int16()),
                "gpu_mem_gb": pa.array(mem, pa.float32()),
                "source": [PhillyMachineList.name] * len(ids),
            },
        )
        return SourceResult({"machines": n}, rejected, "machines: listed_num_gpus, gpu_mem_gb")

    def finish(self) -> dict[str, int]:
        """Nothing is held across files."""
        return {}


# --------------------------------------------------------------------------- job log
@register
class PhillyJobLog(Format):
    name = FORMAT_NAME
    description = "Philly cluster_job_log (JSON array of jobs with attempts and placements)"

    def sniff(self, name: str, head: bytes) -> bool:
        """A JSON array whose first object has the trace's ``jobid`` or ``submitted_time``."""
        text = head[:4096].decode("utf-8", "replace").lstrip()
        return text.startswith("[") and ('"jobid"' in text or '"submitted_time"' in text)

    def session(self, batch: Batch, ctx: IngestContext) -> JobLogSession:
        """A session writing ``jobs``, ``attempts`` and ``placements`` rows."""
        return JobLogSession(batch, ctx)


# --------------------------------------------------------------------------- util CSVs
def _csv_columns(head: bytes, names: list[str], types: list[str]) -> list[tuple[str, str]]:
    """Declared columns; one extra empty column when data rows end with a comma."""
    _, nfields = header_fields(head)
    cols = list(zip(names, types, strict=True))
    if nfields is not None and nfields == len(names) + 1:
        cols.append(("__trailing", "VARCHAR"))
    return cols


@dataclass
class _CsvSession:
    """Reads one of the per-minute CSVs through DuckDB (``csvcopy``)."""

    batch: Batch
    ctx: IngestContext
    fmt: type[_PhillyCsv]

    def feed(self, source: Source) -> SourceResult:
        """Copy one CSV into the batch; from gpu_util also the GPUs each machine showed."""
        try:
            spec = self.fmt.spec(source.head)
        except InputFormatError as e:
            raise InputFormatError(e.message, source=source.name, line=e.line) from None
        written, rejected = copy_csv(
            source,
            self.batch,
            spec,
            timezone=self.ctx.timezone,
            tracker=self.ctx.tracker,
            memory_limit=self.ctx.memory_limit,
        )
        table = schemas.logical_table(spec.table)
        rows = {table: written}
        if table == "gpu_util":
            rows["machine_observations"] = self._observe(spec.table)
        return SourceResult(rows, rejected, table)

    def _observe(self, table: str) -> int:
        """Per machine, how many GPUs carried data (for machines.observed_num_gpus), from the
        staged files of ``table`` (gpu_util, or its wide form)."""
        files = sorted((self.batch.staging / table).rglob("*.parquet"))
        if not files:
            return 0
        lst = ", ".join(sql_literal(str(f)) for f in files)
        if table == "gpu_util":
            gpus = "max(gpu_idx) + 1"
        else:
            # Plain per-column counts: a CASE per value per row cost 3x as much.
            gpus = "greatest({})".format(
                ", ".join(
                    f"CASE WHEN count({g}) > 0 THEN {i + 1} END"
                    for i, g in enumerate(schemas.wide_value_columns(schemas.TABLES[table]))
                )
            )
        con = connect()
        try:
            tbl = con.sql(
                f"SELECT machine_id, n::SMALLINT AS observed_num_gpus, first_seen, last_seen, "
                f"{sql_literal(self.fmt.name)} AS source FROM ("
                f"SELECT machine_id, {gpus} AS n, min(time) AS first_seen, "
                f"max(time) AS last_seen FROM read_parquet([{lst}]) GROUP BY machine_id) "
                f"WHERE n IS NOT NULL"
            ).to_arrow_table()
        finally:
            con.close()
        return self.batch.write("machine_observations", tbl)

    def finish(self) -> dict[str, int]:
        """Nothing is held across files."""
        return {}


class _PhillyCsv(Format):
    """A per-minute CSV of the trace, known by the first fields of its header."""

    header: tuple[str, ...] = ()

    def sniff(self, name: str, head: bytes) -> bool:
        """The header starts with ``header``."""
        fields = [f.strip() for f in first_line(head).split(",")]
        return tuple(fields[: len(self.header)]) == self.header

    def session(self, batch: Batch, ctx: IngestContext) -> _CsvSession:
        """A session copying the CSV with DuckDB."""
        return _CsvSession(batch, ctx, type(self))

    @classmethod
    def spec(cls, head: bytes) -> CsvSpec:
        """How DuckDB reads the file (columns, the SELECT over them, the target table)."""
        raise NotImplementedError


@register
class PhillyGpuUtil(_PhillyCsv):
    name = "philly_gpu_util"
    description = "Philly cluster_gpu_util (per-minute gpu0..gpu7 utilization per machine)"
    header = ("time", "machineId", "gpu0_util")

    @classmethod
    def spec(cls, head: bytes) -> CsvSpec:
        """gpu<N>_util columns, stored wide when the wide table has them all."""
        names, _ = header_fields(head)
        gpus = [n for n in names if re.fullmatch(r"gpu\d+_util", n)]
        if len(gpus) != len(names) - 2 or len(set(gpus)) != len(gpus):
            why = "unexpected" if len(set(gpus)) == len(gpus) else "a column repeated in the"
            raise InputFormatError(f"{why} header {excerpt(','.join(names))}", line=1)
        cols = _csv_columns(
            head, ["time", "machine_id", *gpus], ["VARCHAR"] * 2 + ["FLOAT"] * len(gpus)
        )
        wide = schemas.wide_value_columns(schemas.GPU_UTIL_WIDE)
        if set(gpus) <= set(wide):
            # Rows as they come, one per machine-minute (the gpu_util view unpivots them):
            # writing 4-5 long rows per line instead took twice DuckDB's CSV-to-Parquet time.
            # NaN becomes NULL so that the footer's null counts count the values.
            values = ", ".join(
                f"CASE WHEN isnan({g}) THEN NULL ELSE {g} END AS {g}"
                if g in gpus
                else f"NULL AS {g}"
                for g in wide
            )
            select = f"SELECT __utc AS time, machine_id, {values}, __month FROM parsed"
            return CsvSpec(cols, select, schemas.GPU_UTIL_WIDE.name)
        # More GPU columns than the wide table holds: unpivot here (column position = index).
        util_list = ", ".join(gpus)
        select = (
            f"SELECT __utc AS time, machine_id, (g - 1)::SMALLINT AS gpu_idx, u[g] AS util, "
            f"__month FROM (SELECT __utc, __month, machine_id, [{util_list}] AS u FROM parsed), "
            f"range(1, {len(gpus) + 1}) AS r(g) WHERE u[g] IS NOT NULL AND NOT isnan(u[g])"
        )
        return CsvSpec(cols, select, "gpu_util")


@register
class PhillyCpuUtil(_PhillyCsv):
    name = "philly_cpu_util"
    description = "Philly cluster_cpu_util (per-minute CPU utilization per machine)"
    header = ("time", "machine_id", "cpu_util")

    @classmethod
    def spec(cls, head: bytes) -> CsvSpec:
        """time, machine_id, cpu_util; NA and NaN rows left out (no value, not 0)."""
        cols = _csv_columns(
            head, ["time", "machine_id", "cpu_util"], ["VARCHAR", "VARCHAR", "FLOAT"]
        )
        select = (
            "SELECT __utc AS time, machine_id, cpu_util AS util, __month FROM parsed "
            "WHERE cpu_util IS NOT NULL AND NOT isnan(cpu_util)"
        )
        return CsvSpec(cols, select, "cpu_util")


@register
class PhillyMemUtil(_PhillyCsv):
    name = "philly_mem_util"
    description = "Philly cluster_mem_util (per-minute mem_total, mem_free per machine)"
    header = ("time", "machine_id", "mem_total", "mem_free")

    @classmethod
    def spec(cls, head: bytes) -> CsvSpec:
        """time, machine_id, mem_total, mem_free; rows without a total left out."""
        cols = _csv_columns(
            head,
            ["time", "machine_id", "mem_total", "mem_free"],
            ["VARCHAR", "VARCHAR", "DOUBLE", "DOUBLE"],
        )
        # mem_total == 0 rows carry no information (formats.md): skipped.
        select = (
            "SELECT __utc AS time, machine_id, mem_total, mem_free, __month FROM parsed "
            "WHERE mem_total IS NOT NULL AND mem_total > 0 AND mem_free IS NOT NULL"
        )
        return CsvSpec(cols, select, "mem_util")
