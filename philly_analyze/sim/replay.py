"""Entry points of the replay: ``simulate`` (in-memory inputs) and ``run_replay`` (a store).

Both return a ``ReplayResult``; results are deterministic for given inputs, params and seed
(the bundled policies use no randomness; ``seed`` is recorded and handed to the policy).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from philly_analyze.errors import UserError
from philly_analyze.sim.cluster import Cluster
from philly_analyze.sim.policies import get_policy, validate_params
from philly_analyze.sim.result import ReplayResult
from philly_analyze.sim.workload import NO_VC, Workload
from philly_analyze.vcquota import infer_quotas, stored_quotas


def workload_quotas(workload: Workload, cluster: Cluster) -> dict[str, int]:
    """Quotas inferred from the GPU time per VC of the jobs the cluster can hold (GPUs x
    every attempt's duration; ``vcquota.infer_quotas``), summing to the cluster's GPUs."""
    counts = np.where(workload.num_gpus <= cluster.total_gpus, workload.num_attempts, 0)
    gpu_time = np.repeat(workload.num_gpus, workload.num_attempts) * workload.att_dur_us
    fits = np.repeat(counts > 0, workload.num_attempts)
    by_vc = np.bincount(
        np.repeat(workload.vc, workload.num_attempts)[fits],
        weights=gpu_time[fits].astype(np.float64),
        minlength=len(workload.vc_names),
    )
    return infer_quotas(
        {name: float(by_vc[i]) for i, name in enumerate(workload.vc_names) if name != NO_VC},
        cluster.total_gpus,
    )


def prepare(workload: Workload, cluster: Cluster) -> Workload:
    """Drop jobs no placement could ever hold (more GPUs than the cluster), with a note."""
    if cluster.total_gpus <= 0:
        raise UserError("the cluster has no GPUs (no machines with num_gpus > 0)")
    too_big = workload.num_gpus > cluster.total_gpus
    if too_big.any():
        wl = workload.subset(~too_big)
        wl.notes.append(
            f"{int(too_big.sum()):,} jobs need more GPUs than the cluster has "
            f"({cluster.total_gpus:,}) and were not replayed"
        )
        return wl
    return workload


def simulate(
    workload: Workload,
    cluster: Cluster,
    policy_name: str,
    quotas: Mapping[str, int] | None = None,
    params: Mapping[str, Any] | None = None,
    seed: int = 0,
) -> ReplayResult:
    """Replay ``workload`` on ``cluster`` under a registered policy.

    ``quotas``: GPUs per VC name; None infers them from the workload's GPU time (policies
    without quotas ignore them). ``params``: the policy's named parameters (validated; see
    ``philly-analyze replay --list-policies``)."""
    policy = get_policy(policy_name)
    p = validate_params(policy, params)
    wl = prepare(workload, cluster)
    if quotas is None and policy.uses_quotas:
        quotas = workload_quotas(wl, cluster)
    return policy.simulate(wl, cluster, quotas, p, seed)


def load_inputs(
    store_path: str | os.PathLike[str],
    racks: int | None = None,
    quotas_path: str | os.PathLike[str] | None = None,
    machines: str | None = None,
) -> tuple[Workload, Cluster, dict[str, int]]:
    """Workload, cluster and quotas of a store. Quotas: the file if given, else the store's
    ``vc_quotas.csv`` (``vcquota.stored_quotas``: a replay output keeps the quotas it used
    there, so the same settings reproduce it), else inferred from the replayed jobs'
    GPU-time shares over the replayed cluster's GPUs (``workload_quotas``; with ``--machines
    listed`` that cluster may be smaller than the store's machines, over which the report
    infers them). ``machines``: ``listed``, ``all`` or None (the default of
    ``cluster.machines_choice``). How the cluster differs from the machine list, and quotas
    that do not add up to its GPUs, are noted in the workload's notes."""
    from philly_analyze.progress import current
    from philly_analyze.sim.cluster import cluster_notes
    from philly_analyze.store import Store

    # Seconds at a million jobs (the merged views): the caller's status says which part.
    tracker = current()
    with Store(store_path, read_only=True) as store:
        tracker.describe("reading the store: jobs and attempts")
        wl = Workload.from_store(store)
        tracker.describe("reading the store: machines and quotas")
        cluster = Cluster.from_store(store, racks=racks, machines=machines)
        wl.notes.extend(cluster_notes(store, machines))
        quotas = stored_quotas(store, quotas_path)
        store_gpus = int(store.scalar("SELECT coalesce(sum(num_gpus), 0) FROM machines") or 0)
    if cluster.num_machines == 0:
        raise UserError(
            "has no machines; ingest a machine list (e.g. cluster_machine_list) first",
            source=str(Path(store_path)),
        )
    if quotas is None:
        quotas = workload_quotas(wl, cluster)
        if quotas and store_gpus != cluster.total_gpus:
            wl.notes.append(
                f"VC quotas inferred over the replayed cluster's {cluster.total_gpus:,} GPUs "
                f"(the report infers them over all {store_gpus:,} of the store's machines)"
            )
    elif quotas and sum(quotas.values()) != cluster.total_gpus:
        given = "given" if quotas_path is not None else "kept in the store (vc_quotas.csv)"
        wl.notes.append(
            f"the VC quotas {given} add up to {sum(quotas.values()):,} GPUs; the replayed "
            f"cluster has {cluster.total_gpus:,}"
        )
    return wl, cluster, quotas


def run_replay(
    source: str | os.PathLike[str],
    policy: str,
    params: Mapping[str, Any] | None = None,
    seed: int = 0,
    *,
    racks: int | None = None,
    quotas: str | os.PathLike[str] | Mapping[str, int] | None = None,
    machines: str | None = None,
) -> ReplayResult:
    """Replay the store at ``source`` under ``policy`` (for sweeps: call many times, in
    parallel processes if you like; each call opens the store read-only)."""
    qpath = quotas if isinstance(quotas, str | os.PathLike) else None
    wl, cluster, q = load_inputs(source, racks, qpath, machines)
    if isinstance(quotas, Mapping):
        q = dict(quotas)
    return simulate(wl, cluster, policy, q, params, seed)
