"""A sharing policy's replay (``muxflow``, ``dedicated``, ``mps-naive``; the classes are in
``sim.policies.sharing``): a store's workload in, a ``ReplayResult`` out.

The store's jobs are the offline side, the store's machines the ordinary (training-only)
GPUs, and an inference fleet of ``online_gpus`` GPUs (default: as many as the cluster has)
hosts one online service each. With ``scenario=paper`` the store is ignored and MuxFlow's
deployment is simulated instead (``[scenario.paper]`` of the model file).

The schedule comes back as a ``ReplayResult``: canonical jobs/attempts/placements/machines
(evictions are ``killed`` attempts; online GPUs are machines ``online-NNNNN`` of 8 GPUs); each
job runs its observed attempts in turn and keeps their outcomes (a failed attempt is retried,
the last one's outcome is the job's status), as the other replay policies do; the
replay's standard metrics and every sharing metric in one flat dict, and, unless
``compare_philly=false``, the same jobs replayed under ``philly`` on the cluster alone so that
JCT and queueing can be compared (``philly_*`` and ``*_vs_philly`` keys)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd
import pyarrow as pa

from philly_analyze import schemas
from philly_analyze.sim.sharing.config import SharingConfig
from philly_analyze.sim.sharing.results import EVICTION_REASONS, SharingResult

if TYPE_CHECKING:
    from philly_analyze.sim.cluster import Cluster
    from philly_analyze.sim.policies.sharing import SharingPolicy
    from philly_analyze.sim.result import ReplayResult
    from philly_analyze.sim.workload import Workload

SOURCE = "replay"
US_PER_MIN = 60_000_000
#: Minute 0 of the paper scenario (it has no store to take a time from).
PAPER_ORIGIN = pd.Timestamp("2023-03-01T00:00:00Z")


def sharing_config(params: Mapping[str, Any], total_gpus: int) -> tuple[SharingConfig, bool]:
    """The model configuration for the replay ``params`` (and whether it is the paper
    scenario)."""
    from philly_analyze.sim.sharing.scenario import paper_config

    cfg = SharingConfig.load(params["model"] or None)
    off = [m.strip() for m in str(params["disable"]).split(",") if m.strip()]
    cfg = cfg.without(*off).with_(**{"cluster.step_minutes": int(params["step_minutes"])})
    scenario = str(params["scenario"]).strip().lower()
    if scenario not in ("", "paper"):
        from philly_analyze.errors import UserError

        raise UserError(f"unknown scenario {params['scenario']!r}; the only one is 'paper'")
    if scenario == "paper":
        cfg = paper_config(cfg, params["online_gpus"])
        if params["minutes"] is not None:  # the scenario's day, shortened or lengthened
            cfg = cfg.with_(**{"paper.minutes": int(params["minutes"])})
        return cfg, True
    online = params["online_gpus"]
    if online is None:
        online = round(params["online_ratio"] * total_gpus)
    return cfg.with_(**{"cluster.online_gpus": online, "cluster.ordinary_gpus": total_gpus}), False


def offline_frame(wl: Workload) -> tuple[pd.DataFrame, int]:
    """The workload's jobs as offline jobs: solo work = the sum of its attempts' durations
    (the GPU time it needed, per GPU), run attempt by attempt with the observed outcomes
    (``attempts_work``, ``attempts_outcome``). Returns the frame and the origin
    (microseconds)."""
    origin = int(wl.submit_us.min()) if len(wl) else 0
    csum = np.concatenate([[0], np.cumsum(wl.att_dur_us, dtype=np.int64)])
    work = csum[wl.att_ptr[1:]] - csum[wl.att_ptr[:-1]]
    names = np.array([*schemas.ATTEMPT_OUTCOMES, None], dtype=object)
    outcome = names[np.where(wl.att_outcome < 0, len(schemas.ATTEMPT_OUTCOMES), wl.att_outcome)]
    minutes = wl.att_dur_us / US_PER_MIN
    per_job = [slice(a, b) for a, b in zip(wl.att_ptr[:-1], wl.att_ptr[1:], strict=True)]
    vc_names = np.array([*wl.vc_names, None], dtype=object)
    users = np.array([*wl.user_names, None], dtype=object)
    frame = pd.DataFrame(
        {
            "job_id": wl.job_ids,
            "submit": (wl.submit_us - origin) / US_PER_MIN,
            "work_minutes": np.asarray(work, float) / US_PER_MIN,
            "num_gpus": wl.num_gpus,
            "vc": vc_names[np.where(wl.vc < 0, len(wl.vc_names), wl.vc)],
            "user": users[np.where(wl.user < 0, len(wl.user_names), wl.user)],
            "attempts_work": [minutes[s].tolist() for s in per_job],
            "attempts_outcome": [outcome[s].tolist() for s in per_job],
        }
    )
    return frame, origin


def _ts(us: np.ndarray) -> pa.Array:
    return pa.array(np.asarray(us, np.int64), pa.int64()).cast(schemas.UTC_TS)


def gpu_locations(
    res: SharingResult, cluster: Cluster | None
) -> tuple[np.ndarray, np.ndarray, pa.Table]:
    """Machine id and GPU index of every global GPU id, and the machines table (the cluster's
    servers, then the online fleet's ``online-NNNNN`` servers)."""
    per = res.config.cluster.gpus_per_machine
    n_on = res.config.cluster.online_gpus
    on_ids = np.array([f"online-{g // per:05d}" for g in range(n_on)], dtype=object)
    on_idx = np.arange(n_on) % per
    n_on_machines = -(-n_on // per)
    if cluster is not None and res.config.cluster.ordinary_gpus:
        mids = np.asarray(cluster.machine_ids, dtype=object)
        ord_ids = np.repeat(mids, cluster.gpus)
        starts = np.repeat(np.cumsum(cluster.gpus) - cluster.gpus, cluster.gpus)
        ord_idx = np.arange(len(ord_ids)) - starts
        machines = cluster.to_machines_table()
    else:
        ord_ids, ord_idx = np.zeros(0, object), np.zeros(0, np.int64)
        machines = None
    online = pa.table(
        {
            "machine_id": [f"online-{m:05d}" for m in range(n_on_machines)],
            "listed_num_gpus": pa.array(
                [min(per, n_on - m * per) for m in range(n_on_machines)], pa.int16()
            ),
            "rack": ["online"] * n_on_machines,
            "source": [SOURCE] * n_on_machines,
        }
    )
    table = (
        online if machines is None else pa.concat_tables([machines, online.cast(machines.schema)])
    )
    return (
        np.concatenate([on_ids, ord_ids]),
        np.concatenate([on_idx, ord_idx]).astype(np.int16),
        table,
    )


def to_tables(
    res: SharingResult,
    origin_us: int,
    cluster: Cluster | None,
    input_flags: dict[str, list[str]] | None = None,
) -> tuple[pa.Table, pa.Table, pa.Table, pa.Table]:
    """Canonical (jobs, attempts, placements, machines) of a sharing schedule;
    ``input_flags``: the input jobs' flags by job id, written back with them."""
    from philly_analyze.sim.result import STATUS_OF_OUTCOME

    jt, att = res.jobs, res.attempts.sort_values(["job", "attempt_idx"]).reset_index(drop=True)
    n = len(jt)
    done = jt["end_min"].notna().to_numpy()
    # A job that ended has the outcome of its last attempt (its observed last outcome).
    last = att.groupby("job").tail(1).set_index("job")["outcome"]
    status = np.array([None] * n, dtype=object)
    for j in np.flatnonzero(done):
        status[j] = STATUS_OF_OUTCOME.get(last.get(j))
    jobs = schemas.conform(
        "jobs",
        {
            "job_id": pa.array(jt["job_id"].astype(str), pa.string()),
            "vc": pa.array(jt["vc"], pa.string()),
            "user_id": pa.array(jt["user"], pa.string()),
            "status": pa.array(status, pa.string()),
            "submit_time": _ts(origin_us + np.round(jt["submit_min"].to_numpy() * US_PER_MIN)),
            "num_gpus": pa.array(jt["num_gpus"], pa.int32()),
            "flags": pa.array(
                [
                    [*(input_flags or {}).get(jid, []), *([] if d else ["unfinished"])] or None
                    for jid, d in zip(jt["job_id"].astype(str), done, strict=True)
                ],
                pa.list_(pa.string()),
            ),
            "source": pa.array([SOURCE] * n, pa.string()),
        },
    )
    start = origin_us + np.round(att["start_min"].to_numpy(float) * US_PER_MIN).astype(np.int64)
    end = origin_us + np.round(att["end_min"].to_numpy(float) * US_PER_MIN).astype(np.int64)
    # Unknown outcomes may come back as NaN (pandas' string dtype): None again.
    outcome = np.array([None if pd.isna(o) else o for o in att["outcome"]], dtype=object)
    running = outcome == "running"
    # Evictions are killed attempts; the observed outcomes (passed, failed, killed, unknown)
    # and ``running`` at the horizon stay as they are.
    canon = np.where(np.isin(outcome, EVICTION_REASONS), "killed", outcome)
    machine_of, idx_of, machines = gpu_locations(res, cluster)
    sizes = np.fromiter((len(g) for g in att["gpus"]), np.int64, len(att))
    flat = np.fromiter((g for gs in att["gpus"] for g in gs), np.int64, int(sizes.sum()))
    row = np.repeat(np.arange(len(att)), sizes)
    n_machines = [len({machine_of[g] for g in gs}) for gs in att["gpus"]]
    job_ids = jt["job_id"].astype(str).to_numpy(object)[att["job"].to_numpy()]
    end_arr = _ts(end)
    attempts = schemas.conform(
        "attempts",
        {
            "job_id": pa.array(job_ids, pa.string()),
            "attempt_idx": pa.array(att["attempt_idx"], pa.int32()),
            "start_time": _ts(start),
            "end_time": pa.array(
                [None if r else v for r, v in zip(running, end_arr.to_pylist(), strict=True)],
                schemas.UTC_TS,
            ),
            "num_gpus": pa.array(sizes, pa.int32()),
            "num_machines": pa.array(n_machines, pa.int32()),
            # Null, not NaN, for an attempt still running at the horizon: NaN would turn
            # every sum over it (jobs.gpu_time_s, the summary's GPU hours) into NaN.
            "duration_s": pa.array((end - start) / 1e6, pa.float64(), mask=running),
            "outcome": pa.array(canon, pa.string()),
            "source": pa.array([SOURCE] * len(att), pa.string()),
        },
    )
    placements = schemas.conform(
        "placements",
        {
            "job_id": pa.array(job_ids[row], pa.string()),
            "attempt_idx": pa.array(att["attempt_idx"].to_numpy()[row], pa.int32()),
            "machine_id": pa.array(machine_of[flat], pa.string()),
            "gpu_idx": pa.array(idx_of[flat], pa.int16()),
            "source": pa.array([SOURCE] * len(flat), pa.string()),
        },
    )
    return jobs, attempts, placements, machines


def replay_metrics(res: SharingResult) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The replay's standard metric keys (seconds) from a sharing run, and per-VC rows."""
    jt = res.jobs
    ran = jt[jt["first_start_min"].notna()]
    done = jt[jt["end_min"].notna()]
    att = res.attempts
    jct = (done["end_min"] - done["submit_min"]).to_numpy() * 60
    queue = (ran["first_start_min"] - ran["submit_min"]).to_numpy() * 60

    def pct(x: np.ndarray, q: float) -> float:
        return float(np.percentile(x, q)) if len(x) else float("nan")

    alloc = float((att["gpus"].map(len) * (att["end_min"] - att["start_min"])).sum()) * 60
    span = float(att["end_min"].max() - jt["submit_min"].min()) * 60 if len(att) else 0.0
    total = res.config.cluster.online_gpus + res.config.cluster.ordinary_gpus
    m = {
        "jobs": len(ran),
        "jobs_unscheduled": int(len(jt) - len(ran)),
        "attempts": len(att),
        "preemptions": int(att["outcome"].isin(EVICTION_REASONS).sum()),
        "jct_mean_s": float(jct.mean()) if len(jct) else float("nan"),
        "jct_p50_s": pct(jct, 50),
        "jct_p95_s": pct(jct, 95),
        "jct_p99_s": pct(jct, 99),
        "queue_mean_s": float(queue.mean()) if len(queue) else float("nan"),
        "queue_p50_s": pct(queue, 50),
        "queue_p95_s": pct(queue, 95),
        "queue_p99_s": pct(queue, 99),
        "gpu_util_allocated_pct": 100 * alloc / (total * span) if total and span else float("nan"),
        "makespan_s": span,
    }
    per_vc = []
    for vc, g in ran.groupby(ran["vc"].fillna("default"), sort=True):
        d = g[g["end_min"].notna()]
        per_vc.append(
            {
                "vc": str(vc),
                "quota": None,
                "jobs": len(g),
                "queue_mean_s": float((g["first_start_min"] - g["submit_min"]).mean() * 60),
                "jct_mean_s": float((d["end_min"] - d["submit_min"]).mean() * 60)
                if len(d)
                else float("nan"),
            }
        )
    return m, per_vc


def replay_sharing(
    policy: SharingPolicy,
    workload: Workload,
    cluster: Cluster,
    quotas: Mapping[str, int] | None,
    params: dict[str, Any],
    seed: int,
) -> ReplayResult:
    """``policy`` on the MuxFlow model: the workload's jobs as offline work on the cluster and
    an inference fleet (or the paper scenario, ``params["scenario"]``), as a ``ReplayResult``
    with every sharing metric and, unless ``compare_philly`` is off, the same jobs under
    ``philly`` beside them."""
    from philly_analyze.progress import current
    from philly_analyze.sim.result import ReplayResult
    from philly_analyze.sim.sharing.simulate import simulate_sharing

    cfg, paper = sharing_config(params, cluster.total_gpus)
    jobs, origin, minutes, notes = _offline_input(cfg, paper, workload, params, seed)
    training = None if paper else cluster
    res = simulate_sharing(jobs, cfg, policy.name, seed=seed, minutes=minutes, cluster=training)
    if len(res.jobs) < len(jobs):  # prepare_offline keeps jobs with work and GPUs only
        notes.append(
            f"{len(jobs) - len(res.jobs):,} jobs without work (zero duration) not replayed"
        )
    # ``flags`` is empty for workloads built without them (scenarios, from_columns).
    flags = {str(j): list(f) for j, f in zip(workload.job_ids, workload.flags, strict=False) if f}
    current().describe(f"{policy.name}: building the result")
    jt, at, pl, machines = to_tables(res, origin, training, flags)
    metrics, per_vc = replay_metrics(res)
    metrics.update({k: v for k, v in res.metrics.items() if k != "policy"})
    if paper:
        notes += _paper_notes(cfg, res, policy.name)
    elif params["compare_philly"] and len(workload):
        from philly_analyze.progress import NullTracker, reporting

        with reporting(NullTracker()):  # the caller's bar counts this policy's jobs only
            _compare_philly(workload, cluster, quotas, seed, metrics)
    per_vc_table = (
        pa.Table.from_pylist(per_vc) if per_vc else pa.table({"vc": pa.array([], pa.string())})
    )
    out = ReplayResult(
        policy=policy.name,
        params=dict(params),
        seed=seed,
        jobs=jt,
        attempts=at,
        placements=pl,
        machines=machines,
        waiting=schemas.WAITING.schema.empty_table(),
        metrics=metrics,
        per_vc=per_vc_table,
        notes=notes,
        footnotes=_footnotes(policy, cfg, metrics),
        # The model's own output, kept in the store for the report (sharing.json...).
        artifacts=res.artifacts(),
    )
    out.seconds = float(res.timing.get("seconds", 0.0))
    out.sharing = res  # type: ignore[attr-defined]  # the model's own result (timeseries...)
    return out


def _offline_input(
    cfg: SharingConfig, paper: bool, workload: Workload, params: dict[str, Any], seed: int
) -> tuple[pd.DataFrame, int, int | None, list[str]]:
    """The offline jobs, their origin (us), the horizon (minutes, None: until done) and the
    notes: the paper scenario's synthetic backlog, or the workload's jobs."""
    if not paper:
        jobs, origin = offline_frame(workload)
        return jobs, origin, params["minutes"], list(workload.notes)
    from philly_analyze.sim.sharing.scenario import paper_jobs

    jobs = paper_jobs(cfg, seed)
    note = (
        f"scenario paper: {cfg.cluster.online_gpus:,} online GPUs, {len(jobs):,} "
        f"synthetic offline jobs over {cfg.paper.minutes:,} minutes (no store is used)"
    )
    return jobs, int(PAPER_ORIGIN.value // 1000), cfg.paper.minutes, [note]


def _paper_notes(cfg: SharingConfig, res: SharingResult, name: str) -> list[str]:
    """The paper's before/after numbers beside the simulated online-GPU means."""
    return [
        f"paper {label}: before {cfg.paper.paper_before[key]:.0%}, after "
        f"{cfg.paper.paper_after[key]:.0%}; simulated online GPUs: "
        f"{res.metrics[key + '_online']:.1%} under {name}"
        for key, label in (
            ("gpu_util", "utilization"),
            ("sm_activity", "SM activity"),
            ("gpu_memory", "GPU memory"),
        )
    ]


def _footnotes(policy: SharingPolicy, cfg: Any, metrics: dict[str, Any]) -> dict[str, str]:
    """Why a policy that does not share starts no job on a fleet without training GPUs."""
    waiting = metrics.get("jobs_unscheduled") or 0
    if policy.mechanisms.shares or not waiting or cfg.cluster.ordinary_gpus:
        return {}
    return {
        "jobs_unscheduled": f"{policy.name} is the baseline without sharing: the inference "
        f"fleet's {cfg.cluster.online_gpus:,} GPUs run no training, and there are no "
        f"training GPUs (ordinary_gpus 0), so none of the {waiting:,} offline jobs starts"
    }


def _compare_philly(
    workload: Workload,
    cluster: Cluster,
    quotas: Mapping[str, int] | None,
    seed: int,
    metrics: dict[str, Any],
) -> None:
    """The same jobs under ``philly`` on the cluster alone: JCT and queueing beside ours."""
    from philly_analyze.sim.replay import simulate as replay

    base = replay(workload, cluster, "philly", quotas, None, seed).metrics
    for key in ("jct_mean_s", "jct_p50_s", "queue_mean_s", "queue_p50_s"):
        metrics[f"philly_{key}"] = base.get(key)
        ours, theirs = metrics.get(key), base.get(key)
        ratio = None
        if ours is not None and theirs is not None and theirs != 0 and np.isfinite(theirs):
            ratio = ours / theirs
        metrics[f"{key.removesuffix('_s')}_vs_philly"] = ratio


def run_scenario(
    policy: str, scenario: str, params: Mapping[str, Any] | None = None, seed: int = 0
) -> ReplayResult:
    """``replay --policy P --scenario paper``: a sharing policy on a built-in scenario, no
    store needed (the workload and cluster arguments are not used)."""
    from philly_analyze.errors import UsageError
    from philly_analyze.sim.cluster import Cluster
    from philly_analyze.sim.policies import POLICIES, get_policy, validate_params
    from philly_analyze.sim.policies.sharing import SharingPolicy
    from philly_analyze.sim.workload import Workload

    pol = get_policy(policy)
    if not isinstance(pol, SharingPolicy):
        names = [n for n, c in POLICIES.items() if issubclass(c, SharingPolicy)]
        raise UsageError(f"--scenario needs a sharing policy ({', '.join(names)}), not {policy!r}")
    p = validate_params(pol, {**dict(params or {}), "scenario": scenario})
    empty = Workload.from_columns([], [], [], [], [])
    return pol.simulate(empty, Cluster.from_counts({}), None, p, seed)
