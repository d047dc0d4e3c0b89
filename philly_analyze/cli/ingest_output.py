"""How ``ingest`` reports each source on stderr.

Every file gets a line saying what it was taken to be, except that, unless ``--verbose``,
a group of more than ``FOLD_ABOVE`` files of one grouped format (a folder of framework logs,
Ganglia exports), or of more than ``FOLD_NOT_TAKEN_ABOVE`` files skipped / not recognised for
the same reason, is folded into one line, so a
folder of thousands of logs prints a handful of lines. Errors always get their own line.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from rich.console import Console

from philly_analyze.ingest.formats import get_format
from philly_analyze.ingest.pipeline import SourceOutcome

STYLE = {"ingested": "green", "skipped": "yellow", "unknown": "yellow", "error": "red"}
EXAMPLES = 2
FOLD_ABOVE = 10
#: Files not taken (skipped or not recognised) for the same reason fold sooner: they are noise.
FOLD_NOT_TAKEN_ABOVE = 3


def short(name: str) -> str:
    """A path relative to the working directory when it is below it (archive members too)."""
    path, bang, member = name.partition("!")
    try:
        rel = os.path.relpath(path)
    except ValueError:
        return name
    shown = rel if not rel.startswith("..") else path
    return shown + bang + member


def _grouped(fmt: str | None) -> bool:
    if fmt is None:
        return False
    try:
        return get_format(fmt).grouped
    except KeyError:
        return False


@dataclass
class _Group:
    status: str
    fmt: str | None
    reason: str
    names: list[str] = field(default_factory=list)
    outcomes: list[SourceOutcome] = field(default_factory=list)
    #: Bytes that were not text, and the files holding them.
    not_text_bytes: int = 0
    not_text_files: int = 0
    #: The group's "(fmt: assembled)" outcomes (rows written when the group finished).
    assembled: list[SourceOutcome] = field(default_factory=list)

    def settle(self) -> None:
        """Drop the sources no longer ingested: a group that could not be finished (out of
        memory assembling) turns its sources' outcomes to skipped after they arrived."""
        kept = [o for o in self.outcomes if o.status == self.status]
        self.names = [short(o.name) for o in kept]
        self.outcomes = kept

    @property
    def rows(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for o in (*self.outcomes, *self.assembled):
            for t, n in o.rows.items():
                out[t] = out.get(t, 0) + n
        return out

    @property
    def rejected(self) -> int:
        return sum(o.rejected for o in (*self.outcomes, *self.assembled))


class OutcomePrinter:
    """Receives outcomes as they happen (``__call__``) and prints the folded groups at the end."""

    def __init__(self, console: Console, *, verbose: bool, quiet: bool):
        self.console = console
        self.verbose = verbose
        self.quiet = quiet
        self.groups: dict[tuple[str, str | None, str], _Group] = {}

    def __call__(self, o: SourceOutcome) -> None:
        if self.quiet:
            return
        assembled = o.name.startswith("(")
        if self.verbose and not assembled:
            self._line(o.status, short(o.name), o.format, self._detail(o))
            return
        if o.status == "error" or not (
            assembled or _grouped(o.format) or o.status in ("skipped", "unknown")
        ):
            self._line(o.status, short(o.name), o.format, self._detail(o))
            return
        reason = "" if o.status == "ingested" else o.message
        status = "ingested" if assembled else o.status
        g = self.groups.setdefault((status, o.format, reason), _Group(status, o.format, reason))
        if assembled:
            g.assembled.append(o)
        else:
            g.names.append(short(o.name))
            g.outcomes.append(o)
        if o.not_text_bytes:
            g.not_text_bytes += o.not_text_bytes
            g.not_text_files += 1

    def flush(self) -> None:
        """Print the folded groups (call once, after the last outcome)."""
        for g in self.groups.values():
            g.settle()
            if not g.names and not any(g.rows.values()):
                continue
            fold_above = FOLD_ABOVE if g.status == "ingested" else FOLD_NOT_TAKEN_ABOVE
            if len(g.names) <= fold_above:
                for o in g.outcomes:
                    self._line(o.status, short(o.name), o.format, self._detail(o))
                if g.status == "ingested" and any(g.rows.values()):
                    rows = ", ".join(f"{t} {n:,}" for t, n in g.rows.items() if n)
                    n = len(g.names)
                    self._line(
                        "ingested", None, g.fmt, f"assembled from {n} file{'s' * (n != 1)}: {rows}"
                    )
                continue
            files = f"{len(g.names):,} file{'s' * (len(g.names) != 1)}"
            sample = ", ".join(g.names[:EXAMPLES]) + (", ..." if len(g.names) > EXAMPLES else "")
            if g.status == "ingested":
                rows = ", ".join(f"{t} {n:,}" for t, n in g.rows.items() if n) or "0 rows"
                detail = f"{files} ({sample}): {rows}"
                if g.rejected:
                    detail += f", {g.rejected:,} rejected"
                if g.not_text_bytes:
                    n = g.not_text_files
                    detail += (
                        f", {g.not_text_bytes:,} bytes not text in {n:,} file{'s' * (n != 1)} "
                        "(--verbose names them)"
                    )
            else:
                detail = f"{files} ({sample}): {g.reason}"
            self._line(g.status, None, g.fmt, detail)
        self.groups.clear()

    def _detail(self, o: SourceOutcome) -> str:
        rows = sum(o.rows.values())
        detail = f"{rows:,} rows" if o.status == "ingested" else o.message
        if o.status == "ingested" and o.message:
            detail += f" ({o.message})"
        if o.rejected:
            detail += f", {o.rejected:,} rejected"
        if o.not_text_bytes:
            detail += f", {o.damage()}"
        return detail

    def _line(self, status: str, name: str | None, fmt: str | None, detail: str) -> None:
        what = f"{name} [dim]({fmt or '?'})[/]" if name else f"[dim]{fmt}:[/]" if fmt else ""
        self.console.print(
            f"[{STYLE[status]}]{status:>8}[/] {what} {detail}", highlight=False, soft_wrap=True
        )
