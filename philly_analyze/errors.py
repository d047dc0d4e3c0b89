"""Errors the user can fix, and the exit status of every way a command ends.

The CLI prints a ``UserError`` on one line (no traceback) and exits with its ``exit_code``,
an ``ExitStatus``: the one list of the codes the package exits with."""

from __future__ import annotations

import difflib
import enum
import errno
import os
import re
import sys
import tempfile
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path


class ExitStatus(enum.IntEnum):
    """How ``philly-analyze`` ends: every exit of the package uses one of these."""

    #: The command did what was asked.
    OK = 0
    #: Bad input (a file that cannot be read, a store that cannot be opened; rows of the
    #: sources of an ``ingest`` rejected beyond ``--max-rejects``, default 0, the good rows
    #: kept) or a failed run: one line naming the file and line.
    FAILED = 1
    #: A command line that cannot mean anything (click's usage errors exit 2 too).
    USAGE = 2
    #: Some runs of a sweep failed; the others completed and were written (a re-run retries
    #: only the failed ones). Not 1, so a script can tell "results, but incomplete" apart.
    PARTIAL = 3
    #: Ctrl-C (128 + SIGINT, as shells report a process ended by the signal).
    INTERRUPTED = 130


class UserError(Exception):
    """A problem with the user's input or environment, with a message that says how to fix it."""

    exit_code: ExitStatus = ExitStatus.FAILED

    def __init__(self, message: str, *, source: str | None = None, line: int | None = None):
        self.message = message
        self.source = source
        self.line = line
        super().__init__(self.format())

    def format(self) -> str:
        where = ""
        if self.source is not None:
            where = f"{self.source}:{self.line}: " if self.line is not None else f"{self.source}: "
        return where + self.message


#: Longest message of an ``InputFormatError`` (and reason of a ``rejects`` row): its text may
#: quote the file (a header, a DuckDB error echoing a line), which must not print 64 KB.
MAX_INPUT_MESSAGE = 400
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def one_line(text: str, limit: int = MAX_INPUT_MESSAGE) -> str:
    """``text`` on one line (control characters, newlines included, escaped) of at most about
    ``limit`` characters (the cut says how long it was)."""
    text = _CONTROL.sub(lambda m: repr(m.group())[1:-1], text)
    if len(text) > limit:
        text = text[: limit - 30] + f"... ({len(text):,} characters)"
    return text


class InputFormatError(UserError):
    """A source file is malformed beyond a few bad rows (truncated, binary, empty...).

    Its message is ``one_line``, whatever of the file it quotes."""

    def __init__(self, message: str, *, source: str | None = None, line: int | None = None):
        super().__init__(one_line(message), source=source, line=line)


class UnreadableInputError(InputFormatError):
    """The bytes of a source stop early or are corrupt (a cut .gz, .xz or tar archive)."""


class StoreError(UserError):
    """The store cannot be opened or written (locked, missing, wrong version)."""


class UsageError(UserError):
    """A command line that cannot mean anything, found after parsing (a metric no run has):
    exit 2, as click's usage errors."""

    exit_code = ExitStatus.USAGE


class PartialFailure(UserError):
    """Some runs of a sweep failed and the others completed: ``ExitStatus.PARTIAL``."""

    exit_code = ExitStatus.PARTIAL


#: How many names an "unknown ..." message suggests, at most.
CLOSEST = 5


def closest(name: str, known: Iterable[str], n: int = CLOSEST) -> list[str]:
    """Known names most like ``name``, best first: those it is a prefix of (names typed short,
    VC hashes), then difflib's close matches. The one suggestion helper of the package."""
    known = list(known)
    prefixed = [k for k in known if k.lower().startswith(name.lower())] if name else []
    similar = difflib.get_close_matches(name, known, n=n)
    return list(dict.fromkeys(prefixed + similar))[:n]


def did_you_mean(name: str, known: Iterable[str]) -> str:
    """`` (did you mean X?)`` naming the known name closest to ``name``, or "" when none is
    close."""
    hint = closest(name, known, n=1)
    return f" (did you mean {hint[0]}?)" if hint else ""


def unknown_name(what: str, name: str, known: Iterable[str]) -> UsageError:
    """The usage error for a name that is not one of ``known`` (a policy, a report section):
    ``unknown policy 'phily' (did you mean philly?); choose from philly, relaxed, ...``."""
    known = list(known)
    choices = ", ".join(known) if known else "none"
    return UsageError(f"unknown {what} {name!r}{did_you_mean(name, known)}; choose from {choices}")


class UnwritableError(UserError):
    """A path cannot be written: a read-only file system, no permission, a full disk."""


#: errno values of failures of the environment (space, permissions, what a path is), which
#: the user fixes; other OSErrors are bugs and keep their traceback.
ENVIRONMENT_ERRNOS: frozenset[int] = frozenset(
    {
        errno.ENOSPC,
        errno.EDQUOT,
        errno.EFBIG,
        errno.EROFS,
        errno.EACCES,
        errno.EPERM,
        errno.EISDIR,
        errno.ENOTDIR,
        errno.ENAMETOOLONG,
        errno.EIO,
    }
)
#: Those only a write gives.
WRITE_ERRNOS: frozenset[int] = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EROFS})
#: What to do about each (the message says how to fix).
_HINTS = {
    errno.ENOSPC: "free some space and run the command again",
    errno.EDQUOT: "free some space and run the command again",
    errno.EROFS: "choose a writable location",
    errno.EACCES: "check its permissions or choose another location",
    errno.EPERM: "check its permissions or choose another location",
}
#: A path in an error text: pyarrow quotes it with ', DuckDB with " (\" inside JSON).
_QUOTED_PATH = re.compile(r"""\\?["'](/[^"'\\]+)\\?["']""")


def io_failure(e: BaseException) -> tuple[str | None, int] | None:
    """(path or None, errno) when ``e`` is an I/O failure of the environment -- an OSError
    (pyarrow's too) or a DuckDB error caused by one -- else None."""
    if isinstance(e, OSError):
        if e.errno not in ENVIRONMENT_ERRNOS:
            return None
        name = e.filename if isinstance(e.filename, str) else None
        return name or _path_in(str(e)), e.errno
    duckdb = sys.modules.get("duckdb")
    if duckdb is None or not isinstance(e, duckdb.Error):
        return None
    text = str(e)
    # DuckDB gives the cause as strerror text ("...": No space left on device).
    code = next((c for c in sorted(ENVIRONMENT_ERRNOS) if os.strerror(c) in text), None)
    return None if code is None else (_path_in(text), code)


def environment_error(e: BaseException) -> UserError | None:
    """``e`` as one line naming the path and the cause, if it is an I/O failure of the
    environment (``io_failure``); None for any other error."""
    found = io_failure(e)
    return None if found is None else _environment_line(*found)


def _environment_line(path: str | None, code: int) -> UserError:
    if path is not None and code in WRITE_ERRNOS:
        return unwritable(path, code)
    return UserError(os.strerror(code), source=path)


def _path_in(text: str) -> str | None:
    m = _QUOTED_PATH.search(text)
    return m.group(1) if m else None


def unwritable(
    path: str | os.PathLike[str], code: int, keeps: str = "", option: str = ""
) -> UnwritableError:
    """The one line for ``path`` that cannot be written (``code``: errno; ``option``: the
    option that named it), with what is unharmed (``keeps``) and how to fix it."""
    hint = "; ".join(h for h in (keeps, _HINTS.get(code, "")) if h)
    opt = f" ({option})" if option else ""
    return UnwritableError(
        f"cannot write {path}{opt}: {os.strerror(code)}" + (f" ({hint})" if hint else "")
    )


@contextmanager
def writing(root: str | os.PathLike[str], keeps: str = "") -> Iterator[None]:
    """Turn an I/O failure of the environment inside the block (``io_failure``) into one
    ``UnwritableError`` naming the file below ``root`` that failed (``root`` itself when the
    error does not say: pyarrow's do not) and the cause, with what is unharmed (``keeps``).
    A failure on another path is ``environment_error``'s line."""
    try:
        yield
    except UserError:
        raise
    except Exception as e:
        found = io_failure(e)
        if found is None:
            raise
        path, code = found
        if path is not None and not Path(path).absolute().is_relative_to(Path(root).absolute()):
            raise _environment_line(path, code) from e
        raise unwritable(path or root, code, keeps) from e


def check_writable(path: str | os.PathLike[str], option: str = "") -> None:
    """Refuse an output path that cannot be written before any work is done: a file is
    created and removed in ``path`` (a folder) or in its nearest existing parent. Nothing is
    left behind. ``option`` (``--out``...) is named in the message."""
    p = Path(path)
    target = p if p.is_dir() else next((a for a in p.absolute().parents if a.exists()), None)
    if target is None:
        raise unwritable(path, errno.ENOENT, option=option)
    if not target.is_dir():
        raise unwritable(path, errno.ENOTDIR, option=option)
    try:
        fd, probe = tempfile.mkstemp(prefix=".philly-write-check-", dir=target)
    except OSError as e:
        if e.errno is None:
            raise
        raise unwritable(path, e.errno, option=option) from None
    os.close(fd)
    os.unlink(probe)
