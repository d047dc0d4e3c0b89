"""``replay`` turns transparent huge pages off for its process (``philly_analyze.hugepages``):
the kernel's own report (``THP_enabled`` in /proc/self/status) says so after the command ran
in the same process, and not before."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests._sim_data import observed_store

STATUS = Path("/proc/self/status")
SHOW = (
    "print('THP=' + [ln for ln in open('/proc/self/status') if 'THP_enabled' in ln][0].split()[1])"
)
#: Huge pages back on in the child: the flag is inherited, and a replay run in-process by an
#: earlier test (CliRunner) turned it off for the test process.
ALLOW = "import ctypes; ctypes.CDLL(None).prctl(41, 0, 0, 0, 0); "


def run(code: str) -> list[str]:
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return [ln[4:] for ln in p.stdout.split() if ln.startswith("THP=")]


@pytest.mark.skipif(
    not STATUS.exists() or "THP_enabled" not in STATUS.read_text(),
    reason="the kernel does not report THP_enabled",
)
def test_replay_runs_without_transparent_huge_pages(tmp_path: Path) -> None:
    store = observed_store(tmp_path / "s")
    code = (
        f"{ALLOW}{SHOW}; from philly_analyze.cli import main; "
        f"main(['replay', '--store', {str(store)!r}, '--policy', 'philly', '-q'], "
        f"standalone_mode=False); {SHOW}"
    )
    assert run(code) == ["1", "0"]
