"""Framework logs whose path and text name no YARN id, keyed by their own file or folder name
(``--framework-job-key``). Real logs are copied into id-less layouts at test time (never into
the project)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from click.testing import CliRunner, Result

from philly_analyze.cli import main
from philly_analyze.ingest.framework_ids import AttemptId, from_file
from tests.store_query import q
from tests.test_real_samples_dl_logs import CNTK1, ECC, FAILURES, MEGATRON, SYNERGY

APP = "application_1506638472019_0001"


def ingest(*args: str | Path) -> Result:
    return CliRunner().invoke(main, ["ingest", *map(str, args), "--json"])


def test_key_rules() -> None:
    assert from_file("/b/slurm-1809579.out", "filename") == (
        AttemptId("slurm-1809579", None, "file name"),
        "b",
    )
    # Compression and one more extension go; other dots stay.
    found = from_file("/b/model.v2.log.gz", "filename")
    assert found is not None and found[0].job_id == "model.v2"
    found = from_file("/b/logs.tar!x/run7.err", "filename")
    assert found is not None and found[0].job_id == "run7"
    assert from_file("/r/run17/stdout.txt", "folder") == (
        AttemptId("run17", None, "folder name"),
        "r",
    )
    assert from_file("/r/run17/attempt_1/stderr.txt", "folder") == (
        AttemptId("run17", 1, "folder name"),
        "r",
    )
    assert from_file("/r/run17/stdout.txt", "ids") is None


def test_real_logs_of_a_batch_folder_keyed_by_file_name(reference: Path, tmp_path: Path) -> None:
    logs = reference / "real-samples" / "dl-logs"
    batch = tmp_path / "batch"
    batch.mkdir()
    for name in FAILURES:
        shutil.copy(logs / name, batch / name)
    store = tmp_path / "s"
    r = ingest(batch, "--store", store, "--framework-job-key", "filename")
    assert r.exit_code == 0, r.output
    assert {s["status"] for s in json.loads(r.stdout)["sources"]} == {"ingested"}
    got = {
        row[0]: row[1:] for row in q(store, "SELECT job_id, verdict, reason, line_no FROM failures")
    }
    # Each job is its file's name without the last extension; verdicts as with a mapping.
    want = {n.rsplit(".", 1)[0]: (v, r, line) for n, (v, r, _, line) in FAILURES.items()}
    assert got == want
    epochs = dict(q(store, "SELECT job_id, count(*) FROM epochs GROUP BY job_id"))
    stem = {n: n.rsplit(".", 1)[0] for n in (CNTK1, MEGATRON, SYNERGY, ECC)}
    # CNTK MNIST 3 epochs, Megatron 19 iterations, synergy 3,955 steps, the ECC excerpt 1.
    assert [epochs[stem[n]] for n in (CNTK1, MEGATRON, SYNERGY, ECC)] == [3, 19, 3955, 1]
    assert q(store, "SELECT count(*) FROM failures WHERE attempt_idx IS NOT NULL") == [(0,)]


def test_real_logs_in_run_folders_keyed_by_folder(reference: Path, tmp_path: Path) -> None:
    logs = reference / "real-samples" / "dl-logs"
    runs = tmp_path / "runs"
    for run, name in (("mnist", CNTK1), ("gpt", MEGATRON)):
        (runs / run).mkdir(parents=True)
        shutil.copy(logs / name, runs / run / "stdout.txt")
    (runs / "gpt" / "attempt_1").mkdir()
    shutil.copy(logs / ECC, runs / "gpt" / "attempt_1" / "stderr.txt")
    store = tmp_path / "s"
    r = ingest(runs, "--store", store, "--framework-job-key", "folder")
    assert r.exit_code == 0, r.output
    assert q(store, "SELECT job_id, attempt_idx, reason FROM failures ORDER BY 1, 2") == [
        ("gpt", 1, "GPU ECC error"),
        ("gpt", None, "Job preempted"),
        ("mnist", None, "No signature"),
    ]
    assert q(
        store, "SELECT job_id, attempt_idx, count(*) FROM epochs GROUP BY ALL ORDER BY 1, 2"
    ) == [
        ("gpt", 1, 1),
        ("gpt", None, 19),
        ("mnist", None, 3),
    ]


def test_stdout_and_stderr_of_one_run_and_a_name_in_two_folders(tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    (logs / "zz").mkdir(parents=True)
    (logs / "run17.out").write_text("INFO:tensorflow:loss = 2.5, step = 10\n")
    (logs / "run17.err").write_text("Traceback (most recent call last):\nMemoryError\n")
    # Files are walked in path order: the first folder to give a key keeps it (zz/ comes last).
    (logs / "zz" / "run17.log").write_text("INFO:tensorflow:loss = 9.0, step = 1\n")
    # An id in the path or a mapping still wins over the file's name.
    (logs / APP).mkdir()
    (logs / APP / "stdout.txt").write_text("INFO:tensorflow:loss = 1.0, step = 1\n")
    store = tmp_path / "s"
    r = ingest(logs, "--store", store, "--framework-job-key", "filename")
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)
    skipped = [s for s in out["sources"] if s["status"] == "skipped"]
    assert [Path(s["source"]).name for s in skipped] == ["run17.log"]
    assert skipped[0]["message"].startswith(
        f"job key 'run17' (its file name) is already the job of {logs / 'run17.err'}, in another "
        "folder: the two would merge into one job"
    )
    assert q(store, "SELECT job_id, epoch, loss FROM epochs ORDER BY 1") == [
        (APP, 1, 1.0),
        ("run17", 10, 2.5),
    ]
    assert q(store, "SELECT job_id, reason FROM failures ORDER BY 1") == [
        (APP, "No signature"),
        ("run17", "CPU out of memory"),  # MemoryError in run17.err
    ]
    assert "job attempt of 2 from the file name, 1 from the path; 1 skipped" in " ".join(
        out["notes"]
    )
