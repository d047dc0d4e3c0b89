"""Failure signatures (Table 7): the rules as data and the classifier.

- ``load_rules(path=None) -> RuleSet``: read ``data/failure_signatures.toml`` (validated).
- ``classify(lines, rules=None) -> Match``: the reason, categories, deciding rule, verdict and
  line of one log given as lines.
- ``Scanner`` / ``Evidence``: the same, chunk by chunk over Arrow arrays and over several files
  of one attempt (used by the framework-log parser, ``philly_analyze.ingest.framework``).

The report's ``analysis/failures.py`` aggregates the store's ``failures`` table; it does not
need this package.
"""

from philly_analyze.failures.classify import VERDICTS, ChunkHits, Evidence, Match, Scanner, classify
from philly_analyze.failures.rules import (
    CATEGORIES,
    NO_CATEGORIES,
    NO_SIGNATURE,
    Marker,
    Reason,
    Rule,
    RuleSet,
    default_rules_path,
    load_rules,
)

__all__ = [
    "CATEGORIES",
    "NO_CATEGORIES",
    "NO_SIGNATURE",
    "VERDICTS",
    "ChunkHits",
    "Evidence",
    "Marker",
    "Match",
    "Reason",
    "Rule",
    "RuleSet",
    "Scanner",
    "classify",
    "default_rules_path",
    "load_rules",
]
