"""Download the public datasets the project reads (``philly-analyze fetch``).

The registry (``philly_analyze/data/datasets.toml``, or a file of the same form) names each
dataset's files with their URLs, size and SHA-256. A file is downloaded to ``<path>.part``
next to its final place, continued with an HTTP Range request after an interruption (within
the run, and by the next run), and moved to its final name only once its size and SHA-256
are right; a wrong download is removed. A file already in place with the right checksum is
not downloaded again. Only the standard library's urllib is used.
"""

from __future__ import annotations

import contextlib
import hashlib
import http.client
import os
import re
import socket
import time
import tomllib
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from philly_analyze import __version__
from philly_analyze.errors import UserError
from philly_analyze.progress import Tracker, track

REGISTRY = Path(__file__).parent / "data" / "datasets.toml"
#: Environment variable naming another registry file (``--registry``).
REGISTRY_ENV = "PHILLY_DATASETS"
CHUNK = 1 << 20
TIMEOUT_S = 60.0
#: Broken transfers resumed within one run, in a row without progress, before giving up;
#: the n-th retry in a row waits n x RETRY_WAIT_S seconds.
RETRIES = 3
RETRY_WAIT_S = 2.0
_SHA256 = re.compile(r"[0-9a-f]{64}")
#: Values of a file's ``checked`` (see ``DataFile``).
CHECKED = ("file", "pointer", "")
_LFS_POINTER = b"version https://git-lfs.github.com/spec/"

Note = Callable[[str], None]


class FetchError(UserError):
    """A download failed (offline, HTTP error, wrong checksum); the message says what to do."""


@dataclass(frozen=True)
class DataFile:
    """One file of a dataset."""

    path: str
    urls: tuple[str, ...]
    size: int
    sha256: str
    #: How the URL and the bytes were checked, in words (the registry's ``verified``).
    verified: str
    #: What was compared with upstream: "file" (the bytes at the URL's commit), "pointer"
    #: (a Git LFS pointer naming the size and SHA-256, not the bytes), or "" (nothing: the
    #: URL is unverified). The registry's ``checked``.
    checked: str = ""


@dataclass(frozen=True)
class Dataset:
    """One entry of the registry."""

    name: str
    title: str
    homepage: str
    licence: str
    citation: str
    ingest: str
    files: tuple[DataFile, ...]

    @property
    def size(self) -> int:
        return sum(f.size for f in self.files)


def checked_lines(ds: Dataset) -> list[str]:
    """What was checked of a dataset's URLs and bytes against upstream, in words: one line,
    then one per file nothing was checked of (its URL is unverified) with the registry's
    reason. Every download's SHA-256 is checked whatever these say."""
    n = len(ds.files)
    files = [f for f in ds.files if f.checked == "file"]
    pointers = [f for f in ds.files if f.checked == "pointer"]
    unchecked = [f for f in ds.files if not f.checked]
    parts = []
    if files:
        parts.append(
            f"{len(files)} of {n} file{'s' * (n > 1)}: URL and bytes compared with a copy "
            "of the upstream repository"
        )
    if pointers:
        parts.append(
            f"{len(pointers)} of {n}: only the Git LFS pointer (it names the size and "
            "SHA-256) at the pinned commit; the file itself was never downloaded to check"
        )
    if unchecked:
        urls = "URL" if len(unchecked) == 1 else "URLs"
        parts.append(f"{len(unchecked)} of {n}: NOT CHECKED ({urls} never verified, below)")
    return ["; ".join(parts)] + [f"{f.path} ({f.verified})" for f in unchecked]


def registry_path(path: str | os.PathLike[str] | None = None) -> Path:
    """The registry to use: ``path``, else ``$PHILLY_DATASETS``, else the shipped one."""
    if path is not None:
        return Path(path)
    env = os.environ.get(REGISTRY_ENV)
    return Path(env) if env else REGISTRY


def load_registry(path: str | os.PathLike[str] | None = None) -> dict[str, Dataset]:
    """Datasets by name, checked: every file has URLs, a size, a SHA-256 and a relative path
    that stays inside the target folder."""
    p = registry_path(path)
    try:
        raw = tomllib.loads(p.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError, UnicodeDecodeError) as e:
        raise UserError(f"cannot read the dataset registry: {e}", source=str(p)) from e
    return {name: _dataset(name, entry, p) for name, entry in raw.items()}


def _dataset(name: str, entry: dict, source: Path) -> Dataset:
    def bad(what: str) -> UserError:
        return UserError(f"dataset {name!r}: {what}", source=str(source))

    try:
        files = tuple(
            DataFile(
                path=str(f["path"]),
                urls=tuple(str(u) for u in f["urls"]),
                size=int(f["size"]),
                sha256=str(f["sha256"]).lower(),
                verified=str(f.get("verified", "")),
                checked=str(f.get("checked", "")),
            )
            for f in entry["files"]
        )
        ds = Dataset(
            name,
            str(entry["title"]),
            str(entry.get("homepage", "")),
            str(entry["licence"]),
            str(entry["citation"]),
            str(entry.get("ingest", "")),
            files,
        )
    except (KeyError, TypeError, ValueError) as e:
        raise bad(f"missing or malformed field {e}") from e
    for f in files:
        pure = PurePosixPath(f.path)
        if pure.is_absolute() or ".." in pure.parts or not pure.parts:
            raise bad(f"file path {f.path!r} must stay inside the target folder")
        if not _SHA256.fullmatch(f.sha256) or f.size < 0 or not f.urls:
            raise bad(f"{f.path}: needs urls, a size and a 64-hex-digit sha256")
        if f.checked not in CHECKED:
            raise bad(f"{f.path}: checked must be one of {', '.join(map(repr, CHECKED))}")
    return ds


def sha256_of(path: Path) -> str:
    """SHA-256 of a file's bytes."""
    h = hashlib.sha256()
    with path.open("rb") as f:
        while block := f.read(CHUNK):
            h.update(block)
    return h.hexdigest()


def fetch(
    ds: Dataset,
    dest: str | os.PathLike[str],
    *,
    urls: Sequence[str] | None = None,
    quiet: bool = False,
    note: Note = lambda _: None,
) -> list[tuple[Path, str]]:
    """Download every file of ``ds`` under ``dest``; returns (final path, "present" or
    "downloaded") per file. ``urls`` replaces the registry's URLs (one-file datasets)."""
    if urls is not None and len(ds.files) != 1:
        raise UserError(f"--url needs a dataset of one file; {ds.name} has {len(ds.files)}")
    out = []
    for f in ds.files:
        final = Path(dest) / f.path
        out.append((final, fetch_file(f, final, urls=urls, quiet=quiet, note=note)))
    return out


def fetch_file(
    f: DataFile,
    final: Path,
    *,
    urls: Sequence[str] | None = None,
    quiet: bool = False,
    note: Note = lambda _: None,
) -> str:
    """Make ``final`` hold the file: "present" if it already did (checksum verified),
    "downloaded" otherwise. Raises FetchError with what to do when it cannot."""
    if final.exists():
        if final.stat().st_size == f.size and sha256_of(final) == f.sha256:
            return "present"
        raise FetchError(
            "exists but is not the expected file (size or SHA-256 differs); move it away "
            "and run again",
            source=str(final),
        )
    final.parent.mkdir(parents=True, exist_ok=True)
    part = final.with_name(final.name + ".part")
    if part.exists() and part.stat().st_size > f.size:
        part.unlink()  # longer than the file: not a prefix of it
    errors: list[str] = []
    mismatches: list[str] = []
    for url in urls or f.urls:
        try:
            with track(f"fetching {final.name}", f.size, quiet=quiet) as tracker:
                _download(url, part, f.size, tracker, note)
        except _TransferError as e:
            errors.append(str(e))
            continue
        # Wrong bytes from one URL (a changed file, an error page): the next URL may have them.
        wrong = _verify(part, final, f)
        if wrong is None:
            if errors or mismatches:
                why = (errors + mismatches)[-1]
                note(f"{final.name}: used {url} (the URL(s) before failed: {why})")
            return "downloaded"
        mismatches.append(f"{wrong} from {url}")
    if mismatches:
        raise FetchError(
            f"checksum mismatch: {'; '.join(mismatches)}; the download was removed and "
            f"nothing was written under this name. {_mismatch_hint(f, final, urls)}",
            source=str(final),
        )
    tried = "; ".join(dict.fromkeys(errors))
    raise FetchError(
        f"cannot download: {tried}; {_hand_hint(f, part)}",
        source=str(final),
    )


def _hand_hint(f: DataFile, part: Path) -> str:
    again = "run again"  # nothing kept: a next run starts over, it has nothing to resume
    if part.exists():
        again = f"run again to resume ({part.stat().st_size:,} bytes kept in {part.name})"
    return f"{again}, or download {f.urls[0]} yourself and put it there"


def _mismatch_hint(f: DataFile, final: Path, urls: Sequence[str] | None) -> str:
    """What to do when the bytes served are not the registry's."""
    hint = (
        "What to do: run again if the transfer may have been garbled; else get the file "
        f"from elsewhere (a mirror: --url URL for a one-file dataset, or by hand), check that "
        f"its SHA-256 is {f.sha256} (`sha256sum FILE`), and put it at {final}"
    )
    if urls is None and not f.checked:
        hint += (
            f". This file's URL was never verified (the registry says: {f.verified}): upstream "
            "may hold another version than the one the project names; please report it"
        )
    return hint


class _TransferError(Exception):
    """One URL failed (unreachable, HTTP error, transfer broken too often)."""


def _request(url: str, start: int) -> http.client.HTTPResponse:
    headers = {"User-Agent": f"philly-analyze/{__version__}"}
    if start:
        headers["Range"] = f"bytes={start}-"
    req = urllib.request.Request(url, headers=headers)
    try:
        return urllib.request.urlopen(req, timeout=TIMEOUT_S)
    except urllib.error.HTTPError as e:
        raise _TransferError(_http_message(url, e)) from e
    except urllib.error.URLError as e:
        raise _TransferError(_unreachable(url, e.reason)) from e
    except (OSError, http.client.HTTPException) as e:
        raise _TransferError(_unreachable(url, e)) from e


def _http_message(url: str, e: urllib.error.HTTPError) -> str:
    body = b""
    with contextlib.suppress(OSError, http.client.HTTPException):
        body = e.read(4096)
    hint = ""
    if b"over its data quota" in body:
        hint = " (the repository's Git LFS bandwidth quota is used up: try later, or a copy with --url)"
    return f"HTTP {e.code} {e.reason} from {url}{hint}"


def _unreachable(url: str, reason: object) -> str:
    host = urllib.parse.urlparse(url).netloc
    if isinstance(reason, socket.gaierror):
        why = f"cannot resolve {host}: are you offline?"
    elif isinstance(reason, ConnectionRefusedError):
        why = f"connection refused by {host}"
    elif isinstance(reason, TimeoutError | socket.timeout):
        why = f"{host} did not answer in {TIMEOUT_S:.0f} s"
    else:
        why = f"{host}: {reason}"
    return why


def _download(url: str, part: Path, size: int, tracker: Tracker, note: Note) -> None:
    """Append to ``part`` from ``url`` until it holds ``size`` bytes (or the server says it
    has no more), resuming with Range requests when a transfer breaks."""
    stalls = 0
    while True:
        have = part.stat().st_size if part.exists() else 0
        if have >= size:
            return
        try:
            resp = _request(url, have)
        except _TransferError as e:
            cause = e.__cause__
            if isinstance(cause, urllib.error.HTTPError) and cause.code == 416 and have:
                return  # nothing after `have`: the part is complete (or wrong: verified next)
            if have and stalls < RETRIES and not isinstance(cause, urllib.error.HTTPError):
                stalls += 1
                note(f"{part.name}: {e}; retrying from byte {have:,}")
                time.sleep(stalls * RETRY_WAIT_S)
                continue
            raise
        with resp:
            mode = "ab"
            if have and resp.status != 206:
                note(f"{url} ignored the range request: downloading from the start")
                mode, have = "wb", 0
            elif have and not _range_starts_at(resp, have):
                raise _TransferError(f"{url} answered the range request from the wrong byte")
            tracker.update(completed=have)
            got = _copy_body(resp, part, mode, tracker)
        if have + got >= size:
            return
        stalls = 0 if got else stalls + 1
        if stalls > RETRIES:
            raise _TransferError(f"the transfer from {url} keeps breaking at byte {have + got:,}")
        note(f"{part.name}: transfer broke at byte {have + got:,} of {size:,}; resuming")


def _range_starts_at(resp: http.client.HTTPResponse, start: int) -> bool:
    m = re.match(r"bytes (\d+)-", resp.headers.get("Content-Range", ""))
    return m is not None and int(m.group(1)) == start


def _copy_body(resp: http.client.HTTPResponse, part: Path, mode: str, tracker: Tracker) -> int:
    """Write the response body to ``part``; returns the bytes written. A connection that breaks
    mid-body ends the copy (the bytes so far are kept for the next Range request)."""
    got = 0
    with part.open(mode) as out:
        while True:
            try:
                block = resp.read(CHUNK)
            except (OSError, http.client.HTTPException):
                break
            if not block:
                break
            out.write(block)
            got += len(block)
            tracker.advance(len(block))
    return got


def _verify(part: Path, final: Path, f: DataFile) -> str | None:
    """Rename ``part`` to ``final`` if its size and SHA-256 are right (None); else remove it
    and return what was wrong."""
    n = part.stat().st_size
    digest = sha256_of(part) if n == f.size else None
    if digest == f.sha256:
        os.replace(part, final)
        return None
    with part.open("rb") as fh:
        head = fh.read(len(_LFS_POINTER))
    part.unlink()
    got = f"{n:,} bytes" + (f" with SHA-256 {digest}" if digest else "")
    hint = ""
    if head == _LFS_POINTER:
        hint = " (the server sent a Git LFS pointer instead of the file)"
    return f"got {got}, expected {f.size:,} bytes with SHA-256 {f.sha256}{hint}"
