"""The queueing decomposition agrees with the replay simulator's recorded waiting causes.

The replay (``philly-analyze replay --out``) writes its schedule as a store plus
``waiting.parquet`` (per attempt that waited and cause, the seconds of that cause, by the one
definition of ``philly_analyze.waitcause``: fair-share, fragmentation, capacity, other) and the
quotas it used; the synthesizer writes the same causes as ``ground_truth/waits.parquet``.
Rebuilding the causes from the schedule alone must agree for at least 90% of waiting jobs."""

from __future__ import annotations

from pathlib import Path

import numpy as np
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
    """The issue's check, on the raw files of ``sample_data/`` (``make sample``: published
    trace, YARN logs, Ganglia, framework logs): each waiting job's seconds of each of the four
    causes, rebuilt by the report from the ingested store with the VC quotas the synthesizer's
    scheduler used, against the causes that scheduler recorded (``ground_truth/waits.parquet``).

    Two things the raw files cannot show separate the two, and the test accounts for each
    exactly rather than with a tolerance:
    - the synthesizer's startup latency (``jobs.startup_s``, before its scheduler sees a job):
      the report sees the whole delay, so its total is the truth's plus ``startup_s``, and each
      cause has at least the truth's seconds;
    - attempts still running at the window's end, which the published format writes with a
      final status and no end: the report leaves them out of the cluster state (the attempt-end
      rule, docs/analyses.md), so only waits that ended before the first of them started are
      compared cause by cause.
    Waits of attempts that never started are not in the files at all and are left out."""
    import json

    sample = ROOT / "sample_data"
    store = tmp_path / "store"
    r = CliRunner().invoke(main, ["ingest", str(sample), "--store", str(store), "-q"])
    assert r.exit_code == 0, r.output
    truth_dir = sample / "ground_truth"
    quotas = str(truth_dir / "vc_quotas.csv")  # the file synth writes for this
    manifest = json.loads((truth_dir / "manifest.json").read_text())
    assert load_quotas(quotas) == manifest["vc_quotas"]
    att = pd.read_parquet(truth_dir / "attempts.parquet")
    jobs = pd.read_parquet(truth_dir / "jobs.parquet").set_index("job_id")
    w = pd.read_parquet(truth_dir / "waits.parquet")
    assert set(w["cause"]) <= set(CAUSES)
    started = att.dropna(subset=["start_time"])[["job_id", "attempt_idx"]]
    w = w.merge(started, on=["job_id", "attempt_idx"])
    with Store(store, read_only=True) as s:
        per = decompose_store(s, quotas).set_index("job_id")
    ran = per[per["started"] & ~jobs["carried_over"].reindex(per.index).fillna(False)]
    ours = ran[[f"{c}_s" for c in CAUSES]].set_axis(list(CAUSES), axis=1)
    truth = w.pivot_table(index="job_id", columns="cause", values="seconds", aggfunc="sum")
    truth = truth.reindex(index=ours.index, columns=list(CAUSES)).fillna(0.0)
    startup = jobs["startup_s"].reindex(ours.index).astype(float)
    # The repeated fall-back hour (2017-11-05 01:00-01:59 Pacific = 08:00-09:59 UTC) cannot be
    # told apart in zone-less times: a job submitted or started in it may read an hour off.
    fold = (pd.Timestamp("2017-11-05 08:00", tz="UTC"), pd.Timestamp("2017-11-05 10:00", tz="UTC"))
    in_fold = (
        jobs[["submit_time", "first_start"]]
        .apply(lambda c: c.between(*fold, inclusive="left"))
        .any(axis=1)
        .reindex(ours.index)
    )
    total_gap = ours.sum(axis=1) - truth.sum(axis=1) - startup
    assert (total_gap[~in_fold].abs() < 1.0).all(), total_gap[~in_fold].abs().nlargest(5)
    assert (total_gap.abs() > 1.0).sum() <= in_fold.sum()
    # Cause by cause, on the waits that ended before any attempt the rule leaves out began.
    first_left_out = att.loc[att["end_time"].isna(), "start_time"].min()
    wait_end = w.groupby("job_id")["end_time"].max().reindex(ours.index)
    clear = (wait_end < first_left_out) & ~in_fold & (truth.sum(axis=1) > 0)
    assert clear.sum() >= 30  # enough waiting jobs for the check to mean something
    assert (ours[clear] >= truth[clear] - 1.0).all().all()
    # And the main cause of four: where the startup seconds (which the report adds to some
    # cause) are fewer than the truth's main cause leads the runner-up by, the report's main
    # cause must be the truth's.
    main_true = truth[clear].idxmax(axis=1)
    ranked = -np.sort(-truth[clear].to_numpy(), axis=1)
    decisive = ranked[:, 0] - ranked[:, 1] > startup[clear].to_numpy()
    assert decisive.sum() >= 25
    agree = ran.loc[clear[clear].index, "cause"] == main_true
    assert agree[decisive].all(), agree[decisive][lambda a: ~a]
