"""The replay engine's compiled build: the event loop, the placement state and both engines
compiled to C with mypyc at install (``make install``), with the same Python source as the
fallback.

Why: a saturated million-job ``philly`` replay spends about 50 s of CPU in the engine's
Python; compiled, the same code takes about 20 s (docs/replay.md, *Performance*). mypyc comes
with mypy (already a dev dependency) and needs a C compiler; nothing else is added.

Which code runs: the compiled modules are extension files beside the sources
(``sim/engine.cpython-*.so`` ...), and Python prefers them. They are used only while they
were built from the sources as they are now: ``native.json`` records each source's SHA-256
at build time, and ``use_source_if_stale`` (run when ``philly_analyze.sim`` is imported)
makes Python load the ``.py`` files instead when a source changed since, when the record is
missing, or when ``PHILLY_PURE_PYTHON=1``. All or none: the compiled modules call each other
directly, so a mix is not possible. ``engine_kind()`` says which runs.

Build: ``make native`` (``make install`` runs it: ``native.main``); a build that fails prints
one line and leaves the pure-Python engine in use.
"""

from __future__ import annotations

import hashlib
import importlib.abc
import importlib.machinery
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType

#: The modules compiled together (one mypyc group: they call each other's native methods).
COMPILED = ("events", "placement", "core", "engine", "preemptive")
PACKAGE = "philly_analyze.sim"
#: The shared library of the group (``<group>__mypyc``), beside the modules.
GROUP = "_native"
SIM_DIR = Path(__file__).resolve().parent
STAMP = SIM_DIR / "native.json"
#: Set to 1 to run the pure-Python engine even when the compiled one is built and current.
PURE_ENV = "PHILLY_PURE_PYTHON"


def source_hashes(sim_dir: Path = SIM_DIR) -> dict[str, str]:
    """SHA-256 of each compiled module's source."""
    return {m: hashlib.sha256((sim_dir / f"{m}.py").read_bytes()).hexdigest() for m in COMPILED}


def built_files(sim_dir: Path = SIM_DIR) -> list[Path]:
    """The compiled extension files present beside the sources."""
    names = (*COMPILED, f"{GROUP}__mypyc")
    return sorted(p for m in names for p in sim_dir.glob(f"{m}.*.so"))


def compiled_state(sim_dir: Path = SIM_DIR, env: dict[str, str] | None = None) -> str | None:
    """None when the compiled modules may be used; else why not (one phrase)."""
    env = dict(os.environ) if env is None else env
    if env.get(PURE_ENV, "") not in ("", "0"):
        return f"{PURE_ENV}={env[PURE_ENV]}"
    if not built_files(sim_dir):
        return "not built (make install builds it; needs a C compiler and mypy)"
    stamp = sim_dir / STAMP.name
    try:
        recorded = json.loads(stamp.read_text())["sources"]
    except (OSError, ValueError, KeyError, TypeError):
        return f"{stamp.name} missing or unreadable: rebuild with make install"
    if recorded != source_hashes(sim_dir):
        return "out of date with its source: rebuild with make install"
    return None


class _SourceFirst(importlib.abc.MetaPathFinder):
    """Loads the compiled modules from their ``.py`` files (ahead of the extension files)."""

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        pkg, _, name = fullname.rpartition(".")
        if pkg != PACKAGE or name not in COMPILED:
            return None
        return importlib.util.spec_from_file_location(fullname, SIM_DIR / f"{name}.py")


#: Why the pure-Python engine runs (None: the compiled one), once decided.
_reason: str | None = None
_decided = False


def use_source_if_stale() -> None:
    """Decide once per process which engine runs (module docstring); must run before any
    compiled module is imported."""
    global _reason, _decided
    if _decided:
        return
    _decided = True
    _reason = compiled_state()
    if _reason is not None and built_files():
        sys.meta_path.insert(0, _SourceFirst())


def engine_kind() -> str:
    """``compiled`` or ``pure Python (why)``."""
    use_source_if_stale()
    return "compiled" if _reason is None else f"pure Python ({_reason})"


_SETUP = """\
from setuptools import setup
from mypyc.build import mypycify
setup(name="philly_analyze_native", script_args=["build_ext"],
      ext_modules=mypycify(["--ignore-missing-imports", *{files!r}],
                           group_name={group!r}, opt_level="3"))
"""


def build(sim_dir: Path = SIM_DIR, python: str = sys.executable) -> list[Path]:
    """Compile the modules with mypyc in a temporary folder and put the extension files
    beside the sources, then record the sources' hashes. Raises ``RuntimeError`` with the
    compiler's last lines when the build fails (the previous build is removed first, so the
    pure-Python engine runs then)."""
    for old in built_files(sim_dir):
        old.unlink()
    (sim_dir / STAMP.name).unlink(missing_ok=True)
    hashes = source_hashes(sim_dir)
    with tempfile.TemporaryDirectory(prefix="philly-native-") as tmp:
        files = [str(sim_dir / f"{m}.py") for m in COMPILED]
        setup = Path(tmp) / "setup.py"
        setup.write_text(_SETUP.format(files=files, group=f"{PACKAGE}.{GROUP}"))
        # A folder of its own: setuptools would read the project's pyproject.toml otherwise.
        p = subprocess.run(
            [python, str(setup)], cwd=tmp, capture_output=True, text=True, check=False
        )
        if p.returncode != 0:
            tail = (p.stdout + p.stderr).strip().splitlines()[-5:]
            raise RuntimeError("mypyc build failed: " + " | ".join(tail))
        out = []
        for so in sorted(Path(tmp, "build").glob("lib.*/philly_analyze/sim/*.so")):
            out.append(Path(shutil.copy2(so, sim_dir / so.name)))
    if source_hashes(sim_dir) != hashes:
        raise RuntimeError("a source changed during the build: run it again")
    (sim_dir / STAMP.name).write_text(json.dumps({"sources": hashes}, indent=1) + "\n")
    return out


def main() -> int:
    """``make native``: build, or say why not (exit 0 either way:
    the pure-Python engine is a working fallback)."""
    if shutil.which(os.environ.get("CC", "cc")) is None:
        print("compiled replay engine not built: no C compiler (the pure-Python one runs)")
        return 0
    try:
        files = build()
    except (RuntimeError, OSError) as e:
        print(f"compiled replay engine not built ({e}); the pure-Python one runs")
        return 0
    print(f"compiled replay engine built: {len(files)} extension files in {SIM_DIR}")
    return 0
