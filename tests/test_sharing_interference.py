"""The interference predictor: parsing, fitting, the shipped calibration, and its error on
held-out Gavel pairs and on Lucid pairs (Lucid: validation only, read at test time)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from philly_analyze.errors import UserError
from philly_analyze.sim.sharing.interference import (
    DATA_FILE,
    PairData,
    calibrate,
    fit_latent,
    fit_theta,
    heldout_errors,
    load_gavel_pairs,
    load_interference,
    load_lucid_pairs,
    predictor_errors,
    probe_triples,
)

GAVEL = "colocation/gavel_physical_cluster_throughputs.json"
LUCID = "colocation/lucid_colocate_info.csv"


def _gavel_file(tmp_path: Path) -> Path:
    """Three job types in Gavel's format; C beside B did not fit (0.0)."""
    t = {
        "('A', 1)": {"null": 10.0, "('A', 1)": [5.0, 5.0], "('B', 1)": [8.0, 3.0]},
        "('B', 1)": {"null": 6.0, "('A', 1)": [3.0, 8.0], "('C', 1)": [0.0, 0.0]},
        "('C', 1)": {"null": 4.0, "('A', 1)": [1.0, 9.0], "('C', 2)": [1.0, 1.0]},
        "('C', 2)": {"null": 7.0},
    }
    p = tmp_path / "gavel.json"
    p.write_text(json.dumps({"v100": t}))
    return p


def test_gavel_parse_normalizes_by_solo_and_skips_infeasible(tmp_path: Path) -> None:
    d = load_gavel_pairs(_gavel_file(tmp_path))
    assert d.names == ("A", "B", "C")  # the 2-GPU C is not a single-GPU type
    got = {(d.names[j], d.names[k]): r for j, k, r in zip(d.j, d.k, d.r, strict=True)}
    # By hand: A beside A 5/10, A beside B 8/10, B beside A 3/6, C beside A 1/4.
    assert got == pytest.approx(
        {("A", "A"): 0.5, ("A", "B"): 0.8, ("B", "A"): 0.5, ("C", "A"): 0.25}
    )
    assert d.infeasible == 1
    with pytest.raises(UserError, match="no GPU type"):
        load_gavel_pairs(_gavel_file(tmp_path), "a100")


def _rank1_pairs(s: np.ndarray, p: np.ndarray) -> PairData:
    n = len(s)
    j, k = (a.ravel() for a in np.meshgrid(np.arange(n), np.arange(n), indexing="ij"))
    return PairData(tuple(map(str, range(n))), j, k, np.exp(-s[j] * p[k]))


def test_latent_fit_recovers_an_exact_rank1_world() -> None:
    s = np.array([0.2, 0.5, 0.9, 1.4, 0.7])
    p = np.array([0.8, 0.3, 0.6, 1.1, 0.5])
    fs, fp = fit_latent(_rank1_pairs(s, p))
    np.testing.assert_allclose(np.outer(fs, fp), np.outer(s, p), rtol=1e-6)


def test_probe_predictor_is_exact_on_a_rank1_world() -> None:
    """If y_jk = s_j p_k then y_jP y_Pk / y_PP = y_jk: theta must be (0, 1, 1, -1)."""
    rng = np.random.default_rng(3)
    s, p = rng.uniform(0.2, 1.5, 8), rng.uniform(0.2, 1.5, 8)
    pairs = _rank1_pairs(s, p)
    theta = fit_theta(probe_triples(pairs))
    np.testing.assert_allclose(theta, [0.0, 1.0, 1.0, -1.0], atol=1e-9)
    assert predictor_errors(theta, pairs, probe_triples(pairs)).max() < 1e-9


def test_shipped_calibration_is_reproducible_from_gavel(reference: Path) -> None:
    """The data file is exactly what calibrate() derives from Gavel's (MIT) measurements."""
    from importlib import resources

    shipped = json.loads(resources.files("philly_analyze").joinpath("data", DATA_FILE).read_text())
    fresh = calibrate(reference / GAVEL)
    for gpu, g in shipped["gpus"].items():
        assert fresh["gpus"][gpu]["theta"] == pytest.approx(g["theta"], abs=1e-4)
        assert fresh["gpus"][gpu]["sensitivity"] == pytest.approx(g["sensitivity"], abs=1e-4)
        assert fresh["gpus"][gpu]["heldout_5fold"] == g["heldout_5fold"]
    assert "lucid" not in json.dumps(shipped).lower()


def test_gavel_heldout_error_beats_a_constant(reference: Path) -> None:
    pairs = load_gavel_pairs(reference / GAVEL, "v100")
    err = heldout_errors(pairs, folds=5, seed=0)
    off = pairs.r[pairs.j != pairs.k]
    baseline = np.abs(off - np.median(off)).mean()  # predict the median for every pair
    print(f"Gavel V100 held-out MAE {err.mean():.3f} (n={len(err)}), constant {baseline:.3f}")
    assert len(err) == int((pairs.j != pairs.k).sum())
    assert err.mean() < 0.15
    assert err.mean() < 0.6 * baseline
    assert load_interference("v100").heldout["mae"] == pytest.approx(err.mean(), abs=1e-4)


def test_gavel_theta_transfers_to_lucid(reference: Path) -> None:
    """Validation only: Lucid (non-commercial licence) is read here, nothing is fitted on it."""
    lucid = load_lucid_pairs(reference / LUCID)
    theta = load_interference("v100").theta
    err = predictor_errors(theta, lucid, probe_triples(lucid))
    off = lucid.r[lucid.j != lucid.k]
    baseline = np.abs(off - np.median(off)).mean()
    print(
        f"Lucid pairs with Gavel's theta: MAE {err.mean():.3f} (n={len(err)}), constant {baseline:.3f}"
    )
    assert len(err) > 2000
    assert err.mean() < baseline
    assert err.mean() < 0.08


def _lucid_pairs_with_solos(reference: Path) -> pd.DataFrame:
    c = pd.read_csv(reference / LUCID, index_col=0)
    s = pd.read_csv(reference / "colocation/lucid_single_data.csv")
    solo = s[["model", "batchsize", "amp", "gpu_util", "gmem"]]
    for side in ("1", "2"):
        c = c.merge(
            solo.rename(
                columns={
                    "model": f"model{side}",
                    "batchsize": f"batchsize{side}",
                    "amp": f"amp{side}",
                    "gpu_util": f"u{side}",
                    "gmem": f"m{side}",
                }
            ),
            on=[f"model{side}", f"batchsize{side}", f"amp{side}"],
        )
    return c


def test_metric_composition_rules_against_lucid(reference: Path) -> None:
    """The simulator's utilization rule (busy periods independent, kernels stretched by the
    measured slowdown) and memory rule (sum) against Lucid's measured pairs."""
    from philly_analyze.sim.sharing.model import compose_util

    c = _lucid_pairs_with_solos(reference)
    assert len(c) == 1388
    u1, u2 = c["u1"] / 100, c["u2"] / 100
    r1, r2 = c["speed1"].clip(upper=1), c["speed2"].clip(upper=1)
    busy1, busy2 = 1 - (1 - u1) * r1, 1 - (1 - u2) * r2
    err = compose_util(busy1.to_numpy(), busy2.to_numpy()) - c["gpu_util"].to_numpy() / 100
    print(f"Lucid util rule: MAE {np.abs(err).mean():.3f}, bias {err.mean():+.3f}")
    assert np.abs(err).mean() < 0.12
    mem_rel = np.abs(c["m1"] + c["m2"] - c["gmem"]) / c["gmem"]
    assert np.median(mem_rel) < 0.02
