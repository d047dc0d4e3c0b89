"""The other files of a store: a store's folder holds its catalog, ``parquet/`` and, for the
outputs of some commands, these files (declared here, written in a batch and read through
``store.Store``; ``philly_analyze.artifacts`` has their codecs): nothing else in a store's
folder is the store's."""

from __future__ import annotations

from philly_analyze.schemas.model import (
    F64,
    I32,
    I64,
    STR,
    UTC_TS,
    Artifact,
    Field,
    Table,
    _c,
)

REPLAY_SETTINGS = Artifact(
    "replay",
    "replay.json",
    "What produced a replayed schedule, enough to reproduce it. Its presence marks a store "
    "written by replay (which replaces only such a store).",
    "`replay --out`",
    fields=(
        Field("policy", "string", "The policy's registered name (`replay --list-policies`)."),
        Field("params", "object", "Every parameter of the policy, defaults filled."),
        Field("seed", "integer", "Seed handed to the policy."),
        Field("quotas", "object", "GPUs per VC the policy enforced (`{}` without quotas)."),
    ),
)

VC_QUOTAS = Artifact(
    "vc_quotas",
    "vc_quotas.csv",
    "The VC quotas a replay enforced, as a quota file (`--quotas`, `--vc-quotas`): "
    "`vcquota.quotas_for_store` reads it when no quota file is given, so the report's "
    "decomposition of a replayed schedule and a replay of it use the quotas its scheduler used.",
    "`replay --out`, for a policy that uses quotas",
    table=Table(
        "vc_quotas",
        "Header `vc,gpus`, one row per VC, sorted by VC.",
        (
            _c("vc", STR, "Virtual cluster.", nullable=False),
            _c("gpus", I64, "Its quota, GPUs.", nullable=False),
        ),
    ),
)

WAITING = Artifact(
    "waiting",
    "waiting.parquet",
    "The true waiting causes of a replayed schedule, as its scheduler saw them (the report's "
    "queueing decomposition rebuilds them from the attempts and placements alone).",
    "`replay --out` (empty for sharing policies)",
    table=Table(
        "waiting",
        "One row per attempt that waited and cause, in attempt order then cause order.",
        (
            _c("job_id", STR, "Job id."),
            _c("attempt_idx", I32, "0-based attempt index."),
            _c("start", UTC_TS, "First moment of that cause in the attempt's wait."),
            _c("end", UTC_TS, "End of its last piece."),
            _c(
                "seconds",
                F64,
                "Its total, seconds: less than end - start when other causes came in between.",
            ),
            _c("cause", STR, "fair_share, fragmentation, capacity or other (`waitcause.CAUSES`)."),
        ),
    ),
)

SHARING = Artifact(
    "sharing",
    "sharing.json",
    "A sharing replay's own output: what the report's GPU sharing section and its figures show.",
    "`replay --out`, for a sharing policy (muxflow, dedicated, mps-naive)",
    fields=(
        Field("policy", "string", "The sharing policy."),
        Field(
            "metrics",
            "object",
            "Every sharing metric of the run, fractions 0-1 (docs/muxflow.md lists each key).",
        ),
        Field(
            "slowdown_hist",
            "object",
            "Histogram of ln(online latency slowdown) over shared online GPU-minutes: `bin` "
            "(its width), `index` (the bins with a count), `count`.",
        ),
        Field(
            "paper_side",
            "string",
            "Which of MuxFlow's published numbers the run stands beside: `before` (a cluster "
            "without sharing), `after` (MuxFlow deployed) or null (none). Files written before "
            "it was recorded lack it: read as the side their policy had then.",
            nullable=True,
            required=False,
        ),
        Field(
            "color",
            "string",
            "The policy's line colour in figures (null: matplotlib's cycle); read as "
            "`paper_side` is in older files.",
            nullable=True,
            required=False,
        ),
    ),
)

SHARING_TIMESERIES = Artifact(
    "sharing_timeseries",
    "sharing_timeseries.parquet",
    "A sharing replay's cluster means per simulated step (the report's day figure).",
    "`replay --out`, for a sharing policy",
    table=Table(
        "sharing_timeseries",
        "One row per step of the simulation (`step_minutes`); utilization, SM activity and "
        "memory are fractions 0-1 of a GPU.",
        (
            _c("minute", F64, "Start of the step, minutes since the start of the simulation."),
            _c("util_online", F64, "Mean GPU utilization of the online GPUs."),
            _c("sm_online", F64, "Mean SM activity of the online GPUs."),
            _c("mem_online", F64, "Mean memory used on the online GPUs (of capacity)."),
            _c("util_all", F64, "Mean GPU utilization of all GPUs (online and training-only)."),
            _c("sm_all", F64, "Mean SM activity of all GPUs."),
            _c("mem_all", F64, "Mean memory used on all GPUs."),
            _c("shared_gpus", I64, "Online GPUs running offline work."),
            _c("slowdown_mean", F64, "Mean online latency slowdown on shared GPUs (1: none)."),
            _c("slo_violations", I64, "Online GPUs over their latency SLO."),
            _c("online_down", I64, "Online GPUs down (an offline error's outage)."),
            _c("running_jobs", I64, "Offline jobs running."),
            _c("pending_jobs", I64, "Offline jobs waiting."),
        ),
    ),
)

ARTIFACTS: dict[str, Artifact] = {
    a.name: a for a in (REPLAY_SETTINGS, VC_QUOTAS, WAITING, SHARING, SHARING_TIMESERIES)
}
