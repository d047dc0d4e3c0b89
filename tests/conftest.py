"""Shared test fixtures. Tests read reference material from ../shared/reference (never copied).

``PHILLY_STRICT_SKIPS=1`` (set by ``.ci/run``) turns the skips for something missing from the
machine -- the reference data, a browser -- into failures, so CI cannot pass by skipping."""

from __future__ import annotations

import os
from pathlib import Path
from typing import NoReturn

import pytest

ROOT = Path(__file__).resolve().parent.parent
REFERENCE = ROOT.parent / "shared" / "reference"
SAMPLE_DATA = ROOT / "sample_data"
STRICT_SKIPS = "PHILLY_STRICT_SKIPS"


def skip_unless_strict(reason: str) -> NoReturn:
    """Skip for a missing prerequisite, or fail when ``PHILLY_STRICT_SKIPS=1``."""
    if os.environ.get(STRICT_SKIPS) == "1":
        pytest.fail(f"{reason} ({STRICT_SKIPS}=1: a missing prerequisite fails)", pytrace=False)
    pytest.skip(reason)


@pytest.fixture(scope="session")
def reference() -> Path:
    """../shared/reference; tests needing it are skipped when it is absent."""
    if not REFERENCE.exists():
        skip_unless_strict("../shared/reference not present")
    return REFERENCE


@pytest.fixture
def store_dir(tmp_path: Path) -> Path:
    """A fresh store directory path (not yet created)."""
    return tmp_path / "store"
