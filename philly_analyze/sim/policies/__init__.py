"""The policy registry. A policy is a small class registered by name:

    @register
    class MyPolicy(Policy):
        name = "mine"
        description = "one line for --help"
        params = (Param("knob", float, 1.0, "what it does", minimum=0),)
        uses_quotas = True

        def simulate(self, workload, cluster, quotas, params, seed) -> ReplayResult: ...

``params`` arrives validated (``validate_params``): a plain dict with every declared parameter
(defaults filled). Queue-based policies subclass ``EnginePolicy`` and only map params to an
``EngineConfig``; preemptive ones ``PreemptivePolicy`` (a ``PreemptConfig``); the sharing
policies (muxflow, dedicated, mps-naive, ``policies/sharing.py``) ``SharingPolicy``, each with
its ``SharingMechanisms``. A policy with a simulator of its own implements ``simulate`` and
returns a ``ReplayResult``. The bundled modules register their policies when the registry is
first consulted (importing them is cheap: the simulators load when a policy runs).
"""

from __future__ import annotations

import importlib
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from philly_analyze.errors import UsageError, UserError, did_you_mean, unknown_name

if TYPE_CHECKING:
    from philly_analyze.sim.cluster import Cluster
    from philly_analyze.sim.result import ReplayResult
    from philly_analyze.sim.workload import Workload

BUILTIN_MODULES = (
    "philly_analyze.sim.policies.philly",
    "philly_analyze.sim.policies.fifo",
    "philly_analyze.sim.policies.las",
    "philly_analyze.sim.policies.srtf",
    "philly_analyze.sim.policies.sharing",
)


#: Largest parameter value: far above any count of retries or minutes, and one the engines'
#: int64 arithmetic cannot overflow on (locality_wait_min=1e308 crashed a replay before).
NUMBER_LIMIT = 10**15


@dataclass(frozen=True)
class Param:
    """One named parameter of a policy: type (int, float, bool or str), default, meaning."""

    name: str
    kind: type
    default: Any
    doc: str
    minimum: float | None = None
    #: None is allowed (e.g. max_retries=None: as many as the data has).
    nullable: bool = False

    def convert(self, value: Any, policy: str) -> Any:
        """Validate (and parse, for strings from the command line) one value."""
        where = f"policy {policy}: parameter {self.name}"
        if value is None or (isinstance(value, str) and value.lower() in ("none", "null")):
            if self.nullable:
                return None
            raise UserError(f"{where} cannot be None")
        kind = self.kind
        try:
            if kind is bool:
                if isinstance(value, str):
                    low = value.lower()
                    if low not in ("true", "false", "1", "0", "yes", "no"):
                        raise ValueError(value)
                    value = low in ("true", "1", "yes")
                elif not isinstance(value, bool):
                    raise ValueError(value)
            elif kind is int:
                if isinstance(value, bool) or (isinstance(value, float) and not value.is_integer()):
                    raise ValueError(value)
                value = int(value)
                if abs(value) > NUMBER_LIMIT:
                    raise ValueError(value)
            elif kind is float:
                if isinstance(value, bool):
                    raise ValueError(value)
                value = float(value)
                # nan/inf/1e308 would only fail deep in a run
                if not math.isfinite(value) or abs(value) > NUMBER_LIMIT:
                    raise ValueError(value)
            else:
                value = str(value)
        except (TypeError, ValueError):
            kind_name = {
                float: f"a finite float up to {NUMBER_LIMIT:.0e}",
                int: f"an integer up to {NUMBER_LIMIT:.0e}",
            }.get(kind, kind.__name__)
            raise UserError(f"{where} must be {kind_name}, got {value!r}") from None
        if self.minimum is not None and value < self.minimum:
            raise UserError(f"{where} must be >= {self.minimum}, got {value!r}")
        return value


#: Parameters every event-engine policy takes.
COMMON_PARAMS = (
    Param("max_retries", int, None, "retries after the first attempt (None: as in data)", 0, True),
    Param("retry_delay_s", float, 0.0, "seconds between a failed attempt and its retry", 0),
    Param("slowdown", bool, True, "apply the locality slowdown model (Tables 4/5)"),
    Param("rack_slowdown", float, 1.0, "run-time factor per extra rack spanned", 1.0),
)


class Policy:
    """Base class of a scheduling policy (see module docstring)."""

    name: ClassVar[str]
    description: ClassVar[str]
    params: ClassVar[tuple[Param, ...]] = ()
    #: Whether the policy enforces VC quotas (quotas are inferred when not given).
    uses_quotas: ClassVar[bool] = True

    def simulate(
        self,
        workload: Workload,
        cluster: Cluster,
        quotas: Mapping[str, int] | None,
        params: dict[str, Any],
        seed: int,
    ) -> ReplayResult:
        """Replay ``workload`` on ``cluster`` with validated ``params``."""
        raise NotImplementedError


POLICIES: dict[str, type[Policy]] = {}


def register(cls: type[Policy]) -> type[Policy]:
    """Class decorator adding a policy to the registry under ``cls.name``."""
    POLICIES[cls.name] = cls
    return cls


def _load_builtins() -> None:
    for mod in BUILTIN_MODULES:
        importlib.import_module(mod)


def policy_names() -> list[str]:
    """Every registered policy."""
    _load_builtins()
    return list(POLICIES)


def get_policy(name: str) -> Policy:
    """An instance of the policy ``name``; a ``UsageError`` (exit 2) suggesting the closest
    name and listing the choices otherwise."""
    _load_builtins()
    if name not in POLICIES:
        raise unknown_name("policy", name, POLICIES)
    return POLICIES[name]()


def param_takers(key: str, chosen: Mapping[str, Policy]) -> tuple[str, list[str]]:
    """The parameter name of a ``--param`` key and the chosen policies (name -> policy) it
    applies to: ``NAME``, every chosen policy that takes it; ``POLICY.NAME``, that one. A
    ``UsageError`` when POLICY is not chosen or no chosen policy takes NAME, suggesting the
    closest name -- the same for ``replay`` and ``sweep``."""
    scope, dot, name = key.rpartition(".")
    if dot and scope not in chosen:
        raise UsageError(
            f"--param {key}: policy {scope!r} is not in --policy{did_you_mean(scope, chosen)}"
        )
    targets = [scope] if dot else list(chosen)
    takers = [p for p in targets if any(x.name == name for x in chosen[p].params)]
    if not takers:
        known = sorted({x.name for p in targets for x in chosen[p].params})
        raise UsageError(
            f"--param {key}: no chosen policy takes {name!r}{did_you_mean(name, known)}; "
            f"they take: {', '.join(known) or 'nothing'}"
        )
    return name, takers


def validate_params(policy: Policy, params: Mapping[str, Any] | None) -> dict[str, Any]:
    """Every declared parameter of ``policy``, from ``params`` or its default; unknown names
    raise a ``UsageError``, bad values a ``UserError``."""
    params = dict(params or {})
    spec = {p.name: p for p in policy.params}
    unknown = sorted(set(params) - set(spec))
    if unknown:
        raise UsageError(
            f"policy {policy.name}: unknown parameter(s) {', '.join(unknown)}"
            f"{did_you_mean(unknown[0], spec)}; it takes {', '.join(spec) or 'none'}"
        )
    return {
        name: p.convert(params[name], policy.name) if name in params else p.default
        for name, p in spec.items()
    }
