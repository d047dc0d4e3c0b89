"""Sampling the jobs: arrivals, VCs, users, sizes, final status, attempts, failures, run times.

Everything is vectorised with numpy and drawn from one ``numpy.random.Generator`` so the same
seed gives the same workload. Times are integer seconds from the window start (local midnight
of ``--start`` in the cluster's zone). The model (see ``calibration``):

1. Arrivals (``arrivals``): groups of jobs (single jobs, and sweeps from one user with the same
   VC and size) with the real arrivals' group sizes, hour-of-week rate and day factors; VCs by
   GPU bucket; a startup latency before the scheduler sees each job.
2. Per job: final status from P(status | size); failed attempts (unsuccessful jobs fail every
   attempt, others fail first with a per-bucket probability), each with a Table 7 reason from a
   sticky Markov chain per job and a runtime to failure from that reason's quantiles.
3. Final-attempt run times from the Pollux quantiles of the job's bucket, a factor per VC for
   its share of the GPU time, then three scale factors (passed and killed final attempts,
   failed attempts) solved on the sampled jobs so that the offered load and Table 6's GPU-time
   shares hold before scheduling.
4. Warm start: jobs of a lead-in before the window still running at its start are carried
   over (``_carry_over``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from philly_analyze.synth.arrivals import Arrivals, sample_arrivals
from philly_analyze.synth.calibration import (
    DEMAND_BUCKETS,
    FIG9_BUCKETS,
    Calibration,
    bucket_of,
    duration_quantile,
    rtf_seconds,
)
from philly_analyze.synth.cluster import SynthCluster

# The codes live in synth.codes (so synth.runtimes can use them without an import cycle);
# they are imported here too because most of synth takes them from this module.
from philly_analyze.synth.codes import (
    A_FAILED,
    A_KILLED,
    A_PASSED,
    FRAMEWORKS,
    KILLED,
    PASSED,
    UNSUCCESSFUL,
)
from philly_analyze.synth.runtimes import scale_durations, vc_factors


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
class JobPlan:
    """Jobs (sorted by submission) and their planned attempts (grouped by job, in order).

    A model of what each job will do, not the replay's ``Workload``: beside the jobs and their
    attempts (the part the scheduler needs, handed to it by ``schedule.replay_inputs``) it
    holds what the renderers need (status, failure reasons, frameworks, startup latency,
    withdrawals, the VCs' sizes)."""

    submit: np.ndarray  # int64 s from window start
    vc: np.ndarray  # int16 index into vc_names
    user: np.ndarray  # int32 index into user_names
    gpus: np.ndarray  # int32
    status: np.ndarray  # int8 PASSED/KILLED/UNSUCCESSFUL
    first_attempt: np.ndarray  # int64 index into the attempt arrays
    num_attempts: np.ndarray  # int32
    #: int64 s from submission until the scheduler sees the job (submission processing)
    startup: np.ndarray
    withdraw: np.ndarray  # int64 s after submit when a held job is killed unscheduled; -1 = no
    framework: np.ndarray  # int8 index into FRAMEWORKS
    att_job: np.ndarray  # int64
    att_idx: np.ndarray  # int32
    att_duration: np.ndarray  # int64 s
    att_outcome: np.ndarray  # int8 A_*
    att_reason: np.ndarray  # int16 index into calibration reasons, -1 for none
    vc_names: tuple[str, ...]
    user_names: tuple[str, ...]
    #: Nodes per VC (its guaranteed share of the cluster: quotas are proportional to them).
    vc_nodes: np.ndarray
    #: Scale factors solved in ``runtimes.scale_durations`` (for the manifest).
    scales: dict[str, float]
    #: The first ``carried`` jobs were submitted before the window and still running at its
    #: start (submit 0; only their remaining run is synthesized).
    carried: int = 0

    @property
    def num_jobs(self) -> int:
        """Jobs in the plan."""
        return len(self.submit)


def lead_in_seconds(cal: Calibration, window: Window) -> int:
    """Length of the lead-in before the window: the longest an attempt may run (the duration
    cap), so the jobs running at the window's start are those of a cluster in steady state."""
    if not cal.section("workload", "load").get("warm_start", True):
        return 0
    return int(attempt_cap(cal, window))


def attempt_cap(cal: Calibration, window: Window) -> float:
    """The longest an attempt may run: a share of the window, at most ``max_days``."""
    d = cal.section("workload", "durations")
    return float(min(d["max_days"] * 86400.0, d["max_fraction_of_window"] * window.seconds))


def sample_workload(
    cal: Calibration,
    cluster: SynthCluster,
    window: Window,
    num_jobs: int,
    rng: np.random.Generator,
) -> JobPlan:
    """Draw ``num_jobs`` jobs for ``cluster`` over ``window`` (module docstring): the window's
    submissions, plus the jobs of a lead-in still running at its start (carried over with
    submit = start = 0), thinned so the history holds exactly ``num_jobs`` jobs."""
    lead = lead_in_seconds(cal, window)
    n_lead = round(num_jobs * lead / window.seconds) if lead else 0
    span = lead + window.seconds
    segments = [(0, lead, n_lead)] if n_lead else []
    segments.append((lead, span, num_jobs))
    arr = sample_arrivals(
        cal, cluster, window.start_epoch - lead, span, window.timezone, segments, rng
    )
    full = _jobs(cal, cluster, arr, span, lead, attempt_cap(cal, window), rng)
    return _carry_over(cal, full, lead, num_jobs, rng)


def _jobs(
    cal: Calibration,
    cluster: SynthCluster,
    arr: Arrivals,
    span: int,
    lead: int,
    cap: float,
    rng: np.random.Generator,
) -> JobPlan:
    """Statuses, attempts, failures and run times of the arrivals (times from the lead-in's
    start; the offered load is over ``span`` seconds)."""
    wl = cal.section("workload")
    submit, vc, user, gpus = arr.submit, arr.vc, arr.user, arr.gpus
    vc_names, user_names = arr.vc_names, arr.user_names
    num_jobs = len(submit)
    # The order of the random draws below is part of the seed's meaning: the same seed gives
    # the same history only if statuses, attempts, durations and extras are drawn in turn.
    status, n_att, first_att, att_job, att_idx, outcome, reason = _attempts(cal, gpus, rng)
    failed = outcome == A_FAILED
    fin = ~failed
    raw = _raw_durations(cal, gpus, att_job, reason, fin, rng)
    canc = wl["cancel"]
    held = rng.random(num_jobs) < canc["withdrawn_share"]
    raw[fin] *= vc_factors(cal, raw, att_job, gpus, vc, fin, ~held)[vc[att_job[fin]]]
    duration, scales = scale_durations(
        cal, cluster, span, cap, raw, att_job, outcome, gpus, status, submit, ~held, lead
    )
    withdraw, startup, framework = _job_extras(cal, held, rng)
    status = np.where(held, KILLED, status).astype(np.int8)
    return JobPlan(
        submit=submit.astype(np.int64),
        vc=vc,
        user=user,
        gpus=gpus,
        status=status,
        first_attempt=first_att,
        num_attempts=n_att,
        startup=startup,
        withdraw=withdraw,
        framework=framework,
        att_job=att_job.astype(np.int64),
        att_idx=att_idx,
        att_duration=duration,
        att_outcome=outcome,
        att_reason=reason,
        vc_names=vc_names,
        user_names=user_names,
        vc_nodes=np.asarray(wl["vcs"]["nodes"], dtype=np.int64),
        scales=scales,
    )


def _attempts(
    cal: Calibration, gpus: np.ndarray, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Each job's status and attempts: (status, attempts per job, first attempt of each job,
    job of each attempt, index within its job, outcome, Table 7 reason or -1)."""
    num_jobs = len(gpus)
    size_index = np.searchsorted(cal.sizes, gpus)
    cum = np.cumsum(cal.status_probs[size_index], axis=1)
    status = (rng.random(num_jobs)[:, None] > cum).sum(axis=1).clip(0, 2).astype(np.int8)
    n_fail = _failure_counts(cal, gpus, status, rng)
    # Unsuccessful jobs fail every attempt; the others add a last, passed or killed, attempt.
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
    return status, n_att, first_att, att_job, att_idx, outcome, reason


def _raw_durations(
    cal: Calibration,
    gpus: np.ndarray,
    att_job: np.ndarray,
    reason: np.ndarray,
    fin: np.ndarray,
    rng: np.random.Generator,
) -> np.ndarray:
    """Raw durations: runtime to failure for failed attempts, Pollux shape for final ones
    (``fin``), before the per-VC and load scale factors."""
    total = len(att_job)
    raw = np.empty(total)
    z = rng.standard_normal(total)
    for r, rs in enumerate(cal.reasons):
        sel = reason == r
        if sel.any():
            raw[sel] = rtf_seconds(rs, z[sel])
    raw[fin] = duration_quantile(
        cal, bucket_of(gpus[att_job[fin]], FIG9_BUCKETS), rng.random(int(fin.sum()))
    )
    return raw


def _job_extras(
    cal: Calibration, held: np.ndarray, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per job: when a held job is withdrawn (-1: never), its startup latency, its framework."""
    num_jobs = len(held)
    wl = cal.section("workload")
    canc = wl["cancel"]
    # The draws of the user-patience model of the retired built-in scheduler (issue 15), made
    # and dropped so that a seed still gives the same history.
    rng.random(num_jobs)
    rng.standard_normal(num_jobs)
    hold = np.exp(np.log(canc["withdraw_median_minutes"] * 60) + rng.standard_normal(num_jobs))
    withdraw = np.where(held, np.maximum(hold, 5).astype(np.int64), -1)
    su = wl["startup"]
    startup = np.round(
        su["median_seconds"] * np.exp(su["sigma"] * rng.standard_normal(num_jobs))
    ).astype(np.int64)
    fw = cal.section("frameworks")["shares"]
    fw_p = np.array([fw[f] for f in FRAMEWORKS], dtype=float)
    framework = rng.choice(len(FRAMEWORKS), size=num_jobs, p=fw_p / fw_p.sum()).astype(np.int8)
    return withdraw, startup, framework


def _carry_over(
    cal: Calibration, full: JobPlan, lead: int, num_jobs: int, rng: np.random.Generator
) -> JobPlan:
    """The window's workload from one sampled over lead-in + window: lead-in jobs still running
    at the window's start (attempts back to back from their submission, as on a cluster that
    keeps up) are carried over with submit 0 and only their remaining run (the rest of the
    attempt in progress, then the later attempts); other lead-in jobs are dropped; as many of
    the window's own submissions, chosen at random, are dropped so ``num_jobs`` remain."""
    if lead == 0:
        return full
    sub = full.submit
    dur = full.att_duration
    in_lead = sub < lead
    running, end, carried = _running_at_window_start(full, lead, num_jobs)
    main = np.flatnonzero(~in_lead)
    main = np.sort(rng.choice(main, size=num_jobs - len(carried), replace=False))
    jobs = np.concatenate([carried, main])
    # Attempts kept: from the one in progress at the lead-in's end (carried), all (main).
    keep = np.zeros(len(dur), dtype=bool)
    keep[np.isin(full.att_job, main)] = True
    keep |= running & np.isin(full.att_job, carried)
    att_dur = np.where(running & keep, np.minimum(dur, end - lead), dur)
    asel = np.flatnonzero(keep)
    new_of_job = np.full(full.num_jobs, -1, dtype=np.int64)
    new_of_job[jobs] = np.arange(len(jobs))
    att_job = new_of_job[full.att_job[asel]]
    order = np.argsort(att_job, kind="stable")
    asel, att_job = asel[order], att_job[order]
    n_att = np.bincount(att_job, minlength=len(jobs)).astype(np.int32)
    first = np.concatenate([[0], np.cumsum(n_att)[:-1]]).astype(np.int64)
    is_carried = np.arange(len(jobs)) < len(carried)
    return JobPlan(
        submit=np.where(is_carried, 0, sub[jobs] - lead).astype(np.int64),
        vc=full.vc[jobs],
        user=full.user[jobs],
        gpus=full.gpus[jobs],
        status=full.status[jobs],
        first_attempt=first,
        num_attempts=n_att,
        startup=np.where(is_carried, 0, full.startup[jobs]),
        withdraw=full.withdraw[jobs],
        framework=full.framework[jobs],
        att_job=att_job,
        att_idx=(np.arange(len(asel)) - first[att_job]).astype(np.int32),
        att_duration=att_dur[asel].astype(np.int64),
        att_outcome=full.att_outcome[asel],
        att_reason=full.att_reason[asel],
        vc_names=full.vc_names,
        user_names=full.user_names,
        vc_nodes=full.vc_nodes,
        scales=full.scales,
        carried=len(carried),
    )


def _running_at_window_start(
    full: JobPlan, lead: int, num_jobs: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(attempts of lead-in jobs running at the window's start, each attempt's end, the jobs
    carried over), with attempts back to back from each job's submission."""
    sub = full.submit
    dur = full.att_duration
    cum = np.cumsum(dur)
    before = cum[full.first_attempt] - dur[full.first_attempt]
    end = sub[full.att_job] + cum - before[full.att_job]
    in_lead = sub < lead
    running = in_lead[full.att_job] & (end > lead) & (full.withdraw[full.att_job] < 0)
    carried = np.unique(full.att_job[running])
    # Small runs: at most a quarter of the jobs are carried over (the longest-running kept).
    room = num_jobs // 4
    if len(carried) > room:
        carried = np.sort(carried[np.argsort(-end[full.first_attempt[carried]])][:room])
    return running, end, carried


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
