"""Lines of a utilization CSV too long or too wide are rejects naming their line, at bounded cost.

DuckDB's CSV error handling records one error per field beyond the declared columns, each with
the line: a 10 MB line of 2.5 million fields in a cluster_gpu_util ran for more than 300 s (it
was killed at 642 s, 610 MB), a 200 KB line of 50,000 fields cost 32 CPU s and 1.77 GB. Such
lines are now kept from DuckDB (``csvguard``). The ingest runs in a subprocess with a time-out
only so that a hang fails the test instead of stalling the suite."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from philly_analyze.cli import main
from philly_analyze.ingest.csvguard import LineGuard
from tests.philly_files import GPU_HEADER
from tests.store_query import q

CLI = [sys.executable, "-c", "from philly_analyze.cli import main; main()"]


def _feed(guard: LineGuard, data: bytes, size: int) -> bytes:
    out = b"".join(guard.feed(data[i : i + size]) for i in range(0, len(data), size))
    return out + guard.end()


STREAM = b"".join(
    [
        b"h1,h2,h3\n",  # 1: the header
        b"a,b,c\n",  # 2
        b"a,b,c,d\n",  # 3: four fields where three are declared
        b"x" * 25 + b"\n",  # 4: 25 bytes, over the 20 allowed here
        b"\n",  # 5: empty (DuckDB skips it)
        b"a,b\n",  # 6: too few fields: left to DuckDB
        b"a,\x00b,c\n",  # 7: a NUL byte (DuckDB would keep it in the value)
        b"y," * 15,  # 8: 30 bytes and 16 fields, no newline at the end
    ]
)
#: The stream as DuckDB gets it: lines 3, 4, 7 and 8 blanked, so line numbers stay the file's.
BLANKED = b"h1,h2,h3\na,b,c\n\n\n\na,b\n\n"
REJECTS = [
    (3, "TOO MANY COLUMNS: 4 fields where 3 are declared: not read", "a,b,c,d"),
    (4, "line of 25 bytes, longer than the 20 allowed: not read", "x" * 25),
    (7, "binary data (a NUL byte) in a text line: not read", "a,\x00b,c"),
    (8, "line of 30 bytes, longer than the 20 allowed: not read", "y," * 15),
]


@pytest.mark.parametrize("size", [1, 7, 64, len(STREAM)])
def test_guard_blanks_and_names_the_bad_lines_in_any_chunking(size: int) -> None:
    guard = LineGuard(3, max_bytes=20)
    assert _feed(guard, STREAM, size) == BLANKED
    assert [(r.line_no, r.reason, r.raw) for r in guard.rejects] == REJECTS
    guard.restart()  # read again (the strict query failed): the same, not twice
    assert _feed(guard, STREAM, size) == BLANKED
    assert len(guard.rejects) == 4


def test_guard_passes_good_lines_untouched() -> None:
    guard = LineGuard(3, max_bytes=20)
    data = b"h1,h2,h3\n" + b"1,2,3\r\n" * 1000 + b"4,5,6"
    assert _feed(guard, data, 4096) == data
    assert guard.rejects == []


def _good(minute: int) -> str:
    return f"2017-10-01 00:{minute:02d}:00 PDT,m0,1,2,3,4,5,6,7,8,\n"


def _util_file(path: Path, compress: bool) -> Path:
    lines = [
        GPU_HEADER,  # 1
        _good(1),  # 2
        _good(2),  # 3
        _good(3),  # 4
        "2017-10-01 00:04:00 PDT,mX" + ",1.0" * 50_000 + "\n",  # 5: 200,026 bytes
        _good(5),  # 6
        _good(6),  # 7
        "2017-10-01 00:07:00 PDT,mY" + ",1.0" * 2_500_000 + "\n",  # 8: 10,000,026 bytes
        _good(8),  # 9
        "2017-10-01 00:09:00 PDT,mZ,1,2,3,4,5,6,7,8,9,\n",  # 10: 12 fields, 11 declared
        _good(10),  # 11
        "2017-10-01 00:11:00 PDT,m\x002,1,2,3,4,5,6,7,8,\n",  # 12: a NUL byte
        _good(12),  # 13
    ]
    data = "".join(lines).encode()
    if compress:
        path = path.with_name(path.name + ".gz")
        data = gzip.compress(data)
    path.write_bytes(data)
    return path


@pytest.mark.parametrize("compress", [False, True], ids=["plain", "gzip"])
def test_long_and_wide_lines_in_cluster_gpu_util(
    tmp_path: Path, store_dir: Path, compress: bool
) -> None:
    f = _util_file(tmp_path / "cluster_gpu_util", compress)
    r = subprocess.run(
        [*CLI, "ingest", str(f), "--store", str(store_dir), "--format", "json"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    # The 4 rejects exceed --max-rejects 0: exit 1 naming the first, the good rows kept.
    assert r.returncode == 1, r.stderr
    assert r.stderr.splitlines()[-1].startswith(
        f"error: {f}:5: line of 200,026 bytes, longer than the 65,536 allowed: not read "
        "(4 rows rejected in all"
    )
    assert json.loads(r.stdout)["rejected"] == 4
    # The 8 good lines, 8 GPUs each.
    assert q(store_dir, "SELECT count(*), count(DISTINCT time) FROM gpu_util") == [(64, 8)]
    assert q(store_dir, "SELECT DISTINCT machine_id FROM gpu_util") == [("m0",)]
    rejects = q(store_dir, "SELECT line_no, reason, raw FROM rejects ORDER BY line_no")
    assert [(n, reason) for n, reason, _ in rejects] == [
        (5, "line of 200,026 bytes, longer than the 65,536 allowed: not read"),
        (8, "line of 10,000,026 bytes, longer than the 65,536 allowed: not read"),
        (10, "TOO MANY COLUMNS: 12 fields where 11 are declared: not read"),
        (12, "binary data (a NUL byte) in a text line: not read"),
    ]
    # Each reject shows the start of its line (rejects.raw keeps 1,000 characters).
    assert rejects[0][2] == ("2017-10-01 00:04:00 PDT,mX" + ",1.0" * 50_000)[:1000]
    assert rejects[1][2].startswith("2017-10-01 00:07:00 PDT,mY,1.0,")
    assert rejects[2][2] == "2017-10-01 00:09:00 PDT,mZ,1,2,3,4,5,6,7,8,9,"


def test_a_line_too_wide_with_a_bad_time_is_one_reject(tmp_path: Path, store_dir: Path) -> None:
    """A bad time sends the file through the slow path (read again, times found in Python):
    a line the guard rejected is not rejected a second time for its time."""
    f = tmp_path / "cluster_gpu_util"
    f.write_text(
        GPU_HEADER
        + _good(1)
        + "yesterday,m0,1,2,3,4,5,6,7,8,\n"  # 3
        + _good(2)
        + "2017-10-01 00:03:00 PDT,mX"
        + ",1" * 30
        + "\n"  # 5: 32 fields
        + "tomorrow,m0"
        + ",1" * 30
        + "\n"  # 6: 32 fields and a bad time
        + _good(4)
    )
    r = CliRunner().invoke(main, ["ingest", str(f), "--store", str(store_dir), "-q"])
    assert r.exit_code == 1, r.output  # 3 rejects, beyond --max-rejects 0
    assert r.stderr.startswith(f"error: {f}:3: unparsable time 'yesterday' (3 rows rejected")
    assert q(store_dir, "SELECT line_no, reason FROM rejects ORDER BY 1") == [
        (3, "unparsable time 'yesterday'"),
        (5, "TOO MANY COLUMNS: 32 fields where 11 are declared: not read"),
        (6, "TOO MANY COLUMNS: 32 fields where 11 are declared: not read"),
    ]
    assert q(store_dir, "SELECT count(*) FROM gpu_util") == [(24,)]
