"""Which job attempt a framework log belongs to.

Tried in this order (the first that names a job wins):

1. ``--framework-mapping`` (CSV ``path,job_id,attempt_idx``): an explicit statement by the
   user, so it beats anything inferred. A mapping path matches a file if it is the same file
   (absolute, or relative to the current directory) or a trailing part of its path
   (``job17/stdout.txt``); the longest matching entry wins.
2. The path: job = the first ``application_<ts>_<seq>`` in it (else the application of a
   ``appattempt_``/``container_`` id in it). Attempt (0-based) from, in order: an
   ``appattempt_<ts>_<seq>_<NNNNNN>`` of that job (YARN's 1-based attempt number - 1), a YARN
   container id ``container_[eNN_]<ts>_<seq>_<AA>_<NNNNNN>`` of that job (AA - 1), or a path
   component ``attempt_<N>``, ``attempt-<N>`` or ``attempt<N>`` (N as is).
3. The first 64 KB of the file: YARN container or app-attempt ids (what a launcher prints, or
   the ``CONTAINER_ID`` environment) if any, else application ids. Used only when they all
   name one application; the attempt only when they agree on one.

4. With ``--framework-job-key filename`` or ``folder``, a file that none of the above names
   takes its own name without extensions (``logs/run17.out`` and ``run17.err``: job ``run17``)
   or its folder's name (``runs/run17/stdout.txt``: ``run17``; a folder ``attempt_<N>`` gives the
   attempt N and its parent the job). These jobs have no YARN id, so they join nothing in
   ``jobs``; their epochs and failure verdicts stand on their own. The default, ``ids``, skips
   such files.

A job without an attempt gets ``attempt_idx`` NULL (it cannot be joined to ``attempts``).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import PurePosixPath

APP_RE = re.compile(r"application_(\d+)_(\d+)")
APPATTEMPT_RE = re.compile(r"appattempt_(\d+)_(\d+)_(\d+)")
CONTAINER_RE = re.compile(r"container_(?:e\d+_)?(\d+)_(\d+)_(\d+)_\d+")
ATTEMPT_COMPONENT_RE = re.compile(r"attempt[_-]?(\d+)")
#: ``--framework-job-key`` values (see the module docstring, rule 4).
JOB_KEYS = ("ids", "filename", "folder")
_COMPRESSION = (".gz", ".bz2", ".xz")
#: Bytes of a file's head searched for ids.
CONTENT_BYTES = 64 * 1024


@dataclass(frozen=True)
class AttemptId:
    """A job attempt and how it was found (``mapping``, ``path`` or ``content``)."""

    job_id: str
    attempt_idx: int | None
    how: str


def _ids(text: str) -> list[tuple[int, str, int | None]]:
    """(position, application id, 0-based attempt or None) for every id in ``text``."""
    out: list[tuple[int, str, int | None]] = []
    for m in APP_RE.finditer(text):
        out.append((m.start(), f"application_{m[1]}_{m[2]}", None))
    for m in APPATTEMPT_RE.finditer(text):
        out.append((m.start(), f"application_{m[1]}_{m[2]}", int(m[3]) - 1))
    for m in CONTAINER_RE.finditer(text):
        out.append((m.start(), f"application_{m[1]}_{m[2]}", int(m[3]) - 1))
    return sorted(out)


def _components(name: str) -> list[str]:
    return [c for c in re.split(r"[/\\!]", name) if c]


def from_path(name: str) -> AttemptId | None:
    """The attempt named by a file's path (see the module docstring), or None."""
    ids = _ids(name)
    if not ids:
        return None
    job = ids[0][1]
    # Explicit YARN attempt ids first (appattempt before container), then attempt_<N> folders.
    explicit = [a for _, j, a in ids if j == job and a is not None]
    appattempts = [int(m[3]) - 1 for m in APPATTEMPT_RE.finditer(name) if _app(m) == job]
    attempt: int | None = appattempts[0] if appattempts else (explicit[0] if explicit else None)
    if attempt is None:
        for comp in _components(name):
            m = ATTEMPT_COMPONENT_RE.fullmatch(comp)
            if m:
                attempt = int(m[1])
    return AttemptId(job, attempt, "path")


def _app(m: re.Match[str]) -> str:
    return f"application_{m[1]}_{m[2]}"


def from_content(head: bytes) -> AttemptId | str | None:
    """The attempt named inside a file's first 64 KB; a message when the ids disagree."""
    text = head[:CONTENT_BYTES].decode("utf-8", "replace")
    ids = _ids(text)
    if not ids:
        return None
    # Container / app-attempt ids identify the process itself; bare application ids may be
    # paths of other jobs (e.g. a checkpoint to resume from), so they count only alone.
    specific: list[tuple[str, int | None]] = [(j, a) for _, j, a in ids if a is not None]
    chosen = specific or [(j, a) for _, j, a in ids]
    jobs = sorted({j for j, _ in chosen})
    if len(jobs) > 1:
        shown = ", ".join(jobs[:3]) + (" ..." if len(jobs) > 3 else "")
        return f"its first 64 KB name several applications ({shown})"
    attempts = {a for _, a in chosen if a is not None}
    return AttemptId(jobs[0], attempts.pop() if len(attempts) == 1 else None, "content")


class Mapping:
    """Lookup in the ``--framework-mapping`` table (path -> (job_id, attempt_idx))."""

    def __init__(self, table: dict[str, tuple[str, int]]):
        self._exact: dict[str, tuple[str, int]] = {}
        self._suffix: list[tuple[tuple[str, ...], tuple[str, int]]] = []
        for path, value in table.items():
            key = path.strip()
            if not key:
                continue
            self._exact[os.path.normpath(os.path.abspath(key))] = value
            parts = tuple(_components(PurePosixPath(key.replace("\\", "/")).as_posix()))
            parts = tuple(p for p in parts if p != ".")
            if parts:
                self._suffix.append((parts, value))
        # Longest (most specific) suffix first.
        self._suffix.sort(key=lambda kv: -len(kv[0]))

    def __len__(self) -> int:
        return len(self._exact)

    def lookup(self, name: str) -> AttemptId | None:
        """The mapped attempt of the source called ``name``, or None."""
        if not self._exact:
            return None
        value = None
        if "!" not in name:
            value = self._exact.get(os.path.normpath(os.path.abspath(name)))
        if value is None:
            comps = tuple(_components(name))
            for parts, v in self._suffix:
                if comps[-len(parts) :] == parts:
                    value = v
                    break
        if value is None:
            return None
        return AttemptId(value[0], value[1], "mapping")


def from_file(name: str, job_key: str) -> tuple[AttemptId, str] | None:
    """The job a file's own name (``filename``) or its folder's (``folder``) names, and the
    folder that name is unique in (two jobs of one name elsewhere would merge)."""
    comps = _components(name)
    if job_key == "filename":
        base = comps[-1]
        for ext in _COMPRESSION:
            base = base.removesuffix(ext)
        stem = base.rsplit(".", 1)[0] if "." in base.lstrip(".") else base
        attempt = _attempt_component(comps[:-1])
        return AttemptId(stem, attempt, "file name"), "/".join(comps[:-1])
    if job_key == "folder" and len(comps) >= 2:
        folder, scope = comps[-2], comps[:-2]
        m = ATTEMPT_COMPONENT_RE.fullmatch(folder)
        if m and scope:
            return AttemptId(scope[-1], int(m[1]), "folder name"), "/".join(scope[:-1])
        return AttemptId(folder, None, "folder name"), "/".join(scope)
    return None


def _attempt_component(comps: list[str]) -> int | None:
    for comp in reversed(comps):
        m = ATTEMPT_COMPONENT_RE.fullmatch(comp)
        if m:
            return int(m[1])
    return None


def resolve(name: str, head: bytes, mapping: Mapping) -> AttemptId | str:
    """The attempt of a log file named by the mapping or YARN ids (rules 1-3), or a message
    saying why it cannot be told."""
    found = mapping.lookup(name) or from_path(name)
    if found is not None:
        if found.attempt_idx is None and found.how == "path":
            inner = from_content(head)
            if isinstance(inner, AttemptId) and inner.job_id == found.job_id:
                return AttemptId(found.job_id, inner.attempt_idx, "path")
        return found
    inner = from_content(head)
    if isinstance(inner, AttemptId):
        return inner
    why = inner or "no application, app-attempt or container id in its path or first 64 KB"
    return (
        f"framework log of an unknown job: {why}; put it under a folder named after the "
        "application id (framework/<application_id>/attempt_<N>/stdout.txt), list it in "
        "--framework-mapping, or key jobs by --framework-job-key filename|folder"
    )
