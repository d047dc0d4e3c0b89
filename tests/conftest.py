"""Shared test fixtures. Tests read reference material from ../shared/reference (never copied).

``PHILLY_STRICT_SKIPS=1`` (set by ``.ci/run``) turns the skips for something missing from the
machine -- the reference data, a browser -- into failures, so CI cannot pass by skipping."""

from __future__ import annotations

import os
from pathlib import Path
from typing import NoReturn

import pytest

#: ``user_properties`` name of a text a test wants shown after the run (the slow calibration
#: round trip's table): ``pytest_terminal_summary`` prints it, also without ``-s`` and under
#: xdist (whose workers send each report's user_properties to the controller).
SHOW = "show_after_run"

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


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """Print the texts tests recorded under ``SHOW`` (passed or failed), after the run."""
    shown = []
    for key in ("passed", "failed"):
        for rep in terminalreporter.stats.get(key, []):
            for name, value in getattr(rep, "user_properties", ()):
                if name == SHOW:
                    shown.append((rep.nodeid, str(value)))
    if shown:
        terminalreporter.section("measured by the tests")
        for nodeid, text in shown:
            terminalreporter.write_line(nodeid)
            terminalreporter.write_line(text)
