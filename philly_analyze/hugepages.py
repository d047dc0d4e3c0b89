"""Transparent huge pages off for this process (Linux), for commands that allocate and free
gigabytes of short-lived arrays.

NumPy, Arrow's allocator and DuckDB ask the kernel for transparent huge pages on big
allocations (``madvise``). Each first touch of such memory then zeroes a whole 2 MB page, and
memory freed and allocated again (every temporary array of the result building, the
trace's growing buffers) is zeroed again. In a saturated million-job replay this was 7-8 s
of system time out of about 40 s of CPU; with huge pages off for the process, 2.2 s (same
output; ``bench/replay.py``). ``prctl(PR_SET_THP_DISABLE)`` affects only this process and its
children, and exists since Linux 3.15; elsewhere this does nothing.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import sys

#: ``PR_SET_THP_DISABLE`` from ``<linux/prctl.h>``.
PR_SET_THP_DISABLE = 41


def disable_transparent_hugepages() -> bool:
    """Turn transparent huge pages off for this process; True if the kernel accepted it."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)
        return int(libc.prctl(PR_SET_THP_DISABLE, 1, 0, 0, 0)) == 0
    except (OSError, AttributeError):
        return False
