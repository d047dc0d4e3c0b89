"""Sources: files, compressed files and archive members, read as streams.

A ``Source`` hands out its decompressed bytes as a stream that hashes (SHA-256) and counts
what passes through, so the hash and the progress bar cost no extra pass. For DuckDB, which
reads paths, ``duckdb_path`` gives the file itself when it is plain (hashing it on a side
thread) or a named pipe fed from the stream (compressed files, archive members, and any file
whose lines are checked first): nothing is ever extracted to disk. The stream also counts the
bytes that are not text (``textbytes``), for the ingest summary.
"""

from __future__ import annotations

import bz2
import gzip
import hashlib
import io
import lzma
import os
import shutil
import stat
import tarfile
import tempfile
import threading
import zlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO, Protocol

from philly_analyze import querystop
from philly_analyze.errors import InputFormatError, UnreadableInputError
from philly_analyze.ingest.textbytes import TextDamage
from philly_analyze.progress import NullTracker, Tracker

if TYPE_CHECKING:
    from philly_analyze.ingest.csvguard import LineGuard

HEAD_BYTES = 64 * 1024
CHUNK = 1 << 20

_MAGIC: list[tuple[bytes, str]] = [
    (b"\x1f\x8b", "gzip"),
    (b"BZh", "bz2"),
    (b"\xfd7zXZ\x00", "xz"),
]


def compression_of(head: bytes) -> str | None:
    """Compression by magic bytes, not by file name."""
    for magic, name in _MAGIC:
        if head.startswith(magic):
            return name
    return None


class ByteReader(Protocol):
    """What the readers need of a byte stream, read front to back: a file opened "rb", a
    decompressor, a tar member, and this module's wrappers (``HashingReader``...) all are one.
    ``seekable``/``seek`` are there because the decompressors ask for them (they seek only to
    rewind, which nothing here does)."""

    def read(self, size: int = -1, /) -> bytes: ...

    def seekable(self) -> bool: ...

    def seek(self, offset: int, whence: int = 0, /) -> int: ...

    def close(self) -> object: ...


def _decompressing(raw: ByteReader, compression: str | None) -> ByteReader:
    if compression == "gzip":
        return gzip.GzipFile(fileobj=raw)
    if compression == "bz2":
        return bz2.BZ2File(raw)
    if compression == "xz":
        # typeshed types LZMAFile's file as IO[bytes]; it calls only what ByteReader has.
        return lzma.LZMAFile(raw)  # type: ignore[arg-type]
    return raw


#: What decompressors and tarfile raise on cut or corrupt input.
READ_ERRORS: tuple[type[BaseException], ...] = (
    OSError,
    EOFError,
    zlib.error,
    lzma.LZMAError,
    tarfile.TarError,
)
#: The same, or a stream of this module saying so (``UnreadableInputError``, naming the file).
READ_FAILURES: tuple[type[BaseException], ...] = (UnreadableInputError, *READ_ERRORS)


class HashingReader(io.RawIOBase):
    """Wraps a binary stream; hashes and counts the bytes read (and those that are not text:
    ``Source.damage``), reports them to a tracker."""

    def __init__(
        self, inner: ByteReader, source: Source, tracker: Tracker, damage: TextDamage | None = None
    ):
        self._inner = inner
        self._source = source
        self._tracker = tracker
        self._hash = hashlib.sha256()
        self._damage = damage
        self.bytes_read = 0

    @property
    def name(self) -> str:
        """The source's name (what ``io.TextIOWrapper`` reports as its own)."""
        return self._source.name

    def readable(self) -> bool:
        return True

    def readinto(self, b: bytearray | memoryview) -> int:  # type: ignore[override]  # any buffer in io; these two here
        data = self._read(len(b))
        n = len(data)
        b[:n] = data
        self._account(data)
        return n

    def read(self, size: int = -1) -> bytes:
        data = self._read(size)
        self._account(data)
        return data

    def _read(self, size: int) -> bytes:
        # A cut .gz/.bz2/.xz file or tar archive (a partial download) fails deep inside the
        # decompressor; say which file, once, for every reader of the stream.
        try:
            return self._inner.read(size)
        except READ_ERRORS as e:
            raise UnreadableInputError(
                f"cannot read past byte {self.bytes_read:,} of the decompressed data: "
                f"{e or type(e).__name__} (truncated or corrupt file?)",
                source=self._source.name,
            ) from e

    def _account(self, data: bytes) -> None:
        if data:
            self._hash.update(data)
            if self._damage is not None:
                self._damage.feed(data)
            self.bytes_read += len(data)
            self._tracker.advance(len(data))
        else:
            self._source.sha256 = self._hash.hexdigest()
            self._source.bytes_read = self.bytes_read
            if self._damage is not None:
                self._damage.end()
                self._source.damage = self._damage

    def close(self) -> None:
        with suppress(Exception):
            self._inner.close()
        # A reader that stopped early (an error, a format that needs only the start) still
        # says what it met.
        if self._damage is not None and self._damage.bytes:
            self._source.damage = self._damage
        super().close()


@dataclass
class Source:
    """One input: a file on disk (maybe compressed) or a member of an archive."""

    name: str
    #: Bytes the stream yields if known (uncompressed files and archive members), else the
    #: on-disk size (an estimate for progress).
    size: int | None
    head: bytes
    compression: str | None = None
    #: A plain (uncompressed) file that DuckDB can read directly.
    path: Path | None = None
    #: path|size|mtime, to skip an unchanged file without reading it.
    fingerprint: str | None = None
    #: Opens a fresh raw (still compressed) stream; may re-scan an archive for a member.
    opener: Callable[[], ByteReader] | None = None
    #: For archive members: the first open may use the archive's current stream.
    first_stream: ByteReader | None = None
    sha256: str | None = None
    bytes_read: int = 0
    #: Bytes that are not text met by the last full read (see ``textbytes``).
    damage: TextDamage | None = None
    _opened: int = field(default=0, repr=False)

    @property
    def display(self) -> str:
        """Short name for messages."""
        return self.name

    def open(self, tracker: Tracker | None = None, *, count_damage: bool = True) -> HashingReader:
        """The decompressed bytes as a hashing, counting stream (counting, unless told not to,
        the bytes that are not text: ``damage``)."""
        self._opened += 1
        if self.first_stream is not None and self._opened == 1:
            raw = self.first_stream
        elif self.opener is not None:
            raw = self.opener()
        else:
            raise InputFormatError("source cannot be re-read", source=self.name)
        tracker = tracker or NullTracker()
        if self.compression is not None:
            # Progress counts the file's bytes on disk (what the run's total adds up, see
            # run_progress.py), not the decompressed ones.
            raw, tracker = _Counted(raw, tracker.advance), NullTracker()
        return HashingReader(
            _decompressing(raw, self.compression),
            self,
            tracker,
            TextDamage() if count_damage else None,
        )

    def text_lines(self, tracker: Tracker | None = None) -> Iterator[tuple[int, str]]:
        """(1-based line number, line without newline) over the decompressed text. Bytes that are
        not UTF-8 are replaced, never fatal."""
        with self.open(tracker) as raw:
            text = io.TextIOWrapper(raw, encoding="utf-8", errors="replace", newline="")
            for i, line in enumerate(text, 1):
                yield i, line.rstrip("\r\n")

    @contextmanager
    def duckdb_path(
        self,
        tracker: Tracker | None = None,
        guard: LineGuard | None = None,
        folder: Path | None = None,
    ) -> Iterator[str]:
        """A path DuckDB can read: the file itself when plain, else a named pipe fed from
        ``open()``. The SHA-256 is computed either way.

        With a ``guard`` (``csvguard.LineGuard``) it is always the pipe, and the lines the
        guard rejects are blanked before DuckDB reads them (``guard.rejects`` lists them
        afterwards); the bytes fed move the progress bar. (On a 301 MB cluster_gpu_util the
        pipe cost 6% more CPU than the file, and less memory: docs/raw-sources.md.)

        The pipe is made in ``folder`` (a batch's staging folder, which the store removes even
        after a kill), else in the system's temporary folder.
        """
        tracker = tracker or NullTracker()
        if guard is None and self.path is not None and self.compression is None:
            hasher = threading.Thread(target=self._hash_file, daemon=True)
            hasher.start()
            try:
                yield str(self.path)
            finally:
                hasher.join()
            return
        with (
            tempfile.TemporaryDirectory(prefix="philly-fifo-", dir=folder) as d,
            querystop.at_hard_exit(partial(shutil.rmtree, d, ignore_errors=True)),
        ):
            fifo = os.path.join(d, "stream")
            os.mkfifo(fifo)
            errors: list[BaseException] = []
            feeder = threading.Thread(
                target=self._feed_fifo, args=(fifo, tracker, errors, guard), daemon=True
            )
            feeder.start()
            try:
                yield fifo
            finally:
                if feeder.is_alive():
                    # DuckDB stopped early or never opened the pipe: unblock the writer.
                    with suppress(OSError):
                        fd = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
                        os.close(fd)
                feeder.join(timeout=30)
            if errors:
                raise errors[0]

    def _hash_file(self) -> None:
        h = hashlib.sha256()
        assert self.path is not None
        with open(self.path, "rb") as f:
            while chunk := f.read(CHUNK):
                h.update(chunk)
                self.bytes_read += len(chunk)
        self.sha256 = h.hexdigest()

    def _feed_fifo(
        self,
        fifo: str,
        tracker: Tracker,
        errors: list[BaseException],
        guard: LineGuard | None = None,
    ) -> None:
        try:
            # DuckDB judges the bytes itself (a line not UTF-8 is one of its rejects).
            with self.open(tracker, count_damage=False) as src, open(fifo, "wb") as out:
                # Whole lines only until the end is reached cleanly: if the stream breaks
                # (a cut archive), the reader must not see a half line as a complete row.
                partial = b""
                while chunk := src.read(CHUNK):
                    if guard is not None:  # it holds back the line not ended yet
                        out.write(guard.feed(chunk))
                        continue
                    data = partial + chunk
                    cut = data.rfind(b"\n") + 1
                    out.write(data[:cut])
                    partial = data[cut:]
                out.write(partial if guard is None else guard.end())
                src.read(0)
        except BrokenPipeError:
            pass
        except InputFormatError as e:
            errors.append(e)
        except READ_ERRORS as e:
            errors.append(InputFormatError(f"cannot read: {e}", source=self.name))


def file_source(path: Path) -> Source:
    """A source for a file on disk (compression detected from its bytes)."""
    st = path.stat()
    with open(path, "rb") as f:
        raw_head = f.read(HEAD_BYTES)
    comp = compression_of(raw_head)
    head = peek_decompressed(raw_head, comp)
    return Source(
        name=str(path),
        size=st.st_size,
        head=head,
        compression=comp,
        path=path,
        fingerprint=f"{path}|{st.st_size}|{st.st_mtime_ns}",
        opener=lambda: open(path, "rb"),
    )


def is_tar(path: Path) -> bool:
    """Whether a file is a (possibly compressed) tar archive, by content."""
    try:
        with open(path, "rb") as f:
            block = f.read(tarfile.BLOCKSIZE)
        if compression_of(block) is None:
            # Plain file: the first block must be a tar header (what is_tarfile checks, without
            # also trying every decompressor: ~1 ms a file, minutes for 100,000 small logs).
            try:
                tarfile.TarInfo.frombuf(block, tarfile.ENCODING, "surrogateescape")
            except (tarfile.HeaderError, ValueError):
                return False
        return tarfile.is_tarfile(path)
    except (OSError, tarfile.TarError, EOFError):
        return False


def archive_members(path: Path, on_read: Callable[[int], None] | None = None) -> Iterator[Source]:
    """Sources for the regular-file members of a tar archive, streamed in archive order.

    Each member must be consumed before the next is yielded (the archive is one stream).
    Members are never written to disk; a re-read (rare error path) re-scans the archive.
    ``on_read`` is told how many bytes of the archive file are read (progress)."""
    st = path.stat()
    fp_base = f"{path}|{st.st_size}|{st.st_mtime_ns}"
    raw: BinaryIO | _Counted = open(path, "rb")  # noqa: SIM115 (closed with the archive below)
    if on_read is not None:
        raw = _Counted(raw, on_read)
    with raw, tarfile.open(fileobj=raw, mode="r|*") as tf:
        for member in tf:
            if not member.isfile():
                continue
            stream = tf.extractfile(member)
            if stream is None:
                continue
            raw_head = stream.read(HEAD_BYTES)
            comp = compression_of(raw_head)
            name = member.name
            yield Source(
                name=f"{path}!{name}",
                size=member.size,
                head=peek_decompressed(raw_head, comp),
                compression=comp,
                fingerprint=f"{fp_base}!{name}",
                opener=partial(_member_stream, path, name),
                first_stream=_Chained(raw_head, stream),
            )


def peek_decompressed(raw_head: bytes, compression: str | None) -> bytes:
    """The first decompressed bytes obtainable from the first raw bytes of a stream."""
    if compression is None:
        return raw_head
    if compression == "gzip":
        dec: Any = zlib.decompressobj(wbits=31)
    elif compression == "bz2":
        dec = bz2.BZ2Decompressor()
    else:
        dec = lzma.LZMADecompressor()
    try:
        return dec.decompress(raw_head)[:HEAD_BYTES]
    except (OSError, EOFError, ValueError, zlib.error, lzma.LZMAError):
        return b""


def _member_stream(archive: Path, name: str) -> ByteReader:
    tf = tarfile.open(archive, mode="r|*")  # noqa: SIM115 (stays open while the member is read)
    for member in tf:
        if member.name == name and member.isfile():
            f = tf.extractfile(member)
            if f is not None:
                return f
    raise InputFormatError(f"member {name} not found on re-read", source=str(archive))


class _Counted(io.RawIOBase):
    """A raw stream that tells ``on_read`` how many bytes pass (before decompression)."""

    def __init__(self, inner: ByteReader, on_read: Callable[[int], None]):
        self._inner = inner
        self._on_read = on_read

    def readable(self) -> bool:
        return True

    def readinto(self, b: bytearray | memoryview) -> int:  # type: ignore[override]  # as above
        data = self.read(len(b))
        n = len(data)
        b[:n] = data
        return n

    def read(self, size: int = -1) -> bytes:
        data = self._inner.read(size)
        if data:
            self._on_read(len(data))
        return data

    def close(self) -> None:
        with suppress(Exception):
            self._inner.close()
        super().close()


class _Chained(io.RawIOBase):
    """Bytes already read (``head``) followed by the rest of a stream."""

    def __init__(self, head: bytes, rest: ByteReader):
        self._head = memoryview(head)
        self._rest = rest

    def readable(self) -> bool:
        return True

    def readinto(self, b: bytearray | memoryview) -> int:  # type: ignore[override]  # as above
        if self._head:
            n = min(len(b), len(self._head))
            b[:n] = self._head[:n]
            self._head = self._head[n:]
            return n
        data = self._rest.read(len(b))
        b[: len(data)] = data
        return len(data)


def _walk(root: Path) -> tuple[list[Path], set[Path]]:
    """Everything below ``root`` that is not hidden (no part starting with "."), sorted as
    ``sorted(root.rglob("*"))`` (links to folders are not followed); and the folders that
    could not be listed (no permission, vanished during the walk), which rglob skipped
    silently or crashed on."""
    out: list[Path] = []
    unlisted: set[Path] = set()

    def failed(e: OSError) -> None:
        if e.filename is not None and Path(e.filename) != root:
            unlisted.add(Path(e.filename))

    for d, dirs, files in os.walk(root, onerror=failed):
        dirs[:] = [n for n in dirs if not n.startswith(".")]
        out += [Path(d, n) for n in files + dirs if not n.startswith(".")]
    return sorted(out), unlisted


def expand_paths(paths: list[Path]) -> Iterator[tuple[Path, bool]]:
    """Files to ingest: each path, folders walked in sorted order. Yields (file, explicit)
    where explicit is False for files found inside a folder (those are skipped, not fatal,
    when unreadable or of unknown format), and for a folder inside that cannot be listed."""
    for p in paths:
        try:
            folder = p.is_dir()
        except OSError:  # cannot even be looked at: reported by the caller
            folder = False
        if folder:
            found, unlisted = _walk(p)
            for f in found:
                if f in unlisted:  # reported, not skipped silently
                    yield f, False
                    continue
                try:
                    mode = f.stat().st_mode  # follows symlinks: a linked file is read
                except OSError:  # a dangling link: reported as missing, not fatal
                    yield f, False
                    continue
                if stat.S_ISREG(mode):
                    yield f, False
        else:
            yield p, True
