"""``philly-analyze replay``: thin wrapper over ``philly_analyze.sim``."""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any

import click

from philly_analyze.cli.options import (
    PathType,
    machines_option,
    quiet_option,
    store_option,
    writes,
)
from philly_analyze.errors import UserError
from philly_analyze.report import FORMATS


def _parse_params(values: tuple[str, ...], policies: list[str]) -> dict[str, dict[str, str]]:
    """``--param KEY=VALUE`` (every chosen policy that takes KEY) or ``POLICY.KEY=VALUE``;
    a key no chosen policy takes is a usage error as in sweep (``policies.param_takers``)."""
    from philly_analyze.sim.policies import get_policy, param_takers

    chosen = {p: get_policy(p) for p in policies}
    out: dict[str, dict[str, str]] = {p: {} for p in policies}
    for raw in values:
        key, sep, value = raw.partition("=")
        if not sep or not key:
            raise click.BadParameter(f"expected KEY=VALUE, got {raw!r}", param_hint="--param")
        name, takers = param_takers(key, chosen)
        for p in takers:
            out[p][name] = value
    return out


def _list_policies() -> None:
    from philly_analyze.sim.policies import get_policy, policy_names

    for name in policy_names():
        pol = get_policy(name)
        click.echo(f"{name}: {pol.description}")
        for p in pol.params:
            click.echo(f"    {p.name} ({p.kind.__name__}, default {p.default!r}): {p.doc}")


@click.command(
    "replay",
    epilog="""\b
Examples:
  philly-analyze replay --store philly-store --policy philly,relaxed
  philly-analyze replay --policy philly --param locality_wait_min=30 --out what-if
  philly-analyze report --store what-if            # Table 2 etc. of the simulated schedule
  philly-analyze replay --policy philly,fifo,las,srtf --format json > cmp.json
  philly-analyze replay --policy philly,fifo --format csv > cmp.csv
  philly-analyze replay --policy philly,fifo --format html > cmp.html
  philly-analyze replay --list-policies
  philly-analyze replay --store philly-store --machines all   # + hosts not in the list
  philly-analyze replay --store philly-store --policy philly,dedicated,muxflow
  philly-analyze replay --policy dedicated,muxflow,mps-naive --scenario paper --figures figs
  philly-analyze replay --scenario paper --ablate --param online_gpus=2000 --format md
  philly-analyze replay --scenario paper --policy muxflow --vary sm.threshold=0.05,0.1,0.2 --param online_gpus=2000
""",
)
@click.option(
    "--policy",
    "policy",
    default="philly",
    show_default=True,
    help="Policy name, or several separated by commas (see --list-policies).",
)
@store_option("Store whose jobs and machines to replay.")
@click.option(
    "--out",
    type=PathType(file_okay=False, path_type=Path),
    help="Write the simulated schedule as a store here (several policies: OUT/<policy>).",
)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(FORMATS),
    default="table",
    show_default=True,
    help="Comparison output (the output layer's formats): a rich table, md or html for "
    "docs, json or csv (every metric, fractions also in percent) for scripts.",
)
@click.option(
    "--quotas",
    type=PathType(exists=True, dir_okay=False, path_type=Path),
    help="VC quota file (CSV vc,gpus or JSON); default: inferred as the report does.",
)
@click.option("--racks", type=click.IntRange(min=1), help="Split the servers into N racks.")
@machines_option()
@click.option(
    "--param",
    "params",
    multiple=True,
    metavar="KEY=VALUE",
    help="Policy parameter, for every chosen policy that takes it; POLICY.KEY=VALUE for one.",
)
@click.option("--seed", type=int, default=0, show_default=True, help="Seed handed to policies.")
@click.option("--list-policies", is_flag=True, help="List policies and their parameters.")
@click.option(
    "--scenario",
    type=click.Choice(["paper"]),
    help="Sharing policies only (muxflow, dedicated, mps-naive): a built-in scenario instead "
    "of a store; paper = MuxFlow's deployment, 20,000 online GPUs for one day.",
)
@click.option(
    "--ablate",
    is_flag=True,
    help="With --scenario: muxflow with each mechanism switched off, then mps-naive and "
    "dedicated, on the same jobs (one row each).",
)
@click.option(
    "--vary",
    metavar="PARAM=V1,V2,...",
    help="With --scenario and one sharing --policy: one parameter of the model file (dotted, "
    "e.g. sm.threshold) over the values (one row each).",
)
@click.option(
    "--figures",
    type=click.Path(file_okay=False, path_type=Path),
    help="Sharing policies: write PNG figures here (the day's utilization and the online "
    "slowdown; with --ablate or --vary, that experiment's figure).",
)
@quiet_option()
@writes(out="--out")
def command(
    policy: str,
    store_path: str,
    out: Path | None,
    fmt: str,
    quotas: Path | None,
    racks: int | None,
    machines: str | None,
    params: tuple[str, ...],
    seed: int,
    list_policies: bool,
    scenario: str | None,
    ablate: bool,
    vary: str | None,
    figures: Path | None,
    quiet: bool,
) -> None:
    """Replay a store's jobs through a simulated cluster under one or more scheduling
    policies and compare them: JCT, queueing delay (fair-share, fragmentation, capacity), GPU
    utilization, makespan, per-VC fairness, preemptions; and, for observed data, how far
    the replayed queueing delays are from the observed ones (fidelity_queue_median_abs_err_s)."""
    if list_policies:
        _list_policies()
        return
    from philly_analyze.hugepages import disable_transparent_hugepages
    from philly_analyze.progress import stderr_console

    disable_transparent_hugepages()  # seconds of page zeroing at a million jobs (its docstring)
    from philly_analyze.sim.policies import get_policy
    from philly_analyze.sim.replay import simulate

    names = [p.strip() for p in policy.split(",") if p.strip()]
    if not names:
        raise click.BadParameter("no policy given", param_hint="--policy")
    for n in names:
        get_policy(n)  # unknown names fail before any work
    if ablate or vary:
        if out is not None:
            raise click.UsageError("--ablate and --vary print a table and write no store: no --out")
        _experiment(names, scenario, ablate, vary, params, seed, fmt, figures, quiet)
        return
    sharing = [n for n in names if _is_sharing(n)]
    if figures is not None and not sharing:
        raise click.UsageError("--figures draws sharing runs: choose a sharing --policy")
    per_policy = _parse_params(params, names)
    console = stderr_console()
    if scenario:
        from philly_analyze.sim.sharing.replay import run_scenario

        results = _run_all(
            names, lambda n: run_scenario(n, scenario, per_policy[n], seed), out, quiet, console
        )
        _print(results, fmt, f"scenario {scenario}", _ScenarioCluster(results[0][0].machines))
        _figures(results, figures, scenario, console, quiet)
        return
    wl, cluster, q = _inputs(store_path, racks, quotas, machines, quiet, console)
    results = _run_all(
        names, lambda n: simulate(wl, cluster, n, q, per_policy[n], seed), out, quiet, console
    )
    _print(results, fmt, store_path, cluster)
    _figures(results, figures, None, console, quiet)


def _inputs(
    store_path: str,
    racks: int | None,
    quotas: Path | None,
    machines: str | None,
    quiet: bool,
    console: Any,
) -> tuple[Any, Any, dict[str, int]]:
    """The store's workload, cluster and quotas (``sim.load_inputs``), said on stderr: a
    status line while the store is read (a terminal only, as the bars)."""
    from philly_analyze.progress import reporting, track
    from philly_analyze.sim.replay import load_inputs

    with track("reading the store", None, unit="count", quiet=quiet) as t, reporting(t):
        wl, cluster, q = load_inputs(store_path, racks, quotas, machines)
    if len(wl) == 0:
        raise UserError(
            "has no jobs to replay (jobs need a submit time, GPUs and a duration)",
            source=store_path,
        )
    if not quiet:
        console.print(
            f"replaying {len(wl):,} jobs on {cluster.num_machines:,} machines "
            f"({cluster.total_gpus:,} GPUs, {len(cluster.rack_names)} rack"
            f"{'s' if len(cluster.rack_names) != 1 else ''})",
            highlight=False,
        )
    return wl, cluster, q


def _is_sharing(name: str) -> bool:
    from philly_analyze.sim.policies import get_policy
    from philly_analyze.sim.policies.sharing import SharingPolicy

    return isinstance(get_policy(name), SharingPolicy)


def _experiment(
    names: list[str],
    scenario: str | None,
    ablate: bool,
    vary: str | None,
    params: tuple[str, ...],
    seed: int,
    fmt: str,
    figures: Path | None,
    quiet: bool,
) -> None:
    """``--ablate`` / ``--vary``: a table of sharing runs on a scenario's jobs."""
    from philly_analyze.sim.sharing import scenario as experiments

    if scenario is None:
        raise click.UsageError("--ablate and --vary run on a built-in scenario: add --scenario")
    if ablate and vary:
        raise click.UsageError("--ablate and --vary are separate experiments: choose one")
    source = click.get_current_context().get_parameter_source("policy")
    if ablate:
        ablated = experiments.ABLATED
        if source == click.core.ParameterSource.COMMANDLINE and names != [ablated]:
            raise click.UsageError(f"--ablate ablates {ablated} beside its baselines: no --policy")
        # The ablated policy's parameters apply (online_gpus, model, ...).
        per = _parse_params(params, [ablated])[ablated]
        exp = experiments.run_ablations(scenario, per, seed)
    else:
        if len(names) != 1 or not _is_sharing(names[0]):
            raise click.UsageError("--vary runs one sharing policy: --policy muxflow, say")
        key, sep, raw = (vary or "").partition("=")
        values = [experiments.parse_value(v) for v in raw.split(",") if v.strip()]
        if not sep or not key or not values:
            raise click.BadParameter(f"expected PARAM=V1,V2, got {vary!r}", param_hint="--vary")
        per = _parse_params(params, names)[names[0]]
        exp = experiments.run_sweep(names[0], scenario, key, values, per, seed)
    _print_rows(exp.table, fmt, {"scenario": scenario, **exp.header()})
    if figures is not None:
        path = exp.figure(figures)
        if not quiet:
            click.echo(f"figure: {path}", err=True)


def _figures(
    results: list, figures: Path | None, scenario: str | None, console: Any, quiet: bool
) -> None:
    """``--figures``: the day and slowdown figures of the sharing runs (MuxFlow's published
    before/after numbers beside the day of the paper scenario)."""
    if figures is None:
        return
    from philly_analyze.report.sharing import plot_outputs

    outputs = {r.policy: r.sharing for r, _ in results if getattr(r, "sharing", None)}
    paper = None
    if scenario and outputs:
        paper = next(iter(outputs.values())).config.paper.published()
    stem = f"muxflow_{scenario}" if scenario else "muxflow"
    for path in plot_outputs(outputs, figures, stem, paper):
        if not quiet:
            console.print(f"figure: {path}", highlight=False)


def _run_all(names: list[str], run: Any, out: Path | None, quiet: bool, console: Any) -> list:
    """Run each policy (``run(name) -> ReplayResult``), write its store under ``out``."""
    from philly_analyze.progress import reporting, track
    from philly_analyze.sim.result import encoding_for_store, write_result_store

    results = []
    shown: set[str] = set()  # the same note (e.g. jobs left out) is printed once, not per policy
    for name in names:
        # A bar on stderr only (terminal, not --quiet): the engines report attempts ended, the
        # sharing simulator jobs done.
        # The same line then says when the result is built (library) and written (here).
        target = None
        with track(f"{name}: replaying", None, unit="count", quiet=quiet) as t, reporting(t):
            # Written below: the tables are encoded while the result is built.
            with encoding_for_store() if out is not None else contextlib.nullcontext():
                res = run(name)
            if out is not None:
                target = out if len(names) == 1 else out / name
                t.describe(f"{name}: writing {target}")
                write_result_store(res, target)  # with the sharing model's output, if any
        results.append((res, target))
        if not quiet:
            console.print(
                f"{name}: {res.metrics['jobs']:,} jobs in {res.seconds:.2f} s"
                + (f" -> {target}" if target else ""),
                highlight=False,
            )
            for note in res.notes:
                if note not in shown:
                    shown.add(note)
                    console.print(f"note: {note}", highlight=False)
    return results


class _ScenarioCluster:
    """What ``_print`` shows of the cluster, for a scenario (no store)."""

    def __init__(self, machines: Any) -> None:
        self.num_machines = machines.num_rows
        self.total_gpus = int(sum(machines.column("listed_num_gpus").to_pylist()))


def _print(results: list, fmt: str, store_path: str, cluster: Any) -> None:
    """The policy comparison in ``fmt`` (the output layer renders it)."""
    from philly_analyze.report import emit
    from philly_analyze.sim.tables import comparison_document

    emit(comparison_document(results, store_path, cluster.num_machines, cluster.total_gpus), fmt)


def _print_rows(df: Any, fmt: str, header: dict[str, Any]) -> None:
    """An experiment's table of runs in ``fmt`` (the output layer renders it)."""
    from philly_analyze.report import emit
    from philly_analyze.sim.tables import runs_document

    emit(runs_document(df, header), fmt)
