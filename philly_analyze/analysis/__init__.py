"""The paper's analyses as pure functions over a store (one module each), and ``run`` to
compute several of them into a ``Report``.

Each module exposes ``compute(ctx: Context) -> Section``; heavy intermediates (the GPU
utilization join, the cluster-state timeline) are cached on the ``Context`` so sections that
share them pay once. Sections whose inputs are missing return an empty section with a note.

Example::

    from philly_analyze.store import Store
    from philly_analyze.analysis import run

    with Store("philly-store", read_only=True) as store:
        report = run(store, sections=["status", "queueing"])
    report["queueing"].frame("table2")
"""

from __future__ import annotations

import importlib
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from philly_analyze.analysis.common import Context, Scope
from philly_analyze.analysis.result import ResultTable, Section
from philly_analyze.store import Store

#: Section name -> module (order = report order).
SECTIONS: dict[str, str] = {
    "summary": "philly_analyze.analysis.summary",
    "status": "philly_analyze.analysis.status",
    "queueing": "philly_analyze.analysis.queueing",
    "gpu_utilization": "philly_analyze.analysis.utilization",
    "locality": "philly_analyze.analysis.locality",
    "host_resources": "philly_analyze.analysis.host_resources",
    "failures": "philly_analyze.analysis.failures",
    "retries": "philly_analyze.analysis.retries",
    "convergence": "philly_analyze.analysis.convergence",
    "gpu_sharing": "philly_analyze.analysis.sharing",
}


def _has_sharing_output(store: Store) -> bool:
    from philly_analyze.analysis.inputs import missing

    return not missing("gpu_sharing", store.has_rows, store.path)


#: Sections of optional outputs: in the default report only when the store has their input.
OPTIONAL_SECTIONS: dict[str, Callable[[Store], bool]] = {"gpu_sharing": _has_sharing_output}
#: The JSON report's contract keys (ARCHITECTURE.md), always present.
CONTRACT_KEYS: tuple[str, ...] = (
    "status",
    "gpu_utilization",
    "locality",
    "queueing",
    "failures",
    "retries",
    "convergence",
    "summary",
)
#: Other accepted spellings of section names.
ALIASES: dict[str, str] = {
    "utilization": "gpu_utilization",
    "host": "host_resources",
    "sharing": "gpu_sharing",
    "muxflow": "gpu_sharing",
}

__all__ = [
    "ALIASES",
    "CONTRACT_KEYS",
    "SECTIONS",
    "Context",
    "Report",
    "ResultTable",
    "Scope",
    "Section",
    "resolve_sections",
    "run",
]


@dataclass
class Report:
    """Computed sections plus what they were computed from."""

    sections: dict[str, Section]
    scope: Scope = field(default_factory=Scope)
    store_path: str = ""
    quota_source: str = ""
    #: Notes on the selection itself (a --since/--until window without jobs).
    scope_notes: list[str] = field(default_factory=list)

    def __getitem__(self, name: str) -> Section:
        return self.sections[ALIASES.get(name, name)]

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and ALIASES.get(name, name) in self.sections


def resolve_sections(names: Iterable[str] | None) -> list[str]:
    """Canonical section names in report order; ValueError naming an unknown one."""
    if not names:
        return list(SECTIONS)
    wanted = set()
    for n in names:
        key = ALIASES.get(n, n)
        if key not in SECTIONS:
            raise ValueError(f"unknown section {n!r}; choose from {', '.join(SECTIONS)}")
        wanted.add(key)
    return [s for s in SECTIONS if s in wanted]


def run(
    store: Store,
    sections: Iterable[str] | None = None,
    scope: Scope | None = None,
    vc_quotas: str | Path | dict[str, int] | None = None,
    on_section: Callable[[str], None] | None = None,
) -> Report:
    """Compute ``sections`` (default: all) of the report on ``store`` within ``scope``."""
    names = resolve_sections(sections)
    if not sections:
        names = [n for n in names if n not in OPTIONAL_SECTIONS or OPTIONAL_SECTIONS[n](store)]
    scope = scope or Scope()
    from philly_analyze.analysis import selection

    scope_notes = selection.check(store, scope)  # an unknown --vc raises here
    out: dict[str, Section] = {}
    with Context(store, scope, vc_quotas) as ctx:
        for name in names:
            if on_section is not None:
                on_section(name)
            t0 = time.perf_counter()
            sec = importlib.import_module(SECTIONS[name]).compute(ctx)
            sec.seconds = time.perf_counter() - t0
            out[name] = sec
        quota_source = ctx.quota_source if "quotas" in ctx.cache else ""
    if scope_notes and out:  # first thing a reader sees: the summary, else the first section
        first = out.get("summary") or next(iter(out.values()))
        first.notes[:0] = scope_notes
    return Report(out, scope, str(store.path), quota_source, scope_notes)
