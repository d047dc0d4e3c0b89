"""Round trip: synthesize -> ingest the raw files -> recover the paper's statistics.

The statistics are computed here with this test's own SQL over the ingested store (the
official definitions: a job's size is its first attempt's GPU count; a job's GPU utilization is
the mean of the per-minute utilization of every GPU its attempts held, over their runs; a table
cell is the mean over its jobs; GPU time is the sum over attempts of duration x GPUs, over jobs
whose attempts all ended in the window). Expected values are read from the paper's CSVs in
``../shared/reference/paper``, never from the synthesizer's calibration file.

Failure reasons (Table 7) and loss curves (Figure 8) come from the store's ``failures`` and
``epochs`` tables when the framework-log parser is installed, else from the ground truth (the
test then checks the synthesizer's sampling rather than the parser; it says which it used).
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

from philly_analyze.cli import main
from philly_analyze.store import Store
from philly_analyze.synth.run import SynthConfig, synthesize

BUCKETS = (
    "CASE WHEN size = 1 THEN '1' WHEN size <= 4 THEN '2-4' WHEN size <= 8 THEN '5-8' ELSE 'gt8' END"
)

JOBS_SQL = """
WITH jf AS (
  SELECT job_id, arg_min(num_gpus, attempt_idx) AS size, count(*) AS n_att,
         count(end_time) = count(*) AS done, sum(duration_s * num_gpus) AS gpu_time
  FROM attempts GROUP BY job_id)
SELECT j.job_id, j.status, jf.size, jf.n_att, jf.done, jf.gpu_time
FROM jobs j JOIN jf USING (job_id) WHERE j.status IS NOT NULL
"""

UTIL_SQL = """
SELECT p.job_id, avg(g.util) AS util, count(*) AS gpu_minutes
FROM placements p JOIN attempts a USING (job_id, attempt_idx)
JOIN gpu_util g ON g.machine_id = p.machine_id AND g.gpu_idx = p.gpu_idx
  AND g.time >= a.start_time AND g.time < coalesce(a.end_time, 'infinity'::TIMESTAMPTZ)
GROUP BY p.job_id
"""


def _paper(reference: Path, name: str) -> list[dict[str, str]]:
    with open(reference / "paper" / name, newline="") as f:
        return list(csv.DictReader(f))


def _synth_and_ingest(root: Path, args: list[str], formats: str) -> tuple[Path, Path]:
    out, store = root / "out", root / "store"
    r = CliRunner().invoke(main, ["synth", "--out", str(out), *args, "--formats", formats, "-q"])
    assert r.exit_code == 0, r.output
    paths = [str(out / n) for n in ("cluster_job_log", "cluster_machine_list", "cluster_gpu_util")]
    if (out / "framework").exists():
        paths.append(str(out / "framework"))
    r = CliRunner().invoke(main, ["ingest", *paths, "--store", str(store), "-q"])
    assert r.exit_code == 0, r.output
    return out, store


def _recover(store: Path) -> tuple[pd.DataFrame, pd.DataFrame]:
    with Store(store, read_only=True) as s:
        jobs = s.df(JOBS_SQL)
        util = s.df(UTIL_SQL)
    return jobs, jobs.merge(util, on="job_id")


def _table6(jobs: pd.DataFrame) -> pd.DataFrame:
    done = jobs[jobs.done]
    out = pd.DataFrame(
        {
            "jobs_pct": done.status.value_counts(normalize=True) * 100,
            "gpu_time_pct": done.groupby("status").gpu_time.sum() / done.gpu_time.sum() * 100,
        }
    )
    return out


def _table3(util: pd.DataFrame) -> dict[tuple[str, str], tuple[float, int]]:
    cells = {}
    for size in ("1", "4", "8", "16", "all"):
        d = util if size == "all" else util[util["size"] == int(size)]
        for st in ("passed", "killed", "unsuccessful", "all"):
            e = d if st == "all" else d[d.status == st]
            cells[(size, st)] = (float(e.util.mean()), len(e))
    return cells


def _check_tables_3_and_6(
    jobs: pd.DataFrame,
    util: pd.DataFrame,
    reference: Path,
    *,
    jobs_tol: float,
    gpu_time_tol: float,
    min_jobs: int,
) -> None:
    """Table 6 shares within the tolerances (points); Table 3 cells of ``min_jobs`` jobs or
    more within 3 points."""
    t6 = _table6(jobs)
    for r in _paper(reference, "table6_final_status.csv"):
        if r["status"] == "total":
            continue
        st = r["status"]
        assert t6.loc[st, "jobs_pct"] == pytest.approx(float(r["jobs_pct"]), abs=jobs_tol)
        assert t6.loc[st, "gpu_time_pct"] == pytest.approx(
            float(r["gpu_time_pct"]), abs=gpu_time_tol
        )
    cells = _table3(util)
    for r in _paper(reference, "table3_gpu_util_by_size_status.csv"):
        for st in ("passed", "killed", "unsuccessful", "all"):
            got, n = cells[(r["job_size"], st)]
            if n >= min_jobs:
                assert got == pytest.approx(float(r[st]), abs=3), (r["job_size"], st, n)


# ----------------------------------------------------------------------------- fast
@pytest.fixture(scope="module")
def small(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    args = ["--jobs", "4000", "--machines", "40", "--days", "7", "--seed", "11"]
    return _synth_and_ingest(tmp_path_factory.mktemp("rt_small"), args, "philly")


def test_small_round_trip_status_and_utilization(small: tuple[Path, Path], reference: Path) -> None:
    out, store = small
    jobs, util = _recover(store)
    # 4,000 jobs: job shares within 3 points, GPU time (heavy tails) within 8, and the
    # well-populated Table 3 cells (100+ jobs; the slow test checks them all) within 3.
    _check_tables_3_and_6(jobs, util, reference, jobs_tol=3, gpu_time_tol=8, min_jobs=100)
    # Ingested per-job utilization equals the ground truth's job means, up to the per-minute
    # scatter (about 14 points per minute: a standard error near 1.8 over 60 GPU-minutes).
    truth = pd.read_parquet(out / "ground_truth" / "jobs.parquet")[["job_id", "util_mean"]]
    m = util.merge(truth, on="job_id")
    assert len(m) == len(util)
    long = m[m.gpu_minutes >= 60]
    assert len(long) > 400
    assert (long.util - long.util_mean).abs().median() < 2.0


# ----------------------------------------------------------------------------- slow
@pytest.fixture(scope="module")
def large(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    args = ["--jobs", "24000", "--machines", "150", "--days", "14", "--seed", "5"]
    return _synth_and_ingest(tmp_path_factory.mktemp("rt_large"), args, "philly,framework")


@pytest.mark.slow
@pytest.mark.parametrize("seed", [0, 1, 2, 3, 4])
def test_table6_gpu_time_holds_for_every_seed(tmp_path: Path, reference: Path, seed: int) -> None:
    """Table 6 from the ground truth of the large size (24,000 jobs, 150 servers, 14 days) for
    several seeds, not only the round trip's: the run times are solved on the scheduled
    finishes (synth/rescale.py), so the GPU-time shares among the jobs that finish hold
    whatever the waits. (Solved on submission + run time, ignoring the queueing, seeds 0, 1
    and 2 missed by 3.2-4.0 points: unsuccessful 14.52 vs 17.76 at seed 0.) About 10 s each;
    GPU time = sum over attempts of (end - start) x GPUs, over jobs whose attempts all ended."""
    out = tmp_path / "out"
    synthesize(out, SynthConfig(jobs=24000, machines=150, days=14, seed=seed, formats=()))
    jobs = pd.read_parquet(out / "ground_truth" / "jobs.parquet", columns=["job_id", "status"])
    att = pd.read_parquet(out / "ground_truth" / "attempts.parquet")
    att["gpu_s"] = (att.end_time - att.start_time).dt.total_seconds() * att.num_gpus
    per_job = att.groupby("job_id").agg(
        done=("end_time", lambda e: e.notna().all()), gpu_time=("gpu_s", "sum")
    )
    t6 = _table6(jobs.merge(per_job, left_on="job_id", right_index=True))
    for r in _paper(reference, "table6_final_status.csv"):
        if r["status"] == "total":
            continue
        st = r["status"]
        assert t6.loc[st, "jobs_pct"] == pytest.approx(float(r["jobs_pct"]), abs=2), st
        assert t6.loc[st, "gpu_time_pct"] == pytest.approx(float(r["gpu_time_pct"]), abs=2), st


@pytest.mark.slow
def test_large_round_trip_tables_3_and_6(large: tuple[Path, Path], reference: Path) -> None:
    _, store = large
    jobs, util = _recover(store)
    _check_tables_3_and_6(jobs, util, reference, jobs_tol=2, gpu_time_tol=2, min_jobs=0)
    cells = _table3(util)
    assert min(n for _, n in cells.values()) >= 10


@pytest.mark.slow
def test_large_round_trip_retries_and_locality(large: tuple[Path, Path], reference: Path) -> None:
    _, store = large
    with Store(store, read_only=True) as s:
        fig9 = s.df(
            f"SELECT {BUCKETS} AS b, avg(n_att - 1) AS retries, "
            f"avg((status = 'unsuccessful')::INT) AS unsuccessful FROM ({JOBS_SQL}) "
            "WHERE done GROUP BY 1 ORDER BY 1"
        ).set_index("b")
        t5 = s.df(
            f"""SELECT a.num_machines AS servers, u.util FROM ({UTIL_SQL}) u
            JOIN attempts a ON a.job_id = u.job_id AND a.attempt_idx = 0
            WHERE a.num_gpus = 16"""
        )
    paper9 = {r["gpu_bucket"]: r for r in _paper(reference, "fig9_retries_approx.csv")}
    for b in ("1", "2-4", "5-8", "gt8"):
        assert fig9.loc[b, "unsuccessful"] == pytest.approx(
            float(paper9[b]["unsuccessful_rate"]), abs=0.06
        )
        assert fig9.loc[b, "retries"] == pytest.approx(float(paper9[b]["avg_retries"]), abs=0.3)
    # Shape: small jobs retry less and fail less than any multi-GPU bucket.
    assert fig9.loc["1", "retries"] < fig9.loc[["2-4", "5-8", "gt8"], "retries"].min()
    assert fig9.loc["1", "unsuccessful"] < fig9.loc[["2-4", "5-8", "gt8"], "unsuccessful"].min()
    # Table 5: 16-GPU jobs on 2 servers use their GPUs better than those spread wider.
    paper5 = {
        int(r["servers"]): float(r["mean"])
        for r in _paper(reference, "table5_16gpu_util_by_servers.csv")
    }
    two = t5[t5.servers == 2].util
    wide = t5[t5.servers >= 4].util
    assert len(two) >= 20 and len(wide) >= 5
    assert two.mean() > wide.mean()
    assert two.mean() == pytest.approx(paper5[2], abs=6)


@pytest.mark.slow
def test_large_round_trip_failure_reasons(large: tuple[Path, Path], reference: Path) -> None:
    out, store = large
    with Store(store, read_only=True) as s:
        parsed = s.has_rows("failures")
        if parsed:
            # The parser classifies every attempt's logs; Table 7 counts the failed ones.
            reasons = s.df(
                "SELECT f.reason FROM failures f JOIN attempts a USING (job_id, attempt_idx) "
                "WHERE a.outcome = 'failed'"
            ).reason
    if not parsed:  # no framework-log parser installed: the truth's reasons
        ta = pd.read_parquet(out / "ground_truth" / "attempts.parquet")
        reasons = ta.failure_reason.dropna()
    rows = _paper(reference, "table7_failures.csv")
    total = sum(float(r["trials"]) for r in rows)
    shares = reasons.value_counts(normalize=True) * 100
    assert len(reasons) > 5000
    for r in rows:
        want = float(r["trials"]) / total * 100
        assert shares.get(r["failure_reason"], 0.0) == pytest.approx(want, abs=2), r[
            "failure_reason"
        ]


@pytest.mark.slow
def test_large_round_trip_convergence(large: tuple[Path, Path], reference: Path) -> None:
    out, store = large
    with Store(store, read_only=True) as s:
        parsed = s.has_rows("epochs")
        if parsed:
            loss = s.df("SELECT job_id, epoch, loss FROM epochs")
    tj = pd.read_parquet(out / "ground_truth" / "jobs.parquet")
    if not parsed:
        loss = pd.read_parquet(out / "ground_truth" / "loss.parquet")
    complete = tj[~tj.censored & (tj.epochs >= 5)][["job_id", "status", "epochs"]]
    loss = loss.merge(complete, on="job_id")
    stats = []
    for _, g in loss.groupby("job_id"):
        v = g.sort_values("epoch").loss.to_numpy()
        if len(v) != g.epochs.iloc[0]:
            continue
        lo = v.min()
        within = int(np.flatnonzero(v <= lo * 1.001)[0])
        lowest = int(np.argmin(v))
        stats.append((g.status.iloc[0], within / (len(v) - 1), lowest / (len(v) - 1)))
    df = pd.DataFrame(stats, columns=["status", "within", "lowest"])
    for r in _paper(reference, "fig8_convergence_approx.csv"):
        d = df[df.status == r["jobs"]]
        x = float(r["fraction_of_epochs"])
        col = "within" if r["threshold"].startswith("within") else "lowest"
        got = (d[col] <= x).mean()
        assert len(d) > 300
        assert got == pytest.approx(float(r["cumulative_fraction_of_jobs"]), abs=0.06), (r, got)


@pytest.mark.slow
def test_large_round_trip_through_the_report(large: tuple[Path, Path], reference: Path) -> None:
    """The same store through ``philly-analyze report --format json`` (the report's own
    definitions), compared with the paper's CSVs where the definitions agree with the paper's
    tables: Table 3 as the mean of per-job means (the report's ``table3``; its
    ``table3_minute_weighted`` weighs jobs by GPU-minutes), Table 6 (jobs that ran), Table 7's trial shares, Figure 9 and Figure 8."""
    _, store = large
    res = CliRunner().invoke(main, ["report", "--store", str(store), "--format", "json", "-q"])
    assert res.exit_code == 0, res.output
    rep = json.loads(res.output)
    t3 = {r["job_size"]: r for r in rep["gpu_utilization"] if r["table"] == "table3"}
    for r in _paper(reference, "table3_gpu_util_by_size_status.csv"):
        for st in ("passed", "killed", "unsuccessful", "all"):
            assert t3[r["job_size"]][st] == pytest.approx(float(r[st]), abs=3), (r["job_size"], st)
    t6 = {r["status"]: r for r in rep["status"]}
    for r in _paper(reference, "table6_final_status.csv"):
        want = float(r["gpu_time_pct"])
        assert t6[r["status"]]["gpu_time_pct"] == pytest.approx(want, abs=2), r["status"]
        got = t6[r["status"]]["jobs_pct"]
        assert got == pytest.approx(float(r["jobs_pct"]), abs=2), r["status"]
    t7 = [r for r in rep["failures"] if r["table"] == "table7" and r["reason"] != "total"]
    total = sum(r["trials"] for r in t7)
    paper7 = _paper(reference, "table7_failures.csv")
    ptotal = sum(float(r["trials"]) for r in paper7)
    got7 = {r["reason"]: r["trials"] / total * 100 for r in t7}
    for r in paper7:
        want = float(r["trials"]) / ptotal * 100
        assert got7.get(r["failure_reason"], 0.0) == pytest.approx(want, abs=2), r["failure_reason"]
    fig9 = {
        r["gpu_bucket"].replace("gt8", ">8"): r
        for r in _paper(reference, "fig9_retries_approx.csv")
    }
    got9 = {r["gpu_bucket"]: r for r in rep["retries"] if r["table"] == "fig9"}
    for b in ("1", "2-4", "5-8", ">8"):
        assert got9[b]["avg_retries"] == pytest.approx(float(fig9[b]["avg_retries"]), abs=0.3)
        want = float(fig9[b]["unsuccessful_rate"])
        assert got9[b]["unsuccessful_rate"] == pytest.approx(want, abs=0.06)
    got8 = {
        (r["status"], r["threshold"], r["fraction_of_epochs"]): r["cumulative_fraction_of_jobs"]
        for r in rep["convergence"]
        if r["table"] == "fig8_points"
    }
    for r in _paper(reference, "fig8_convergence_approx.csv"):
        key = (r["jobs"], r["threshold"], float(r["fraction_of_epochs"]))
        want = float(r["cumulative_fraction_of_jobs"])
        assert got8[key] == pytest.approx(want, abs=0.06), key
