"""Shell completion (click's, documented in the README): the installed ``philly-analyze``
prints a completion script for bash, zsh and fish, and bash completes verbs with it."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import skip_unless_strict

BIN = Path(sys.executable).parent
ENTRY = BIN / "philly-analyze"


def _script(shell: str) -> str:
    env = {**os.environ, "_PHILLY_ANALYZE_COMPLETE": f"{shell}_source"}
    p = subprocess.run([str(ENTRY)], env=env, capture_output=True, text=True, check=True)
    return p.stdout


@pytest.mark.parametrize(
    ("shell", "marker"),
    [
        ("bash", "complete -o nosort -F _philly_analyze_completion philly-analyze"),
        ("zsh", "compdef _philly_analyze_completion philly-analyze"),
        ("fish", "complete --no-files --command philly-analyze"),
    ],
)
def test_completion_script(shell: str, marker: str) -> None:
    assert marker in _script(shell)


def test_bash_completes_verbs_and_section_names() -> None:
    """The README's `eval` line, then what bash does on <TAB> after `philly-analyze rep` and
    after `report --section q`."""
    if shutil.which("bash") is None:
        skip_unless_strict("no bash")
    script = (
        'eval "$(_PHILLY_ANALYZE_COMPLETE=bash_source philly-analyze)"\n'
        "COMP_WORDS=(philly-analyze rep); COMP_CWORD=1\n"
        '_philly_analyze_completion philly-analyze; echo "${COMPREPLY[*]}"\n'
        "COMPREPLY=(); COMP_WORDS=(philly-analyze report --section q); COMP_CWORD=3\n"
        '_philly_analyze_completion philly-analyze; echo "${COMPREPLY[*]}"\n'
    )
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"}
    out = subprocess.run(
        ["bash", "-c", script], env=env, capture_output=True, text=True, check=True
    ).stdout
    assert out.splitlines() == ["report replay", "queueing"]
