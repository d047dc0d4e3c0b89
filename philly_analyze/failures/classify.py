"""Classify a job attempt's logs into a Table 7 failure reason.

Vectorised: lines arrive as Arrow string arrays (one chunk of a log at a time). One RE2 pass
with the union of every pattern picks the few lines worth a look; only those are matched rule
by rule, highest priority first. Python touches only the lines that matched something.

Decision for an attempt (all of its files, fed in order):

- ``failed``: some rule matched; the reason is the highest-priority match (earliest among
  equals). If the logs also show a normal end (a ``[[completion]]`` marker), only matches after
  the last marker *in the same file* count: errors logged before a run completed (UCX/NCCL
  device probing, warnings) are benign, a crash after it is not.
- ``completed``: a completion marker and no match after it: reason ``No signature``.
- ``unmatched``: no rule matched but some line looks like an error (the ``hint`` pattern):
  reason ``No signature``, and that last error-looking line is kept as the message.
- ``none``: nothing at all (truncated log, clean stop): reason ``No signature``.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from philly_analyze.failures.rules import (
    NO_CATEGORIES,
    NO_SIGNATURE,
    Rule,
    RuleSet,
    compile_python,
    load_rules,
)

#: Verdicts, in the ``failures.verdict`` column.
VERDICTS = ("failed", "completed", "unmatched", "none")
MAX_MESSAGE = 1000
#: Up to this many rule-matching lines in a chunk, rules are tried with Python's ``re``
#: (compiled once) instead of one RE2 pass per rule (each pass compiles its pattern).
PYTHON_MATCH_LINES = 500
CLASSIFY_CHUNK = 50_000


@dataclass(frozen=True)
class Match:
    """The classification of one attempt's logs."""

    reason: str
    categories: str
    #: Id of the deciding rule (None for No signature).
    signature: str | None
    verdict: str
    #: 1-based line of ``message`` in ``log`` (None when there is no line to show).
    line_no: int | None = None
    message: str | None = None
    #: Which of the attempt's files ``line_no`` refers to (the key it was fed with).
    log: Hashable | None = None


@dataclass(frozen=True)
class ChunkHits:
    """What one chunk of lines contained: positions are indexes into the chunk."""

    rule_pos: np.ndarray  # lines matching a rule
    rule_idx: np.ndarray  # index into Scanner.rules of the best rule on that line
    marker_pos: np.ndarray  # completion-marker lines
    hint_pos: np.ndarray  # error-looking lines

    def at(self, positions: np.ndarray) -> ChunkHits:
        """The same hits for a chunk that was a subset: ``positions[p]`` is each line's index."""
        return ChunkHits(
            positions[self.rule_pos],
            self.rule_idx,
            positions[self.marker_pos],
            positions[self.hint_pos],
        )

    def within(self, lo: int, hi: int) -> ChunkHits | None:
        """The hits at positions ``lo <= p < hi`` (one file of a batch of files)."""
        r = (self.rule_pos >= lo) & (self.rule_pos < hi)
        m = self.marker_pos[(self.marker_pos >= lo) & (self.marker_pos < hi)]
        h = self.hint_pos[(self.hint_pos >= lo) & (self.hint_pos < hi)]
        if not (r.any() or len(m) or len(h)):
            return None
        return ChunkHits(self.rule_pos[r], self.rule_idx[r], m, h)


def _alternation(patterns: Iterable[str]) -> str:
    return "|".join(f"(?:{p})" for p in patterns)


def _mask(arr: pa.Array, pattern: str) -> np.ndarray:
    return pc.match_substring_regex(arr, pattern).to_numpy(zero_copy_only=False)


class Scanner:
    """Finds rule matches, completion markers and error-looking lines in chunks of lines."""

    def __init__(self, rules: RuleSet):
        self.ruleset = rules
        self.rules: tuple[Rule, ...] = rules.rules
        self.priority = np.array([r.priority for r in self.rules], dtype=np.int64)
        self._compiled = [compile_python(r.pattern) for r in self.rules]
        self._rule_gate = _alternation(r.pattern for r in self.rules)
        self._marker_gate = _alternation(m.pattern for m in rules.completion)
        gates = (self._rule_gate, self._marker_gate, f"(?:{rules.hint})")
        self._any_gate = "|".join(g for g in gates if g)

    @property
    def gate(self) -> str:
        """RE2 pattern matching every line ``scan`` can report (to pre-filter with others)."""
        return self._any_gate

    def scan(self, lines: pa.Array) -> ChunkHits | None:
        """Hits in one chunk (``None`` when the chunk holds nothing of interest)."""
        if len(lines) == 0:
            return None
        cand = np.flatnonzero(_mask(lines, self._any_gate))
        if len(cand) == 0:
            return None
        sub = lines.take(pa.array(cand))
        in_rules = np.flatnonzero(_mask(sub, self._rule_gate))
        rule_idx = self._best_rules(sub.take(pa.array(in_rules))) if len(in_rules) else in_rules
        markers = (
            np.flatnonzero(_mask(sub, self._marker_gate))
            if self.ruleset.completion
            else np.empty(0, np.int64)
        )
        hints = np.flatnonzero(_mask(sub, self.ruleset.hint))
        return ChunkHits(cand[in_rules], rule_idx, cand[markers], cand[hints])

    def _best_rules(self, lines: pa.Array) -> np.ndarray:
        """Index (into ``self.rules``) of the best rule matching each line. Rules are in
        priority order, so the first rule that matches a line is its best."""
        best = np.full(len(lines), -1, dtype=np.int64)
        if len(lines) <= PYTHON_MATCH_LINES:
            # Few lines (the usual case): Python's compiled patterns, no RE2 compilations.
            for i, text in enumerate(lines.to_pylist()):
                for k, rx in enumerate(self._compiled):
                    if rx.search(text):
                        best[i] = k
                        break
            return best
        for k, rule in enumerate(self.rules):
            open_ = best < 0
            if not open_.any():
                break
            best[open_ & _mask(lines, rule.pattern)] = k
        return best


@dataclass
class _Hit:
    priority: int
    order: tuple[int, int]  # (file sequence, line number): earlier wins among equal priority
    rule: Rule | None
    log: Hashable
    line_no: int
    text: str

    def beats(self, other: _Hit | None) -> bool:
        return other is None or (self.priority, -self.order[0], -self.order[1]) > (
            other.priority,
            -other.order[0],
            -other.order[1],
        )


def _text(lines: pa.Array, pos: int) -> str:
    return str(lines[pos].as_py()).rstrip("\r\n")[:MAX_MESSAGE]


@dataclass
class Evidence:
    """Failure evidence of one attempt, accumulated chunk by chunk over all of its files."""

    scanner: Scanner
    best: _Hit | None = None
    #: Per file that showed a completion marker: the best match after its last marker.
    after_marker: dict[Hashable, _Hit | None] = field(default_factory=dict)
    last_marker: _Hit | None = None
    hint: _Hit | None = None
    _files: dict[Hashable, int] = field(default_factory=dict)

    def register(self, log: Hashable) -> None:
        """Fix the order of ``log`` among the attempt's files (first registered = first).
        Files may then be added in any order; chunks of one file must come in order."""
        self._files.setdefault(log, len(self._files))

    def add(self, log: Hashable, first_line_no: int, lines: pa.Array, hits: ChunkHits) -> None:
        """Record the hits of one chunk of ``log``: ``lines[p]`` is line ``first_line_no + p``."""
        self.register(log)
        seq = self._files[log]
        if len(hits.marker_pos):
            m = int(hits.marker_pos[-1])
            self.after_marker[log] = None
            marker = _Hit(0, (seq, first_line_no + m), None, log, first_line_no + m, "")
            if self.last_marker is None or marker.order > self.last_marker.order:
                marker.text = _text(lines, m)
                self.last_marker = marker
        if len(hits.rule_pos):
            prio = self.scanner.priority[hits.rule_idx]
            # Best in the chunk: highest priority, then earliest line.
            i = int(np.lexsort((hits.rule_pos, -prio))[0])
            cand = self._hit(log, seq, first_line_no, lines, hits, i)
            if cand.beats(self.best):
                self.best = cand
            if log in self.after_marker:
                after = (
                    hits.rule_pos >= hits.marker_pos[-1]
                    if len(hits.marker_pos)
                    else np.ones(len(hits.rule_pos), dtype=bool)
                )
                if after.any():
                    sel = np.flatnonzero(after)
                    j = int(sel[np.lexsort((hits.rule_pos[sel], -prio[sel]))[0]])
                    cand = self._hit(log, seq, first_line_no, lines, hits, j)
                    if cand.beats(self.after_marker[log]):
                        self.after_marker[log] = cand
        if len(hits.hint_pos):
            h = int(hits.hint_pos[-1])
            hint = _Hit(0, (seq, first_line_no + h), None, log, first_line_no + h, "")
            if self.hint is None or hint.order > self.hint.order:
                hint.text = _text(lines, h)
                self.hint = hint

    def _hit(
        self,
        log: Hashable,
        seq: int,
        first_line_no: int,
        lines: pa.Array,
        hits: ChunkHits,
        i: int,
    ) -> _Hit:
        rule = self.scanner.rules[int(hits.rule_idx[i])]
        pos = int(hits.rule_pos[i])
        line_no = first_line_no + pos
        return _Hit(rule.priority, (seq, line_no), rule, log, line_no, _text(lines, pos))

    def result(self) -> Match:
        """The attempt's verdict and reason (see the module docstring)."""
        if self.after_marker:
            decisive = None
            for hit in self.after_marker.values():
                if hit is not None and hit.beats(decisive):
                    decisive = hit
            if decisive is None:
                m = self.last_marker
                assert m is not None
                return Match(
                    NO_SIGNATURE, NO_CATEGORIES, None, "completed", m.line_no, m.text, m.log
                )
            return self._failed(decisive)
        if self.best is not None:
            return self._failed(self.best)
        if self.hint is not None:
            h = self.hint
            return Match(NO_SIGNATURE, NO_CATEGORIES, None, "unmatched", h.line_no, h.text, h.log)
        return Match(NO_SIGNATURE, NO_CATEGORIES, None, "none")

    def _failed(self, hit: _Hit) -> Match:
        assert hit.rule is not None
        cats = self.scanner.ruleset.categories_of(hit.rule.reason)
        return Match(hit.rule.reason, cats, hit.rule.id, "failed", hit.line_no, hit.text, hit.log)


def classify(lines: Iterable[str], rules: RuleSet | None = None) -> Match:
    """Classify one log given as lines (line numbers are 1-based positions in ``lines``).

    >>> classify(["Traceback (most recent call last):", "RuntimeError: CUDA error: out of memory"]).reason
    'GPU out of memory'
    """
    scanner = Scanner(rules or load_rules())
    ev = Evidence(scanner)
    buf: list[str] = []
    first = 1

    def flush() -> None:
        nonlocal first
        arr = pa.array(buf, pa.string())
        hits = scanner.scan(arr)
        if hits is not None:
            ev.add(None, first, arr, hits)
        first += len(buf)
        buf.clear()

    for line in lines:
        buf.append(line)
        if len(buf) >= CLASSIFY_CHUNK:
            flush()
    if buf:
        flush()
    return ev.result()
