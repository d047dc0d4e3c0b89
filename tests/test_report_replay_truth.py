"""The queueing decomposition agrees with the replay simulator's recorded waiting causes.

The replay (``philly-analyze replay --out``) writes its schedule as a store plus
``waiting.parquet`` (per attempt that waited and cause, the seconds of that cause, by the one
definition of ``philly_analyze.waitcause``: fair-share, fragmentation, capacity, other) and the
quotas it used; the synthesizer writes the same causes as ``ground_truth/waits.parquet``.
Rebuilding the causes from the schedule alone must agree for at least 90% of waiting jobs."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
from click.testing import CliRunner

from philly_analyze.analysis.queueing import decompose_store
from philly_analyze.cli import main
from philly_analyze.store import Store
from philly_analyze.vcquota import load_quotas
from philly_analyze.waitcause import CAUSES

ROOT = Path(__file__).resolve().parent.parent


def _main_cause(w: pd.DataFrame) -> pd.Series:
    """Each waiting job's cause with the most seconds (ties: ``CAUSES`` order)."""
    t = w.pivot_table(index="job_id", columns="cause", values="seconds", aggfunc="sum")
    t = t.reindex(columns=list(CAUSES)).fillna(0.0)
    return t[t.sum(axis=1) > 0].idxmax(axis=1)


@pytest.mark.slow
def test_decomposition_matches_replay_truth(tmp_path: Path) -> None:
    sample = ROOT / "sample_data"
    if not sample.exists():
        pytest.skip("no sample_data/")
    runner = CliRunner()
    store, out = tmp_path / "store", tmp_path / "replay"
    r = runner.invoke(main, ["ingest", str(sample), "--store", str(store), "-q"])
    assert r.exit_code == 0, r.output
    r = runner.invoke(
        main, ["replay", "--store", str(store), "--policy", "philly", "--out", str(out), "-q"]
    )
    if r.exit_code != 0 or not (out / "waiting.parquet").exists():
        pytest.skip(f"replay did not write a schedule with its waiting causes: {r.output[-300:]}")
    true_cause = _main_cause(pd.read_parquet(out / "waiting.parquet"))
    if true_cause.empty:
        pytest.skip("nobody waited in this replay")
    with Store(out, read_only=True) as s:
        per = decompose_store(s, str(out / "vc_quotas.csv")).set_index("job_id")
    ours = per["cause"].reindex(true_cause.index)
    agree = float((ours == true_cause).mean())
    assert agree >= 0.9, (agree, len(true_cause))
    # Same definitions, same schedule: the seconds of each cause agree job by job.
    w = pd.read_parquet(out / "waiting.parquet")
    truth = w.pivot_table(index="job_id", columns="cause", values="seconds", aggfunc="sum")
    truth = truth.reindex(columns=list(CAUSES)).fillna(0.0)
    mine = per[[f"{c}_s" for c in CAUSES]].reindex(truth.index)
    assert mine.to_numpy() == pytest.approx(truth.to_numpy(), abs=1e-3)


def test_decomposition_matches_the_synthesizers_ground_truth(tmp_path: Path) -> None:
    """The issue's check, on the raw files of a synthesized history made like
    ``sample_data/`` (``make sample``: published trace, YARN logs, Ganglia, framework logs):
    each waiting job's main cause of four, rebuilt by the report from the ingested store,
    against the causes the synthesizer recorded when its scheduler held the job back
    (``ground_truth/waits.parquet``), with the VC quotas that scheduler used."""
    import json

    runner = CliRunner()
    sample, store = tmp_path / "sample", tmp_path / "store"
    r = runner.invoke(
        main,
        [
            *("synth", "--out", str(sample), "--quiet", "--jobs", "300", "--machines", "8"),
            *("--days", "2", "--start", "2017-11-04", "--seed", "7", "--ganglia-step", "360"),
        ],
    )
    assert r.exit_code == 0, r.output
    r = runner.invoke(main, ["ingest", str(sample), "--store", str(store), "-q"])
    assert r.exit_code == 0, r.output
    quotas = str(sample / "ground_truth" / "vc_quotas.csv")  # the file synth writes for this
    manifest = json.loads((sample / "ground_truth" / "manifest.json").read_text())
    assert load_quotas(quotas) == manifest["vc_quotas"]
    w = pd.read_parquet(sample / "ground_truth" / "waits.parquet")
    assert set(w["cause"]) <= set(CAUSES)
    true_cause = _main_cause(w)
    assert len(true_cause) >= 30  # enough waiting jobs for a 90% test to mean something
    with Store(store, read_only=True) as s:
        per = decompose_store(s, quotas).set_index("job_id")
    ours = per["cause"].reindex(true_cause.index)
    agree = float((ours == true_cause).mean())
    assert agree >= 0.9, (agree, len(true_cause))
