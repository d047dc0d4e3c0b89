"""Exit codes in one place (issue 15): ``errors.ExitStatus`` is the one list of the codes the
package exits with, an unknown name on the command line (a policy, a report section, a
``--param``) is a usage error (exit 2) that suggests the closest name the same way in every
verb, and the package never checks whether its own modules exist.

Before: no ``ExitStatus`` (literals 1, 2 and 130 in ``errors.py``, ``cli/__init__.py`` and
``querystop.py``); ``replay --policy phily`` and ``sweep --policy phily`` exited 1 with no
suggestion; ``report --section queing`` exited 2 with click's list and no suggestion;
``replay --param max_retrys=1`` exited 2 with no suggestion while ``sweep`` exited 1 with one;
a sweep with some failed runs exited 1, as one whose every run failed (those two are in
``test_sweep_run.py``); a missing verb or format module was quietly left out."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from philly_analyze.cli import main
from philly_analyze.errors import (
    ExitStatus,
    PartialFailure,
    UsageError,
    UserError,
    closest,
    did_you_mean,
)
from tests.conftest import ROOT

POLICIES = "philly, relaxed, fifo, las, srtf, muxflow, dedicated, mps-naive"
PHILLY_PARAMS = (
    "borrow, borrow_limit, locality_wait_min, locality_wait_spread, max_retries, "
    "rack_slowdown, retry_delay_s, slowdown"
)
SECTIONS = (
    "summary, status, queueing, gpu_utilization, locality, host_resources, failures, retries, "
    "convergence, gpu_sharing, utilization, host, sharing, muxflow"
)


def test_the_codes() -> None:
    assert [(s.name, int(s)) for s in ExitStatus] == [
        ("OK", 0),
        ("FAILED", 1),
        ("USAGE", 2),
        ("PARTIAL", 3),
        ("INTERRUPTED", 130),
    ]
    assert UserError("x").exit_code is ExitStatus.FAILED
    assert UsageError("x").exit_code is ExitStatus.USAGE
    assert PartialFailure("x").exit_code is ExitStatus.PARTIAL


def test_the_suggestion() -> None:
    known = ["philly", "relaxed", "fifo", "las", "srtf", "muxflow", "dedicated", "mps-naive"]
    assert did_you_mean("phily", known) == " (did you mean philly?)"
    assert did_you_mean("Philly", known) == " (did you mean philly?)"
    assert did_you_mean("mps", known) == " (did you mean mps-naive?)"  # a prefix
    assert did_you_mean("zzz", known) == ""
    # Prefixes first (VC hashes are typed short), then difflib's matches; no repeats.
    # ab2c9 is difflib's: ratio 2 x 3 matching / (3 + 5) characters = 0.75 >= its 0.6.
    assert closest("2c9", ["2c9d2", "ab2c9", "2c9e1", "zzz"]) == ["2c9d2", "2c9e1", "ab2c9"]
    assert closest("queing", ["queueing", "status"]) == ["queueing"]


def _cli(*args: object) -> Result:
    return CliRunner().invoke(main, [str(a) for a in args])


def _error_line(r: Result) -> str:
    """The one error line on stderr (ours ``error: ...``, click's ``Error: ...``)."""
    assert isinstance(r.exception, SystemExit), repr(r.exception)
    lines = [ln for ln in r.stderr.splitlines() if ln.lower().startswith("error")]
    assert len(lines) == 1, r.stderr
    return lines[0]


PARAM_LINE = (
    "error: --param max_retrys: no chosen policy takes 'max_retrys' (did you mean "
    f"max_retries?); they take: {PHILLY_PARAMS}"
)
CASES = [
    (
        ["replay", "--policy", "phily"],
        f"error: unknown policy 'phily' (did you mean philly?); choose from {POLICIES}",
    ),
    (
        ["sweep", "--policy", "phily"],
        f"error: unknown policy 'phily' (did you mean philly?); choose from {POLICIES}",
    ),
    (["replay", "--policy", "zzz"], f"error: unknown policy 'zzz'; choose from {POLICIES}"),
    (
        ["replay", "--policy", "philly,muxflw", "--scenario", "paper"],
        f"error: unknown policy 'muxflw' (did you mean muxflow?); choose from {POLICIES}",
    ),
    (
        ["replay", "--policy", "philly", "--scenario", "paper"],
        "error: --scenario needs a sharing policy (muxflow, dedicated, mps-naive), not 'philly'",
    ),
    # A misspelt --param: the same line and code in replay and sweep.
    (["replay", "--policy", "philly", "--param", "max_retrys=1"], PARAM_LINE),
    (["sweep", "--policy", "philly", "--param", "max_retrys=1"], PARAM_LINE),
    (
        ["replay", "--policy", "philly", "--param", "phily.max_retries=1"],
        "error: --param phily.max_retries: policy 'phily' is not in --policy "
        "(did you mean philly?)",
    ),
    (
        ["sweep", "--policy", "philly", "--param", "phily.max_retries=1"],
        "error: --param phily.max_retries: policy 'phily' is not in --policy "
        "(did you mean philly?)",
    ),
    (
        ["sweep", "--policy", "las", "--param", "las.threshold=1"],
        "error: --param las.threshold: no chosen policy takes 'threshold' (did you mean "
        "thresholds_gpu_h?); they take: max_retries, rack_slowdown, retry_delay_s, slowdown, "
        "thresholds_gpu_h",
    ),
    (["sweep", "--param", "max_retries"], "error: --param expects KEY=VALUES, got 'max_retries'"),
    (["sweep", "--policy", ","], "error: no policy given (--policy NAME[,NAME...])"),
    (
        ["report", "--section", "queing"],
        "Error: Invalid value for '--section': unknown section 'queing' (did you mean "
        f"queueing?); choose from {SECTIONS}",
    ),
    (
        ["report", "--section", "gpu"],
        "Error: Invalid value for '--section': unknown section 'gpu' (did you mean "
        f"gpu_utilization?); choose from {SECTIONS}",
    ),
]


@pytest.fixture
def builtin_policies_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """Hide the policies other tests of this worker registered (``--import`` plugins), so
    the listed choices are the package's."""
    from philly_analyze.sim import policies

    policies.policy_names()
    for name, cls in list(policies.POLICIES.items()):
        if cls.__module__ not in policies.BUILTIN_MODULES:
            monkeypatch.delitem(policies.POLICIES, name)


@pytest.mark.usefixtures("builtin_policies_only")
@pytest.mark.parametrize(
    ("args", "line"), CASES, ids=lambda a: " ".join(a) if isinstance(a, list) else None
)
def test_an_unknown_name_is_a_usage_error_with_a_suggestion(
    tmp_path: Path, args: list[str], line: str
) -> None:
    store = tmp_path / "store"  # refused before the store is looked at: none is needed
    r = _cli(*args, "--store", store, "-q")
    assert r.exit_code == ExitStatus.USAGE == 2, r.output
    assert _error_line(r) == line
    assert not store.exists()


def test_sweep_help_names_the_partial_failure_code() -> None:
    r = _cli("sweep", "--help")
    assert r.exit_code == 0
    text = " ".join(r.output.split())
    assert "3 when some runs failed" in text and "1 when every run failed" in text


# --- No hidden optionality -----------------------------------------------------------------


def test_a_missing_verb_module_fails_loudly(monkeypatch: pytest.MonkeyPatch) -> None:
    """Before, ``find_spec`` hid it: "No such command" (exit 2), as for a typo."""
    from philly_analyze import cli

    verbs = {
        **cli.VERBS,
        "ghost": ("philly_analyze.cli.ghost_verb", "A verb whose module is gone."),
    }
    monkeypatch.setattr(cli, "VERBS", verbs)
    assert "ghost" in cli.LazyGroup().list_commands(None)  # type: ignore[arg-type]
    r = _cli("ghost")
    assert isinstance(r.exception, ModuleNotFoundError), repr(r.exception)
    assert "philly_analyze.cli.ghost_verb" in str(r.exception)


def test_a_missing_format_module_fails_loudly(monkeypatch: pytest.MonkeyPatch) -> None:
    """Before, ``load_formats`` skipped it: its files were then "of no known format"."""
    from philly_analyze.ingest import formats

    monkeypatch.setattr(formats, "FORMAT_MODULES", ("philly_analyze.ingest.ghost_format",))
    monkeypatch.setattr(formats, "FORMATS", [])
    monkeypatch.setattr(formats, "_LOADED", False)
    with pytest.raises(ModuleNotFoundError, match=r"philly_analyze\.ingest\.ghost_format"):
        formats.load_formats()


def _calls(tree: ast.AST, names: set[str]) -> list[ast.Call]:
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            f = node.func
            name = f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", "")
            if name in names:
                out.append(node)
    return out


def _literal(node: ast.Call) -> str | None:
    arg = node.args[0] if node.args else None
    return arg.value if isinstance(arg, ast.Constant) and isinstance(arg.value, str) else None


def test_no_module_of_the_project_is_checked_for_before_use() -> None:
    """``find_spec``/``importorskip`` only name a third-party module, by a literal: never one
    of ``philly_analyze`` (a missing one is a bug, which must fail, not be skipped)."""
    found = []
    for top in ("philly_analyze", "tests", "bench"):
        for path in sorted((ROOT / top).rglob("*.py")):
            tree = ast.parse(path.read_text(), str(path))
            for call in _calls(tree, {"find_spec", "importorskip"}):
                name = _literal(call)
                if name is None or name.split(".")[0] == "philly_analyze":
                    found.append(f"{path.relative_to(ROOT)}:{call.lineno}")
    assert found == []


def test_the_check_sees_one() -> None:
    tree = ast.parse(
        "import importlib.util, pytest\n"
        "pytest.importorskip('philly_analyze.sim.replay')\n"
        "importlib.util.find_spec(mod)\n"
        "importlib.util.find_spec('ray')\n"
    )
    flagged = [c.lineno for c in _calls(tree, {"find_spec", "importorskip"})]
    kept = [c.lineno for c in _calls(tree, {"find_spec", "importorskip"}) if _literal(c) == "ray"]
    assert flagged == [2, 3, 4] and kept == [4]


def test_every_exit_of_the_package_uses_exit_status() -> None:
    """No ``sys.exit(130)``, ``os._exit(1)`` or ``exit_code = 2``: the codes are ExitStatus's."""
    found = []
    for path in sorted((ROOT / "philly_analyze").rglob("*.py")):
        tree = ast.parse(path.read_text(), str(path))
        for call in _calls(tree, {"exit", "_exit"}):
            arg = call.args[0] if call.args else None
            if isinstance(arg, ast.Constant) and isinstance(arg.value, int):
                found.append(f"{path.relative_to(ROOT)}:{call.lineno}")
        for node in ast.walk(tree):
            if isinstance(node, ast.Assign | ast.AnnAssign):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                named = any(getattr(t, "id", "") == "exit_code" for t in targets)
                if named and isinstance(node.value, ast.Constant):
                    found.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert found == []
