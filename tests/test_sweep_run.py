"""``philly-analyze sweep`` end to end on a real store: rows, summary, resume, failures,
figures, outputs. The reference for every metric is the replay API called directly."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq
import pytest

from philly_analyze.sim import load_inputs, run_replay, simulate
from philly_analyze.sim.metrics import METRICS
from tests._sweep_data import ROOT, sample_store, sweep


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return sample_store(tmp_path_factory.mktemp("sweep") / "store")


def _runs(out: Path) -> pd.DataFrame:
    return pq.read_table(out / "runs.parquet").to_pandas()


def test_each_row_is_the_replay_of_its_settings(store: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    r = sweep(
        "--store", str(store), "--policy", "philly,relaxed", "--param",
        "locality_wait_min=0,120", "--seeds", "2", "--out", str(out), "--workers", "2",
        "--format", "json",
    )  # fmt: skip
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    runs = _runs(out)
    # 2 waits x 2 seeds for philly, 2 seeds for relaxed (no locality wait).
    assert len(runs) == 6 and (runs["status"] == "ok").all()
    assert doc["executed"] == 6 and doc["skipped"] == 0 and doc["failed"] == []
    assert list(runs.columns[:7]) == [
        "run_id", "inputs_id", "policy", "seed", "jitter_s", "param_locality_wait_min", "status"
    ]  # fmt: skip
    wl, cluster, quotas = load_inputs(store)  # what run_replay reads, read once
    for _, row in runs.iterrows():
        given = {} if pd.isna(row["param_locality_wait_min"]) else {
            "locality_wait_min": row["param_locality_wait_min"]
        }  # fmt: skip
        ref = simulate(wl, cluster, row["policy"], quotas, given, int(row["seed"])).metrics
        for k in METRICS:
            if ref.get(k) is None:
                assert pd.isna(row[k]), k
            else:
                assert row[k] == pytest.approx(ref[k], rel=1e-12, abs=0), k
        assert (
            json.loads(row["params_json"])[
                "locality_wait_min" if row["policy"] == "philly" else "borrow"
            ]
            is not None
        )
    # The locality wait reached the replay: on this data it changes the queueing delay.
    philly = runs[runs["policy"] == "philly"].set_index("param_locality_wait_min")
    queue_mean = philly["queue_mean_s"]
    assert set(queue_mean.loc[120.0]).isdisjoint(queue_mean.loc[0.0])
    # Seeds without jitter are identical for these deterministic policies: said so.
    assert any("every seed gave the same metrics" in n for n in doc["notes"])
    cell = [
        s
        for s in doc["summary"]
        if s["policy"] == "philly"
        and s["param_locality_wait_min"] == 120.0
        and s["metric"] == "queue_mean_s"
    ]
    assert (
        len(cell) == 1 and cell[0]["n"] == 2 and cell[0]["sd"] == 0 and cell[0]["half_width"] == 0
    )
    assert cell[0]["mean"] == pytest.approx(queue_mean.loc[120.0].iloc[0])
    # Outputs: summary, figures in both formats, report linking the figure.
    assert (out / "summary.parquet").exists() and (out / "sweep.json").exists()
    for ext in ("png", "svg"):
        assert (out / "figures" / f"locality_wait_min.{ext}").stat().st_size > 10_000
    assert "![locality_wait_min](figures/locality_wait_min.png)" in (out / "report.md").read_text()
    assert not (out / "parts").exists()


def test_jitter_makes_seeds_differ_and_the_interval_follows(store: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    r = sweep(
        "--store", str(store), "--policy", "philly", "--seeds", "3", "--jitter", "600",
        "--out", str(out), "--workers", "1", "--format", "csv", "-q", "--no-figures",
    )  # fmt: skip
    assert r.exit_code == 0, r.output
    runs = _runs(out)
    q = runs["queue_mean_s"].to_numpy()
    assert len(set(q)) == 3  # each seed moved the arrivals differently
    rows = {
        row["metric"]: row
        for row in pd.read_csv(__import__("io").StringIO(r.stdout)).to_dict("records")
    }
    # t(0.975, 2) = 4.302653 from the t table; sd with ddof 1, computed here by hand.
    mean = sum(q) / 3
    sd = math.sqrt(sum((x - mean) ** 2 for x in q) / 2)
    assert rows["queue_mean_s"]["mean"] == pytest.approx(mean, rel=1e-9)
    assert rows["queue_mean_s"]["half_width"] == pytest.approx(
        4.302653 * sd / math.sqrt(3), rel=1e-6
    )
    assert rows["jobs"]["sd"] == 0  # every job still runs
    # Same seed again (another output): the same numbers.
    r2 = sweep(
        "--store", str(store), "--policy", "philly", "--seeds", "3", "--jitter", "600",
        "--out", str(tmp_path / "again"), "--workers", "2", "-q", "--no-figures",
    )  # fmt: skip
    assert r2.exit_code == 0
    assert list(_runs(tmp_path / "again")["queue_mean_s"]) == list(q)


def test_rerun_skips_what_is_done_and_extends_seeds(store: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    args = ["--store", str(store), "--policy", "philly,las", "--out", str(out), "--workers", "1"]
    args.append("--no-figures")
    first = sweep(*args, "--seeds", "2", "--format", "json", "-q")
    assert json.loads(first.stdout)["executed"] == 4
    before = _runs(out).set_index("run_id")["finished_at"]
    again = sweep(*args, "--seeds", "2", "--format", "json")
    assert json.loads(again.stdout)["executed"] == 0 and json.loads(again.stdout)["skipped"] == 4
    assert "4 runs (4 already done, 0 to run)" in again.stderr
    more = json.loads(sweep(*args, "--seeds", "3", "--format", "json", "-q").stdout)
    assert more["executed"] == 2 and more["skipped"] == 4 and more["runs"] == 6
    after = _runs(out).set_index("run_id")["finished_at"]
    assert len(after) == 6 and (after[before.index] == before).all()  # old rows untouched


def test_a_failed_run_is_recorded_and_the_others_complete(store: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    # '10,1' is not ascending: las refuses it when the run starts (not when parsing).
    args = [
        "--store", str(store), "--policy", "las,philly", "--param",
        "las.thresholds_gpu_h=1,10;10,1", "--out", str(out), "--workers", "1", "--format", "json",
        "--no-figures",
    ]  # fmt: skip
    r = sweep(*args)
    # Some runs failed, the others are written: ExitStatus.PARTIAL, not 1.
    assert r.exit_code == 3
    assert (
        "failed: las seed 0 thresholds_gpu_h=10,1: UserError: policy las: thresholds_gpu_h must be finite, positive and ascending"
        in r.stderr
    )
    assert "1 of 3 runs failed" in r.stderr
    doc = json.loads(r.stdout)
    assert [f["params"]["thresholds_gpu_h"] for f in doc["failed"]] == ["10,1"]
    runs = _runs(out)
    bad = runs[runs["status"] == "failed"]
    assert len(bad) == 1 and bad["param_thresholds_gpu_h"].iloc[0] == "10,1"
    assert "Traceback" in bad["traceback"].iloc[0] and pd.isna(bad["jobs"].iloc[0])
    jobs = run_replay(store, "philly", {}, 0).metrics["jobs"]
    assert (runs[runs["status"] == "ok"]["jobs"] == jobs).all() and len(runs) == 3
    assert "## Failed runs" in (out / "report.md").read_text()
    # Re-run: the failed run is tried again, the others are skipped.
    again = json.loads(sweep(*args).stdout)
    assert again["executed"] == 1 and again["skipped"] == 2


def test_a_sweep_whose_every_run_failed_exits_1(store: Path, tmp_path: Path) -> None:
    """Nothing completed: a failed run's exit 1, not the partial failure's 3."""
    r = sweep(
        "--store", str(store), "--policy", "las", "--param", "thresholds_gpu_h=10,1;20,2",
        "--workers", "1", "--no-figures", "--format", "json",
    )  # fmt: skip
    assert r.exit_code == 1, r.stderr
    assert "error: 2 of 2 runs failed (listed above); run the same command again to retry them" in (
        r.stderr
    )


def test_a_worker_that_dies_loses_only_its_run(store: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    r = sweep(
        "--store", str(store), "--import", "tests._sweep_plugin", "--policy", "crashy-test",
        "--param", "crash=false,true", "--seeds", "2", "--out", str(out), "--workers", "2",
        "--no-figures",
        "--format", "json", "-q",
    )  # fmt: skip
    assert r.exit_code == 3, r.stderr  # 2 of 4 runs failed: partial
    runs = _runs(out)
    assert len(runs) == 4
    died = runs[runs["param_crash"]]
    assert (died["status"] == "failed").all()
    assert died["error"].str.contains("worker process running it died").all()
    assert (runs[~runs["param_crash"]]["status"] == "ok").all()
    assert (runs[~runs["param_crash"]]["jobs"] == run_replay(store, "philly").metrics["jobs"]).all()


def test_an_interrupted_sweep_keeps_its_runs_and_resumes(store: Path, tmp_path: Path) -> None:
    from philly_analyze.progress import NullTracker
    from philly_analyze.sweep import run_sweep
    from philly_analyze.sweep.results import RunsTable

    class StopAfter(NullTracker):
        def __init__(self, n: int) -> None:
            self.left = n

        def advance(self, amount: float = 1) -> None:
            self.left -= 1
            if self.left == 0:
                raise KeyboardInterrupt

    out = tmp_path / "out"
    kw = {"seeds": 5, "out": out, "workers": 1, "figures": False}
    with pytest.raises(KeyboardInterrupt):
        run_sweep(store, "philly", {}, progress=StopAfter(3), **kw)
    assert len(_runs(out)) == 3
    res = run_sweep(store, "philly", {}, **kw)
    assert res.executed == 2 and res.skipped == 3 and len(res.runs) == 5
    # A harder stop (the process killed) leaves part files; they count as done next time.
    table = RunsTable(out, flush_every=0)
    row = dict(table.rows[res.runs["run_id"].iloc[0]], run_id="f" * 20)
    table.add(row)
    assert list((out / "parts").glob("*.parquet"))
    assert "f" * 20 in RunsTable(out).done()


def test_out_must_be_a_sweep_output(store: Path, tmp_path: Path) -> None:
    other = tmp_path / "other"
    other.mkdir()
    (other / "keep.txt").write_text("mine")
    r = sweep("--store", str(store), "--out", str(other))
    assert r.exit_code == 1 and "is not a sweep output" in r.stderr
    assert (other / "keep.txt").read_text() == "mine"


def test_without_out_nothing_is_written(
    store: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    r = sweep("--store", str(store), "--policy", "philly,las", "--workers", "1")
    assert r.exit_code == 0
    assert list(tmp_path.iterdir()) == []
    assert "mean over seeds" in r.stdout and "queue_mean_s" in r.stdout
    assert "philly" in r.stdout and "las" in r.stdout


def test_without_a_swept_parameter_the_figure_has_bars(store: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    r = sweep(
        "--store", str(store), "--policy", "philly,fifo", "--out", str(out), "-q",
        "--workers", "1", "--metric", "queue_mean_s,jct_mean_s",
    )  # fmt: skip
    assert r.exit_code == 0
    assert (out / "figures" / "policies.png").stat().st_size > 10_000
    # --metric chooses the report's columns too.
    assert (
        "| policy | runs | failed | queue_mean_s | jct_mean_s |" in (out / "report.md").read_text()
    )


def test_ray_asked_for_but_not_installed(
    store: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "ray", None)  # what `import ray` sees when it is absent
    r = sweep("--store", str(store), "--ray", "127.0.0.1:1", "--out", str(tmp_path / "o"))
    assert r.exit_code == 1
    assert "pip install 'philly-analyze[distributed]'" in r.stderr


def test_the_local_sweep_needs_no_ray(store: Path) -> None:
    code = (
        "import sys; sys.modules['ray'] = None\n"
        "from philly_analyze.sweep import run_sweep\n"
        f"r = run_sweep({str(store)!r}, 'philly', seeds=2, workers=1)\n"
        "assert (r.runs['status'] == 'ok').all() and len(r.runs) == 2\n"
        "print('ok')\n"
    )
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == "ok"


def test_a_parameter_set_to_none_is_labelled_and_plotted(store: Path, tmp_path: Path) -> None:
    """``max_retries=0,none`` (``sweep --help``): the None run is a cell labelled ``none``,
    not a blank one that reads as "policy without the parameter" (and the figure drew it:
    this crashed with ``KeyError: nan``)."""
    out = tmp_path / "out"
    r = sweep(
        "--store", str(store), "--policy", "philly,relaxed", "--param", "max_retries=0,none",
        "--out", str(out), "--workers", "1", "--format", "csv", "-q",
    )  # fmt: skip
    assert r.exit_code == 0, r.output
    runs = _runs(out).set_index(["policy", "param_max_retries"])
    # relaxed is philly without locality: it takes max_retries too.
    assert sorted(runs.index) == [("philly", "0"), ("philly", "none"), ("relaxed", "0"),
                                  ("relaxed", "none")]  # fmt: skip
    none_run = json.loads(runs["params_json"].loc[("philly", "none")])
    assert none_run["max_retries"] is None  # the replay ran with None, the column says "none"
    labels = {(row["policy"], row["param_max_retries"]) for _, row in _csv(r.stdout).iterrows()}
    assert ("philly", "none") in labels and ("philly", "0") in labels
    assert (out / "figures" / "max_retries.png").stat().st_size > 10_000


def _csv(text: str) -> pd.DataFrame:
    import io

    return pd.read_csv(io.StringIO(text), dtype=str)


def test_former_metric_name_is_accepted_with_a_note(store: Path, tmp_path: Path) -> None:
    """``fidelity_queue_mae_s`` was renamed ``fidelity_queue_median_abs_err_s`` (it is a
    median): ``--metric`` takes the old name, says so, and shows the metric; an unknown name
    is a usage error naming the closest one (issue 14: it was a note, and exit 0)."""
    r = sweep(
        "--store", str(store), "--policy", "philly", "--metric", "fidelity_queue_mae_s",
        "--workers", "1", "--format", "csv",
    )  # fmt: skip
    assert r.exit_code == 0, r.output
    assert "'fidelity_queue_mae_s' is now called 'fidelity_queue_median_abs_err_s'" in r.stderr
    r = sweep("--store", str(store), "--policy", "philly", "--metric", "queue_mean", "-q")
    assert r.exit_code == 2
    assert "no metric 'queue_mean' (did you mean queue_mean_s?)" in r.stderr
    table = sweep(
        "--store", str(store), "--policy", "philly", "--metric", "fidelity_queue_mae_s",
        "--workers", "1", "-q",
    )  # fmt: skip
    assert "fidelity_queue_median_abs_err_s" in table.stdout.splitlines()[2]


def test_runs_of_an_older_version_resume_under_the_new_metric_name(
    store: Path, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    args = ("--store", str(store), "--policy", "philly", "--out", str(out), "--workers", "1")
    assert sweep(*args, "-q").exit_code == 0
    old = pq.read_table(out / "runs.parquet")
    names = [
        "fidelity_queue_mae_s" if n == "fidelity_queue_median_abs_err_s" else n
        for n in old.column_names
    ]
    pq.write_table(old.rename_columns(names), out / "runs.parquet")  # as an older version wrote
    again = sweep(*args, "--format", "json", "-q")
    doc = json.loads(again.stdout)
    assert doc["executed"] == 0 and doc["skipped"] == 1
    assert "fidelity_queue_median_abs_err_s" in _runs(out).columns
    assert "fidelity_queue_mae_s" not in _runs(out).columns
    assert "fidelity_queue_median_abs_err_s" in {row["metric"] for row in doc["summary"]}
