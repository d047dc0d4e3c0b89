"""``PHILLY_STRICT_SKIPS=1`` (set by ``.ci/run``) turns a skip for a missing prerequisite (the
reference data, a browser) into a failure; without it the test is skipped."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests import conftest
from tests.conftest import STRICT_SKIPS, skip_unless_strict


def test_skip_outside_ci(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(STRICT_SKIPS, raising=False)
    with pytest.raises(pytest.skip.Exception, match="no browser"):
        skip_unless_strict("no browser")


def test_failure_under_strict_skips(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(STRICT_SKIPS, "1")
    with pytest.raises(pytest.fail.Exception, match=r"no browser \(PHILLY_STRICT_SKIPS=1"):
        skip_unless_strict("no browser")


def test_missing_reference_fails_under_strict_skips(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(conftest, "REFERENCE", tmp_path / "absent")
    monkeypatch.setenv(STRICT_SKIPS, "1")
    with pytest.raises(pytest.fail.Exception, match=r"\.\./shared/reference not present"):
        # pytest's fixture object keeps the function (functools.update_wrapper), untyped.
        conftest.reference.__wrapped__()  # type: ignore[attr-defined]
