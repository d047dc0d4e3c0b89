"""The bounds of ingested values (``philly_analyze/bounds.py``, ``data/input_bounds.toml``):
the checks on hand-picked values, and the docs' table against the data file."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from philly_analyze.bounds import (
    GPU_INDEX,
    MACHINE_GPUS,
    STEP,
    TIME,
    OutOfRange,
    all_bounds,
    excerpt,
    json_int,
)
from philly_analyze.timeutil import localize_naive

DOC = Path(__file__).resolve().parent.parent / "docs" / "raw-sources.md"


def test_int_of_accepts_the_bound_and_refuses_beyond() -> None:
    assert MACHINE_GPUS.int_of(" 0") == 0
    assert MACHINE_GPUS.int_of("1024") == 1024
    assert MACHINE_GPUS.int_of("+8") == 8
    for text in ("1025", "-1", "99999999999999999999", "9" * 5000):
        with pytest.raises(OutOfRange, match=r"GPUs of a machine .* out of range"):
            MACHINE_GPUS.int_of(text)
    for text in ("inf", "1e3", "8.0", "", "0x10", "gpu3"):
        with pytest.raises(ValueError, match="is not an integer") as e:
            MACHINE_GPUS.int_of(text)
        assert not isinstance(e.value, OutOfRange)
    with pytest.raises(ValueError):
        MACHINE_GPUS.int_of(True)  # a bool is an int to Python, not a GPU count


def test_check_refuses_nan_and_infinity() -> None:
    assert STEP.check(1e12) == 1e12
    for v in (float("nan"), float("inf"), -0.5, 1e12 + 1):
        with pytest.raises(OutOfRange):
            STEP.check(v)
    assert GPU_INDEX.mask(np.array([0, 1023, 1024, -1, np.nan])).tolist() == [
        True,
        True,
        False,
        False,
        False,
    ]


def test_time_bound_and_localize_never_raises() -> None:
    naive = np.array(
        ["1969-12-31T23:59:59", "1970-01-01", "2199-12-31T23:59:59", "2200-01-01", "9999-12-31"],
        dtype="datetime64[us]",
    )
    assert TIME.mask(naive).tolist() == [False, True, True, False, False]
    # Year 9999 made tz_localize raise (year 10000 after the shift): now NaT, never a crash.
    utc, _ = localize_naive(naive, "America/Los_Angeles")
    assert np.isnat(utc).tolist() == [True, False, False, True, True]
    # 1970-01-01 00:00 in Los Angeles (PST, UTC-8) is 08:00 UTC.
    assert utc[1] == np.datetime64("1970-01-01T08:00", "us")
    assert TIME.ok_us(0) and not TIME.ok_us(-1) and not TIME.ok_us(float("nan"))
    assert TIME.hi_us == 7_258_118_400_000_000  # 2200-01-01 UTC


def test_excerpt_and_json_int() -> None:
    assert excerpt("abc") == "'abc'"
    long = excerpt("x" * 1000)
    assert long.startswith("'xxx") and long.endswith("... (1,000 characters)") and len(long) < 120
    assert json_int("12") == 12
    assert json_int("9" * 5000) == float("inf")


def test_docs_table_lists_every_bound_as_the_data_file_says() -> None:
    rows = {
        m[1]: m[2]
        for m in re.finditer(r"^\| `(\w+)` \| ([^|]+) \|", DOC.read_text(), flags=re.MULTILINE)
    }
    assert rows["time"].startswith(f"{TIME.lo:%Y-%m-%d} to {TIME.hi:%Y-%m-%d}")
    for b in all_bounds():
        assert rows[b.name].startswith(b.range_text()), (b.name, rows[b.name])
