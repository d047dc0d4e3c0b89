"""Failure messages for failed attempts' logs, taken from the signature rules.

The rules file ``philly_analyze/data/failure_signatures.toml`` (``philly_analyze.failures``)
is the one definition of what each Table 7 reason looks like in a log: every rule carries
``examples``, realistic log lines it matches. A failed attempt's log ends with one example of
its true reason, chosen at random, so the classifier is exercised on the lines it was written
for. A reason without examples (``No signature``) ends the log with a line no rule matches.
Examples that are also training-progress lines (``INFO:tensorflow:loss = nan, step = 2300``
for a diverged model) are left out: the progress parser would read them as one more step of
the loss curve, which the ground truth does not have.
"""

from __future__ import annotations

import re

from philly_analyze.failures import NO_SIGNATURE, load_rules
from philly_analyze.ingest.framework_progress import SHAPES

#: The last line of a failed attempt whose failure matches no signature.
NO_SIGNATURE_LINE = "process exited with status 1"


def load_examples() -> dict[str, list[str]]:
    """Reason name -> example lines of its rules (``No signature`` has none)."""
    progress = [re.compile(s.pattern) for s in SHAPES]
    out = {
        name: [ln for ln in lines if not any(p.search(ln) for p in progress)]
        for name, lines in load_rules().examples().items()
    }
    out = {name: lines for name, lines in out.items() if lines}
    out.pop(NO_SIGNATURE, None)
    return out
