"""Virtual-cluster quotas: one source for the report's queueing decomposition and the replay.

A quota file is CSV with a header ``vc,gpus`` (or JSON ``{"vc": gpus, ...}``). Without one,
quotas are inferred: each VC gets a share of the cluster's GPUs proportional to its share of
the GPU time used in the data (jobs.gpu_time_s), rounded by largest remainder so the quotas sum
to the cluster size, with at least one GPU for every VC that ran anything. This reflects the
paper's description of Philly's VCs as guaranteed shares sized by each group's demand.
"""

from __future__ import annotations

import csv
import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from philly_analyze import schemas
from philly_analyze.errors import UserError

if TYPE_CHECKING:
    import pyarrow as pa


def load_quotas(path: str | os.PathLike[str]) -> dict[str, int]:
    """Read a quota file (CSV ``vc,gpus`` or JSON object)."""
    p = Path(path)
    try:
        text = p.read_text()
    except OSError as e:
        raise UserError(f"cannot read VC quota file: {e.strerror}", source=str(p)) from e
    if text.lstrip().startswith("{"):
        try:
            data = json.loads(text)
        except json.JSONDecodeError as e:
            raise UserError(f"invalid JSON: {e.msg}", source=str(p), line=e.lineno) from e
        items = list(data.items())
        return {str(k): _gpus(v, p, None) for k, v in items}
    out: dict[str, int] = {}
    for i, row in enumerate(csv.reader(text.splitlines()), 1):
        if not row or (i == 1 and row[0].strip().lower() == "vc"):
            continue
        if len(row) != 2:
            raise UserError("expected 2 fields: vc,gpus", source=str(p), line=i)
        out[row[0].strip()] = _gpus(row[1].strip(), p, i)
    return out


def quota_table(quotas: Mapping[str, int]) -> pa.Table:
    """Quotas as the rows of a quota file (``schemas.VC_QUOTAS``: vc, gpus; sorted by VC)."""
    import pyarrow as pa

    items = sorted(quotas.items())
    return pa.table({"vc": [v for v, _ in items], "gpus": [int(n) for _, n in items]})


def write_quotas(path: str | Path, quotas: Mapping[str, int]) -> Path:
    """Write quotas as the CSV ``load_quotas`` reads (a store's ``vc_quotas.csv``: header
    ``vc,gpus``, sorted by VC), e.g. synth's ground truth."""
    from philly_analyze import artifacts

    p = Path(path)
    artifacts.write(schemas.VC_QUOTAS, quota_table(quotas), p)
    return p


def _gpus(v: object, p: Path, line: int | None) -> int:
    try:
        n = int(str(v))
    except ValueError:
        raise UserError(f"GPU quota {v!r} is not an integer", source=str(p), line=line) from None
    if n < 0:
        raise UserError(f"GPU quota {n} is negative", source=str(p), line=line)
    return n


def infer_quotas(gpu_time_by_vc: Mapping[str, float], total_gpus: int) -> dict[str, int]:
    """Quotas proportional to GPU-time use, summing to ``total_gpus`` (see module doc)."""
    vcs = sorted(v for v, t in gpu_time_by_vc.items() if t and t > 0)
    if not vcs or total_gpus <= 0:
        return {}
    if total_gpus < len(vcs):
        return {v: (1 if i < total_gpus else 0) for i, v in enumerate(vcs)}
    total = sum(gpu_time_by_vc[v] for v in vcs)
    spare = total_gpus - len(vcs)
    exact = {v: spare * gpu_time_by_vc[v] / total for v in vcs}
    base = {v: 1 + int(exact[v]) for v in vcs}
    left = total_gpus - sum(base.values())
    for v in sorted(vcs, key=lambda v: (-(exact[v] - int(exact[v])), v))[:left]:
        base[v] += 1
    return base


#: The name of a quota file kept inside a store directory (``replay --out`` writes the quotas
#: it used there, so the report's decomposition of a replayed schedule uses the same quotas),
#: and of synth's ground-truth quotas.
STORE_QUOTA_FILE = schemas.VC_QUOTAS.file


def stored_quotas(
    store: object, path: str | os.PathLike[str] | None = None
) -> dict[str, int] | None:
    """Quotas from ``path`` if given, else from the store's own ``vc_quotas.csv`` if it has
    one; None when neither gives them (they are inferred then)."""
    if path is not None:
        return load_quotas(path)
    from philly_analyze.store import Store

    assert isinstance(store, Store)
    kept = store.read_artifact(schemas.VC_QUOTAS.name)
    if kept is None:
        return None
    return dict(zip(kept.column("vc").to_pylist(), kept.column("gpus").to_pylist(), strict=True))


def quotas_for_store(store: object, path: str | Path | None = None) -> dict[str, int]:
    """Quotas from ``path`` if given, else from the store's own ``vc_quotas.csv`` if it has
    one, else inferred from the store's jobs and machines (``infer_store_quotas``)."""
    kept = stored_quotas(store, path)
    return kept if kept is not None else infer_store_quotas(store)[0]


def infer_store_quotas(store: object) -> tuple[dict[str, int], list[str]]:
    """Quotas inferred from the GPU time of the store's jobs (``jobs.gpu_time_s``) over all
    its machines' GPUs, and the VCs whose quota cannot be inferred: jobs of theirs ran, but
    the GPU time of none is known (every one has an attempt without a recorded end or GPU
    count). Such a VC gets no quota, and is not one of quota 0 (docs/analyses.md)."""
    from philly_analyze.store import Store

    assert isinstance(store, Store)
    rows = store.con.execute(
        "SELECT vc, sum(gpu_time_s), count(*) FILTER (WHERE num_attempts > 0), "
        "count(gpu_time_s) FILTER (WHERE num_attempts > 0) "
        "FROM jobs WHERE vc IS NOT NULL GROUP BY vc ORDER BY vc"
    ).fetchall()
    total = store.scalar("SELECT coalesce(sum(num_gpus), 0) FROM machines")
    quotas = infer_quotas({v: float(t or 0) for v, t, _, _ in rows}, int(total or 0))
    unknown = [v for v, _, ran, known in rows if ran and not known]
    return quotas, unknown
