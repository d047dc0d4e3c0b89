"""Every example of every ``--help`` runs, as printed, in a folder set up like a user's.

The examples are parsed out of the help texts themselves (the ``Example:``/``Examples:`` block
of ``philly-analyze --help`` and of each command's ``--help``; a line ending in ``\\`` continues
on the next), so a new command or example is covered without touching this file. They run
in-process (``CliRunner``), in order, in one folder that holds what they name: the bundled
``sample_data/``, a ``trace-data.tar.gz`` made of its five published-format files, YARN logs
(``rm.log``, ``rm.log.1.gz``, ``logs/``), ``quotas.csv`` and small inputs in other layouts
(Ganglia, Gavel, RFold, framework logs); a pattern such as ``traces/*.trace`` is expanded as
a shell would; stores such as ``philly-store``
and ``what-if`` are made by earlier examples, as they would be for a user.

An example ending in ``# needs: ...`` needs what a test machine may lack (the network, a Ray
cluster, 9 GB of disk): it is only parsed, with click's own validation of every option,
never run. ``| jq .KEY...`` checks that stdout is JSON with that first key; ``> FILE`` writes stdout
there. No example may make matplotlib warn (a warning is printed on the user's stderr).

Each example is a test of its own (``test_example_runs[...]``). Under pytest-xdist the
examples spread over processes, so each one first runs, in that process's folder, the earlier
examples that write what it reads (``prerequisites``: ``report --store what-if`` runs the
``replay ... --out what-if`` before it and the ingests of the store that replay reads),
each at most once. The few too heavy for the default suite are listed in ``SLOW`` with why
(``make test-all`` runs them); the default suite parses every example too.
"""

from __future__ import annotations

import glob
import gzip
import io
import json
import re
import shlex
import shutil
import tarfile
import time
import warnings
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from philly_analyze.cli import main
from tests.conftest import ROOT

#: The documented marker of an example that is only parsed.
NEEDS = "needs:"
PUBLISHED = ("cluster_job_log", "cluster_machine_list", "cluster_gpu_util", "cluster_cpu_util",
             "cluster_mem_util")  # fmt: skip


@dataclass(frozen=True)
class Example:
    """One example line of a help text."""

    help_of: str  # the command whose --help shows it ("" = philly-analyze itself)
    text: str
    args: tuple[str, ...]  # after `philly-analyze`
    needs: str | None = None
    stdout_to: str | None = None  # `> FILE`
    jq_key: str | None = None  # `| jq .KEY...`: the first key of the filter


def _block(help_text: str) -> list[str]:
    """The lines of the Example(s): block, continuations joined."""
    lines = help_text.splitlines()
    start = next(i for i, ln in enumerate(lines) if ln.strip() in ("Example:", "Examples:"))
    out: list[str] = []
    for ln in lines[start + 1 :]:
        if not ln.strip():
            break
        if out and out[-1].endswith("\\"):
            out[-1] = out[-1][:-1].rstrip() + " " + ln.strip()
        else:
            out.append(ln.strip())
    return out


def _example(help_of: str, line: str) -> Example:
    tokens = shlex.split(line)
    assert tokens[0] == "philly-analyze", line
    comment = next((i for i, t in enumerate(tokens) if t.startswith("#")), len(tokens))
    note = " ".join(tokens[comment:]).lstrip("#").strip()
    words = tokens[1:comment]
    needs = note[len(NEEDS) :].strip() if note.startswith(NEEDS) else None
    stdout_to = jq_key = None
    if ">" in words:
        i = words.index(">")
        words, stdout_to = words[:i], words[i + 1]
    if "|" in words:
        i = words.index("|")
        pipe = words[i + 1 :]
        key = re.match(r"\.(\w+)", pipe[1]) if pipe[0] == "jq" and len(pipe) == 2 else None
        assert key, f"unsupported pipe in {line!r} (only `| jq .KEY...`)"
        words, jq_key = words[:i], key.group(1)
    assert "..." not in words, f"an example must be a whole command: {line!r}"
    return Example(help_of, line, tuple(words), needs, stdout_to, jq_key)


def all_examples() -> list[Example]:
    """Every example of `philly-analyze --help`, then of each command's, in command order."""
    ctx = click.Context(main)
    out = []
    for verb in ["", *main.list_commands(ctx)]:
        r = CliRunner().invoke(main, [verb, "--help"] if verb else ["--help"])
        assert r.exit_code == 0, r.output
        out += [_example(verb, line) for line in _block(r.output)]
    return out


EXAMPLES = all_examples()


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder holding the files the examples name."""
    d = tmp_path_factory.mktemp("examples")
    sample = ROOT / "sample_data"
    (d / "sample_data").symlink_to(sample, target_is_directory=True)
    with tarfile.open(d / "trace-data.tar.gz", "w:gz") as tar:
        for name in PUBLISHED:
            data = (sample / name).read_bytes()
            if name == "cluster_job_log":
                data = _real_vc_name(data)
            info = tarfile.TarInfo(f"trace-data/{name}")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    yarn = sorted((sample / "yarn").iterdir())
    shutil.copy(yarn[0], d / "rm.log")
    (d / "rm.log.1.gz").write_bytes(gzip.compress(yarn[1].read_bytes(), mtime=0))
    (d / "logs").mkdir()
    for f in yarn[2:]:
        shutil.copy(f, d / "logs")
    quotas = (sample / "ground_truth" / "vc_quotas.csv").read_bytes()
    (d / "quotas.csv").write_bytes(quotas.replace(_sample_vc().encode(), REAL_VC.encode()))
    _other_inputs(d, sample)
    return d


def _other_inputs(d: Path, sample: Path) -> None:
    """Inputs of the ingest examples for other layouts: Ganglia CSVs named HOST_METRIC.csv,
    Gavel traces and throughputs, RFold's arrivals, framework logs named by job."""
    (d / "ganglia").mkdir()
    for f in sorted((sample / "ganglia" / "philly" / "m0").glob("*.csv"))[:4]:
        shutil.copy(f, d / "ganglia" / f"m0_{f.name}")
    (d / "traces").mkdir()
    # Gavel's msr layout (job type, command, num_steps_arg, needs_data_dir, total_steps,
    # arrival seconds, scale factor) and its throughputs: type -> "('job', scale)" -> steps/s.
    for name, scale in (("a", 1), ("b", 2)):
        (d / "traces" / f"{name}.trace").write_text(
            f"ResNet-18 (batch size 128)\tpython3 main.py\t--num_steps\t1\t36000\t60.0\t{scale}\n"
        )
    job = "('ResNet-18 (batch size 128)', {})"
    (d / "throughputs.json").write_text(
        json.dumps({"v100": {job.format(1): {"null": 20.0}, job.format(2): {"null": 36.0}}})
    )
    (d / "rfold_philly_arrivals.csv").write_text(
        "#job id,arrival time (sec),topology,shape,size,duration (sec)\n"
        "0,0.0,CLOS,1,1,3600.0\n1,60.0,CLOS,1,4,7200.0\n"
    )
    (d / "slurm-logs").mkdir()
    logs = sorted((sample / "framework").glob("*/attempt_0/stdout.txt"))[:2]
    for i, f in enumerate(logs):
        shutil.copy(f, d / "slurm-logs" / f"slurm-{1001 + i}.out")


#: `report --vc ee9e8c` names one of Philly's real VCs: the sample's largest VC takes its name
#: in the archive (and in quotas.csv), so that the example finds it.
#: The VC the examples name (`report --vc ee9e8c`): the sample's largest VC is renamed to it.
REAL_VC = "ee9e8c"


def _sample_vc() -> str:
    """The sample's VC with the most jobs (the one renamed to ``REAL_VC``)."""
    job_log = (ROOT / "sample_data" / "cluster_job_log").read_bytes()
    counts = Counter(re.findall(rb'"vc": "([^"]+)"', job_log))
    return counts.most_common(1)[0][0].decode()


def _real_vc_name(job_log: bytes) -> bytes:
    old, new = f'"vc": "{_sample_vc()}"'.encode(), f'"vc": "{REAL_VC}"'.encode()
    assert job_log.count(old) > 30, "the sample's largest VC should hold many jobs"
    return job_log.replace(old, new)


def test_the_help_texts_have_examples() -> None:
    by_command = {e.help_of for e in EXAMPLES}
    ctx = click.Context(main)
    assert by_command == {"", *main.list_commands(ctx)}  # every command shows some
    assert all(not e.needs or e.needs.strip() for e in EXAMPLES)


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda e: e.text[len("philly-analyze ") :])
def test_every_example_parses(
    example: Example, workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Parsed with every option validated (types, choices, ranges, input files that must
    exist), as click does before running."""
    monkeypatch.chdir(workspace)
    args = _expanded(example.args)
    ctx = main.make_context("philly-analyze", args)
    sub = main.get_command(ctx, args[0])
    assert sub is not None, example.text
    with sub.make_context(args[0], args[1:], parent=ctx):
        pass


def _expanded(args: tuple[str, ...]) -> list[str]:
    """The arguments as a shell passes them: a pattern (``traces/*.trace``) becomes the files
    it matches in the current folder (left as it is when none do)."""
    out: list[str] = []
    for a in args:
        hits = sorted(glob.glob(a)) if any(c in a for c in "*?[") else []
        out += hits or [a]
    return out


def _run(example: Example, where: Path) -> float:
    """Run one example in ``where`` (the current folder); returns its seconds."""
    t0 = time.perf_counter()
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        r = CliRunner().invoke(main, _expanded(example.args))
    secs = time.perf_counter() - t0
    assert r.exit_code == 0, (example.text, r.output[-3000:], r.exception)
    plotted = [str(w.message) for w in seen if "matplotlib" in w.filename]
    assert plotted == [], example.text
    if example.jq_key is not None:
        assert example.jq_key in json.loads(r.stdout), example.text
    if example.stdout_to is not None:
        (where / example.stdout_to).write_text(r.stdout)
        assert r.stdout.strip(), example.text
    return secs


#: Examples too heavy for the default suite, each with why (CPU seconds measured on the
#: 2-core test machine); ``make test-all`` runs them. Keyed by the text after
#: ``philly-analyze ``; an entry naming no example fails ``test_slow_examples_exist``.
SLOW: dict[str, str] = {
    "replay --policy dedicated,muxflow,mps-naive --scenario paper --figures figs": (
        "a day of 20,000 online GPUs under three sharing policies: 51 CPU-s"
    ),
    "replay --scenario paper --ablate --param online_gpus=2000 --format md": (
        "eight variants of muxflow, each a day of 2,000 GPUs: 25 CPU-s"
    ),
    "sweep --policy muxflow --param online_ratio=0.5,1,2 --seeds 3 --out mux": (
        "nine sharing replays, each with its philly comparison: 22 CPU-s"
    ),
}

#: What a store-reading command reads when it names no --store (PHILLY_STORE is unset).
DEFAULT_STORE = "philly-store"
#: Options whose value names what the command writes.
WRITES = ("--out", "-o", "--output", "--figures")


def _key(example: Example) -> str:
    return example.text[len("philly-analyze ") :]


def _option(args: tuple[str, ...], *names: str) -> str | None:
    for i, a in enumerate(args[:-1]):
        if a in names:
            return args[i + 1]
    return None


def _writes(e: Example) -> set[str]:
    """The paths an example creates or changes (stores, output folders, files)."""
    out = {v.rstrip("/") for n in WRITES if (v := _option(e.args, n))}
    if e.args[0] == "ingest":
        out.add((_option(e.args, "--store") or DEFAULT_STORE).rstrip("/"))
    if e.stdout_to:
        out.add(e.stdout_to)
    return out


def _reads(e: Example) -> set[str]:
    """The paths an example needs that the workspace does not start with: the store of a
    command that reads one, and inputs made by earlier examples (``ingest synth-out``)."""
    verb, args = e.args[0], e.args
    if verb == "ingest":
        return {a.rstrip("/") for a in _positional(verb, args[1:])}
    paper = _option(args, "--scenario") is not None or "--list-policies" in args
    if verb in ("report", "replay", "sweep", "info") and not paper:
        return {(_option(args, "--store") or DEFAULT_STORE).rstrip("/")}
    return set()


def _positional(verb: str, args: tuple[str, ...]) -> list[str]:
    """The arguments that are not options or option values (click knows which options are
    flags, taking no value)."""
    cmd = main.get_command(click.Context(main), verb)
    assert cmd is not None
    flags = {o for p in cmd.params if isinstance(p, click.Option) and p.is_flag for o in p.opts}
    out, skip = [], False
    for a in args:
        if skip:
            skip = False
        elif a.startswith("-"):
            skip = a not in flags and "=" not in a
        else:
            out.append(a)
    return out


def prerequisites(i: int) -> list[int]:
    """Indices of the earlier examples example ``i`` needs (those writing what it reads, and
    theirs), in order: a user follows the help texts top to bottom."""
    need: set[int] = set()
    todo = [i]
    while todo:
        k = todo.pop()
        for j in range(k):
            if (
                j not in need
                and not EXAMPLES[j].needs
                and _reads(EXAMPLES[k]) & _writes(EXAMPLES[j])
            ):
                need.add(j)
                todo.append(j)
    return sorted(need)


class Workspace:
    """The examples' folder of this test process, and which examples ran in it (each runs
    once: a second `synth --out s` would refuse the folder the first one wrote)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.ran: dict[int, str | None] = {}  # index -> None (passed) or why it failed

    def run(self, i: int) -> None:
        """Run example ``i`` (after what it needs) unless it ran; raise if it failed."""
        for j in [*prerequisites(i), i]:
            if j not in self.ran:
                try:
                    _run(EXAMPLES[j], self.path)
                    self.ran[j] = None
                except AssertionError as e:
                    self.ran[j] = f"{EXAMPLES[j].text}: {e}"
            if self.ran[j] is not None:
                raise AssertionError(self.ran[j] if j == i else f"needs {self.ran[j]}")


@pytest.fixture(scope="module")
def ran_in(workspace: Path) -> Workspace:
    return Workspace(workspace)


RUNNABLE = [(i, e) for i, e in enumerate(EXAMPLES) if not e.needs]


def _marks(e: Example) -> list[pytest.MarkDecorator]:
    return [pytest.mark.slow] if _key(e) in SLOW else []


@pytest.mark.parametrize(
    "index",
    [pytest.param(i, id=_key(e), marks=_marks(e)) for i, e in RUNNABLE],
)
def test_example_runs(index: int, ran_in: Workspace, monkeypatch: pytest.MonkeyPatch) -> None:
    """The example exits 0 in a folder where the examples it builds on ran first; no
    matplotlib warning; `| jq .KEY` gets JSON with that key, `> FILE` something to write."""
    monkeypatch.chdir(ran_in.path)
    for var in ("PHILLY_STORE", "RAY_ADDRESS"):
        monkeypatch.delenv(var, raising=False)
    ran_in.run(index)


def test_slow_examples_exist_and_nothing_fast_needs_them() -> None:
    """Every SLOW entry names an example (none left over from an edited help text), says
    why, and no example of the default suite builds on a slow one (it would run it)."""
    keys = {_key(e) for e in EXAMPLES}
    assert set(SLOW) <= keys, set(SLOW) - keys
    assert all(len(why) > 20 for why in SLOW.values())
    for i, e in RUNNABLE:
        if _key(e) not in SLOW:
            assert not [_key(EXAMPLES[j]) for j in prerequisites(i) if _key(EXAMPLES[j]) in SLOW]


def test_prerequisites_follow_the_stores() -> None:
    """Hand-checked: `report --store what-if` needs the replay that wrote what-if and the
    ingests of the store that replay read; `ingest synth-out` the synth that wrote it; an
    ingest of a file the workspace has, nothing."""

    def index(text: str) -> int:
        return next(i for i, e in enumerate(EXAMPLES) if _key(e) == text)

    def named(i: int) -> list[str]:
        return [_key(EXAMPLES[j]) for j in prerequisites(i)]

    what_if = named(
        index("report --store what-if            # Table 2 etc. of the simulated schedule")
    )
    assert what_if[-1] == "replay --policy philly --param locality_wait_min=30 --out what-if"
    assert "ingest trace-data.tar.gz --store philly-store" in what_if
    assert not [t for t in what_if if "demo-store" in t or "synth" in t]
    assert named(index("ingest synth-out --store synth-store")) == [
        "synth --out synth-out --jobs 500 --machines 16 --days 3"
    ]
    assert named(index("ingest trace-data.tar.gz --store philly-store")) == []
