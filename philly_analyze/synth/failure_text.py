"""Failure messages for failed attempts' logs, taken from the signature rules.

The rules file ``philly_analyze/data/failure_signatures.toml`` (``philly_analyze.failures``)
is the one definition of what each Table 7 reason looks like in a log: every rule carries
``examples``, realistic log lines it matches. A failed attempt's log ends with one example of
its true reason, chosen at random, so the classifier is exercised on the lines it was written
for. A reason without examples (``No signature``) ends the log with a line no rule matches.
"""

from __future__ import annotations

from philly_analyze.failures import NO_SIGNATURE, load_rules

#: The last line of a failed attempt whose failure matches no signature.
NO_SIGNATURE_LINE = "process exited with status 1"


def load_examples() -> dict[str, list[str]]:
    """Reason name -> example lines of its rules (``No signature`` has none)."""
    out = {name: lines for name, lines in load_rules().examples().items() if lines}
    out.pop(NO_SIGNATURE, None)
    return out
