"""How much memory ingest's DuckDB work may use, and what happens beyond it.

One setting, ``ingest --memory-limit SIZE`` or the environment variable ``PHILLY_MEMORY_LIMIT``
(the option wins): the memory limit of every DuckDB connection ingest opens (the Philly CSV
copies, YARN assembly, Ganglia resampling). The default is a quarter of the machine's memory
(the physical memory, or the container's cgroup limit when that is lower), at least 256 MB and
at most 2 GB: enough for DuckDB to work in memory on the common inputs, and a whole ingest of
the published trace's size in every format then peaks under 4 GB (``make bench``).

Beyond the limit DuckDB writes to a spill folder inside the store's staging area
(``<store>/.staging/<batch>/...``, removed when the batch ends), and the work DuckDB cannot
spill is split into parts that fit (Ganglia resampling: groups of hosts and ranges of time,
``ganglia_route``), so ingest finishes on any input that fits on disk. If memory still runs
out, the source fails with one line naming it and this setting (``out_of_memory``).
"""

from __future__ import annotations

import contextlib
import os
import re
from pathlib import Path

import duckdb

from philly_analyze.errors import InputFormatError
from philly_analyze.progress import human_bytes
from philly_analyze.store import DUCKDB_FLUSH_ROWS, sql_literal

#: The environment variable; ``--memory-limit`` overrides it.
ENV = "PHILLY_MEMORY_LIMIT"
MB = 1_000_000
#: Default: this share of the machine's memory, within the bounds below.
DEFAULT_FRACTION = 0.25
DEFAULT_MIN = 256 * MB
DEFAULT_MAX = 2_000 * MB
#: Rows a partitioned COPY buffers per open partition before a flush: DuckDB's default, or
#: fewer under a small limit (``configure``; ``Batch.copy_query`` then makes row groups no
#: larger), so the rows a COPY holds before writing fit (about 1 KB a row at most).
WRITE_ROW_BYTES = 1_000
MIN_FLUSH_ROWS = 2_048
#: Smaller is refused as a usage error (DuckDB itself needs a few MB for almost anything).
SMALLEST = 1 * MB

_UNITS = {
    "": 1,
    "b": 1,
    "k": 1000,
    "kb": 1000,
    "m": MB,
    "mb": MB,
    "g": 1000 * MB,
    "gb": 1000 * MB,
    "t": 1000_000 * MB,
    "tb": 1000_000 * MB,
    "kib": 1 << 10,
    "mib": 1 << 20,
    "gib": 1 << 30,
    "tib": 1 << 40,
}
_SIZE_RE = re.compile(r"^\s*(\d+(?:\.\d*)?|\.\d+)\s*([a-zA-Z]*)\s*$")


def parse_size(text: str) -> int:
    """``"500MB"``, ``"1.5GB"``, ``"512MiB"``, ``"2G"`` or a number of bytes -> bytes.
    Raises ``ValueError`` saying what is accepted."""
    m = _SIZE_RE.match(text)
    unit = m.group(2).lower() if m else None
    if m is None or unit not in _UNITS:
        raise ValueError("expected a size such as 500MB, 4GB or 1.5GiB")
    n = int(float(m.group(1)) * _UNITS[unit])
    if n < SMALLEST:
        raise ValueError(f"at least {human_bytes(SMALLEST)}")
    return n


def machine_memory() -> int | None:
    """Memory this process can use: physical memory, or the cgroup's limit when lower
    (a container); None when neither can be read."""
    sizes = []
    with contextlib.suppress(ValueError, OSError, AttributeError):
        sizes.append(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
    for f in ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"):
        try:
            text = Path(f).read_text().strip()
        except OSError:
            continue
        if text.isdigit() and int(text) < 1 << 60:  # "max" or a huge number: no limit
            sizes.append(int(text))
    return min(sizes) if sizes else None


def default_limit() -> int:
    """A quarter of ``machine_memory()``, within ``DEFAULT_MIN``..``DEFAULT_MAX``."""
    total = machine_memory()
    if total is None:
        return DEFAULT_MIN
    return int(min(DEFAULT_MAX, max(DEFAULT_MIN, total * DEFAULT_FRACTION)))


def resolve(option: str | None) -> tuple[int, str]:
    """The limit in bytes and where it came from (``--memory-limit``, ``PHILLY_MEMORY_LIMIT``
    or the default). Raises ``ValueError`` for a bad value, naming its origin."""
    for value, origin in ((option, "--memory-limit"), (os.environ.get(ENV), ENV)):
        if value is not None and value.strip():
            try:
                return parse_size(value), origin
            except ValueError as e:
                raise ValueError(f"{origin} {value!r}: {e}") from None
    return default_limit(), "default"


def configure(con: duckdb.DuckDBPyConnection, limit: int, spill: Path) -> None:
    """Give a connection the limit and a spill folder (``spill``, inside a batch's staging
    folder); insertion order is not needed by any ingest query and costs memory. DuckDB
    prints no progress bar of its own (ours is on stderr, ``run_progress``)."""
    con.execute(f"SET memory_limit = {sql_literal(f'{limit}B')}")
    con.execute(f"SET temp_directory = {sql_literal(str(spill))}")
    con.execute("SET preserve_insertion_order = false")
    con.execute("SET enable_progress_bar_print = false")
    rows = max(MIN_FLUSH_ROWS, min(DUCKDB_FLUSH_ROWS, limit // WRITE_ROW_BYTES))
    con.execute(f"SET partitioned_write_flush_threshold = {rows}")


def out_of_memory(source: str, doing: str, limit: int, e: BaseException) -> InputFormatError:
    """The one-line error for a source whose DuckDB work ran out of memory."""
    first = str(e).splitlines()[0] if str(e) else type(e).__name__
    first = first.removeprefix("Out of Memory Error: ")
    return InputFormatError(
        f"out of memory {doing} ({first}; limit {human_bytes(limit)}): raise --memory-limit or "
        f"{ENV} (e.g. --memory-limit 4GB), or ingest fewer files at once",
        source=source,
    )
