"""``make bench``: run every benchmark module in this folder (or those named on the command
line) and print their figures with the machine's core count. Benchmarks print; they never
assert on time."""

from __future__ import annotations

import importlib
import os
import pkgutil
import platform
import sys
from pathlib import Path

HERE = Path(__file__).parent


def main(argv: list[str]) -> int:
    names = argv or sorted(
        m.name for m in pkgutil.iter_modules([str(HERE)]) if not m.name.startswith("_")
    )
    print(
        f"# philly-analyze benchmarks: {os.cpu_count()} cores, {platform.machine()}, "
        f"Python {platform.python_version()}",
        flush=True,
    )
    failed = 0
    for name in names:
        mod = importlib.import_module(f"bench.{name}")
        print(f"\n## {name}", flush=True)
        try:
            mod.run()
        except Exception as e:  # one broken benchmark must not hide the others' figures
            failed += 1
            print(f"FAILED: {type(e).__name__}: {e}", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
