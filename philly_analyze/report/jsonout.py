"""``--format json``: one object whose contract keys (ARCHITECTURE.md) are always present.

Keys: ``status``, ``gpu_utilization``, ``locality``, ``queueing``, ``failures``, ``retries``,
``convergence``, ``summary`` -- each a list of row objects tagged with ``"table"`` -- plus
``host_resources`` (when computed), ``notes`` (a string: every section's notes, ``section:
note`` joined by ``"; "``, empty when there are none), ``section_notes`` (the same by section)
and ``meta`` (store, scope, quotas, paper, citations: every publication the values come from). Sections not computed (``--section``) are empty
lists with a note. Output is deterministic: no timestamps, sorted nothing but what the
analyses order.
"""

from __future__ import annotations

import json
from typing import Any

from philly_analyze.analysis import CONTRACT_KEYS, SECTIONS, Report, paper
from philly_analyze.report import text


def to_dict(report: Report) -> dict[str, Any]:
    """The JSON object of a report."""
    out: dict[str, Any] = {}
    notes: dict[str, list[str]] = {}
    for key in (*CONTRACT_KEYS, *(s for s in SECTIONS if s not in CONTRACT_KEYS)):
        sec = report.sections.get(key)
        if sec is None:
            if key in CONTRACT_KEYS:
                out[key] = []
                notes[key] = ["not computed (left out by --section)"]
            continue
        out[key] = sec.rows()
        if sec.notes:
            notes[key] = list(sec.notes)
    out["notes"] = "; ".join(f"{k}: {n}" for k, ns in notes.items() for n in ns)
    out["section_notes"] = notes
    out["meta"] = {
        "store": report.store_path,
        "scope": report.scope.describe(),
        "vc_quotas": report.quota_source or None,
        "paper": paper.citation(),
        "citations": text.citations(report),
        "sections": list(report.sections),
    }
    return out


def render(report: Report) -> str:
    """The report as a JSON document (one object, newline-terminated)."""
    return json.dumps(to_dict(report), indent=1, ensure_ascii=False, allow_nan=False) + "\n"
