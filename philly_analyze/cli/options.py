"""Options shared by several verbs (one definition each)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import click

from philly_analyze.store import DEFAULT_STORE

F = Callable[..., Any]


def store_option(help_text: str = "Store directory.") -> Callable[[F], F]:
    """``--store DIR`` (env PHILLY_STORE, default ./philly-store)."""
    return click.option(
        "--store",
        "store_path",
        type=click.Path(file_okay=False),
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
