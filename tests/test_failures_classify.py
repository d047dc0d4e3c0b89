"""How the classifier decides: priorities, ties, completed runs, unmatched and empty logs."""

from __future__ import annotations

import random

import pyarrow as pa
import pyarrow.compute as pc
from hypothesis import given, settings
from hypothesis import strategies as st

from philly_analyze.failures import NO_SIGNATURE, VERDICTS, Evidence, Scanner, classify, load_rules

RULES = load_rules()
PROGRESS = [
    "INFO:tensorflow:loss = 2.36026, step = 1",
    "Epoch: [3][ 400/5005]\tTime  0.412 ( 0.398)\tData  0.001 ( 0.012)\tLoss 3.1416e+00 (3.2071e+00)",
    "Finished Epoch[ 1 of 10]: [Training] ce = 1.66950797 * 50000; errs = 61.228% * 50000",
    "MPI Rank 0: 08/16/2016 10:09:34:  Epoch[ 1 of 4]-Minibatch[  11-  20, 6.25%]: CrossEntropyWithSoftmax = 4.35619366 * 640; EvalClassificationError = 0.92343750 * 640",
]


def test_specific_cause_beats_the_traceback_and_mpirun_it_triggers() -> None:
    log = [
        "Traceback (most recent call last):",
        "RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB",
        "mpirun noticed that process rank 0 with PID 77967 on node n342 exited on signal 9 (Killed).",
    ]
    m = classify(log)
    assert (m.reason, m.signature, m.line_no, m.verdict) == (
        "GPU out of memory",
        "torch-cuda-oom",
        2,
        "failed",
    )
    assert m.categories == "AE"


def test_equal_priority_keeps_the_earliest_line() -> None:
    log = [
        "ImportError: No module named 'cntk'",
        "IOError: [Errno 2] No such file or directory: '/x'",
    ]
    # Import error and Incorrect inputs both have priority 50: the first line decides.
    assert classify(log).reason == "Import error"
    assert classify(log[::-1]).reason == "Incorrect inputs"


def test_errors_before_completion_are_benign_and_crash_after_is_not() -> None:
    benign = [
        "MPI_ABORT was invoked on rank 0 in communicator MPI_COMM_WORLD",
        *PROGRESS,
        "__COMPLETED__",
    ]
    m = classify(benign)
    assert (m.verdict, m.reason, m.signature, m.line_no) == ("completed", NO_SIGNATURE, None, 6)
    crash = [*benign, "Segmentation fault (core dumped)"]
    m = classify(crash)
    assert (m.verdict, m.reason, m.line_no) == ("failed", "Core dump", 7)
    # A later completion marker makes the crash before it benign again.
    m = classify([*crash, "RESULT,IMAGE_CLASSIFICATION,,3612,,2019-06-18 09:09:40 AM"])
    assert (m.verdict, m.reason) == ("completed", NO_SIGNATURE)


def test_completion_in_one_file_makes_other_files_errors_benign() -> None:
    """stdout ends normally; stderr has error lines: the attempt completed."""
    scanner = Scanner(RULES)
    ev = Evidence(scanner)
    for name, lines in [
        ("stderr.txt", ["NCCL error in: ProcessGroupNCCL.cpp:272, unhandled system error"]),
        ("stdout.txt", [*PROGRESS, "INFO:tensorflow:Loss for final step: 0.553216."]),
    ]:
        arr = pa.array(lines)
        hits = scanner.scan(arr)
        assert hits is not None
        ev.add(name, 1, arr, hits)
    m = ev.result()
    assert (m.verdict, m.log, m.line_no) == ("completed", "stdout.txt", 5)


def test_evidence_across_files_and_chunks_keeps_first_of_equal_priority() -> None:
    scanner = Scanner(RULES)
    ev = Evidence(scanner)
    chunks = [
        ("stderr.txt", 1, ["Traceback (most recent call last):", "KeyError: 'num_classes'"]),
        ("stderr.txt", 3, ["TypeError: unsupported operand type(s)"]),
        ("stdout.txt", 1, ["AttributeError: 'module' object has no attribute 'mul'"]),
    ]
    for name, first, lines in chunks:
        arr = pa.array(lines)
        hits = scanner.scan(arr)
        assert hits is not None
        ev.add(name, first, arr, hits)
    m = ev.result()
    assert (m.reason, m.signature, m.log, m.line_no) == (
        "Semantic error",
        "key-index-error",
        "stderr.txt",
        2,
    )


def test_unmatched_keeps_last_error_looking_line() -> None:
    log = ["starting", "ERROR: something odd happened", "Fatal: the frobnicator broke", "bye"]
    m = classify(log)
    assert (m.verdict, m.reason, m.categories, m.signature) == (
        "unmatched",
        NO_SIGNATURE,
        "-",
        None,
    )
    assert (m.line_no, m.message) == (3, "Fatal: the frobnicator broke")


def test_no_evidence_and_empty_logs() -> None:
    assert classify(PROGRESS) == classify([]) == classify([""])
    m = classify([])
    assert (m.verdict, m.reason, m.line_no, m.message) == ("none", NO_SIGNATURE, None, None)


def test_benign_lookalikes_do_not_match() -> None:
    # Real lines from successful runs (nvidia-smi header, CNTK config dumps, UCX/NCCL probing).
    lines = [
        "| GPU  Name        Persistence-M| Bus-Id        Disp.A | Volatile Uncorr. ECC |",
        "MPI Rank 0:         else Fail('unknown trainingCriterion ' + trainingCriterion)",
        "[1594407135.546337] [k69a05298:117  :0]          ib_md.c:1933 UCX  ERROR ibv_open_device(mlx5_9) failed: No such file or directory",
        "k69a05298:149:455 [0] misc/ibvwrap.cc:212 NCCL WARN Call to ibv_open_device failed",
        "09/22/2016 21:57:12: Evaluation criterion: errs = ClassificationError",
        "INFO:tensorflow:loss = 0.0012, step = 2300 (1.212 sec)",
    ]
    assert classify(lines).verdict in ("unmatched", "none")


def test_long_logs_span_chunks() -> None:
    rng = random.Random(5)
    log = [rng.choice(PROGRESS) for _ in range(120_000)]
    log[70_000] = "RuntimeError: CUDA error: uncorrectable ECC error encountered"
    log[110_000] = "Traceback (most recent call last):"
    m = classify(log)
    assert (m.reason, m.line_no) == ("GPU ECC error", 70_001)


def _effective_priority(line: str) -> int:
    """The highest priority of any rule whose pattern matches the line, one rule at a time."""
    arr = pa.array([line])
    return max(
        r.priority for r in RULES.rules if pc.match_substring_regex(arr, r.pattern)[0].as_py()
    )


EXAMPLES = [
    (reason.name, _effective_priority(ex), ex)
    for reason in RULES.reasons
    for rule in reason.rules
    for ex in rule.examples
]


@settings(max_examples=60, deadline=None)
@given(
    picks=st.lists(st.sampled_from(range(len(EXAMPLES))), min_size=1, max_size=4),
    filler=st.lists(st.sampled_from(PROGRESS), max_size=30),
    seed=st.integers(0, 1000),
)
def test_highest_priority_example_decides(picks: list[int], filler: list[str], seed: int) -> None:
    """Any mix of examples among progress lines: the reason is the one of the example whose
    rule has the highest priority (ties: the earliest), worked out here from the data file."""
    lines = list(filler)
    rng = random.Random(seed)
    for i in picks:
        lines.insert(rng.randrange(len(lines) + 1), EXAMPLES[i][2])
    m = classify(lines)
    positions = [(lines.index(EXAMPLES[i][2]), i) for i in set(picks)]
    top = max(EXAMPLES[i][1] for _, i in positions)
    first_top = min(pos for pos, i in positions if EXAMPLES[i][1] == top)
    assert m.line_no == first_top + 1
    assert m.reason == next(EXAMPLES[i][0] for pos, i in positions if pos == first_top)


@settings(max_examples=80, deadline=None)
@given(st.lists(st.text(max_size=200), max_size=40))
def test_arbitrary_text_never_crashes(lines: list[str]) -> None:
    m = classify(lines)
    assert m.verdict in VERDICTS
    assert m.line_no is None or 1 <= m.line_no <= len(lines)
