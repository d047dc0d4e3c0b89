"""The physics of one shared GPU, vectorised over GPUs: interference both ways, the effect of
the offline SM share and launch duty, and how the GPU's metrics compose.

Notation (per GPU, per minute): ``q`` online relative load, ``lam = floor + (1 - floor) q``,
``d`` offline launch duty (xCUDA kernel-launch limit), ``x`` offline SM share (MPS active
thread percentage), ``u_j, sm_j, m_j`` the offline job's solo busy fraction, SM fraction and
memory; ``Y_off[type, svc]``/``Y_on[svc, type]`` pair log-slowdowns at full load.

- offline interference ``r_int = exp(-Y_off lam)``; SM cap ``f = min(1, x / sm_j)^gamma``;
  progress rate ``d r_int f`` (solo minutes of work per minute);
- online latency slowdown ``sigma = exp(Y_on lam d x^delta + noise)``;
- utilization (nvidia-smi: any kernel running): kernels stretched by contention keep the GPU busy
  longer, so the offline busy fraction is ``d (1 - (1 - u_j) r_int f)`` (per iteration: kernel
  time K, gaps G; stretching K by c gives busy ``1 - (1 - u) r``), the online one ``min(1,
  u_o sigma)``, and the GPU's ``1 - (1 - a)(1 - b)`` (independent busy periods; validated on
  Lucid's measured pairs in the tests);
- SM activity adds the two sides' busy SM fractions, capped at 1 (MPS shares SMs in space);
- memory adds.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from philly_analyze.sim.sharing.config import ServiceSpec, SharingConfig
from philly_analyze.sim.sharing.interference import Y_FLOOR, Interference


@dataclass(frozen=True)
class PairTables:
    """True and predicted full-load log-slowdowns between offline job types and services.

    Truth: the latent model fitted on Gavel plus a per-pair deviation drawn with the fit's
    residual spread. Prediction: every workload is *profiled* against the Gavel types as
    probes (each profiling run measured with the same spread), and the Gavel-fitted log-linear
    predictor maps the profiles to a pair (``interference.py``)."""

    y_off_true: np.ndarray  # [type, svc]: offline type slowed by service
    y_on_true: np.ndarray  # [svc, type]: service slowed by offline type
    y_off_pred: np.ndarray
    y_on_pred: np.ndarray

    def predictor_mae(self) -> float:
        """Mean |r - r_hat| over all (type, service) pairs, both directions, at full load."""
        err = np.concatenate(
            [
                np.abs(np.exp(-self.y_off_true) - np.exp(-self.y_off_pred)).ravel(),
                np.abs(np.exp(-self.y_on_true) - np.exp(-self.y_on_pred)).ravel(),
            ]
        )
        return float(err.mean())


def build_pair_tables(
    inter: Interference,
    services: tuple[ServiceSpec, ...],
    rng: np.random.Generator,
    profile_noise: bool = True,
    truth_noise: bool = True,
) -> PairTables:
    """Draw the simulated world's pair interference and the predictor's view of it."""
    s_t, p_t = inter.sensitivity, inter.pressure
    s_o = np.array([s.sensitivity for s in services])
    p_o = np.array([s.pressure for s in services])
    sig = inter.sigma_eps
    tsig = sig if truth_noise else 0.0
    nt, ns = len(s_t), len(s_o)
    y_off = np.maximum(np.outer(s_t, p_o) + rng.normal(0, tsig, (nt, ns)), 0.0)
    y_on = np.maximum(np.outer(s_o, p_t) + rng.normal(0, tsig, (ns, nt)), 0.0)

    # Profiling: all workloads (types then services) against every probe type P.
    s_all, p_all = np.concatenate([s_t, s_o]), np.concatenate([p_t, p_o])
    psig = sig if profile_noise else 0.0
    n = len(s_all)

    def measured(mean: np.ndarray) -> np.ndarray:
        return np.maximum(mean + rng.normal(0, psig, mean.shape), Y_FLOOR)

    a = measured(np.outer(s_all, p_t))  # [w, P]: w beside probe P
    b = measured(np.outer(p_all, s_t))  # [w, P]: probe P beside w
    x = measured(s_t * p_t)  # [P]: probe's self-pair
    t0, t1, t2, t3 = (float(v) for v in inter.theta)
    la, lb = np.log(a).mean(axis=1), np.log(b).mean(axis=1)
    base = t0 + t3 * float(np.log(x).mean())
    # ln y_hat[v, g] = base + t1 la_v + t2 lb_g  (probe predictions averaged in log space)
    pred = np.exp(base + t1 * la[:, None] + t2 * lb[None, :])
    assert pred.shape == (n, n)
    types, svcs = np.arange(nt), nt + np.arange(ns)
    return PairTables(
        y_off_true=y_off,
        y_on_true=y_on,
        y_off_pred=pred[np.ix_(types, svcs)],
        y_on_pred=pred[np.ix_(svcs, types)],
    )


def sm_speed(x: np.ndarray, sm_j: np.ndarray, gamma: float) -> np.ndarray:
    """Offline speed factor under SM share x: ``min(1, x / sm_j)^gamma``."""
    return np.power(np.minimum(1.0, x / np.maximum(sm_j, 1e-6)), gamma)


def sm_target(cfg: SharingConfig, online_need: np.ndarray) -> np.ndarray:
    """Offline SM share complementary to the online need, rounded down to the step."""
    sm = cfg.sm
    raw = 1.0 - online_need - sm.headroom
    stepped = np.floor(raw / sm.step + 1e-9) * sm.step
    return np.clip(stepped, sm.min_share, sm.max_share)


def slowdown_target(cfg: SharingConfig, slo: np.ndarray) -> np.ndarray:
    """The launch controller's target slowdown: part of the way to the SLO."""
    return 1.0 + cfg.launch.target_fraction * (slo - 1.0)


def safe_duty(cfg: SharingConfig, y_on_full: np.ndarray, slo: np.ndarray) -> np.ndarray:
    """The duty at which a predicted online log-slowdown ``y_on_full`` (at duty 1) meets the
    controller's target: where the feedback loop is expected to settle."""
    target = np.log(slowdown_target(cfg, slo))
    d = target / np.maximum(y_on_full, 1e-9)
    return np.clip(d, cfg.launch.min_duty, 1.0)


def compose_util(u_online: np.ndarray, u_offline: np.ndarray) -> np.ndarray:
    """GPU utilization of two independent busy processes: ``1 - (1 - a)(1 - b)``."""
    return 1.0 - (1.0 - u_online) * (1.0 - u_offline)


def launch_control(
    cfg: SharingConfig, sigma: np.ndarray, duty: np.ndarray, target: np.ndarray
) -> np.ndarray:
    """One minute of the kernel-launch feedback loop (xCUDA + latency feedback).

    The real loop adjusts every few seconds; a minute holds ``steps_per_minute`` AIMD steps. Above
    target the duty falls to where the measured slowdown would meet the target (a proportional
    correction in log-slowdown, which the inner steps converge to), but by no more than
    ``(1 - decrease)^steps`` in a minute; below ``target (1 - tolerance)`` it rises additively."""
    la = cfg.launch
    ln_s = np.log(np.maximum(sigma, 1e-9))
    ln_t = np.log(target)
    floor = duty * (1.0 - la.decrease) ** la.steps_per_minute
    down = np.maximum(floor, duty * ln_t / np.maximum(ln_s, 1e-9))
    up = np.minimum(1.0, duty + la.increase)
    new = np.where(sigma > target, down, np.where(sigma < target * (1.0 - la.tolerance), up, duty))
    return np.clip(new, la.min_duty, 1.0)
