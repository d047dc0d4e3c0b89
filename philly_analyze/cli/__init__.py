"""The ``philly-analyze`` command: a click group whose verbs load lazily (fast ``--help``).

Each verb lives in its own module ``philly_analyze.cli.<verb>`` exposing a click command named
``command``; it parses options, calls the library and prints. Errors the user can fix
(``UserError``) print one line and exit with their ``errors.ExitStatus`` (1; ``UsageError``
2; some runs of a sweep failed, 3), and so do failures of the environment (a full disk, a
read-only path: ``errors.environment_error``); Ctrl-C exits 130, within about a second even
while DuckDB runs a query (``querystop``). Every verb's module is imported when it runs: a
missing one is a bug, which fails loudly.
"""

from __future__ import annotations

import importlib
import sys
from typing import Any

import click

from philly_analyze import __version__

#: verb -> (module, one-line help). Adding a verb touches this table and one new module.
VERBS: dict[str, tuple[str, str]] = {
    "fetch": ("philly_analyze.cli.fetch", "Download a public dataset (the Philly trace, ...)."),
    "ingest": ("philly_analyze.cli.ingest", "Read traces and logs into a store."),
    "info": ("philly_analyze.cli.info", "Show what a store holds and what it can compute."),
    "report": ("philly_analyze.cli.report", "Compute the paper's analyses on a store."),
    "replay": ("philly_analyze.cli.replay", "Replay a store's jobs through a scheduler policy."),
    "synth": ("philly_analyze.cli.synth", "Write a synthetic cluster history in every format."),
    "sweep": ("philly_analyze.cli.sweep", "Run many replays over parameters and seeds."),
}


class LazyGroup(click.Group):
    """Imports a verb's module only when that verb runs (or its --help is asked)."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(VERBS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in VERBS:
            return None
        module = importlib.import_module(VERBS[cmd_name][0])
        return module.command

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        rows = [(v, VERBS[v][1]) for v in self.list_commands(ctx)]
        if not rows:
            return
        with formatter.section("Commands"):
            formatter.write_dl(rows)

    def invoke(self, ctx: click.Context) -> Any:
        import signal
        import threading
        from contextlib import nullcontext

        from philly_analyze.errors import UserError, environment_error
        from philly_analyze.querystop import stop_queries_on_ctrl_c

        # Ctrl-C may land inside a DuckDB query, which then fails with its own error (an
        # InterruptException, a RuntimeError, even std::bad_cast from a half-built result):
        # after a SIGINT, any failure is the interruption, reported as such (exit 130).
        interrupted = False

        def on_sigint(signum: int, frame: Any) -> None:
            nonlocal interrupted
            interrupted = True
            raise KeyboardInterrupt

        # Not in a worker thread, and not when SIGINT is ignored (a job started with `&`).
        main_thread = (
            threading.current_thread() is threading.main_thread()
            and signal.getsignal(signal.SIGINT) is not signal.SIG_IGN
        )
        previous = signal.signal(signal.SIGINT, on_sigint) if main_thread else None
        try:
            # The handler above cannot run while DuckDB holds the main thread: this also
            # interrupts the running queries, and ends the process if they ignore it.
            with stop_queries_on_ctrl_c() if main_thread else nullcontext():
                return super().invoke(ctx)
        except UserError as e:
            if interrupted:
                _exit_interrupted()
            click.echo(f"error: {e.format()}", err=True)
            sys.exit(e.exit_code)
        except KeyboardInterrupt:
            _exit_interrupted()
        except Exception as e:
            if interrupted or _is_query_interrupt(e):
                _exit_interrupted()
            # A full disk or a read-only path that no verb foresaw: still one line.
            err = environment_error(e)
            if err is None and isinstance(e, MemoryError):
                err = UserError("out of memory (try a smaller input or fewer at once)")
            if err is None and _is_duckdb_out_of_memory(e):  # not a MemoryError
                first = str(e).splitlines()[0] if str(e) else type(e).__name__
                err = UserError(
                    f"out of memory in DuckDB ({first}): for ingest, raise --memory-limit or "
                    "PHILLY_MEMORY_LIMIT; else try a smaller input or fewer at once"
                )
            if err is None:
                raise
            click.echo(f"error: {err.format()}", err=True)
            sys.exit(err.exit_code)
        finally:
            if main_thread:
                signal.signal(signal.SIGINT, previous)


def _exit_interrupted() -> None:
    from philly_analyze.errors import ExitStatus

    click.echo("interrupted", err=True)
    sys.exit(ExitStatus.INTERRUPTED)


def _is_duckdb_out_of_memory(e: BaseException) -> bool:
    """DuckDB's OutOfMemoryException (an OperationalError, not a MemoryError) where no verb
    caught it (ingest names the source: ``ingest/memory.py``)."""
    duckdb = sys.modules.get("duckdb")
    return duckdb is not None and isinstance(e, getattr(duckdb, "OutOfMemoryException", ()))


def _is_query_interrupt(e: BaseException) -> bool:
    """DuckDB's answer to SIGINT during a query (InterruptException in newer versions, a
    RuntimeError "Query interrupted" in others)."""
    duckdb = sys.modules.get("duckdb")
    if duckdb is not None and isinstance(e, getattr(duckdb, "InterruptException", ())):
        return True
    return isinstance(e, RuntimeError) and str(e).startswith("Query interrupted")


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="philly-analyze")
def main() -> None:
    """Analyse multi-tenant GPU cluster traces (the ATC'19 Philly study) and ask what another
    scheduler, or MuxFlow-style GPU sharing, would have changed.

    \b
    Example:
      philly-analyze fetch philly-trace  # needs: the network
      philly-analyze ingest trace-data.tar.gz --store philly-store
      philly-analyze report --store philly-store --format html -o report.html
      philly-analyze replay --store philly-store --policy philly,relaxed
    """
