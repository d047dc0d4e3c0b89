"""What each report section needs from a store: one definition, used by the sections (their
"needs ..." notes) and by ``philly-analyze info`` (what a store can compute).

A section *can* run when every table of ``all_of`` has rows and, if ``any_of`` is given, at
least one of those has rows. ``adds`` lists tables that, when present, add parts of the
section (without them the section runs, with a note). Whether a table "has rows" is
``Store.has_rows`` (from the file list, so nothing is scanned).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from philly_analyze.store import has_artifact


@dataclass(frozen=True)
class Needs:
    """Inputs of one section."""

    #: Tables that must all have rows.
    all_of: tuple[str, ...] = ()
    #: At least one of these must have rows (empty: no such condition).
    any_of: tuple[str, ...] = ()
    #: Why the section needs them, and which source provides them.
    why: str = ""
    #: Optional tables: table -> what it adds.
    adds: dict[str, str] = field(default_factory=dict)
    #: A file of the store other than tables (``schemas.ARTIFACTS``: the sharing replay's
    #: output), as (what it is, its artefact name).
    output: tuple[str, str] | None = None


#: Section name -> what it needs (the report's sections, analysis.SECTIONS).
NEEDS: dict[str, Needs] = {
    "summary": Needs(why="counts whatever the store holds"),
    "status": Needs(
        all_of=("jobs", "attempts"),
        why="jobs with a final status whose attempts ran to an end (a job log or RM log)",
    ),
    "queueing": Needs(
        all_of=("attempts",),
        why="attempts (start times) to measure queueing delay",
        adds={
            "placements": "servers known to be busy (without them fragmentation delay is "
            "underestimated)",
            "machines": "VC quotas inferred from the cluster's GPUs (without them and without "
            "--vc-quotas every wait counts as fair-share)",
            "scheduler_events": "jobs that ended in the queue before any attempt",
        },
    ),
    "gpu_utilization": Needs(
        all_of=("gpu_util", "placements"),
        why="per-minute GPU utilization joined to placements",
    ),
    "locality": Needs(
        all_of=("placements",),
        why="placements (which servers each attempt ran on)",
        adds={"gpu_util": "Table 5 (GPU utilization of 16-GPU jobs by servers spanned)"},
    ),
    "host_resources": Needs(
        all_of=("placements",),
        any_of=("cpu_util", "mem_util"),
        why="per-minute host metrics and placements",
    ),
    "failures": Needs(
        all_of=("failures",),
        why="the failures table: ingest the jobs' framework logs (stdout/stderr), whose "
        "errors are classified by the signature rules",
    ),
    "retries": Needs(all_of=("attempts",), why="the attempts table"),
    "convergence": Needs(
        all_of=("epochs",),
        why="the epochs table: ingest framework logs that print a loss per epoch or step",
    ),
    "gpu_sharing": Needs(
        why="the output of a sharing replay: `philly-analyze replay --policy muxflow --out DIR` "
        "(then `report --store DIR`)",
        output=("sharing replay output", "sharing"),
    ),
}


def missing(section: str, has: Callable[[str], bool], store_path: str | Path = "") -> list[str]:
    """What ``section`` lacks: table names, ``a or b`` for an any-of group, or the name of a
    missing output. Empty when the section can run."""
    n = NEEDS[section]
    out = [t for t in n.all_of if not has(t)]
    if n.any_of and not any(has(t) for t in n.any_of):
        out.append(" or ".join(n.any_of))
    if n.output is not None and not (store_path and has_artifact(store_path, n.output[1])):
        out.append(n.output[0])
    return out


def missing_note(section: str, has: Callable[[str], bool], store_path: str | Path = "") -> str:
    """The section's note when it cannot run ("needs X; missing: ..."), else ""."""
    lacking = missing(section, has, store_path)
    if not lacking:
        return ""
    return f"needs {NEEDS[section].why}; missing: {', '.join(lacking)}"
