"""What a sweep runs: the cross product of policies x parameter values x seeds, one replay each.

Parameters are the replay registry's (``philly_analyze.sim.policies``): ``KEY`` applies to
every chosen policy that takes it, ``POLICY.KEY`` to one. A policy is crossed only with the
parameters it takes, so ``--policy philly,relaxed --param locality_wait_min=0,30`` is
2 x seeds runs of ``philly`` and 1 x seeds of ``relaxed`` (which has no locality wait).

Each run is keyed by a stable hash of (policy, every parameter with defaults filled, seed,
arrival jitter, identity of the replay's inputs), so a re-run skips what is already done.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from philly_analyze.errors import UsageError, UserError

#: Prefix of the per-parameter columns of the runs table (metric names never start with it,
#: and a parameter may share a name with a metric: ``online_gpus`` is both for muxflow).
PARAM_PREFIX = "param_"
#: How a parameter set to None (``--param max_retries=0,1,none``) is written and shown: in a
#: ``param_`` column a null means "this policy does not take the parameter", so None is
#: spelled out as the user typed it.
NONE_VALUE = "none"


@dataclass(frozen=True)
class Task:
    """One replay of a sweep: what a worker needs besides the inputs."""

    run_id: str
    policy: str
    #: The parameters the sweep set for this run (swept or fixed), typed.
    given: dict[str, Any]
    #: Every parameter of the policy, defaults filled (what the replay ran with).
    params: dict[str, Any]
    seed: int
    jitter_s: float
    #: Modules every worker imports first (custom policies register themselves there).
    imports: tuple[str, ...] = ()


def split_values(raw: str, kind: type) -> list[Any]:
    """The values of one ``--param KEY=VALUES``: a JSON list (``[1, 2.5]``), or a list
    separated by ``,``, or by ``;`` for string parameters (their values are themselves
    comma lists: ``las.thresholds_gpu_h``, ``muxflow.disable``)."""
    s = raw.strip()
    if s.startswith("["):
        try:
            vals = json.loads(s)
        except json.JSONDecodeError as e:
            raise UserError(f"--param value {raw!r} is not a JSON list: {e}") from None
        if not isinstance(vals, list) or not vals:
            raise UserError(f"--param value {raw!r} must be a non-empty JSON list")
        return vals
    return [v.strip() for v in s.split(";" if kind is str else ",")]


def parse_param_args(values: Sequence[str]) -> dict[str, list[str]]:
    """``KEY=VALUES`` / ``POLICY.KEY=VALUES`` strings (the CLI's ``--param``) -> raw values per
    key; a key given twice gets both lists."""
    out: dict[str, list[str]] = {}
    for raw in values:
        key, sep, value = raw.partition("=")
        if not sep or not key.strip():
            raise UsageError(f"--param expects KEY=VALUES, got {raw!r}")
        out.setdefault(key.strip(), []).append(value)
    return out


def _dedupe(values: list[Any]) -> list[Any]:
    seen: list[Any] = []
    for v in values:
        if not any(v == s and type(v) is type(s) for s in seen):
            seen.append(v)
    return seen


@dataclass
class SweepSpec:
    """Policies, the parameter grid of each, and seeds.

    ``grid[policy][name]`` is the ordered list of typed values of parameter ``name`` for that
    policy (validated by the policy's ``Param``); a single value is a fixed setting."""

    policies: list[str]
    grid: dict[str, dict[str, list[Any]]]
    seeds: list[int]
    jitter_s: float = 0.0
    imports: tuple[str, ...] = ()
    #: Every parameter of each policy with its defaults (from the registry).
    _defaults: dict[str, dict[str, Any]] = field(default_factory=dict, repr=False)

    @classmethod
    def build(
        cls,
        policies: str | Sequence[str],
        params: Mapping[str, Any] | None = None,
        seeds: int | Sequence[int] = 1,
        *,
        jitter_s: float = 0.0,
        imports: Sequence[str] = (),
    ) -> SweepSpec:
        """Validate and expand the user's choices. ``params`` maps ``KEY`` or ``POLICY.KEY``
        to a string (split by ``split_values``), a list of values, a list of such strings
        (a repeated ``--param``), or one value. ``seeds``: a count (0..N-1) or the seeds."""
        import importlib

        from philly_analyze.sim.policies import get_policy, param_takers, validate_params

        for mod in imports:  # custom policies must be registered before names are checked
            try:
                importlib.import_module(mod)
            except (ImportError, ValueError) as e:  # ValueError: an empty or relative name
                raise UserError(f"cannot import {mod!r} (--import): {e}") from None
        names = [policies] if isinstance(policies, str) else list(policies)
        names = _dedupe([p.strip() for n in names for p in n.split(",") if p.strip()])
        if not names:
            raise UsageError("no policy given (--policy NAME[,NAME...])")
        pols = {n: get_policy(n) for n in names}  # unknown names fail here, before any work
        seed_list = list(range(seeds)) if isinstance(seeds, int) else [int(s) for s in seeds]
        if not seed_list:
            raise UserError("no seeds (--seeds must be at least 1)")
        if not 0 <= jitter_s < math.inf:  # nan too
            raise UserError(f"--jitter must be a finite number >= 0 of seconds, got {jitter_s}")
        grid: dict[str, dict[str, list[Any]]] = {n: {} for n in names}
        scoped: dict[str, set[str]] = {n: set() for n in names}
        # Scoped keys (POLICY.KEY) first so they win over a plain KEY for their policy.
        items = sorted((params or {}).items(), key=lambda kv: "." not in kv[0])
        for key, raw in items:
            name, takers = param_takers(key, pols)
            dot = "." in key
            for p in takers:
                if not dot and name in scoped[p]:
                    continue
                spec = next(x for x in pols[p].params if x.name == name)
                grid[p][name] = _dedupe([spec.convert(v, p) for v in _raw_values(raw, spec.kind)])
                if dot:
                    scoped[p].add(name)
        defaults = {n: validate_params(pols[n], {}) for n in names}
        return cls(names, grid, seed_list, float(jitter_s), tuple(imports), defaults)

    def swept(self) -> list[str]:
        """Parameters with more than one value for some policy (the figures' x axes)."""
        out: list[str] = []
        for g in self.grid.values():
            out += [k for k, v in g.items() if len(v) > 1 and k not in out]
        return out

    def param_names(self) -> list[str]:
        """Every parameter the sweep sets (swept or fixed), in first-given order."""
        out: list[str] = []
        for g in self.grid.values():
            out += [k for k in g if k not in out]
        return out

    def tasks(self, input_id: str) -> list[Task]:
        """One task per (policy, combination of values, seed), in that nesting order."""
        out = []
        for pol in self.policies:
            keys = list(self.grid[pol])
            for combo in itertools.product(*(self.grid[pol][k] for k in keys)):
                given = dict(zip(keys, combo, strict=True))
                full = {**self._defaults[pol], **given}
                for seed in self.seeds:
                    rid = run_key(pol, full, seed, self.jitter_s, input_id)
                    out.append(Task(rid, pol, given, full, seed, self.jitter_s, self.imports))
        return out

    def describe(self) -> list[str]:
        """One line per policy: its grid and run count (for stderr)."""
        lines = []
        for pol in self.policies:
            g = self.grid[pol]
            n = 1
            for v in g.values():
                n *= len(v)
            parts = [f"{k}={','.join(_show(x) for x in v)}" for k, v in g.items()]
            lines.append(
                f"{pol}: {' x '.join(parts) or 'defaults'} x {len(self.seeds)} seed"
                f"{'s' if len(self.seeds) != 1 else ''} = {n * len(self.seeds)} runs"
            )
        return lines


def _raw_values(raw: Any, kind: type) -> list[Any]:
    if isinstance(raw, str):
        return split_values(raw, kind)
    if isinstance(raw, list | tuple):
        # A repeated --param gives a list of strings, each itself a list of values.
        return [v for r in raw for v in (split_values(r, kind) if isinstance(r, str) else [r])]
    return [raw]


def _show(v: Any) -> str:
    if v is None:
        return NONE_VALUE
    if isinstance(v, float) and v.is_integer():
        return str(int(v))
    return json.dumps(v) if isinstance(v, str) and ("," in v or ";" in v or not v) else str(v)


#: Parameters naming a file whose content (not just its path) defines the run.
FILE_PARAMS = ("model",)


def _file_params_digest(params: Mapping[str, Any]) -> dict[str, str]:
    """sha256 of each file a parameter names, so that editing the file (say, a MuxFlow model
    TOML) makes a resumed sweep run again instead of reusing stale results."""
    out = {}
    for key in FILE_PARAMS:
        value = params.get(key)
        if value and Path(str(value)).is_file():
            out[key] = hashlib.sha256(Path(str(value)).read_bytes()).hexdigest()
    return out


def run_key(
    policy: str, params: Mapping[str, Any], seed: int, jitter_s: float, input_id: str
) -> str:
    """Stable id of one run: sha256 of its canonical JSON (every parameter, defaults filled;
    so a run with a parameter left at its default and one setting it explicitly are the same
    run). 20 hex digits: collisions are out of reach for any sweep size."""
    files = _file_params_digest(params)
    doc = json.dumps(
        {
            "policy": policy,
            "params": dict(params),
            "seed": int(seed),
            "jitter_s": float(jitter_s),
            "inputs": input_id,
            **({"files": files} if files else {}),
        },
        sort_keys=True,
        separators=(",", ":"),
    )
    return hashlib.sha256(doc.encode()).hexdigest()[:20]
