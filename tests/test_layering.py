"""The package's structure, read from its source (``ast`` over ``philly_analyze/**/*.py``):

- layering: a package may import another's public API only, or nothing of it (``LAYERS``:
  the package, the prefixes it must not import from, and what it may import of them). The
  analyses and the report read stores, not simulators: ``analysis/`` and ``report/`` import
  nothing from ``sim/`` (what they need of a sharing run is a store's file, read through
  ``sharingout``), ``synth/`` only ``sim``'s public API; the store layer imports none of its
  consumers. A module name in a string (``importlib.import_module("philly_analyze.sim.x")``)
  counts as an import;
- one event loop: only ``sim/events.py`` pushes and pops a heap of events;
- one placement: only ``sim/placement.py`` defines free-GPU state;
- no name-string switches on policies: behaviour is chosen by a policy's class (its config,
  its mechanism set), never by comparing its registered name.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "philly_analyze"


@dataclass(frozen=True)
class Layer:
    """Modules under ``package`` import nothing that starts with one of ``forbidden`` except
    the names in ``allowed`` (``module`` or ``module.name``)."""

    package: str
    forbidden: tuple[str, ...]
    allowed: frozenset[str]


def _public_api(package: str) -> frozenset[str]:
    """``package`` itself and each name its ``__init__.py`` exports (``_EXPORTS``/``__all__``)."""
    init = PACKAGE.joinpath(*package.split(".")[1:], "__init__.py")
    names: set[str] = set()
    for node in ast.walk(ast.parse(init.read_text())):
        if isinstance(node, ast.Assign | ast.AnnAssign) and isinstance(node.value, ast.Dict):
            target = node.targets[0] if isinstance(node, ast.Assign) else node.target
            if isinstance(target, ast.Name) and target.id == "_EXPORTS":
                names |= {str(k.value) for k in node.value.keys if isinstance(k, ast.Constant)}
    return frozenset({package, *(f"{package}.{n}" for n in names)})


SIM = "philly_analyze.sim"
#: What reads or writes stores, above the store layer.
CONSUMERS = tuple(
    f"philly_analyze.{p}" for p in ("sim", "analysis", "report", "cli", "ingest", "sweep", "synth")
)

LAYERS = (
    Layer("philly_analyze.synth", (SIM,), _public_api(SIM)),
    Layer(
        "philly_analyze.analysis", (SIM, "philly_analyze.report", "philly_analyze.cli"), frozenset()
    ),
    Layer("philly_analyze.report", (SIM, "philly_analyze.cli"), frozenset()),
    # The store layer and what sim, analysis and report share through it.
    *(
        Layer(f"philly_analyze.{m}", CONSUMERS, frozenset())
        for m in ("schemas", "store", "artifacts", "sharingout", "units", "vcquota", "waitcause")
    ),
)
LAYER = {la.package: la for la in LAYERS}


def _modules() -> list[tuple[str, Path, ast.Module]]:
    out = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE.parent).with_suffix("")
        name = ".".join(p for p in rel.parts if p != "__init__")
        out.append((name, path, ast.parse(path.read_text(), filename=str(path))))
    return out


#: A string holding a dotted name of the package (a module imported by name).
DOTTED = re.compile(r"philly_analyze(\.\w+)+")


def _imports(module: str, tree: ast.Module) -> list[tuple[int, str]]:
    """(line, imported name): ``import a.b`` gives ``a.b``; ``from a.b import c`` gives
    ``a.b.c`` (a module or a name of ``a.b``); relative imports are resolved; a string that is
    a dotted name of the package (``import_module("philly_analyze.sim.x")``) gives that name."""
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            if DOTTED.fullmatch(node.value):
                out.append((node.lineno, node.value))
        elif isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = module.split(".")[: -node.level]
                base = ".".join([*parts, base] if base else parts)
            out += [(node.lineno, f"{base}.{a.name}") for a in node.names]
    return out


def _violations(layer: Layer, modules: list[tuple[str, Path, ast.Module]]) -> list[str]:
    bad = []
    for name, path, tree in modules:
        if name != layer.package and not name.startswith(layer.package + "."):
            continue
        for line, imported in _imports(name, tree):
            if not any(imported == f or imported.startswith(f + ".") for f in layer.forbidden):
                continue
            if imported not in layer.allowed:
                bad.append(f"{path.relative_to(PACKAGE.parent)}:{line} imports {imported}")
    return bad


@pytest.mark.parametrize("layer", LAYERS, ids=lambda la: la.package)
def test_packages_import_only_the_public_api_of_their_lower_layers(layer: Layer) -> None:
    assert _violations(layer, _modules()) == []


def test_the_layering_check_sees_a_back_edge() -> None:
    """The check itself: an internal import in a synth module is reported, the public API
    (``from philly_analyze.sim import Cluster``) is not."""
    layer = LAYER["philly_analyze.synth"]
    bad = ast.parse(
        "from philly_analyze.sim.engine import QueueEngine\n"
        "import philly_analyze.sim.cluster\n"
        "from philly_analyze.sim import Cluster, simulate\n"
        "from ..sim.placement import FreeState\n"
    )
    found = _violations(layer, [("philly_analyze.synth.x", PACKAGE / "synth" / "x.py", bad)])
    assert [f.split(" imports ")[1] for f in found] == [
        "philly_analyze.sim.engine.QueueEngine",
        "philly_analyze.sim.cluster",
        "philly_analyze.sim.placement.FreeState",
    ]


def test_analysis_and_report_import_nothing_of_the_simulator() -> None:
    """An analysis or report module may not import even ``sim``'s public API, by any spelling
    (absolute, relative, by name); the store's shared modules are allowed."""
    bad = ast.parse(
        "from philly_analyze.sim import get_policy\n"
        "from ..sim.sharing.results import SharingOutput\n"
        "import philly_analyze.sim.units\n"
        "mod = importlib.import_module('philly_analyze.sim.sharing.config')\n"
        "from philly_analyze.sharingout import SharingOutput\n"
        "from philly_analyze.store import Store\n"
        "from philly_analyze.analysis.result import Section\n"
    )
    for pkg in ("analysis", "report"):
        found = _violations(
            LAYER[f"philly_analyze.{pkg}"],
            [(f"philly_analyze.{pkg}.x", PACKAGE / pkg / "x.py", bad)],
        )
        assert [f.split(" imports ")[1] for f in found] == [
            "philly_analyze.sim.get_policy",
            "philly_analyze.sim.sharing.results.SharingOutput",
            "philly_analyze.sim.units",
            "philly_analyze.sim.sharing.config",
        ]


def test_the_check_finds_the_old_back_edges_in_the_real_modules() -> None:
    """The real section and figure modules with the imports they had before the store owned
    its files (analysis -> sim.sharing, report -> sim.sharing.figures) fail the check, each
    at its line; as they are, they pass."""
    modules = {name: (path, tree) for name, path, tree in _modules()}
    for module, line in (
        (
            "philly_analyze.analysis.sharing",
            "from philly_analyze.sim.sharing.results import SharingOutput",
        ),
        (
            "philly_analyze.report.plots",
            "from philly_analyze.sim.sharing.figures import day_figure",
        ),
    ):
        path, tree = modules[module]
        layer = LAYER[module.rsplit(".", 1)[0]]
        assert _violations(layer, [(module, path, tree)]) == []
        text = path.read_text()
        found = _violations(layer, [(module, path, ast.parse(text + line + "\n"))])
        imported = ".".join([line.split()[1], line.split()[-1]])
        at = f"{path.relative_to(PACKAGE.parent)}:{len(text.splitlines()) + 1}"
        assert found == [f"{at} imports {imported}"]


def _uses(tree: ast.Module, names: set[str]) -> list[int]:
    """Lines that name one of ``names``: a call (``heapq.heappush(...)``, ``heappush(...)``)
    or a reference kept for later (``_heappush: Final = heapq.heappush``, as the compiled
    engine keeps them)."""
    out = []
    for node in ast.walk(tree):
        named = (
            node.attr
            if isinstance(node, ast.Attribute)
            else node.id
            if isinstance(node, ast.Name)
            else None
        )
        if named in names:
            out.append(getattr(node, "lineno", 0))
    return out


#: Heaps that are not simulations: module -> why.
NOT_EVENT_LOOPS = {
    "philly_analyze.synth.render_yarn": "merges the log lines of all jobs by time",
}


def test_one_event_loop_and_one_placement() -> None:
    heap_users, free_state = [], []
    for name, _, tree in _modules():
        if name in NOT_EVENT_LOOPS:
            continue
        if _uses(tree, {"heappush", "heappop", "heapreplace", "heappushpop"}):
            heap_users.append(name)
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef) and "free" in node.name.lower():
                free_state.append(f"{name}.{node.name}")
    assert heap_users == ["philly_analyze.sim.events"]
    assert free_state == ["philly_analyze.sim.placement.FreeState"]


def _policy_names() -> set[str]:
    from philly_analyze.sim.policies import policy_names

    return set(policy_names())


def _name_switches(tree: ast.Module, names: set[str]) -> list[int]:
    """Lines that choose behaviour by a policy's name: a comparison with it (``==``, ``!=``,
    ``in``), indexing with it, or a mapping keyed by several policy names."""

    def is_name(node: ast.AST) -> bool:
        return isinstance(node, ast.Constant) and node.value in names

    def switches(node: ast.AST) -> bool:
        if isinstance(node, ast.Compare):
            operands = [node.left, *node.comparators]
            seqs = [o for o in operands if isinstance(o, ast.Tuple | ast.List | ast.Set)]
            return any(is_name(o) for o in operands + [e for s in seqs for e in s.elts])
        if isinstance(node, ast.Subscript):
            return is_name(node.slice)
        if isinstance(node, ast.Dict):
            return sum(is_name(k) for k in node.keys if k) >= 2
        return False

    return sorted(n.lineno for n in ast.walk(tree) if isinstance(n, ast.expr) and switches(n))


#: Modules where a policy's name means something else: module -> what.
OTHER_MEANINGS = {
    "philly_analyze.synth.run": "'philly' is also the name of the published-trace format",
    "philly_analyze.sharingout": "the paper side and colour each of the three sharing policies "
    "had when stores did not record them yet (frozen history, read back from old stores only)",
}


def test_no_policy_is_chosen_by_comparing_its_name() -> None:
    names = _policy_names()
    assert {"philly", "muxflow", "dedicated", "mps-naive"} <= names
    found = [
        f"{path.relative_to(PACKAGE.parent)}:{line}"
        for name, path, tree in _modules()
        if name not in OTHER_MEANINGS
        for line in _name_switches(tree, names)
    ]
    assert found == []


def test_the_name_switch_check_sees_one() -> None:
    names = {"muxflow", "dedicated"}
    src = (
        'share = policy != "dedicated"\n'
        'aware = policy in ("muxflow", "x")\n'
        'before = results["dedicated"]\n'
        'COLORS = {"dedicated": 1, "muxflow": 2}\n'
        'ok = run("muxflow")\n'
        'name = "muxflow"\n'
    )
    assert _name_switches(ast.parse(src), names) == [1, 2, 3, 4]
