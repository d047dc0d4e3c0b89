"""Sampling the jobs: arrivals, VCs, users, sizes, final status, attempts, failures, run times.

Everything is vectorised with numpy and drawn from one ``numpy.random.Generator`` so the same
seed gives the same workload. Times are integer seconds from the window start (local midnight
of ``--start`` in the cluster's zone). The model (see ``calibration``):

1. Arrivals: groups of jobs (single jobs, and hyper-parameter sweeps from one user with the same
   VC and size) at times drawn from the Pollux hour-of-day x day-of-week profile over the window.
2. Per job: final status from P(status | size); failed attempts (unsuccessful jobs fail every
   attempt, others fail first with a per-bucket probability), each with a Table 7 reason from a
   sticky Markov chain per job and a runtime to failure from that reason's quantiles.
3. Final-attempt run times from the Pollux quantiles of the job's bucket, then three scale
   factors (passed and killed final attempts, failed attempts) solved on the sampled jobs so
   that the offered load and Table 6's GPU-time shares hold exactly before scheduling.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from philly_analyze.synth.calibration import (
    DEMAND_BUCKETS,
    FIG9_BUCKETS,
    Calibration,
    bucket_of,
    duration_quantile,
    rtf_seconds,
)
from philly_analyze.synth.cluster import SynthCluster

PASSED, KILLED, UNSUCCESSFUL = 0, 1, 2
#: Attempt outcomes (codes): the job statuses' last attempts, plus failed.
A_PASSED, A_KILLED, A_FAILED = 0, 1, 2
FRAMEWORKS = ("cntk", "tensorflow", "pytorch")


@dataclass(frozen=True)
class Window:
    """The simulated period: ``days`` from local midnight of ``start`` in ``timezone``."""

    start_epoch: int
    seconds: int
    timezone: str

    @classmethod
    def from_date(cls, start: str, days: float, timezone: str) -> Window:
        """From local midnight of ``start`` to the same wall-clock time ``days`` later (a day
        with a clock change lasts 23 or 25 hours)."""
        naive = pd.Timestamp(start)
        t0 = naive.tz_localize(timezone)
        t1 = (naive + pd.Timedelta(days=days)).tz_localize(
            timezone, ambiguous=True, nonexistent="shift_forward"
        )
        return cls(int(t0.timestamp()), int((t1 - t0).total_seconds()), timezone)


@dataclass
class Workload:
    """Jobs (sorted by submission) and their planned attempts (grouped by job, in order)."""

    submit: np.ndarray  # int64 s from window start
    vc: np.ndarray  # int16 index into vc_names
    user: np.ndarray  # int32 index into user_names
    gpus: np.ndarray  # int32
    status: np.ndarray  # int8 PASSED/KILLED/UNSUCCESSFUL
    first_attempt: np.ndarray  # int64 index into the attempt arrays
    num_attempts: np.ndarray  # int32
    patience: np.ndarray  # int64 s; -1 = waits forever
    withdraw: np.ndarray  # int64 s after submit when a held job is killed unscheduled; -1 = no
    framework: np.ndarray  # int8 index into FRAMEWORKS
    att_job: np.ndarray  # int64
    att_idx: np.ndarray  # int32
    att_duration: np.ndarray  # int64 s
    att_outcome: np.ndarray  # int8 A_*
    att_reason: np.ndarray  # int16 index into calibration reasons, -1 for none
    vc_names: tuple[str, ...]
    user_names: tuple[str, ...]
    #: Scale factors solved in ``_scale_durations`` (for the manifest).
    scales: dict[str, float]

    @property
    def num_jobs(self) -> int:
        return len(self.submit)


def hex_names(rng: np.random.Generator, n: int) -> tuple[str, ...]:
    """``n`` distinct 6-hex-digit names, like the trace's hashed VCs and users."""
    out: list[str] = []
    seen: set[int] = set()
    while len(out) < n:
        for v in rng.integers(0, 16**6, size=n * 2):
            if int(v) not in seen and len(out) < n:
                seen.add(int(v))
                out.append(f"{int(v):06x}")
    return tuple(out)


def sample_workload(
    cal: Calibration,
    cluster: SynthCluster,
    window: Window,
    num_jobs: int,
    rng: np.random.Generator,
) -> Workload:
    """Draw ``num_jobs`` jobs for ``cluster`` over ``window`` (module docstring)."""
    wl = cal.section("workload")
    groups = _groups(wl["arrivals"], num_jobs, rng)
    g = len(groups)
    # Per group: VC, user, size, time.
    shares = np.asarray(wl["vcs"]["job_shares"], dtype=float)
    shares /= shares.sum()
    vc_names = hex_names(rng, len(shares))
    n_users = max(
        len(shares),
        round(
            wl["users"]["users_at_full_scale"] * (num_jobs / wl["users"]["full_scale_jobs"]) ** 0.5
        ),
    )
    users_per_vc = np.maximum(1, np.floor(shares * (n_users - len(shares)) + 1).astype(int))
    user_names = hex_names(rng, int(users_per_vc.sum()))
    user_base = np.concatenate([[0], np.cumsum(users_per_vc)[:-1]])
    g_vc = rng.choice(len(shares), size=g, p=shares)
    # Users of a VC are Zipf-weighted (a few heavy users): rank r has weight 1/r.
    u_rank = np.empty(g, dtype=np.int64)
    for v in np.unique(g_vc):
        sel = g_vc == v
        w = 1.0 / np.arange(1, users_per_vc[v] + 1)
        u_rank[sel] = rng.choice(users_per_vc[v], size=int(sel.sum()), p=w / w.sum())
    g_user = user_base[g_vc] + u_rank
    g_size = _sizes(cal, cluster, g, rng)
    g_time = _arrival_times(wl["arrivals"], window, g, rng)
    # Expand groups to jobs.
    job_group = np.repeat(np.arange(g), groups)
    first = np.concatenate([[0], np.cumsum(groups)[:-1]])
    offset = rng.uniform(0, wl["arrivals"]["burst_spread_seconds"], size=num_jobs)
    offset[first] = 0.0
    submit = np.minimum(g_time[job_group] + offset.astype(np.int64), window.seconds - 1)
    order = np.argsort(submit, kind="stable")
    submit = submit[order]
    job_group = job_group[order]
    vc = g_vc[job_group].astype(np.int16)
    user = g_user[job_group].astype(np.int32)
    gpus = g_size[job_group].astype(np.int32)

    size_index = np.searchsorted(cal.sizes, gpus)
    cum = np.cumsum(cal.status_probs[size_index], axis=1)
    status = (rng.random(num_jobs)[:, None] > cum).sum(axis=1).clip(0, 2).astype(np.int8)
    n_fail = _failure_counts(cal, gpus, status, rng)
    n_att = np.where(status == UNSUCCESSFUL, n_fail, n_fail + 1).astype(np.int32)
    first_att = np.concatenate([[0], np.cumsum(n_att)[:-1]]).astype(np.int64)
    total = int(n_att.sum())
    att_job = np.repeat(np.arange(num_jobs), n_att)
    att_idx = (np.arange(total) - first_att[att_job]).astype(np.int32)
    is_last = att_idx == n_att[att_job] - 1
    outcome = np.full(total, A_FAILED, dtype=np.int8)
    st_last = status[att_job[is_last]]
    outcome[is_last] = np.where(
        st_last == PASSED, A_PASSED, np.where(st_last == KILLED, A_KILLED, A_FAILED)
    )
    failed = outcome == A_FAILED
    reason = np.full(total, -1, dtype=np.int16)
    reason[failed] = _reasons(cal, gpus[att_job[failed]], att_idx[failed], rng)
    # Raw durations: runtime to failure for failed attempts, Pollux shape for final ones.
    raw = np.empty(total)
    z = rng.standard_normal(total)
    for r, rs in enumerate(cal.reasons):
        sel = reason == r
        if sel.any():
            raw[sel] = rtf_seconds(rs, z[sel])
    fin = ~failed
    raw[fin] = duration_quantile(
        cal, bucket_of(gpus[att_job[fin]], FIG9_BUCKETS), rng.random(int(fin.sum()))
    )
    canc = wl["cancel"]
    held = rng.random(num_jobs) < canc["withdrawn_share"]
    duration, scales = _scale_durations(
        cal, cluster, window, raw, att_job, outcome, gpus, status, submit, ~held
    )
    impatient = rng.random(num_jobs) < canc["impatient_share"]
    pat = np.exp(
        np.log(canc["patience_median_minutes"] * 60)
        + canc["patience_sigma"] * rng.standard_normal(num_jobs)
    )
    patience = np.where(impatient, np.maximum(pat, 60).astype(np.int64), -1)
    hold = np.exp(np.log(canc["withdraw_median_minutes"] * 60) + rng.standard_normal(num_jobs))
    withdraw = np.where(held, np.maximum(hold, 5).astype(np.int64), -1)
    status = np.where(held, KILLED, status).astype(np.int8)
    fw = cal.section("frameworks")["shares"]
    fw_p = np.array([fw[f] for f in FRAMEWORKS], dtype=float)
    framework = rng.choice(len(FRAMEWORKS), size=num_jobs, p=fw_p / fw_p.sum()).astype(np.int8)
    return Workload(
        submit=submit.astype(np.int64),
        vc=vc,
        user=user,
        gpus=gpus,
        status=status,
        first_attempt=first_att,
        num_attempts=n_att,
        patience=patience,
        withdraw=withdraw,
        framework=framework,
        att_job=att_job.astype(np.int64),
        att_idx=att_idx,
        att_duration=duration,
        att_outcome=outcome,
        att_reason=reason,
        vc_names=vc_names,
        user_names=user_names,
        scales=scales,
    )


def _groups(arr: dict, num_jobs: int, rng: np.random.Generator) -> np.ndarray:
    """Group sizes (1 = a single job, more = a sweep), summing to ``num_jobs``, shuffled."""
    in_bursts = round(num_jobs * arr["burst_share"])
    mean_extra = max(arr["burst_mean_jobs"] - 2, 0.0)
    sizes: list[np.ndarray] = []
    left = in_bursts
    while left >= 2:
        s = 2 + rng.geometric(1.0 / (1.0 + mean_extra), size=max(1, left // 2)) - 1
        s = s[np.cumsum(s) <= left]
        if len(s) == 0:
            s = np.array([left])
        sizes.append(s)
        left -= int(s.sum())
    bursts = np.concatenate(sizes) if sizes else np.zeros(0, dtype=np.int64)
    singles = np.ones(num_jobs - int(bursts.sum()), dtype=np.int64)
    out = np.concatenate([singles, bursts]).astype(np.int64)
    return out[rng.permutation(len(out))]


def _sizes(cal: Calibration, cluster: SynthCluster, n: int, rng: np.random.Generator) -> np.ndarray:
    """GPU counts; sizes the cluster cannot hold well (over half of its 8-GPU servers' GPUs)
    are left out and the rest renormalised."""
    big = int(cluster.gpus[cluster.gpus == cluster.largest].sum())
    ok = cal.sizes <= max(cluster.largest, big // 2)
    p = np.where(ok, cal.size_probs, 0.0)
    return cal.sizes[rng.choice(len(p), size=n, p=p / p.sum())]


def _arrival_times(arr: dict, window: Window, n: int, rng: np.random.Generator) -> np.ndarray:
    """Times (s) from the hour-of-day x day-of-week intensity in the window's zone."""
    hours = -(-window.seconds // 3600)
    starts = window.start_epoch + 3600 * np.arange(hours)
    local = pd.DatetimeIndex(pd.to_datetime(starts, unit="s", utc=True)).tz_convert(window.timezone)
    w = (
        np.asarray(arr["hour_of_day"])[local.hour]
        * np.asarray(arr["day_of_week"])[local.day_of_week]
    )
    # The last slot may be partial.
    w[-1] *= (window.seconds - 3600 * (hours - 1)) / 3600
    slot = rng.choice(hours, size=n, p=w / w.sum())
    t = slot * 3600 + rng.integers(0, 3600, size=n)
    return np.minimum(t, window.seconds - 1).astype(np.int64)


def _failure_counts(
    cal: Calibration, gpus: np.ndarray, status: np.ndarray, rng: np.random.Generator
) -> np.ndarray:
    """Failed attempts per job (retries model, calibration docstring)."""
    n = len(gpus)
    p = 1.0 / (1.0 + cal.extra_failures_mean)
    extra = rng.geometric(p, size=n) - 1
    b = bucket_of(gpus, FIG9_BUCKETS)
    fails_first = rng.random(n) < cal.fail_first_prob[b]
    k = np.where(status == UNSUCCESSFUL, 1 + extra, np.where(fails_first, 1 + extra, 0))
    cap = int(cal.section("retries")["max_attempts"])
    return np.minimum(k, np.where(status == UNSUCCESSFUL, cap, cap - 1)).astype(np.int32)


def _reasons(
    cal: Calibration, gpus: np.ndarray, att_idx: np.ndarray, rng: np.random.Generator
) -> np.ndarray:
    """A reason per failed attempt (attempts of a job are consecutive, in order)."""
    d = bucket_of(gpus, DEMAND_BUCKETS)
    n = len(gpus)
    out = np.empty(n, dtype=np.int16)
    r_n = len(cal.reasons)
    cmix = np.cumsum(cal.reason_mix, axis=1)
    cfresh = np.cumsum(cal.reason_fresh, axis=1)
    u = rng.random(n)
    keep = rng.random(n)
    first = att_idx == 0
    out[first] = np.minimum((u[first, None] > cmix[d[first]]).sum(axis=1), r_n - 1)
    # Later failures depend on the previous one: walk attempt positions in order.
    pos = np.flatnonzero(~first)
    for k in range(1, int(att_idx.max(initial=0)) + 1):
        sel = pos[att_idx[pos] == k]
        if len(sel) == 0:
            continue
        prev = out[sel - 1]
        fresh = np.minimum((u[sel, None] > cfresh[d[sel]]).sum(axis=1), r_n - 1)
        out[sel] = np.where(keep[sel] < cal.reason_repeat[prev], prev, fresh)
    return out


def _scale_durations(
    cal: Calibration,
    cluster: SynthCluster,
    window: Window,
    raw: np.ndarray,
    att_job: np.ndarray,
    outcome: np.ndarray,
    gpus: np.ndarray,
    status: np.ndarray,
    submit: np.ndarray,
    runs: np.ndarray,
) -> tuple[np.ndarray, dict[str, float]]:
    """Scale raw run times so the offered GPU time is the target load and Table 6's GPU-time
    shares hold among the jobs that will finish inside the window.

    Three factors: passed final attempts, killed final attempts, failed attempts (all jobs).
    Jobs that cannot finish in the window (their run time from submission passes its end) are
    left out of the shares, as an analysis of the output must leave them out (long killed jobs
    would otherwise be under-represented). Solved by damped fixed-point iteration; ``runs``
    masks the jobs that will be scheduled at all."""
    d = cal.section("workload", "durations")
    share = cal.section("status", "gpu_time_pct")
    s = np.array([share["passed"], share["killed"], share["unsuccessful"]]) / 100.0
    s /= s.sum()
    load = cal.section("workload", "load")["offered_load"]
    target = load * cluster.total_gpus * window.seconds
    cap = min(d["max_days"] * 86400.0, d["max_fraction_of_window"] * window.seconds)
    floor_fin = float(d["min_seconds"])
    floor_fail = float(cal.section("failures")["min_seconds"])
    floors = np.where(outcome == A_FAILED, floor_fail, floor_fin)
    live = runs[att_job]
    n = gpus[att_job].astype(float) * live
    jst = status[att_job]
    cls = np.where(outcome == A_FAILED, 2, outcome)  # 0 passed final, 1 killed final, 2 failed
    f = np.ones(3)

    def durations(f: np.ndarray) -> np.ndarray:
        return np.clip(raw * f[cls], floors, cap)

    for _ in range(60):
        gt = n * durations(f)
        f *= target / max(gt.sum(), 1e-9)
        dur = durations(f)
        finish = submit + np.bincount(att_job, weights=dur, minlength=len(submit))
        done = (finish <= window.seconds)[att_job] & live
        by_status = np.bincount(jst[done], weights=(n * dur)[done], minlength=3)
        if (by_status <= 0).any():
            break
        adj = (s / (by_status / by_status.sum())) ** 0.8
        f *= adj
        # Small windows cannot always meet the shares: keep the factors within plausible
        # ratios (killed runs 0.5-10x passed ones, failures 0.1-10x) rather than degenerate.
        f[1] = np.clip(f[1], 0.5 * f[0], 10 * f[0])
        f[2] = np.clip(f[2], 0.1 * f[0], 10 * f[0])
        if np.abs(adj - 1).max() < 2e-4:
            break
    f *= target / max((n * durations(f)).sum(), 1e-9)
    dur = durations(f)
    scales = {"passed_final": float(f[0]), "killed_final": float(f[1]), "failed": float(f[2])}
    return np.round(dur).astype(np.int64), scales
