"""How many CPUs this process may use: the one definition behind the sweep's default number
of workers and the threads that write a store's files or build a replay's result."""

from __future__ import annotations

import os


def usable_cpus() -> int:
    """The CPUs this process may run on (its affinity on Linux; ``os.cpu_count`` elsewhere),
    at least 1."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return max(1, os.cpu_count() or 1)
