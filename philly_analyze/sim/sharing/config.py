"""Typed view of ``philly_analyze/data/muxflow_model.toml``: the one place every parameter of the
MuxFlow simulator is defined, with its source. ``SharingConfig.load()`` reads the shipped file,
optionally overlaid by a user's TOML file of the same shape, and ``cfg.with_(**{"sm.dynamic":
False})`` derives variants for ablations and sweeps."""

from __future__ import annotations

import dataclasses
import re
import tomllib
from dataclasses import dataclass, field, fields
from importlib import resources
from pathlib import Path
from typing import Any

from philly_analyze.errors import UserError

MODEL_FILE = "muxflow_model.toml"


@dataclass(frozen=True)
class ClusterCfg:
    online_gpus: int
    ordinary_gpus: int
    gpu_type: str
    step_minutes: int
    gpus_per_machine: int


@dataclass(frozen=True)
class ServiceSpec:
    """One online service class (see the TOML for each field's meaning and source)."""

    name: str
    share: float
    peak_util: float
    trough: float
    peak_hour: float
    sm_low: float
    sm_high: float
    mem_static: float
    mem_load: float
    sensitivity: float
    pressure: float
    slo: float


@dataclass(frozen=True)
class OnlineCfg:
    noise_sigma: float
    noise_rho: float
    peak_jitter_hours: float
    util_spread: float
    mem_spread: float
    slowdown_noise: float
    load_sensitivity_floor: float
    slo_violation_budget: float
    services: tuple[ServiceSpec, ...]


@dataclass(frozen=True)
class OfflineCfg:
    util_mean: float
    util_concentration: float
    sm_mean: float
    sm_concentration: float
    mem_median: float
    mem_sigma: float
    mem_spike_prob: float
    mem_spike_factor: float
    checkpoint_minutes: float
    max_gang: int


@dataclass(frozen=True)
class MemoryCfg:
    enabled: bool
    margin: float
    oom_outage_minutes: float


@dataclass(frozen=True)
class LaunchCfg:
    enabled: bool
    target_fraction: float
    decrease: float
    increase: float
    tolerance: float
    min_duty: float
    steps_per_minute: int


@dataclass(frozen=True)
class MonitorCfg:
    enabled: bool
    slowdown_factor: float
    consecutive: int
    mem_threshold: float
    sm_threshold: float
    cooldown_minutes: float


@dataclass(frozen=True)
class SmCfg:
    dynamic: bool
    fixed_share: float
    headroom: float
    step: float
    threshold: float
    min_share: float
    max_share: float
    horizon_minutes: float
    restart_minutes: float
    check_minutes: int
    pressure_exponent: float
    speed_exponent: float


@dataclass(frozen=True)
class MatchingCfg:
    enabled: bool
    period_minutes: int
    window_factor: float
    block_rows: int
    min_weight: float
    oracle_sample: float
    profile_noise: bool
    truth_noise: bool


@dataclass(frozen=True)
class ErrorsCfg:
    mixed: bool
    rate_per_hour: float
    signal_fraction: float
    reset_outage_minutes: float
    mps_outage_minutes: float


@dataclass(frozen=True)
class PaperScenarioCfg:
    online_gpus: int
    ordinary_gpus: int
    minutes: int
    backlog_jobs: int
    load_factor: float
    duration_median_minutes: float
    duration_sigma: float
    multi_gpu_fraction: float
    paper_before: dict[str, float] = field(default_factory=dict)
    paper_after: dict[str, float] = field(default_factory=dict)

    def published(self) -> dict[str, dict[str, float]]:
        """The paper's headline numbers by side: {"before": {...}, "after": {...}}."""
        return {"before": self.paper_before, "after": self.paper_after}


_SECTIONS: dict[str, type] = {
    "cluster": ClusterCfg,
    "online": OnlineCfg,
    "offline": OfflineCfg,
    "memory": MemoryCfg,
    "launch": LaunchCfg,
    "monitor": MonitorCfg,
    "sm": SmCfg,
    "matching": MatchingCfg,
    "errors": ErrorsCfg,
}

#: Mechanism switches, by the name ablations use -> the dotted parameter that turns it off.
MECHANISMS: dict[str, tuple[str, Any]] = {
    "memory_limit": ("memory.enabled", False),
    "launch_limit": ("launch.enabled", False),
    "monitor": ("monitor.enabled", False),
    "dynamic_sm": ("sm.dynamic", False),
    "matching": ("matching.enabled", False),
    "mixed_errors": ("errors.mixed", False),
}


@dataclass(frozen=True)
class SharingMechanisms:
    """What a sharing policy does, beside the model's parameters: each registered sharing
    policy (``sim.policies.sharing``) carries one, as the queue policies carry their engine
    config."""

    #: Offline work runs on the online GPUs (else only on training GPUs: no sharing).
    shares: bool
    #: Placement itself respects each GPU's memory limit and, without a launch limit, the
    #: predicted SLO (MuxFlow's scheduler); otherwise only the matcher's weights guide it.
    aware: bool
    #: Model mechanisms (keys of ``MECHANISMS``) the policy never uses, whatever the model file
    #: says.
    switched_off: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        unknown = set(self.switched_off) - set(MECHANISMS)
        if unknown:
            raise ValueError(f"unknown mechanism(s) {sorted(unknown)}")

    def configure(self, cfg: SharingConfig) -> SharingConfig:
        """``cfg`` with this policy's switched-off mechanisms off."""
        return cfg.without(*self.switched_off) if self.switched_off else cfg


@dataclass(frozen=True)
class SharingConfig:
    """All parameters of one simulation (see ``muxflow_model.toml``)."""

    cluster: ClusterCfg
    online: OnlineCfg
    offline: OfflineCfg
    memory: MemoryCfg
    launch: LaunchCfg
    monitor: MonitorCfg
    sm: SmCfg
    matching: MatchingCfg
    errors: ErrorsCfg
    paper: PaperScenarioCfg

    @classmethod
    def load(cls, path: Path | str | None = None) -> SharingConfig:
        """The shipped parameters, overlaid by the TOML file at ``path`` if given."""
        text = resources.files("philly_analyze").joinpath("data", MODEL_FILE).read_text()
        base = tomllib.loads(text)
        if path is not None:
            p = Path(path)
            try:
                user_text = p.read_text()
                user = tomllib.loads(user_text)
            except OSError as e:
                raise UserError(f"cannot read model file: {e}", source=str(p)) from e
            except tomllib.TOMLDecodeError as e:
                raise UserError(f"not valid TOML: {e}", source=str(p)) from e
            _merge(base, user, str(p), user_text)
        return _build(base, MODEL_FILE if path is None else str(path))

    def with_(self, **dotted: Any) -> SharingConfig:
        """A copy with parameters replaced, e.g. ``cfg.with_(**{"sm.dynamic": False})``."""
        cfg = self
        for key, value in dotted.items():
            section, _, name = key.partition(".")
            if section not in {f.name for f in fields(self)} or not name:
                raise UserError(f"unknown parameter {key!r}")
            sub = getattr(cfg, section)
            if name not in {f.name for f in fields(sub)}:
                raise UserError(f"unknown parameter {key!r}")
            cfg = dataclasses.replace(cfg, **{section: dataclasses.replace(sub, **{name: value})})
        return cfg

    def without(self, *mechanisms: str) -> SharingConfig:
        """A copy with the named mechanisms (keys of ``MECHANISMS``) switched off."""
        unknown = set(mechanisms) - set(MECHANISMS)
        if unknown:
            raise UserError(f"unknown mechanism(s) {sorted(unknown)}; known: {sorted(MECHANISMS)}")
        return self.with_(**{MECHANISMS[m][0]: MECHANISMS[m][1] for m in mechanisms})


def _line_of(text: str, key: str) -> int | None:
    m = re.search(rf"^\s*{re.escape(key)}\s*=", text, re.MULTILINE)
    return text.count("\n", 0, m.start()) + 1 if m else None


def _merge(base: dict[str, Any], user: dict[str, Any], source: str, text: str) -> None:
    """Overlay ``user`` onto ``base`` in place, refusing keys the model does not have."""
    for key, value in user.items():
        if key not in base:
            raise UserError(f"unknown parameter {key!r}", source=source, line=_line_of(text, key))
        if isinstance(base[key], dict) and isinstance(value, dict):
            _merge(base[key], value, source, text)
        else:
            base[key] = value


def _construct(kind: type, data: dict[str, Any], where: str) -> Any:
    names = {f.name for f in fields(kind)}
    unknown = set(data) - names
    missing = {f.name for f in fields(kind) if f.default is dataclasses.MISSING} - set(data)
    missing -= {f.name for f in fields(kind) if f.default_factory is not dataclasses.MISSING}
    if unknown or missing:
        raise UserError(f"[{where}]: unknown {sorted(unknown)}, missing {sorted(missing)}")
    return kind(**data)


def _build(raw: dict[str, Any], source: str) -> SharingConfig:
    try:
        parts: dict[str, Any] = {}
        for name, kind in _SECTIONS.items():
            data = dict(raw[name])
            if name == "online":
                data["services"] = tuple(
                    _construct(ServiceSpec, s, "online.services") for s in data["services"]
                )
            parts[name] = _construct(kind, data, name)
        parts["paper"] = _construct(PaperScenarioCfg, dict(raw["scenario"]["paper"]), "paper")
    except KeyError as e:
        raise UserError(f"missing section {e}", source=source) from e
    except UserError as e:
        raise UserError(e.message, source=source) from e
    cfg = SharingConfig(**parts)
    total = sum(s.share for s in cfg.online.services)
    if abs(total - 1.0) > 1e-6:
        raise UserError(f"online service shares sum to {total:g}, not 1", source=source)
    return cfg


def parameters_markdown(text: str | None = None) -> str:
    """The markdown table of every scalar parameter of the model file with the comment that
    documents it (docs/muxflow.md embeds it; a test keeps the two equal)."""
    if text is None:
        text = resources.files("philly_analyze").joinpath("data", MODEL_FILE).read_text()
    rows: list[list[str]] = []
    section = ""
    for line in text.splitlines():
        head = re.match(r"^\[\[?([\w.]+)\]\]?", line)
        if head:
            section = head.group(1)
            continue
        if section == "online.services":
            continue
        m = re.match(r"^(\w+)\s*=\s*([^#]+?)\s*(?:#\s*(.*))?$", line)
        if m and not m.group(1).startswith("paper_"):
            rows.append([f"{section}.{m.group(1)}", m.group(2), (m.group(3) or "").strip()])
            continue
        more = re.match(r"^\s+#\s*(.*)$", line)
        if more and rows:
            rows[-1][2] += " " + more.group(1).strip()
    out = ["| parameter | default | meaning and source |", "|---|---|---|"]
    out += [f"| `{k}` | {v} | {doc.replace('|', '/')} |" for k, v, doc in rows]
    return "\n".join(out)
