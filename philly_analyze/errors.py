"""Errors the user can fix. The CLI prints them on one line and exits 1 (no traceback)."""

from __future__ import annotations


class UserError(Exception):
    """A problem with the user's input or environment, with a message that says how to fix it."""

    exit_code = 1

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


class InputFormatError(UserError):
    """A source file is malformed beyond a few bad rows (truncated, binary, empty...)."""


class UnreadableInputError(InputFormatError):
    """The bytes of a source stop early or are corrupt (a cut .gz, .xz or tar archive)."""


class StoreError(UserError):
    """The store cannot be opened or written (locked, missing, wrong version)."""
