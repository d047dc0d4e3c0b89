"""Trace replay: a discrete-event simulator of the cluster under scheduling policies.

Public API (lazy imports keep ``philly-analyze --help`` fast)::

    from philly_analyze.sim import Workload, Cluster, simulate, run_replay, write_result_store
"""

from __future__ import annotations

from typing import Any

from philly_analyze.sim import native

# Before any engine module is imported: the compiled build only while it matches its source.
native.use_source_if_stale()

_EXPORTS = {
    "Workload": "philly_analyze.sim.workload",
    "Cluster": "philly_analyze.sim.cluster",
    "ReplayResult": "philly_analyze.sim.result",
    "write_result_store": "philly_analyze.sim.result",
    "simulate": "philly_analyze.sim.replay",
    "run_replay": "philly_analyze.sim.replay",
    "load_inputs": "philly_analyze.sim.replay",
    "policy_names": "philly_analyze.sim.policies",
    "get_policy": "philly_analyze.sim.policies",
    "register": "philly_analyze.sim.policies",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        import importlib

        return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(name)
