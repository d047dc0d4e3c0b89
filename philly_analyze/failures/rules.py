"""Failure signature rules: loading and validating ``data/failure_signatures.toml``.

The TOML file is the one definition of the rules (see its header and docs/framework-logs.md).
Patterns are RE2 regular expressions, run by Arrow's vectorised ``match_substring_regex`` over
whole chunks of log lines (and by Python's ``re`` on the few candidate lines); RE2 has no
look-around or back-references, so a pattern that Python's ``re`` would accept may be refused
here, with the rule's id in the message.
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass
from functools import cache
from importlib import resources
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc

from philly_analyze.errors import UserError

#: Reason given to failure evidence no rule matches (Table 7's last row).
NO_SIGNATURE = "No signature"
#: Categories column for No signature (as in table7_failures.csv).
NO_CATEGORIES = "-"
#: Failure categories of Table 7: infrastructure, AI engine, user.
CATEGORIES = ("IF", "AE", "U")
DEFAULT_PRIORITY = 50


@dataclass(frozen=True)
class Rule:
    """One signature: an RE2 pattern searched in each log line."""

    id: str
    reason: str
    pattern: str
    priority: int
    examples: tuple[str, ...]


@dataclass(frozen=True)
class Reason:
    """A Table 7 failure reason and its rules."""

    name: str
    categories: tuple[str, ...]
    gloss: str
    rules: tuple[Rule, ...]

    @property
    def categories_str(self) -> str:
        """Categories as stored in ``failures.categories`` (``"AE,U"``; ``"-"`` for none)."""
        return ",".join(self.categories) or NO_CATEGORIES


@dataclass(frozen=True)
class Marker:
    """A line showing that a run finished normally (``[[completion]]``)."""

    id: str
    pattern: str
    examples: tuple[str, ...]


@dataclass(frozen=True)
class RuleSet:
    """Every reason with its rules, the completion markers and the no-signature hint."""

    reasons: tuple[Reason, ...]
    completion: tuple[Marker, ...]
    #: Pattern of "error-looking" lines; the last one is shown for No-signature logs.
    hint: str
    #: Where the rules were read from.
    path: str

    @property
    def rules(self) -> tuple[Rule, ...]:
        """All rules, highest priority first (file order among equals)."""
        flat = [r for reason in self.reasons for r in reason.rules]
        return tuple(sorted(flat, key=lambda r: -r.priority))

    def reason(self, name: str) -> Reason:
        """The reason called ``name`` (KeyError if none)."""
        for r in self.reasons:
            if r.name == name:
                return r
        raise KeyError(name)

    def categories_of(self, name: str) -> str:
        """Stored categories string of a reason name, including No signature."""
        return NO_CATEGORIES if name == NO_SIGNATURE else self.reason(name).categories_str

    def examples(self) -> dict[str, list[str]]:
        """Reason name -> every example line of its rules (what the synthesizer samples)."""
        return {r.name: [e for rule in r.rules for e in rule.examples] for r in self.reasons}


def default_rules_path() -> Path:
    """The packaged rules file."""
    return Path(str(resources.files("philly_analyze") / "data" / "failure_signatures.toml"))


def load_rules(path: str | Path | None = None) -> RuleSet:
    """Read and validate a rules file (default: the packaged one, cached).

    Raises ``UserError`` naming the file (and rule) for a TOML syntax error, a missing field,
    an unknown category, a duplicate id or reason, or a pattern RE2 cannot compile."""
    if path is None:
        return _load_default()
    return _load(Path(path))


@cache
def _load_default() -> RuleSet:
    return _load(default_rules_path())


def _load(path: Path) -> RuleSet:
    where = str(path)
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as e:
        raise UserError(f"cannot read failure rules: {e.strerror}", source=where) from None
    except tomllib.TOMLDecodeError as e:
        raise UserError(f"invalid TOML: {e}", source=where) from None
    seen_ids: set[str] = set()
    reasons: list[Reason] = []
    for i, raw in enumerate(_list(data, "reason", where), 1):
        name = _str(raw, "name", f"reason #{i}", where)
        if any(r.name == name for r in reasons) or name == NO_SIGNATURE:
            raise UserError(f"reason {name!r} defined twice", source=where)
        cats = tuple(raw.get("categories", ()))
        bad = [c for c in cats if c not in CATEGORIES]
        if bad or not cats:
            raise UserError(
                f"reason {name!r}: categories must be a non-empty list of {CATEGORIES}, got {cats}",
                source=where,
            )
        default_prio = int(raw.get("priority", DEFAULT_PRIORITY))
        rules = []
        for rraw in _list(raw, "rule", where, f"reason {name!r}"):
            rid = _str(rraw, "id", f"a rule of {name!r}", where)
            if rid in seen_ids:
                raise UserError(f"rule id {rid!r} used twice", source=where)
            seen_ids.add(rid)
            pattern = _str(rraw, "pattern", f"rule {rid!r}", where)
            check_pattern(pattern, f"rule {rid!r}", where)
            examples = tuple(rraw.get("examples", ()))
            if not examples:
                raise UserError(f"rule {rid!r} has no examples", source=where)
            rules.append(
                Rule(rid, name, pattern, int(rraw.get("priority", default_prio)), examples)
            )
        reasons.append(Reason(name, cats, str(raw.get("gloss", "")), tuple(rules)))
    markers = []
    for mraw in data.get("completion", []):
        mid = _str(mraw, "id", "a completion marker", where)
        pattern = _str(mraw, "pattern", f"completion {mid!r}", where)
        check_pattern(pattern, f"completion {mid!r}", where)
        markers.append(Marker(mid, pattern, tuple(mraw.get("examples", ()))))
    nosig = data.get("no_signature", {})
    hint = str(nosig.get("hint", r"(?i)\berror\b"))
    check_pattern(hint, "no_signature.hint", where)
    return RuleSet(tuple(reasons), tuple(markers), hint, where)


def check_pattern(pattern: str, what: str, where: str) -> None:
    """Refuse patterns RE2 cannot compile and patterns anchored with ``^``/``$`` (lines carry
    rank and time prefixes, and the scanner's lines keep their newline)."""
    if _has_anchor(pattern):
        raise UserError(f"{what}: pattern must not use ^ or $ anchors: {pattern!r}", source=where)
    try:
        pc.match_substring_regex(pa.array([""], pa.string()), pattern)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as e:
        raise UserError(f"{what}: invalid RE2 pattern {pattern!r}: {e}", source=where) from None
    try:
        compile_python(pattern)
    except re.error as e:
        raise UserError(
            f"{what}: pattern {pattern!r} is not valid for Python: {e}", source=where
        ) from None


@cache
def compile_python(pattern: str) -> re.Pattern[str]:
    """The pattern for Python's ``re`` (ASCII classes, as RE2's): the classifier tries rules on
    the few candidate lines with it, and RE2 on whole chunks; the syntax both accept (no
    look-around, back-references or possessive repeats) means the same in both."""
    return re.compile(pattern, re.ASCII)


def _has_anchor(pattern: str) -> bool:
    """Whether a regex uses ``^`` or ``$`` as an anchor (not escaped, not inside [...])."""
    in_class = False
    i = 0
    while i < len(pattern):
        ch = pattern[i]
        if ch == "\\":
            i += 2
            continue
        if in_class:
            if ch == "]":
                in_class = False
        elif ch == "[":
            in_class = True
            # A ']' right after '[' or '[^' is a literal member of the class.
            if pattern[i + 1 : i + 2] == "^":
                i += 1
            if pattern[i + 1 : i + 2] == "]":
                i += 1
        elif ch in "^$":
            return True
        i += 1
    return False


def _list(data: dict, key: str, where: str, owner: str = "file") -> list[dict]:
    value = data.get(key, [])
    if not isinstance(value, list) or not all(isinstance(v, dict) for v in value):
        raise UserError(f"{owner}: {key!r} must be an array of tables", source=where)
    return value


def _str(data: dict, key: str, owner: str, where: str) -> str:
    value = data.get(key)
    if not isinstance(value, str) or not value:
        raise UserError(f"{owner}: missing or empty {key!r}", source=where)
    return value
