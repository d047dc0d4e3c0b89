"""Shared test fixtures. Tests read reference material from ../shared/reference (never copied)."""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
REFERENCE = ROOT.parent / "shared" / "reference"
SAMPLE_DATA = ROOT / "sample_data"


@pytest.fixture(scope="session")
def reference() -> Path:
    """../shared/reference; tests needing it are skipped when it is absent."""
    if not REFERENCE.exists():
        pytest.skip("../shared/reference not present")
    return REFERENCE


@pytest.fixture
def store_dir(tmp_path: Path) -> Path:
    """A fresh store directory path (not yet created)."""
    return tmp_path / "store"
