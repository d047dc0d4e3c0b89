"""What an ``ingest`` run reads: the files under its paths (folders walked, archives opened
member by member), each as a ``Source`` or the reason it cannot be one, and their bytes on
disk, the total of the run's progress bar (``run_progress``)."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator, Sequence
from pathlib import Path

from philly_analyze.errors import InputFormatError
from philly_analyze.ingest.run_progress import RunProgress
from philly_analyze.ingest.source import (
    READ_ERRORS,
    Source,
    archive_members,
    expand_paths,
    file_source,
    is_tar,
)


def listed(paths: Sequence[Path]) -> tuple[list[tuple[Path, bool]], int]:
    """Every file under ``paths`` (``expand_paths``) and their bytes on disk, the run's
    progress total (a file that cannot be looked at counts 0: it is reported when met)."""
    files = list(expand_paths(list(paths)))
    total = 0
    for path, _ in files:
        with contextlib.suppress(OSError):
            if path.is_file():
                total += path.stat().st_size
    return files, total


def sources(
    files: list[tuple[Path, bool]], progress: RunProgress
) -> Iterator[tuple[Source | None, bool, str, str]]:
    """(source, explicit, name, problem) for every file or archive member of ``files``."""
    for path, explicit in files:
        folder = False
        try:  # a file may vanish, or be unreadable, between the walk and here
            folder = path.is_dir()  # one inside a folder that could not be listed
            if folder:
                os.listdir(path)
                continue
            size = path.stat().st_size
        except OSError as e:
            why = (e.strerror or str(e)).lower()
            yield None, explicit, str(path), f"cannot list this folder: {why}" if folder else why
            continue
        if size == 0:
            yield None, explicit, str(path), "empty file"
            continue
        tar = is_tar(path)
        progress.start(size, archive=tar)
        if tar:
            try:
                # Members are an archive's contents, as files are a folder's: one of an
                # unknown format is not taken (folded in the summary), not an error.
                for member in archive_members(path, progress.archive_read):
                    yield member, False, member.name, ""
            except READ_ERRORS as e:
                yield None, explicit, str(path), f"corrupt or truncated archive: {e}"
            continue
        try:
            yield file_source(path), explicit, str(path), ""
        except InputFormatError as e:
            yield None, explicit, str(path), e.message
        except OSError as e:  # no permission to read it (or it vanished)
            yield None, explicit, str(path), f"cannot read: {(e.strerror or str(e)).lower()}"
