"""Framework logs through the real CLI: the synthesizer's layout, every progress shape of
formats.md §4, ranks, time zones, several files per attempt, and broken input."""

from __future__ import annotations

import datetime as dt
import gzip
import json
import tarfile
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from philly_analyze.cli import main
from philly_analyze.ingest import framework
from tests.store_query import q

UTC = dt.UTC
A = "application_1506638472019_0001"
B = "application_1506638472019_0002"


def ingest(*args: str | Path) -> Result:
    return CliRunner().invoke(main, ["ingest", *map(str, args)])


def write(root: Path, job: str, attempt: int, name: str, lines: list[str] | bytes) -> Path:
    p = root / "framework" / job / f"attempt_{attempt}" / name
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_bytes(lines if isinstance(lines, bytes) else ("\n".join(lines) + "\n").encode())
    return p


def test_synthesizer_layout_formats_md_lines(tmp_path: Path, store_dir: Path) -> None:
    # formats.md §4 lines, verbatim.
    write(
        tmp_path,
        A,
        0,
        "stdout.txt",
        [
            "Epoch[ 1 of 10]-Minibatch[   1- 100, 12.80%]: ce = 2.10434176 * 5760; errs = 78.472% * 5760",
            "Finished Epoch[ 1 of 10]: [Training] ce = 1.66950797 * 50000; errs = 61.228% * 50000",
            "Finished Epoch[ 1 of 100]: [Validate] CE = 0.32190538 * 3592929",
        ],
    )
    write(
        tmp_path,
        A,
        0,
        "stderr.txt",
        ["Traceback (most recent call last):", "ImportError: No module named 'cntk'"],
    )
    write(
        tmp_path,
        A,
        1,
        "stdout.txt",
        [
            "INFO:tensorflow:loss = 2.36026, step = 1",
            "INFO:tensorflow:loss = 76982.47, step = 101 (1.080 sec)",
            "INFO:tensorflow:Saving checkpoints for 300 into /tmp/leftoff/model.ckpt.",
            "INFO:tensorflow:Loss for final step: 0.553216.",
        ],
    )
    write(
        tmp_path,
        B,
        0,
        "stdout.txt",
        [
            "Finished Epoch[ 1 of 100]: [Training] CE = 0.15920662 * 59999999; totalSamplesSeen = 59999999; learningRatePerSample = 9.9999997e-05; epochTime=641.392s",
            "Epoch: [3][ 400/5005]\tTime  0.412 ( 0.398)\tData  0.001 ( 0.012)\tLoss 3.1416e+00 (3.2071e+00)\tAcc@1  32.81 ( 31.10)\tAcc@5  58.59 ( 56.72)",
        ],
    )
    r = ingest(tmp_path / "framework", "--store", store_dir)
    assert r.exit_code == 0, r.output
    assert "(framework_log)" in r.output
    epochs = q(
        store_dir,
        "SELECT job_id, attempt_idx, unit, epoch, loss, line_no, time FROM epochs ORDER BY 1, 2, 4",
    )
    assert epochs == [
        (A, 0, "epoch", 1, 1.66950797, 2, None),
        (A, 1, "step", 1, 2.36026, 1, None),
        (A, 1, "step", 101, 76982.47, 2, None),
        (B, 0, "epoch", 1, 0.15920662, 1, None),
        (B, 0, "step", 3 * 5005 + 400, 3.1416, 2, None),
    ]
    failures = q(
        store_dir,
        "SELECT job_id, attempt_idx, verdict, reason, categories, signature, line_no, message, log_file FROM failures ORDER BY 1, 2",
    )
    assert [f[:8] for f in failures] == [
        (
            A,
            0,
            "failed",
            "Import error",
            "IF,U",
            "no-module",
            2,
            "ImportError: No module named 'cntk'",
        ),
        (
            A,
            1,
            "completed",
            "No signature",
            "-",
            None,
            4,
            "INFO:tensorflow:Loss for final step: 0.553216.",
        ),
        (B, 0, "none", "No signature", "-", None, None, None),
    ]
    assert failures[0][8].endswith(f"{A}/attempt_0/stderr.txt")
    # Idempotent: the same files again change nothing.
    r = ingest(tmp_path / "framework", "--store", store_dir)
    assert r.exit_code == 0 and "already ingested" in r.output
    assert q(store_dir, "SELECT count(*) FROM epochs") == [(5,)]
    assert q(store_dir, "SELECT count(*) FROM failures") == [(3,)]


@pytest.mark.parametrize(
    ("zone", "cntk_utc", "mxnet_utc"),
    [
        (
            "UTC",
            dt.datetime(2016, 9, 22, 21, 57, 14, tzinfo=UTC),
            dt.datetime(2019, 6, 18, 9, 10, 44, 633000, tzinfo=UTC),
        ),
        # Default America/Los_Angeles: PDT is UTC-7.
        (
            None,
            dt.datetime(2016, 9, 23, 4, 57, 14, tzinfo=UTC),
            dt.datetime(2019, 6, 18, 16, 10, 44, 633000, tzinfo=UTC),
        ),
    ],
)
def test_line_times_use_the_timezone(
    tmp_path: Path, store_dir: Path, zone: str | None, cntk_utc: dt.datetime, mxnet_utc: dt.datetime
) -> None:
    write(
        tmp_path,
        A,
        0,
        "stdout.txt",
        [
            "MPI Rank 0: 09/22/2016 21:57:14: Finished Epoch[ 1 of 3]: [Training] ce = 0.23254831 * 60000; errs = 7.082% * 60000",
            "[1,0]<stderr>:2019-06-18 09:10:44,633 Node[0] Epoch[2] Train-cross-entropy=1.25",
            "[2021-08-12 08:19:28,225] [INFO] iteration      200/    1000 | lm loss: 7.365868E+00 |",
        ],
    )
    extra = ["--timezone", zone] if zone else []
    r = ingest(tmp_path, "--store", store_dir, *extra)
    assert r.exit_code == 0, r.output
    rows = q(store_dir, "SELECT unit, epoch, loss, time FROM epochs ORDER BY line_no")
    megatron_naive = dt.datetime(2021, 8, 12, 8, 19, 28, 225000)
    megatron = megatron_naive.replace(tzinfo=UTC) + (
        dt.timedelta(hours=7) if zone is None else dt.timedelta(0)
    )
    assert rows == [
        ("epoch", 1, 0.23254831, cntk_utc),
        ("epoch", 2, 1.25, mxnet_utc),
        ("step", 200, 7.365868, megatron),
    ]


def test_ranks_lowest_tag_and_untagged_duplicates(tmp_path: Path, store_dir: Path) -> None:
    write(
        tmp_path,
        A,
        0,
        "stdout.txt",
        [
            "[1,1]<stdout>:INFO:tensorflow:loss = 9.0, step = 1",
            "[1,0]<stdout>:INFO:tensorflow:loss = 2.0, step = 1",
            "[1,0]<stdout>:INFO:tensorflow:loss = 1.5, step = 2",
            "[1,1]<stdout>:INFO:tensorflow:loss = 8.0, step = 2",
        ],
    )
    write(
        tmp_path,
        A,
        1,
        "stdout.txt",
        [  # only ranks 2 and 3 printed: rank 2 is kept
            "[default3]:Epoch: [0][1/10]\tLoss 7.0 (7.0)",
            "[default2]:Epoch: [0][1/10]\tLoss 6.0 (6.0)",
        ],
    )
    write(
        tmp_path,
        B,
        0,
        "stdout.txt",
        [  # untagged, interleaved ranks: first line of a step
            "Epoch: [0][1/10]\tLoss 5.0 (5.0)",
            "Epoch: [0][1/10]\tLoss 5.5 (5.5)",
            "Epoch: [0][2/10]\tLoss 4.0 (4.0)",
        ],
    )
    # stderr repeats a step of stdout: one row per (unit, epoch) per attempt, from the file
    # first in path order (stderr.txt sorts before stdout.txt).
    write(
        tmp_path,
        B,
        0,
        "stderr.txt",
        ["Epoch: [0][2/10]\tLoss 4.4 (4.4)", "Epoch: [0][3/10]\tLoss 3.0 (3.0)"],
    )
    r = ingest(tmp_path, "--store", store_dir)
    assert r.exit_code == 0, r.output
    rows = q(store_dir, "SELECT job_id, attempt_idx, epoch, loss FROM epochs ORDER BY 1, 2, 3")
    assert rows == [
        (A, 0, 1, 2.0),
        (A, 0, 2, 1.5),
        (A, 1, 1, 6.0),
        (B, 0, 1, 5.0),
        (B, 0, 2, 4.4),
        (B, 0, 3, 3.0),
    ]


def test_unknown_job_skipped_not_recorded_then_mapping(tmp_path: Path, store_dir: Path) -> None:
    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "train.log").write_text("INFO:tensorflow:loss = 2.5, step = 10\nMemoryError\n")
    write(tmp_path, A, 0, "stdout.txt", ["INFO:tensorflow:loss = 1.0, step = 1"])
    r = ingest(tmp_path, "--store", store_dir)
    assert r.exit_code == 0, r.output
    assert "skipped" in r.output and "unknown job" in r.output
    assert q(store_dir, "SELECT count(*) FROM ingest_log WHERE source LIKE '%train.log'") == [(0,)]
    mapping = tmp_path / "map.csv"
    mapping.write_text(f"path,job_id,attempt_idx\nlogs/train.log,{B},2\n")
    r = ingest(tmp_path, "--store", store_dir, "--framework-mapping", mapping)
    assert r.exit_code == 0, r.output
    assert q(
        store_dir, "SELECT epoch, loss FROM epochs WHERE job_id = ? AND attempt_idx = 2", [B]
    ) == [(10, 2.5)]
    assert q(store_dir, "SELECT reason FROM failures WHERE job_id = ?", [B]) == [
        ("CPU out of memory",)
    ]


def test_job_from_content_container_id(tmp_path: Path, store_dir: Path) -> None:
    p = tmp_path / "run.log"
    p.write_text(
        "CONTAINER_ID=container_e26_1506638472019_0001_02_000001\nSegmentation fault (core dumped)\n"
    )
    r = ingest(p, "--store", store_dir)
    assert r.exit_code == 0, r.output
    assert q(store_dir, "SELECT job_id, attempt_idx, reason FROM failures") == [(A, 1, "Core dump")]


def test_broken_inputs(tmp_path: Path, store_dir: Path) -> None:
    write(tmp_path, A, 0, "empty.txt", b"")
    write(tmp_path, A, 0, "binary.bin", bytes(range(256)) * 50)
    write(
        tmp_path,
        A,
        0,
        "garbage.txt",
        b"\x01\x02 qwe\nasdf;lkj\n}{][ \x7f\nEpoch: [x][y/z] Loss\nINFO:tensorflow:loss = , step = \n",
    )
    # Invalid UTF-8 in a progress line (past the 8 KB the binary check reads), a number cut
    # short, and a last line without a newline.
    filler = b"".join(b"starting worker %d\n" % i for i in range(600))
    write(
        tmp_path,
        A,
        1,
        "stdout.txt",
        filler
        + b"INFO:tensorflow:loss = 1., step = 3 \xff\nINFO:tensorflow:loss = 1.2e, step = 5\nINFO:tensorflow:loss = 2.5, step = 7",
    )
    long_line = b"x" * (3 << 20)
    write(
        tmp_path,
        B,
        0,
        "stdout.txt",
        long_line + b"\nINFO:tensorflow:loss = 0.5, step = 9\n" + long_line,
    )
    r = ingest(tmp_path, "--store", store_dir, "--json")
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)
    status = {
        Path(s["source"]).name: s["status"]
        for s in out["sources"]
        if s["format"] != "framework_log" or "!" not in s["source"]
    }
    assert status["empty.txt"] == "unknown" and status["binary.bin"] == "unknown"
    assert q(
        store_dir, "SELECT job_id, attempt_idx, epoch, loss, line_no FROM epochs ORDER BY 1, 2"
    ) == [
        (A, 1, 3, 1.0, 601),
        (A, 1, 7, 2.5, 603),
        (B, 0, 9, 0.5, 2),
    ]
    verdicts = q(store_dir, "SELECT job_id, attempt_idx, verdict FROM failures ORDER BY 1, 2")
    assert verdicts == [(A, 0, "none"), (A, 1, "none"), (B, 0, "none")]


def test_gzip_tar_and_corrupt_gzip(tmp_path: Path, store_dir: Path) -> None:
    src = tmp_path / "src"
    p = write(
        src,
        A,
        0,
        "stdout.txt",
        ["INFO:tensorflow:loss = 3.0, step = 5", "RuntimeError: CUDA error: out of memory"],
    )
    archive = tmp_path / "logs.tar.gz"
    with tarfile.open(archive, "w:gz") as tf:
        tf.add(p, arcname=f"framework/{A}/attempt_0/stdout.txt")
    gz = tmp_path / "plain" / B / "attempt_1" / "stderr.txt.gz"
    gz.parent.mkdir(parents=True)
    gz.write_bytes(
        gzip.compress(
            b"INFO:tensorflow:loss = 4.0, step = 6\nMPI_ABORT was invoked on rank 0 in communicator MPI_COMM_WORLD\n"
        )
    )
    r = ingest(archive, gz, "--store", store_dir)
    assert r.exit_code == 0, r.output
    assert q(store_dir, "SELECT job_id, attempt_idx, reason FROM failures ORDER BY 1") == [
        (A, 0, "GPU out of memory"),
        (B, 1, "MPI error"),
    ]
    assert q(store_dir, "SELECT job_id, epoch FROM epochs ORDER BY 1") == [(A, 5), (B, 6)]
    # A gzip cut short: an error naming the file (exit 1), what was read before it is kept.
    body = "".join(f"INFO:tensorflow:loss = {i}.5, step = {i}\n" for i in range(20000)).encode()
    bad = tmp_path / "bad" / B / "attempt_2" / "stdout.txt.gz"
    bad.parent.mkdir(parents=True)
    bad.write_bytes(gzip.compress(body)[:20000])
    r = ingest(bad, "--store", store_dir)
    assert r.exit_code == 1
    assert "stdout.txt.gz" in r.output and "cannot read further" in r.output
    kept = q(store_dir, "SELECT count(*), min(epoch) FROM epochs WHERE attempt_idx = 2")[0]
    assert kept[0] > 0 and kept[1] == 0
    assert q(store_dir, "SELECT count(*) FROM rejects WHERE source LIKE '%stdout.txt.gz'") == [(1,)]


def test_large_files_stream_and_small_files_batch(
    tmp_path: Path, store_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Tiny chunk sizes force many chunks per large file and many batches of small files."""
    monkeypatch.setattr(framework, "CHUNK_BYTES", 16384)
    monkeypatch.setattr(framework, "SMALL_FILE_BYTES", 2048)
    big = [f"INFO:tensorflow:loss = {i / 1000}, step = {i}" for i in range(3000)]
    big[1500] = "ResourceExhaustedError: OOM when allocating tensor with shape[64,1000]"
    big.append("Traceback (most recent call last):")
    write(tmp_path, A, 0, "stdout.txt", big)
    for k in range(40):
        write(
            tmp_path,
            B,
            k,
            "stdout.txt",
            [f"Epoch: [0][{k}/40]\tLoss {k}.25 ({k}.25)"] * 3 + (["MemoryError"] if k % 2 else []),
        )
    r = ingest(tmp_path, "--store", store_dir)
    assert r.exit_code == 0, r.output
    assert q(store_dir, "SELECT count(*), sum(epoch) FROM epochs WHERE job_id = ?", [A]) == [
        (2999, sum(range(3000)) - 1500)
    ]
    assert q(store_dir, "SELECT reason, line_no FROM failures WHERE job_id = ?", [A]) == [
        ("GPU out of memory", 1501)
    ]
    rows = q(
        store_dir, "SELECT attempt_idx, epoch, loss FROM epochs WHERE job_id = ? ORDER BY 1", [B]
    )
    assert rows == [(k, k, k + 0.25) for k in range(40)]
    reasons = q(
        store_dir,
        "SELECT attempt_idx, reason, line_no FROM failures WHERE job_id = ? ORDER BY 1",
        [B],
    )
    assert reasons == [
        (k, "CPU out of memory", 4) if k % 2 else (k, "No signature", None) for k in range(40)
    ]


def test_documentation_quoting_failures_is_not_a_log(tmp_path: Path, store_dir: Path) -> None:
    # A provenance note that quotes real failure lines and an application id (like
    # ../shared/reference/real-samples/PROVENANCE.md) must not become a job's failure.
    doc = tmp_path / "NOTES.md"
    doc.write_text(
        "# Samples\n\n| file | what |\n|---|---|\n"
        f"| x.log | `RuntimeError: CUDA error: out of memory` in {A} |\n"
    )
    r = ingest(doc, "--store", store_dir)
    assert r.exit_code == 1 and "unrecognised format" in r.stderr
    assert not store_dir.exists()  # nothing taken: no store, so no failure row either
