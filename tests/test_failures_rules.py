"""The failure signature rules file: Table 7 coverage, every example, loader errors."""

from __future__ import annotations

import csv
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from philly_analyze.errors import UserError
from philly_analyze.failures import NO_SIGNATURE, classify, default_rules_path, load_rules

RULES = load_rules()
EXAMPLES = [
    (reason.name, rule.id, ex)
    for reason in RULES.reasons
    for rule in reason.rules
    for ex in rule.examples
]
#: Prefixes a line may carry in real logs (rank tags of CNTK, Open MPI, torch elastic).
PREFIXES = ["", "MPI Rank 3: ", "[1,2]<stderr>:", "[default3]:", "09/22/2016 21:57:14: "]


def test_every_table7_reason_with_its_categories(reference: Path) -> None:
    with open(reference / "paper" / "table7_failures.csv", newline="") as f:
        paper = {r["failure_reason"]: r["categories"] for r in csv.DictReader(f)}
    assert paper.pop(NO_SIGNATURE) == "-"
    assert len(paper) == 21
    ours = {r.name: r.categories_str for r in RULES.reasons}
    assert ours == paper
    assert RULES.categories_of(NO_SIGNATURE) == "-"
    assert all(r.rules for r in RULES.reasons)


@pytest.mark.parametrize(("reason", "rule_id", "example"), EXAMPLES, ids=[e[1] for e in EXAMPLES])
def test_example_classifies_to_its_reason(reason: str, rule_id: str, example: str) -> None:
    # Alone, behind every rank/time prefix, and with the line ending the scanner sees.
    for prefix in PREFIXES:
        for ending in ("", "\n", "\r\n"):
            m = classify([prefix + example + ending])
            assert (m.reason, m.verdict) == (reason, "failed"), (prefix, ending, m)
            assert m.categories == RULES.reason(reason).categories_str
    # Inside a log with progress and a Python traceback around it, it still decides.
    log = [
        "INFO:tensorflow:loss = 2.36026, step = 1",
        "Traceback (most recent call last):",
        '  File "train.py", line 212, in <module>',
        example,
        "Epoch: [3][ 400/5005]\tTime  0.412 ( 0.398)\tLoss 3.1416e+00 (3.2071e+00)",
    ]
    m = classify(log)
    line = 2 if example == log[1] else 4  # the traceback example: its first occurrence
    assert (m.reason, m.line_no, m.message) == (reason, line, example)


@pytest.mark.parametrize(("reason", "rule_id", "example"), EXAMPLES, ids=[e[1] for e in EXAMPLES])
def test_rule_matches_its_own_examples(reason: str, rule_id: str, example: str) -> None:
    rule = next(r for r in RULES.rules if r.id == rule_id)
    assert pc.match_substring_regex(pa.array([example]), rule.pattern)[0].as_py()


def test_examples_are_distinct_between_reasons() -> None:
    owner: dict[str, str] = {}
    for reason, _, ex in EXAMPLES:
        assert owner.setdefault(ex, reason) == reason, ex
    assert len({e for _, _, e in EXAMPLES}) == len(EXAMPLES)


def test_completion_markers() -> None:
    for marker in RULES.completion:
        for ex in marker.examples:
            m = classify([ex])
            assert (m.verdict, m.reason, m.message) == ("completed", NO_SIGNATURE, ex)


# formats.md §4, "Failure messages": what each line means (decided by hand, see docs).
FORMATS_MD = [
    (
        "RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB (GPU 0; 11.17 GiB total capacity; ...)",
        "GPU out of memory",
    ),
    (
        "ResourceExhaustedError: OOM when allocating tensor with shape[11772117,100] and type float on /job:localhost/replica:0/task:0/device:GPU:0 by allocator GPU_0_bfc",
        "GPU out of memory",
    ),
    ("RuntimeError: CUDA error: an illegal memory access was encountered", "Invalid mem access"),
    (
        "mpirun noticed that process rank 0 with PID 77967 on node n342 exited on signal 9 (Killed).",
        "MPI runtime failure",
    ),
    (
        "mpirun noticed that process rank 3 with PID 1234 on node n17 exited on signal 11 (Segmentation fault).",
        "Invalid mem access",
    ),
    (
        "Horovod has been shut down. This was caused by an exception on one of the ranks or an attempt to allreduce, allgather or broadcast a tensor after one of the ranks finished execution.",
        "MPI runtime failure",
    ),
    (
        "java.net.ConnectException: Call From host/10.0.0.1 to nn:9000 failed on connection exception: java.net.ConnectException: Connection refused",
        "Model ckpt error",
    ),
    ("Traceback (most recent call last):", "Traceback from crash"),
    ("MemoryError", "CPU out of memory"),
    ("Segmentation fault (core dumped)", "Core dump"),
    ("SyntaxError: invalid syntax", "Syntax error"),
    ("ImportError: No module named 'cntk'", "Import error"),
    ("PermissionError: [Errno 13] Permission denied: '/hdfs/...'", "Permission error"),
]


@pytest.mark.parametrize(("line", "reason"), FORMATS_MD)
def test_formats_md_failure_lines(line: str, reason: str) -> None:
    assert classify([line]).reason == reason


# ------------------------------------------------------------------------------ loader errors
GOOD_REASON = """
[[reason]]
name = "GPU ECC error"
categories = ["AE"]
[[reason.rule]]
id = "ecc"
pattern = 'uncorrectable ECC error'
examples = ["uncorrectable ECC error encountered"]
"""


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[[reason]\nname = ", "invalid TOML"),
        (GOOD_REASON.replace("'uncorrectable ECC error'", "'(?<=x)ECC'"), "invalid RE2 pattern"),
        (GOOD_REASON.replace("'uncorrectable ECC error'", "'^ECC'"), "must not use ^ or $"),
        (GOOD_REASON.replace("'uncorrectable ECC error'", "'ECC error$'"), "must not use ^ or $"),
        (GOOD_REASON.replace('["AE"]', '["XX"]'), "categories must be"),
        (
            GOOD_REASON.replace('examples = ["uncorrectable ECC error encountered"]', ""),
            "has no examples",
        ),
        (GOOD_REASON + GOOD_REASON.replace("GPU ECC error", "Other"), "rule id 'ecc' used twice"),
        (GOOD_REASON.replace('name = "GPU ECC error"', ""), "missing or empty 'name'"),
    ],
)
def test_bad_rules_file_names_the_problem(tmp_path: Path, text: str, message: str) -> None:
    p = tmp_path / "rules.toml"
    p.write_text(text)
    with pytest.raises(UserError) as e:
        load_rules(p)
    assert message in e.value.message
    assert e.value.source == str(p)


def test_custom_rules_file_and_anchors_inside_classes(tmp_path: Path) -> None:
    p = tmp_path / "rules.toml"
    # '^' inside a character class and an escaped '$' are not anchors.
    p.write_text(GOOD_REASON.replace("'uncorrectable ECC error'", r"'ECC [^x]rror \$?'"))
    rules = load_rules(p)
    assert classify(["uncorrectable ECC error encountered"], rules).reason == "GPU ECC error"
    assert classify(["CUDA error: out of memory"], rules).reason == NO_SIGNATURE


def test_packaged_rules_path_is_the_data_file() -> None:
    assert default_rules_path().name == "failure_signatures.toml"
    assert default_rules_path().parent.name == "data"
    assert load_rules(default_rules_path()).reasons == RULES.reasons
