"""Every real deep-learning log of ../shared/reference/real-samples/dl-logs, through the CLI.

The files are read where they are (never copied into the project); a mapping file names the
job attempt of each (their paths carry no application id). Expected values were read off the
files by hand (grep -n), see the comments.
"""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from philly_analyze.cli import main
from tests.store_query import q

UTC = dt.UTC
CNTK1 = "microsoft__CNTK__GettingStarted_01_OneHidden_baseline.linux.txt"
CNTK_MPI = "microsoft__CNTK__ParallelBufferedAsyncGradientAggregation_baseline.gpu.txt"
SYNERGY = "msr-fiddle__synergy__audio_classification_stdout.out"
MEGATRON = "bigscience-workshop__bigscience__meg_gpt2_base_n4_dp1_tp4_pp4-1809579.out"
ALLREDUCE = "bigscience-workshop__bigscience__all_reduce_bench-a100-n4.txt"
ECC = "bigscience-workshop__bigscience__tr1-13B-base_chronicles_L232-273_ecc_error.log"
OOM = "bigscience-workshop__bigscience__tr1-13B-base_chronicles_L279-300_cuda_oom_barrier.log"
BUS = "bigscience-workshop__bigscience__tr1-13B-base_chronicles_L64-97_dataloader_buserror.log"
C10 = "bigscience-workshop__bigscience__tr11-176B-ml_chronicles_L82-91_c10_CUDAError.log"
MLPERF5 = "mlcommons__training_results_v0.5__nvidia_dgx1_multi_pytorch_ssd_result_0.txt"
MLPERF6 = "mlcommons__training_results_v0.6__NVIDIA_dgx2_mxnet_resnet_result_0.txt"
ALIBABA = "mlcommons__training_results_v0.7__Alibaba_a100-8_resnet_200711025203744603517_1.log"

#: file -> (verdict, reason, rule, line of the deciding message).
FAILURES = {
    # Excerpts: the message decides (see docs/framework-logs.md for each choice).
    ECC: ("failed", "GPU ECC error", "ecc-uncorrectable", 20),  # cudaErrorECCUncorrectable
    OOM: ("failed", "GPU out of memory", "cuda-error-oom", 22),  # CUDA error: out of memory
    BUS: ("failed", "CPU out of memory", "shared-memory-bus-error", 1),  # shm exhausted
    C10: ("failed", "CUDA failure", "cuda-error", 1),  # c10::CUDAError, CUDA error: unknown error
    # SLURM cancelled the job and SIGTERMed it: stopped from outside -> Job preempted.
    MEGATRON: ("failed", "Job preempted", "batch-job-cancelled", 1571),
    # Completed runs (CNTK __COMPLETED__, MLPerf RESULT): errors before are benign.
    CNTK1: ("completed", "No signature", None, 274),
    CNTK_MPI: ("completed", "No signature", None, 1941),
    MLPERF5: ("completed", "No signature", None, 6622),
    MLPERF6: ("completed", "No signature", None, 1889),
    ALIBABA: ("completed", "No signature", None, 1962),  # despite 50+ UCX/NCCL error lines
    # Ends mid-epoch without an error; a clean benchmark: no evidence either way.
    SYNERGY: ("none", "No signature", None, None),
    ALLREDUCE: ("none", "No signature", None, None),
}


@pytest.fixture(scope="module")
def ingested(
    reference: Path, tmp_path_factory: pytest.TempPathFactory
) -> tuple[Path, dict[str, str]]:
    tmp = tmp_path_factory.mktemp("real")
    logs = reference / "real-samples" / "dl-logs"
    files = sorted(p.name for p in logs.iterdir())
    assert set(FAILURES) == set(files), "a new real sample needs its expected outcome here"
    job = {name: f"application_1500000000000_{i:04d}" for i, name in enumerate(files, 1)}
    mapping = tmp / "mapping.csv"
    mapping.write_text(
        "path,job_id,attempt_idx\n" + "".join(f"{logs / n},{job[n]},0\n" for n in files)
    )
    store = tmp / "store"
    r = CliRunner().invoke(
        main, ["ingest", str(logs), "--store", str(store), "--framework-mapping", str(mapping)]
    )
    assert r.exit_code == 0, r.output
    return store, job


@pytest.mark.parametrize("name", sorted(FAILURES))
def test_failure_verdict_and_reason(ingested: tuple[Path, dict[str, str]], name: str) -> None:
    store, job = ingested
    rows = q(
        store,
        "SELECT verdict, reason, signature, line_no, log_file FROM failures WHERE job_id = ?",
        [job[name]],
    )
    assert len(rows) == 1
    verdict, reason, signature, line_no, log_file = rows[0]
    assert (verdict, reason, signature, line_no) == FAILURES[name]
    if line_no is not None:
        assert log_file.endswith(name)


def test_cntk_single_gpu_epochs(ingested: tuple[Path, dict[str, str]]) -> None:
    store, job = ingested
    rows = q(
        store,
        "SELECT epoch, unit, loss, time, line_no FROM epochs WHERE job_id = ? ORDER BY epoch",
        [job[CNTK1]],
    )
    # Finished Epoch[ n of 3]: [Training] ce = ... at lines 199/206/213, 09/22/2016 PDT (UTC-7).
    assert rows == [
        (1, "epoch", 0.23254831, dt.datetime(2016, 9, 23, 4, 57, 14, tzinfo=UTC), 199),
        (2, "epoch", 0.09240444, dt.datetime(2016, 9, 23, 4, 57, 15, tzinfo=UTC), 206),
        (3, "epoch", 0.06433678, dt.datetime(2016, 9, 23, 4, 57, 15, tzinfo=UTC), 213),
    ]


def test_cntk_mpi_rank0_epochs(ingested: tuple[Path, dict[str, str]]) -> None:
    store, job = ingested
    rows = q(
        store,
        "SELECT epoch, loss, time, line_no FROM epochs WHERE job_id = ? ORDER BY epoch",
        [job[CNTK_MPI]],
    )
    # Three ranks print the same four epochs; rank 0's lines are 620/668/685/703.
    assert rows == [
        (1, 3.03815141, dt.datetime(2016, 8, 16, 17, 9, 37, tzinfo=UTC), 620),
        (2, 2.15620068, dt.datetime(2016, 8, 16, 17, 9, 38, tzinfo=UTC), 668),
        (3, 2.09667113, dt.datetime(2016, 8, 16, 17, 9, 38, tzinfo=UTC), 685),
        (4, 1.97591825, dt.datetime(2016, 8, 16, 17, 9, 39, tzinfo=UTC), 703),
    ]


def test_pytorch_steps(ingested: tuple[Path, dict[str, str]]) -> None:
    store, job = ingested
    rows = q(
        store,
        "SELECT epoch, loss, line_no, time FROM epochs WHERE job_id = ? AND unit = 'step' ORDER BY epoch",
        [job[SYNERGY]],
    )
    # 3,955 distinct `Epoch: [e][i/398]` lines; step = e * 398 + i; no time stamps.
    assert len(rows) == 3955
    assert rows[0] == (2, 10.88, 238, None)
    assert rows[-1] == (9 * 398 + 394, 5.0565, 5159, None)


def test_megatron_iterations(ingested: tuple[Path, dict[str, str]]) -> None:
    store, job = ingested
    rows = q(
        store,
        "SELECT epoch, loss, line_no FROM epochs WHERE job_id = ? ORDER BY epoch",
        [job[MEGATRON]],
    )
    # 19 `iteration N/ 1000 | ... lm loss:` lines (iteration 10 has no lm loss); validation not stored.
    assert len(rows) == 19
    assert rows[0] == (20, 12.03115, 1511)
    assert rows[-1] == (200, 7.365868, 1566)


def test_logs_without_loss_give_no_epochs(ingested: tuple[Path, dict[str, str]]) -> None:
    store, job = ingested
    # MXNet progress lines carry accuracy only; the SSD log has only MLPerf key lines.
    for name in (MLPERF5, MLPERF6, ALIBABA, ALLREDUCE, OOM, BUS, C10):
        assert q(store, "SELECT count(*) FROM epochs WHERE job_id = ?", [job[name]]) == [(0,)], name
    # The ECC excerpt starts with one Megatron iteration line.
    assert q(store, "SELECT epoch, loss FROM epochs WHERE job_id = ?", [job[ECC]]) == [
        (43680, 2.635663)
    ]


def test_without_mapping_every_file_is_skipped_with_the_reason(
    reference: Path, store_dir: Path
) -> None:
    logs = reference / "real-samples" / "dl-logs"
    r = CliRunner().invoke(main, ["ingest", str(logs), "--store", str(store_dir), "--json"])
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)
    statuses = {
        Path(s["source"]).name: (s["status"], s["format"], s["message"]) for s in out["sources"]
    }
    assert len(statuses) == len(FAILURES)
    for status, fmt, message in statuses.values():
        assert (status, fmt) == ("skipped", "framework_log")
        assert "unknown job" in message and "--framework-mapping" in message
    assert out["rows_added"] == {}
