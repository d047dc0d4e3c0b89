"""Interference between two workloads sharing one GPU: measured data, a latent model and the
predictor MuxFlow's matcher uses.

Data. Gavel (stanford-futuredata/gavel, MIT) measured the throughput of 26 DL training job types
alone and in every colocated pair on V100, P100 and K80. A pair ``(j, k)`` gives ``r_{j|k}``: the
throughput of ``j`` beside ``k`` divided by ``j`` alone (its *normalized throughput*); zero means
the pair did not fit in memory. Lucid (S-Lab licence, non-commercial) measured 1,388 pairs of
small jobs; it is read only by tests, to validate, and nothing fitted on it is shipped.

Two models, both over the *log-slowdown* ``y = -ln r`` (0 = no interference):

- **Latent (ground truth of the simulator).** ``y_{j|k} = s_j * p_k``: each workload has a
  *sensitivity* ``s`` (how much it suffers) and a *pressure* ``p`` (how much it hurts others).
  Fitted on all feasible Gavel pairs by alternating least squares; the residual spread
  ``sigma_eps`` (of ``y``, i.e. of ``ln r``) becomes a per-pair random deviation in the simulator.
- **Predictor (what the scheduler knows).** A workload is profiled against *probe* workloads:
  ``a = y_{w|P}`` (its slowdown beside probe P), ``b = y_{P|w}`` (P's slowdown beside it) and
  ``x = y_{P|P}`` (the probe's self-interference). For a pair never measured,
  ``ln y_hat_{j|k} = mean over probes P of (t0 + t1 ln a_j + t2 ln b_k + t3 ln x_P)``; ``theta``
  is fitted on Gavel only. Because the features are dataset-independent, Gavel's ``theta``
  applies unchanged to Lucid's workloads: that is the validation. (MuxFlow's own predictor is a
  neural network whose inputs and accuracy are NOT FOUND; this log-linear model is our choice:
  four coefficients that transfer across datasets.)

``calibrate(GAVEL_JSON)`` derives ``philly_analyze/data/muxflow_interference.json`` (a test
checks the shipped file is exactly that; maintainers regenerate it with ``python -m
bench.muxflow_predictor calibrate GAVEL_JSON OUT``: the package never writes its data folder).
"""

from __future__ import annotations

import ast
import json
from dataclasses import dataclass
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np

from philly_analyze.errors import UserError

#: Floor of the log-slowdown: pairs measured faster than solo (noise) count as this.
Y_FLOOR = 0.01
#: Floor of the normalized throughput before taking logs (a pair measured at ~0).
R_FLOOR = 1e-3
#: GPU types calibrated in the shipped file, in Gavel's spelling.
GPU_TYPES = ("v100", "p100", "k80")
DATA_FILE = "muxflow_interference.json"


@dataclass(frozen=True)
class PairData:
    """Measured colocation pairs of one dataset: ordered pairs (j beside k) -> r_{j|k}."""

    names: tuple[str, ...]
    j: np.ndarray  # int, the workload whose throughput was measured
    k: np.ndarray  # int, its partner
    r: np.ndarray  # float, normalized throughput of j beside k
    infeasible: int = 0  # pairs recorded with zero throughput (did not fit), excluded

    @property
    def n(self) -> int:
        return len(self.names)

    def subset(self, mask: np.ndarray) -> PairData:
        return PairData(self.names, self.j[mask], self.k[mask], self.r[mask], self.infeasible)


def log_slowdown(r: np.ndarray) -> np.ndarray:
    """``y = -ln r`` floored at ``Y_FLOOR`` (measurements slightly above solo are noise)."""
    return np.maximum(-np.log(np.clip(r, R_FLOOR, None)), Y_FLOOR)


def load_gavel_pairs(path: Path, gpu: str = "v100") -> PairData:
    """Single-GPU colocation pairs of one GPU type from a Gavel throughputs JSON file."""
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, json.JSONDecodeError) as e:
        raise UserError(f"cannot read Gavel throughputs: {e}", source=str(path)) from e
    if gpu not in data:
        raise UserError(f"no GPU type {gpu!r} (has {sorted(data)})", source=str(path))
    table = data[gpu]
    keys = [k for k in table if ast.literal_eval(k)[1] == 1]
    index = {k: i for i, k in enumerate(keys)}
    js, ks, rs, infeasible = [], [], [], 0
    for key in keys:
        solo = float(table[key]["null"])
        for partner, val in table[key].items():
            if partner == "null" or partner not in index:
                continue
            if float(val[0]) <= 0.0 or solo <= 0.0:
                infeasible += 1
                continue
            js.append(index[key])
            ks.append(index[partner])
            rs.append(float(val[0]) / solo)
    names = tuple(ast.literal_eval(k)[0] for k in keys)
    return PairData(names, np.array(js), np.array(ks), np.array(rs), infeasible)


def load_lucid_pairs(colocate_csv: Path) -> PairData:
    """Lucid's colocated pairs (validation only: S-Lab licence, nothing derived is shipped).
    A workload is (model, dataset, batch size, amp); both directions of each row are kept."""
    import pandas as pd

    c = pd.read_csv(colocate_csv, index_col=0)

    def key(side: str) -> pd.Series:
        return (
            c[f"model{side}"]
            + "/"
            + c[f"dataset{side}"]
            + "/"
            + c[f"batchsize{side}"].astype(str)
            + "/"
            + c[f"amp{side}"].astype(str)
        )

    k1, k2 = key("1"), key("2")
    names = tuple(sorted(set(k1) | set(k2)))
    idx = {n: i for i, n in enumerate(names)}
    j = np.concatenate([k1.map(idx).to_numpy(), k2.map(idx).to_numpy()])
    k = np.concatenate([k2.map(idx).to_numpy(), k1.map(idx).to_numpy()])
    r = np.concatenate([c["speed1"].to_numpy(float), c["speed2"].to_numpy(float)])
    # A self-pair row lists the same ordered pair twice: keep its first reading once.
    _, first = np.unique(j * len(names) + k, return_index=True)
    first.sort()
    return PairData(names, j[first], k[first], r[first])


def fit_latent(pairs: PairData, iters: int = 400) -> tuple[np.ndarray, np.ndarray]:
    """Fit ``y_{j|k} = s_j p_k`` by alternating least squares (closed-form updates).
    Scale is fixed so that the geometric means of s and p are equal."""
    y = log_slowdown(pairs.r)
    n = pairs.n
    s = np.full(n, 0.7)
    p = np.full(n, 0.7)
    for _ in range(iters):
        num = np.bincount(pairs.j, y * p[pairs.k], n)
        den = np.bincount(pairs.j, p[pairs.k] ** 2, n)
        s = np.where(den > 0, num / np.maximum(den, 1e-12), s)
        num = np.bincount(pairs.k, y * s[pairs.j], n)
        den = np.bincount(pairs.k, s[pairs.j] ** 2, n)
        p = np.where(den > 0, num / np.maximum(den, 1e-12), p)
    s = np.maximum(s, 1e-3)
    p = np.maximum(p, 1e-3)
    g = np.sqrt(np.exp(np.mean(np.log(p)) - np.mean(np.log(s))))
    return s * g, p / g


def latent_residual_sigma(pairs: PairData, s: np.ndarray, p: np.ndarray) -> float:
    """Standard deviation of ``y - s_j p_k`` over the pairs (the rank-1 misfit). In the
    simulator a pair's true ``ln r`` deviates from ``-s_j p_k`` by a draw of this spread."""
    y = log_slowdown(pairs.r)
    return float(np.std(y - s[pairs.j] * p[pairs.k]))


@dataclass(frozen=True)
class Triples:
    """One row per (pair j|k, probe P) with every measurement the probe predictor needs."""

    j: np.ndarray
    k: np.ndarray
    y: np.ndarray  # log-slowdown of j beside k (the target)
    a: np.ndarray  # y_{j|P}
    b: np.ndarray  # y_{P|k}
    x: np.ndarray  # y_{P|P}

    def design(self) -> np.ndarray:
        return np.column_stack(
            [np.ones(len(self.a)), np.log(self.a), np.log(self.b), np.log(self.x)]
        )

    def take(self, mask: np.ndarray) -> Triples:
        return Triples(*(getattr(self, f)[mask] for f in ("j", "k", "y", "a", "b", "x")))


def probe_triples(targets: PairData, profiles: PairData | None = None) -> Triples:
    """Features for each target pair ``j|k`` (j != k) from every probe P != j, k with the
    three profiling measurements present in ``profiles`` (default: ``targets`` itself)."""
    prof = profiles if profiles is not None else targets
    n = prof.n
    m = np.full((n, n), np.nan)
    m[prof.j, prof.k] = log_slowdown(prof.r)
    sel = targets.j != targets.k
    tj, tk = targets.j[sel], targets.k[sel]
    ty = log_slowdown(targets.r[sel])
    a = m[tj, :]  # rows: target pairs, columns: probes
    b = m[:, tk].T
    x = np.broadcast_to(np.diag(m), a.shape)
    ok = ~(np.isnan(a) | np.isnan(b) | np.isnan(x))
    probes = np.arange(n)
    ok &= (probes[None, :] != tj[:, None]) & (probes[None, :] != tk[:, None])
    row, col = np.nonzero(ok)
    return Triples(tj[row], tk[row], ty[row], a[row, col], b[row, col], x[row, col])


def fit_theta(t: Triples) -> np.ndarray:
    """Least-squares fit of ``ln y`` on ``(1, ln a, ln b, ln x)``."""
    theta, *_ = np.linalg.lstsq(t.design(), np.log(t.y), rcond=None)
    return theta


def predict_triples(theta: np.ndarray, t: Triples) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per target pair (averaging the probes' predictions of ln y): (j, k, r_hat)."""
    key = t.j.astype(np.int64) * 1_000_000 + t.k
    uniq, inv = np.unique(key, return_inverse=True)
    ln_y = np.bincount(inv, t.design() @ theta) / np.bincount(inv)
    return uniq // 1_000_000, uniq % 1_000_000, np.exp(-np.exp(ln_y))


def predictor_errors(theta: np.ndarray, targets: PairData, t: Triples) -> np.ndarray:
    """|r - r_hat| for every target pair the probes could predict."""
    pj, pk, r_hat = predict_triples(theta, t)
    truth = {(a, b): r for a, b, r in zip(targets.j, targets.k, targets.r, strict=True)}
    r = np.array([truth[(a, b)] for a, b in zip(pj, pk, strict=True)])
    return np.abs(r - r_hat)


def _pair_keys(pairs: PairData) -> np.ndarray:
    """An id per unordered pair: both directions of one measurement share it."""
    lo, hi = np.minimum(pairs.j, pairs.k), np.maximum(pairs.j, pairs.k)
    return lo.astype(np.int64) * pairs.n + hi


def heldout_errors(pairs: PairData, folds: int = 5, seed: int = 0) -> np.ndarray:
    """K-fold cross-validation over unordered pairs: theta is fitted on the training pairs'
    triples, then predicts each held-out pair (whose probes' profiling runs stay known, as a
    newly submitted workload's would after profiling). Returns |r - r_hat| per held-out pair."""
    rng = np.random.default_rng(seed)
    keys = _pair_keys(pairs)
    uniq = np.unique(keys[pairs.j != pairs.k])
    fold_of = dict(zip(uniq.tolist(), rng.integers(0, folds, len(uniq)).tolist(), strict=True))
    t = probe_triples(pairs)
    t_keys = np.minimum(t.j, t.k).astype(np.int64) * pairs.n + np.maximum(t.j, t.k)
    t_fold = np.array([fold_of[int(q)] for q in t_keys])
    errs = []
    for f in range(folds):
        theta = fit_theta(t.take(t_fold != f))
        errs.append(predictor_errors(theta, pairs, t.take(t_fold == f)))
    return np.concatenate(errs)


def leave_type_out_errors(pairs: PairData) -> np.ndarray:
    """Cold start: for each workload type w, fit theta without any target pair involving w,
    then predict w's pairs from its profiling runs alone. Returns |r - r_hat| per pair."""
    t = probe_triples(pairs)
    errs = []
    for w in range(pairs.n):
        involved = (t.j == w) | (t.k == w)
        if not involved.any():
            continue
        theta = fit_theta(t.take(~involved))
        errs.append(predictor_errors(theta, pairs, t.take(involved)))
    return np.concatenate(errs)


def error_summary(err: np.ndarray) -> dict[str, float]:
    """MAE, median and p90 of absolute errors in normalized throughput."""
    return {
        "pairs": len(err),
        "mae": round(float(np.mean(err)), 4),
        "median": round(float(np.median(err)), 4),
        "p90": round(float(np.quantile(err, 0.9)), 4),
    }


def calibrate(gavel_json: Path) -> dict[str, Any]:
    """Everything the simulator ships, fitted on one Gavel throughputs file."""
    out: dict[str, object] = {
        "source": (
            "stanford-futuredata/gavel (MIT): "
            f"scheduler/throughputs/{Path(gavel_json).name}, single-GPU colocated pairs"
        ),
        "generated_by": "philly_analyze.sim.sharing.interference.calibrate (python -m bench.muxflow_predictor calibrate)",
        "model": "y = -ln(normalized throughput); latent y_jk = s_j p_k; predictor "
        "ln y_hat = mean_P(t0 + t1 ln y_jP + t2 ln y_Pk + t3 ln y_PP)",
        "gpus": {},
    }
    gpus: dict[str, object] = {}
    for gpu in GPU_TYPES:
        pairs = load_gavel_pairs(gavel_json, gpu)
        s, p = fit_latent(pairs)
        theta = fit_theta(probe_triples(pairs))
        held = heldout_errors(pairs)
        cold = leave_type_out_errors(pairs)
        gpus[gpu] = {
            "types": list(pairs.names),
            "sensitivity": [round(float(v), 5) for v in s],
            "pressure": [round(float(v), 5) for v in p],
            "sigma_eps": round(latent_residual_sigma(pairs, s, p), 4),
            "theta": [round(float(v), 5) for v in theta],
            "pairs": len(pairs.r),
            "infeasible_pairs": pairs.infeasible,
            "heldout_5fold": error_summary(held),
            "leave_type_out": error_summary(cold),
        }
    out["gpus"] = gpus
    return out


@dataclass(frozen=True)
class Interference:
    """The shipped calibration for one GPU type (see ``calibrate``)."""

    gpu: str
    types: tuple[str, ...]
    sensitivity: np.ndarray
    pressure: np.ndarray
    sigma_eps: float
    theta: np.ndarray
    heldout: dict[str, float]

    def predictor_scale(self) -> tuple[float, float, float]:
        """The predictor written over latent profiles: profiling against every probe type P
        gives ``a_w = s_w p_P``, ``b_w = s_P p_w``, ``x_P = s_P p_P``, so the averaged prediction
        is ``y_hat_{j|k} = C s_j^t1 p_k^t2`` with ``C`` below. Returns (C, t1, t2)."""
        t0, t1, t2, t3 = (float(v) for v in self.theta)
        ls, lp = np.log(self.sensitivity), np.log(self.pressure)
        ln_c = t0 + t1 * lp.mean() + t2 * ls.mean() + t3 * (ls + lp).mean()
        return float(np.exp(ln_c)), t1, t2

    def predict_y(self, s_victim: np.ndarray, p_aggressor: np.ndarray) -> np.ndarray:
        """Predicted log-slowdown of a victim with sensitivity ``s`` beside pressure ``p``."""
        c, t1, t2 = self.predictor_scale()
        return c * np.power(s_victim, t1) * np.power(p_aggressor, t2)


@cache
def load_interference(gpu: str = "v100") -> Interference:
    """The calibration shipped in ``philly_analyze/data/muxflow_interference.json``."""
    text = resources.files("philly_analyze").joinpath("data", DATA_FILE).read_text()
    data = json.loads(text)["gpus"]
    if gpu not in data:
        raise UserError(f"no interference calibration for GPU type {gpu!r} (have {sorted(data)})")
    g = data[gpu]
    return Interference(
        gpu=gpu,
        types=tuple(g["types"]),
        sensitivity=np.array(g["sensitivity"], float),
        pressure=np.array(g["pressure"], float),
        sigma_eps=float(g["sigma_eps"]),
        theta=np.array(g["theta"], float),
        heldout=dict(g["heldout_5fold"]),
    )
