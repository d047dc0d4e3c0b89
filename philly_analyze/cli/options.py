"""Options shared by several verbs (one definition each)."""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from typing import Any

import click

from philly_analyze.errors import check_writable, unknown_name, writing
from philly_analyze.store import DEFAULT_STORE

F = Callable[..., Any]


class PathType(click.Path):
    """``click.Path`` refusing an empty string, which would mean the current folder
    (``ingest ""`` read all of it, ``--out ""`` wrote into it): a usage error."""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if isinstance(value, str | bytes) and not value.strip():
            self.fail("an empty path (for the current folder, write .)", param, ctx)
        return super().convert(value, param, ctx)


class FiniteFloat(click.FloatRange):
    """``click.FloatRange`` refusing nan and inf (nan passes every range check)."""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        rv = super().convert(value, param, ctx)
        if not math.isfinite(rv):
            self.fail(f"{value!r} is not a finite number", param, ctx)
        return rv


class SuggestingChoice(click.Choice):
    """``click.Choice`` whose refusal (a usage error, exit 2) suggests the closest name
    (``errors.unknown_name``), as an unknown policy's does. ``what`` names the choices."""

    def __init__(self, choices: Any, what: str) -> None:
        super().__init__(choices)
        self.what = what

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        try:
            return super().convert(value, param, ctx)
        except click.BadParameter:
            self.fail(
                unknown_name(self.what, str(value), map(str, self.choices)).message, param, ctx
            )


def writes(**options: str) -> Callable[[F], F]:
    """Decorates a verb that writes to the paths of its parameters ``options`` (parameter
    -> option, e.g. ``out="--out"``): each given path is checked before any work
    (``errors.check_writable``: a read-only file system is refused at once, not after the
    run), and a failure of the disk during the work is one line naming the file, or the
    first path when the error does not say (``errors.writing``)."""

    def decorate(f: F) -> F:
        @functools.wraps(f)
        def run(*args: Any, **kwargs: Any) -> Any:
            given = [(kwargs[p], opt) for p, opt in options.items() if kwargs.get(p) is not None]
            for path, opt in given:
                check_writable(path, opt)
            if not given:
                return f(*args, **kwargs)
            with writing(given[0][0]):
                return f(*args, **kwargs)

        return run

    return decorate


def store_option(help_text: str = "Store directory.") -> Callable[[F], F]:
    """``--store DIR`` (env PHILLY_STORE, default ./philly-store)."""
    return click.option(
        "--store",
        "store_path",
        type=PathType(file_okay=False),
        envvar="PHILLY_STORE",
        default=DEFAULT_STORE,
        show_default=True,
        help=f"{help_text} Env: PHILLY_STORE.",
    )


def quiet_option() -> Callable[[F], F]:
    """``--quiet``: no progress bars or summaries on stderr."""
    return click.option("-q", "--quiet", is_flag=True, help="No progress or summary on stderr.")


def machines_option() -> Callable[[F], F]:
    """``--machines listed|all``: which of the store's machines a replay uses."""
    return click.option(
        "--machines",
        type=click.Choice(["listed", "all"]),
        default=None,
        help="Machines to replay on: listed = only the machine list's (the default when the "
        "store has a machine list); all = also hosts known only from placements or "
        "utilization (the default without one). Jobs that ran on unlisted hosts are "
        "replayed on the chosen machines either way.",
    )
