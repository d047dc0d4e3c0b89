"""One progress bar for a whole ingest run (run_progress.py).

A recording tracker stands for the bar on stderr: the run sets its total once, to the bytes of
every input file on disk; it only moves forward, moves while a big CSV is copied by DuckDB
(whose own progress is polled) and ends at the total. Before, each file reset the bar to 0 of
its own size, and DuckDB's progress was never tracked (its bar setting was off), so the bar sat
at 0 until a big CSV ended.
"""

from __future__ import annotations

import gzip
import io
import tarfile
from pathlib import Path

import pytest

from philly_analyze.ingest.formats import IngestContext
from philly_analyze.ingest.pipeline import ingest_paths
from philly_analyze.store import Store
from tests.philly_files import write_big_gpu_util


class Recorder:
    """A ``Tracker`` that keeps every call."""

    def __init__(self) -> None:
        self.calls: list[tuple] = []

    def advance(self, amount: float = 1) -> None:
        self.calls.append(("advance", amount))

    def update(self, *, completed: float | None = None, total: float | None = None) -> None:
        self.calls.append(("update", completed, total))

    def describe(self, text: str) -> None:
        self.calls.append(("describe", text))


def _ganglia_csv(path: Path, rows: int) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    body = "".join(f"2017-10-03T{h:02d}:{m:02d}:00-07:00,{m}\n" for h in range(rows // 60 + 1)
                   for m in range(60))[: rows * 29]  # fmt: skip
    path.write_text("Timestamp,gpu0_util\n" + body)


def _inputs(root: Path) -> list[Path]:
    """A plain CSV DuckDB reads itself, a gzipped Ganglia export read in Python, a tar
    archive of two Ganglia exports, and a file of no known format."""
    d = root / "in"
    d.mkdir()
    write_big_gpu_util(
        d / "cluster_gpu_util", minutes=25_000
    )  # ~42 MB: more than one of DuckDB's 32 MB buffers
    _ganglia_csv(root / "tmp" / "m1" / "gpu0_util.csv", 2000)
    with gzip.open(d / "m1_gpu0_util.csv.gz", "wb") as f:
        f.write((root / "tmp" / "m1" / "gpu0_util.csv").read_bytes())
    with tarfile.open(d / "exports.tar", "w") as tf:
        for host in ("m2", "m3"):
            data = (root / "tmp" / "m1" / "gpu0_util.csv").read_bytes()
            info = tarfile.TarInfo(f"{host}/gpu0_util.csv")
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))
    (d / "notes.txt").write_text("nothing to ingest here\n" * 100)
    return sorted(d.iterdir())


def test_one_bar_over_every_input(
    tmp_path: Path, store_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    files = _inputs(tmp_path)
    sizes = {f.name: f.stat().st_size for f in files}
    total = sum(sizes.values())
    bar = Recorder()
    ctx = IngestContext(tracker=bar, timezone="America/Los_Angeles")
    with Store(store_dir) as store:
        report = ingest_paths(store, [tmp_path / "in"], ctx=ctx)
    assert not report.errors, report.errors
    assert ctx.tracker is bar  # handed back after the run
    totals = [c[2] for c in bar.calls if c[0] == "update" and c[2] is not None]
    assert totals == [total]  # set once, before anything moved
    first_total = next(i for i, c in enumerate(bar.calls) if c[0] == "update" and c[2])
    done = [(i, c[1]) for i, c in enumerate(bar.calls) if c[0] == "update" and c[1] is not None]
    assert all(i >= first_total or v == 0 for i, v in done)
    values = [v for _, v in done]
    assert values == sorted(values)  # only forward
    assert values[-1] == total
    assert not [c for c in bar.calls if c[0] == "advance"]  # the run's bar is set, not pushed
    # While DuckDB reads cluster_gpu_util through the guard's pipe (the first file in name order, from 0 to its size),
    # the bar moves between its start and its end.
    big = sizes["cluster_gpu_util"]
    assert big > 40_000_000
    inside = [v for v in values if 0 < v < big]
    assert inside, values[:20]


def test_parts_of_files_add_up_and_never_go_back() -> None:
    """Hand-made sequence: sizes 100, 50 (gzip: reports its compressed bytes), an archive of
    40 whose members' reports are not bytes of it, a re-read file of 10 added to the total."""
    from philly_analyze.ingest.run_progress import RunProgress

    bar = Recorder()
    p = RunProgress(bar)
    p.set_total(190)
    p.start(100)
    p.advance(30)
    p.update(completed=20)  # a late, lower poll does not move it back
    p.update(completed=60)
    p.advance(500)  # reports beyond the file stop at its end
    p.start(50)
    p.advance(25)
    p.start(40, archive=True)
    p.advance(1000)  # a member's own bytes: muted
    p.archive_read(10)
    p.finish()
    p.extra(10)
    p.advance(10)
    p.finish()
    shown = [c[1] for c in bar.calls if c[0] == "update" and c[1] is not None]
    totals = [c[2] for c in bar.calls if c[0] == "update" and c[2] is not None]
    # Steps below 1 MB are drawn only when a file starts and at the end.
    assert shown == [0, 100, 150, 190, 200]
    assert totals == [190, 200]


def test_small_steps_are_drawn_once_a_megabyte() -> None:
    from philly_analyze.ingest.run_progress import RunProgress

    bar = Recorder()
    p = RunProgress(bar)
    p.set_total(10 << 20)
    p.start(10 << 20)
    for _ in range(80):
        p.advance(64 << 10)  # 5 MB in 64 KB reads
    shown = [c[1] for c in bar.calls if c[0] == "update" and c[1]]
    assert shown == [(k + 1) << 20 for k in range(5)]
