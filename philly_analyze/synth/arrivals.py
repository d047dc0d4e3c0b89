"""When jobs arrive, in which groups, from which VC and user, asking for how many GPUs.

The model (numbers in ``data/synth_calibration.toml``, derived from real Philly arrivals by
``synth/realfit.py``):

- Jobs come in **groups**: one user submitting one or more jobs of the same size seconds apart
  (a sweep). Group sizes follow the real arrivals' group-size shares of the job's GPU bucket
  (uniform over the integers of each bin); the gaps inside a group follow the real gaps'
  quantiles. A group's GPU count is drawn so that the *jobs* keep the calibrated size mix
  (``Calibration.size_probs``): P(group of s GPUs) is proportional to P(s) / mean group size.
- **Group starts** follow the real hour-of-week rate (Pacific wall-clock, in the window's
  zone) times a **day factor** with the real days' factor quantiles and lag-1 correlation (a
  Gaussian-copula AR(1)): busy days and quiet days, in runs, as on Philly.
- A group's **VC** is drawn from P(VC | GPU bucket) of the Pollux job list (large jobs come
  from a few VCs), its **user** among the VC's users (Zipf-weighted: a few heavy users).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import stats

from philly_analyze.synth.calibration import FIG9_BUCKETS, Calibration, bucket_of, cdf_inverse
from philly_analyze.synth.cluster import SynthCluster
from philly_analyze.synth.realfit import DAY_QUANTILES


@dataclass
class Arrivals:
    """Jobs in submission order: submit (s from the window start), VC, user, GPUs."""

    submit: np.ndarray
    vc: np.ndarray
    user: np.ndarray
    gpus: np.ndarray
    vc_names: tuple[str, ...]
    user_names: tuple[str, ...]


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


def group_size_law(arr: dict, bucket: int) -> tuple[np.ndarray, np.ndarray]:
    """Group sizes 1..max and their probabilities for GPU bucket ``bucket``: each bin's share
    spread evenly over its integers."""
    edges = list(arr["group_size_bins"])
    shares = np.asarray(arr["group_size_shares"][bucket], dtype=float)
    top = edges[-1]
    values = np.arange(1, top + 1)
    p = np.zeros(top)
    for k, share in enumerate(shares):
        lo = edges[k]
        hi = edges[k + 1] if k + 2 < len(edges) else top + 1
        p[lo - 1 : hi - 1] = share / (hi - lo)
    return values, p / p.sum()


def vc_job_shares(cal: Calibration) -> np.ndarray:
    """Each VC's share of all jobs implied by P(VC | bucket) and the size mix."""
    sh = np.asarray(cal.section("workload", "vcs")["bucket_shares"], dtype=float)
    pb = np.bincount(bucket_of(cal.sizes, FIG9_BUCKETS), weights=cal.size_probs, minlength=4)
    return sh @ pb


def sample_arrivals(
    cal: Calibration,
    cluster: SynthCluster,
    start_epoch: int,
    seconds: int,
    timezone: str,
    segments: list[tuple[int, int, int]],
    rng: np.random.Generator,
) -> Arrivals:
    """Draw the arrivals of ``segments`` (from, to, jobs): exactly that many jobs submitted in
    each [from, to) of the period of ``seconds`` from ``start_epoch`` (module docstring)."""
    wl = cal.section("workload")
    arr = wl["arrivals"]
    parts = [_groups(cal, cluster, arr, n, rng) for _, _, n in segments]
    g_gpus = np.concatenate([p[0] for p in parts])
    counts = np.concatenate([p[1] for p in parts])
    g = len(counts)
    bucket_shares = np.asarray(wl["vcs"]["bucket_shares"], dtype=float)
    n_vc = bucket_shares.shape[0]
    vc_names = hex_names(rng, n_vc)
    g_bucket = bucket_of(g_gpus, FIG9_BUCKETS)
    g_vc = np.empty(g, dtype=np.int64)
    for b in range(len(FIG9_BUCKETS)):
        sel = g_bucket == b
        p = bucket_shares[:, b]
        g_vc[sel] = rng.choice(n_vc, size=int(sel.sum()), p=p / p.sum())
    # Users scale with the window's jobs (the last segment).
    g_user, user_names = _group_users(cal, wl["users"], g_vc, n_vc, segments[-1][2], rng)
    g_time = _group_starts(
        arr,
        start_epoch,
        seconds,
        timezone,
        [(lo, hi, len(p[1])) for (lo, hi, _), p in zip(segments, parts, strict=True)],
        rng,
    )
    job_group = np.repeat(np.arange(g), counts)
    first = np.concatenate([[0], np.cumsum(counts)[:-1]])
    gap = cdf_inverse(
        [[x, q] for x, q in zip(arr["group_gap_quantiles"], np.linspace(0, 1, 5), strict=True)],
        rng.random(len(job_group)),
    )
    gap[first] = 0.0
    # Offsets inside a group: cumulative gaps from its first job (kept inside its segment).
    cum = np.cumsum(gap)
    offset = cum - cum[first][job_group]
    seg = np.repeat(np.arange(len(segments)), [len(p[1]) for p in parts])[job_group]
    seg_end = np.array([hi for _, hi, _ in segments], dtype=np.int64)[seg]
    submit = np.minimum(g_time[job_group] + np.round(offset).astype(np.int64), seg_end - 1)
    order = np.argsort(submit, kind="stable")
    job_group = job_group[order]
    return Arrivals(
        submit=submit[order].astype(np.int64),
        vc=g_vc[job_group].astype(np.int16),
        user=g_user[job_group].astype(np.int32),
        gpus=g_gpus[job_group].astype(np.int32),
        vc_names=vc_names,
        user_names=user_names,
    )


def _group_users(
    cal: Calibration,
    users: dict,
    g_vc: np.ndarray,
    n_vc: int,
    window_jobs: int,
    rng: np.random.Generator,
) -> tuple[np.ndarray, tuple[str, ...]]:
    """Each group's user and the users' names: users scale with the square root of the
    window's jobs, each VC has users in proportion to its jobs, and within a VC rank r is
    drawn with weight r ** -zipf_exponent (a few heavy users)."""
    shares = vc_job_shares(cal)
    n_users = max(
        n_vc,
        round(users["users_at_full_scale"] * (window_jobs / users["full_scale_jobs"]) ** 0.5),
    )
    users_per_vc = np.maximum(1, np.floor(shares / shares.sum() * (n_users - n_vc) + 1).astype(int))
    user_names = hex_names(rng, int(users_per_vc.sum()))
    user_base = np.concatenate([[0], np.cumsum(users_per_vc)[:-1]])
    a = float(users["zipf_exponent"])
    u_rank = np.empty(len(g_vc), dtype=np.int64)
    for v in np.unique(g_vc):
        sel = g_vc == v
        w = np.arange(1, users_per_vc[v] + 1, dtype=float) ** -a
        u_rank[sel] = rng.choice(users_per_vc[v], size=int(sel.sum()), p=w / w.sum())
    return user_base[g_vc] + u_rank, user_names


def _groups(
    cal: Calibration, cluster: SynthCluster, arr: dict, num_jobs: int, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    """GPUs and job count of each group; the counts sum to ``num_jobs``."""
    # Sizes larger than a share of the cluster's 8-GPU capacity are left out (renormalised).
    big = int(cluster.gpus[cluster.gpus == cluster.largest].sum())
    cut = float(cal.section("workload", "sizes")["largest_share_of_8gpu_capacity"])
    ok = cal.sizes <= max(cluster.largest, int(big * cut))
    p_job = np.where(ok, cal.size_probs, 0.0)
    p_job /= p_job.sum()
    b = bucket_of(cal.sizes, FIG9_BUCKETS)
    laws = [group_size_law(arr, k) for k in range(len(FIG9_BUCKETS))]
    mean = np.array([float(v @ p) for v, p in laws])
    p_group = p_job / mean[b]
    p_group /= p_group.sum()
    gpus_parts: list[np.ndarray] = []
    count_parts: list[np.ndarray] = []
    left = num_jobs
    while left > 0:
        n = max(16, int(left / float(p_group @ mean[b])) + 1)
        sz = cal.sizes[rng.choice(len(p_group), size=n, p=p_group)]
        bk = bucket_of(sz, FIG9_BUCKETS)
        c = np.empty(n, dtype=np.int64)
        for k, (vals, p) in enumerate(laws):
            sel = bk == k
            c[sel] = rng.choice(vals, size=int(sel.sum()), p=p)
        cut = int(np.searchsorted(np.cumsum(c), left))
        c, sz = c[: cut + 1], sz[: cut + 1]
        if c.sum() > left:  # the last group is cut to the jobs still needed
            c[-1] -= int(c.sum()) - left
        gpus_parts.append(sz)
        count_parts.append(c)
        left -= int(c.sum())
    return np.concatenate(gpus_parts), np.concatenate(count_parts)


def day_factors(arr: dict, days: int, rng: np.random.Generator) -> np.ndarray:
    """Per day, a factor on the group-start rate: a stationary Gaussian AR(1) ``z`` with the
    data file's lag-1 correlation, mapped through the real factors' quantiles (a Gaussian
    copula, so the real days' light upper and heavy lower tails are kept)."""
    rho = float(arr["day_factor_autocorr"])
    eps = rng.standard_normal(days)
    z = np.empty(days)
    z[0] = eps[0]
    for d in range(1, days):
        z[d] = rho * z[d - 1] + np.sqrt(1 - rho * rho) * eps[d]
    q = np.asarray(arr["day_factor_quantiles"], dtype=float)
    return np.interp(stats.norm.cdf(z), DAY_QUANTILES, q)


def _group_starts(
    arr: dict,
    start_epoch: int,
    seconds: int,
    timezone: str,
    segments: list[tuple[int, int, int]],
    rng: np.random.Generator,
) -> np.ndarray:
    """Times (s) from the hour-of-week rate x day factors, in the window's zone: per segment
    (from, to, groups), that many times inside [from, to), in segment order."""
    hours = -(-seconds // 3600)
    starts = start_epoch + 3600 * np.arange(hours)
    local = pd.DatetimeIndex(pd.to_datetime(starts, unit="s", utc=True)).tz_convert(timezone)
    naive = local.tz_localize(None)
    day = ((naive.normalize() - naive[0].normalize()).days).to_numpy()
    w = np.asarray(arr["hour_of_week"], dtype=float)[local.day_of_week * 24 + local.hour]
    w = w * day_factors(arr, int(day.max()) + 1, rng)[day]
    out = []
    for lo, hi, n in segments:
        # Hour slots overlapping [lo, hi), weighted by the part of each inside it.
        a, b = lo // 3600, -(-hi // 3600)
        slot_lo = np.maximum(np.arange(a, b) * 3600, lo)
        slot_hi = np.minimum(np.arange(a, b) * 3600 + 3600, hi)
        ws = w[a:b] * (slot_hi - slot_lo) / 3600
        k = rng.choice(b - a, size=n, p=ws / ws.sum())
        out.append(slot_lo[k] + (rng.random(n) * (slot_hi[k] - slot_lo[k])).astype(np.int64))
    t = np.concatenate(out) if out else np.zeros(0, dtype=np.int64)
    return np.minimum(t, seconds - 1).astype(np.int64)
