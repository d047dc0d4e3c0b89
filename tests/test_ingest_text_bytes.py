"""Text with a few bad bytes is read, and the bad bytes are counted; binary files are skipped.

One NUL or one byte that is not UTF-8 near the start of a log used to mark the whole file
binary: skipped, exit 0, every good line lost. Now a file is binary only when more than 30% of
its first 8 KB is not text (``textbytes``); the expected shares and counts below are worked out
by hand from the bytes written."""

from __future__ import annotations

import gzip
import json
import sys
import zlib
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner, Result

from philly_analyze.cli import main
from philly_analyze.ingest.textbytes import TextDamage, binary_share, looks_binary
from tests.store_query import q

RM = "org.apache.hadoop.yarn.server.resourcemanager"
APP = "application_1637633166384_0001"
JOB = "application_1506638472019_0001"


def ingest(store: Path, *paths: Path) -> Result:
    return CliRunner().invoke(
        main, ["ingest", *map(str, paths), "--store", str(store), "--format", "json"]
    )


def source(r: Result, name: str) -> dict:
    return next(s for s in json.loads(r.stdout)["sources"] if s["source"].endswith(name))


@pytest.mark.parametrize(
    ("sample", "share"),
    [
        (b"abc\n", 0.0),
        (b"a\x01b\x02", 0.5),  # two control bytes in four
        (b"\t\n\r\x0b\x0c\x08\x1b", 0.0),  # the controls text holds
        ("café".encode(), 0.0),  # valid UTF-8
        (b"caf\xe9!", 0.2),  # latin-1 e-acute: one byte in five is not UTF-8
        (b"\xff\xfe" + b"a" * 8, 0.2),
        (b"log\n" * 10 + b"\x00" * 64 + b"end\n", 0.0),  # a hole of 64 NULs: left out
        (b"log\n" * 10 + b"\x00" * 63 + b"end\n", 63 / 107),  # 63 NULs: counted
        (b"\x00" * 100, 1.0),  # nothing but a hole
        (b"a" * 8191 + "é".encode(), 0.0),  # a character cut by the 8 KB sample is fine
        (b"a" * 8191 + b"\xc3", 1 / 8192),  # ... but not one cut by the end of the file
    ],
    ids=[
        "text",
        "controls",
        "text-controls",
        "utf8",
        "latin1",
        "bom16",
        "hole",
        "short-hole",
        "only-hole",
        "cut-by-sample",
        "cut-by-end",
    ],
)
def test_share_of_bytes_not_text(sample: bytes, share: float) -> None:
    assert binary_share(sample) == pytest.approx(share)


def test_binary_is_more_than_30_percent() -> None:
    assert not looks_binary(b"x" * 70 + b"\x7f" * 30)  # exactly 30%
    assert looks_binary(b"x" * 69 + b"\x7f" * 31)


def test_damage_counted_across_chunks() -> None:
    d = TextDamage()
    for chunk in (b"ab\xc3", b"\xa9\n"):  # an e-acute cut between two reads: not damage
        d.feed(chunk)
    d.end()
    assert (d.bytes, d.lines, d.first_line) == (0, 0, None)

    d = TextDamage()
    for chunk in (b"l1\nx\x00", b"\x00y\nok\n\xff", b"\x00a", b"\x00b", b"\n"):
        d.feed(chunk)
    d.end()
    # Line 2: two NULs; line 4 (after "ok" on line 3): 0xff and two NULs in three chunks.
    assert (d.bytes, d.lines, d.first_line) == (5, 2, 2)

    d = TextDamage()
    d.feed(b"ok\nend \xe2\x82")  # a cut euro sign at the end of the file
    d.end()
    assert (d.bytes, d.lines, d.first_line) == (2, 1, 2)


def _event(ts: str, a: str, b: str) -> bytes:
    return (
        f"2021-11-23 {ts} INFO {RM}.rmapp.RMAppImpl: {APP} State change from {a} to {b}\n".encode()
    )


#: Bad lines of a YARN log, put in its first 8 KB.
NUL_EVENT = (
    f"2021-11-23 10:00:00,005 INFO {RM}.rmapp.RMAppImpl: {APP} State change\x00 from NEW_SAVING "
    "to SUBMITTED\n"
).encode()
LATIN1_LINE = f"2021-11-23 10:00:00,015 INFO {RM}.ClientRMService: user caf\xe9 \xff\xfe\n".encode(
    "latin-1"
)


@pytest.mark.parametrize(
    ("bad", "events", "rejects", "counts"),
    [
        # The NUL line is an event no longer readable: a reject naming it. 1 byte, line 3.
        (NUL_EVENT, [1, 2, 4], [(3, "binary data in a text log")], (1, 1, 3)),
        # \xe9 (followed by a space), \xff, \xfe: 3 bytes not UTF-8 on line 3, which holds no
        # event (a log's other lines are not rejected).
        (LATIN1_LINE, [1, 2, 4], [], (3, 1, 3)),
    ],
    ids=["nul", "not-utf8"],
)
def test_yarn_log_with_a_bad_byte_in_its_first_8_kb_is_read(
    tmp_path: Path,
    store_dir: Path,
    bad: bytes,
    events: list[int],
    rejects: list[tuple[int, str]],
    counts: tuple[int, int, int],
) -> None:
    log = tmp_path / "yarn-rm.log"
    log.write_bytes(
        _event("10:00:00,000", "NEW", "NEW_SAVING")
        + _event("10:00:00,001", "NEW_SAVING", "SUBMITTED")
        + bad
        + _event("10:00:01,000", "SUBMITTED", "ACCEPTED")
    )
    r = ingest(store_dir, log)
    # A line the bad bytes make unreadable is a reject: beyond --max-rejects 0, exit 1.
    assert r.exit_code == (1 if rejects else 0), r.output
    if rejects:
        line, reason = rejects[0]
        assert r.stderr.splitlines()[-1].startswith(f"error: {log}:{line}: {reason} (")
    src = source(r, "yarn-rm.log")
    assert src["status"] == "ingested"
    got = (src["not_text_bytes"], src["not_text_lines"], src["first_not_text_line"])
    assert got == counts
    nbytes, nlines, first = counts
    assert f"{nbytes} byte{'s' * (nbytes > 1)} not text" in r.stderr
    assert f"on {nlines} line (first: line {first})" in r.stderr
    assert q(store_dir, "SELECT line_no FROM scheduler_events ORDER BY 1") == [(n,) for n in events]
    assert q(store_dir, "SELECT line_no, reason FROM rejects ORDER BY 1") == rejects


@pytest.mark.parametrize("compress", [False, True], ids=["plain", "gzip"])
def test_framework_log_with_bad_bytes_in_its_first_8_kb_is_read(
    tmp_path: Path, store_dir: Path, compress: bool
) -> None:
    body = (
        b"INFO:tensorflow:loss = 3.0, step = 5\n"
        b"\x00\x00garbage\xff\n"  # line 2: two NULs and 0xff
        b"INFO:tensorflow:loss = 2.0, step = 6\n"
        b"\xff\xfeINFO:tensorflow:loss = 1.5, step = 7\n"  # line 4: 0xff 0xfe, then a step
        b"RuntimeError: CUDA error: out of memory\n"
    )
    name = "stdout.txt.gz" if compress else "stdout.txt"
    p = tmp_path / "framework" / JOB / "attempt_0" / name
    p.parent.mkdir(parents=True)
    p.write_bytes(gzip.compress(body) if compress else body)
    r = ingest(store_dir, tmp_path / "framework")
    assert r.exit_code == 0, r.output
    src = source(r, name)
    assert (src["status"], src["format"]) == ("ingested", "framework_log")
    got = (src["not_text_bytes"], src["not_text_lines"], src["first_not_text_line"])
    assert got == (5, 2, 2)
    assert json.loads(r.stdout)["not_text_bytes"] == 5
    assert q(store_dir, "SELECT epoch, loss, line_no FROM epochs ORDER BY 1") == [
        (5, 3.0, 1),
        (6, 2.0, 3),
        (7, 1.5, 4),
    ]
    assert q(store_dir, "SELECT reason FROM failures") == [("GPU out of memory",)]


def test_a_hole_of_nul_bytes_is_one_bad_line(tmp_path: Path, store_dir: Path) -> None:
    """What a crash leaves in a log: 4 KB of NULs among the lines (most of its first 8 KB)."""
    filler = b"".join(
        f"2021-11-23 10:00:0{i},000 INFO {RM}.ClientRMService: heartbeat {i}\n".encode()
        for i in range(10)
    )
    log = tmp_path / "yarn-rm.log"
    log.write_bytes(filler + b"\x00" * 4096 + b"\n" + _event("10:00:10,000", "NEW", "NEW_SAVING"))
    assert binary_share(log.read_bytes()) == 0.0
    r = ingest(store_dir, log)
    assert r.exit_code == 1, r.output  # the NUL line is a reject, beyond --max-rejects 0
    assert r.stderr.splitlines()[-1].startswith(f"error: {log}:11: binary data in a text log (")
    src = source(r, "yarn-rm.log")
    got = (src["not_text_bytes"], src["not_text_lines"], src["first_not_text_line"])
    assert got == (4096, 1, 11)
    assert q(store_dir, "SELECT line_no, reason FROM rejects") == [
        (11, "binary data in a text log")
    ]
    assert q(store_dir, "SELECT line_no FROM scheduler_events") == [(12,)]
    # Without --format json, the summary's title gives the total.
    r = CliRunner().invoke(main, ["ingest", str(log), "--store", str(store_dir), "--replace"])
    title = " ".join(r.stderr.split())  # the title, wrapped to the table's width
    assert "1 row rejected, 4,096 bytes not text in 1 file ┏" in title


def _png(path: Path) -> bytes:
    """A real PNG: signature, IHDR, one IDAT of deflated noise, IEND."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        crc = zlib.crc32(kind + data).to_bytes(4, "big")
        return len(data).to_bytes(4, "big") + kind + data + crc

    pixels = np.random.default_rng(0).integers(0, 256, 64 * (1 + 64 * 3), dtype=np.uint8)
    ihdr = (64).to_bytes(4, "big") * 2 + bytes([8, 2, 0, 0, 0])
    data = (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", ihdr)
        + chunk(b"IDAT", zlib.compress(pixels.tobytes()))
        + chunk(b"IEND", b"")
    )
    path.write_bytes(data)
    return data


def test_binary_files_are_still_skipped(tmp_path: Path, store_dir: Path) -> None:
    folder = tmp_path / "in"
    folder.mkdir()
    png = _png(folder / "plot.png")
    # The same image gzipped under a name without .gz: judged on what it decompresses to.
    (folder / "plot-copy").write_bytes(gzip.compress(png))
    exe = Path(sys.executable).resolve().read_bytes()[:65536]
    assert exe.startswith(b"\x7fELF")  # the running interpreter: an ELF executable
    (folder / "python").write_bytes(exe)
    (folder / "yarn-rm.log").write_bytes(_event("10:00:00,000", "NEW", "NEW_SAVING"))
    r = ingest(store_dir, folder)
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)["sources"]
    skipped = {Path(s["source"]).name: s["message"] for s in out if s["status"] == "unknown"}
    assert sorted(skipped) == ["plot-copy", "plot.png", "python"]
    for message in skipped.values():
        assert message == (
            "binary file (more than 30% of its first 8 KB is not text), not a text log or trace"
        )
    assert q(store_dir, "SELECT count(*) FROM scheduler_events") == [(1,)]
