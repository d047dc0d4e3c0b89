"""Empty selections are errors or notes, never a quietly empty report.

``check(store, scope)`` runs before any analysis: a ``--vc`` that names no VC of the store is
an error (exit 1) listing the store's VCs, or the closest names when there are many; a
``--since``/``--until`` window (and VCs) that holds no job gives a note with the span the
store's jobs were submitted in.
"""

from __future__ import annotations

from philly_analyze.analysis.common import Scope
from philly_analyze.errors import CLOSEST, UserError, closest
from philly_analyze.store import Store

#: Up to this many VCs, an unknown ``--vc`` lists them all; beyond, the closest few
#: (``errors.closest``: VC names are hashes, typed short).
LIST_ALL = 12


def check(store: Store, scope: Scope) -> list[str]:
    """Raise ``UserError`` for a ``--vc`` the store does not have; return notes for a
    selection that holds no job."""
    if scope.vcs:
        known = [r[0] for r in store.con.execute(
            "SELECT DISTINCT vc FROM jobs WHERE vc IS NOT NULL ORDER BY vc"
        ).fetchall()]  # fmt: skip
        unknown = [v for v in scope.vcs if v not in known]
        if unknown:
            raise UserError(_unknown_vcs(unknown, known), source=str(store.path))
    if scope.since is None and scope.until is None:
        return []
    pred, params = scope.job_filter("j")
    n = store.scalar(f"SELECT count(*) FROM jobs j WHERE {pred}", params)
    if n:
        return []
    vc_pred, vc_params = Scope(scope.vcs).job_filter("j")
    first, last = store.con.execute(  # an aggregate: always one row
        f"SELECT min(submit_time), max(submit_time) FROM jobs j WHERE {vc_pred}", vc_params
    ).fetchall()[0]
    whose = f"of VC {', '.join(scope.vcs)} " if scope.vcs else ""
    span = (
        f"from {first:%Y-%m-%d %H:%M} to {last:%Y-%m-%d %H:%M} UTC"
        if first is not None
        else "without submit times"
    )
    return [f"no job {whose}was submitted in this window ({scope.describe()}); the store's "
            f"jobs {whose}were submitted {span}"]  # fmt: skip


def _unknown_vcs(unknown: list[str], known: list[str]) -> str:
    names = ", ".join(repr(v) for v in unknown)
    head = f"no VC {names} in this store"
    if not known:
        return head + " (it has no job with a VC)"
    if len(known) <= LIST_ALL:
        return f"{head}; its VCs: {', '.join(known)}"
    near = list(dict.fromkeys(c for v in unknown for c in closest(v, known)))
    if near:
        return f"{head}; closest of its {len(known)} VCs: {', '.join(near)}"
    return f"{head} ({len(known)} VCs; e.g. {', '.join(known[:CLOSEST])})"
