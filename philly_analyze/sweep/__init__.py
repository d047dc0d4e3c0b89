"""What-if sweeps: many replays over policies x parameter values x seeds, locally or on Ray.

Public API (lazy imports keep ``philly-analyze --help`` fast; Ray is imported only when a
Ray address is given)::

    from philly_analyze.sweep import run_sweep, SweepSpec, summarize, t_interval

    res = run_sweep("philly-store", "philly,relaxed", {"locality_wait_min": [0, 5, 30]},
                    seeds=5, out="sweep-out", jitter_s=60)           # ray="host:6379"
    res.runs        # one row per run (DataFrame); also sweep-out/runs.parquet
    res.summary     # per (policy, params) and metric: n, mean, sd, ci_low, ci_high
    res.failed      # failed runs with their parameters and error
"""

from __future__ import annotations

from typing import Any

_EXPORTS = {
    "run_sweep": "philly_analyze.sweep.run",
    "SweepResult": "philly_analyze.sweep.run",
    "SweepSpec": "philly_analyze.sweep.spec",
    "Task": "philly_analyze.sweep.spec",
    "run_key": "philly_analyze.sweep.spec",
    "summarize": "philly_analyze.sweep.summary",
    "t_interval": "philly_analyze.sweep.summary",
    "plot_sweep": "philly_analyze.sweep.figures",
    "read_inputs": "philly_analyze.sweep.inputs",
    "jittered": "philly_analyze.sweep.inputs",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        import importlib

        return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(name)
