"""YARN ResourceManager logs of the history (``formats.md`` §2).

log4j layout ``yyyy-MM-dd HH:mm:ss,SSS LEVEL fully.qualified.Class: message`` of Hadoop 3.x
(``on event = ...`` suffixes, ``yarn.io/gpu`` resources), local wall-clock time (the fall-back
hour repeats). Every application has its submission, acceptance, attempts (``appattempt_``
transitions), containers (``Assigned container ... on host m47:45454`` with the GPU count, one
container per server of the attempt, the first being the AM), and its end (FINISHED / FAILED /
KILLED, RMAuditLogger and ApplicationSummary lines). Queue = VC. Ids follow the job ids of the
published-format files. The RM restarts once (shutdown and startup banners, recovery of the
running applications; later applications carry the new cluster timestamp and containers the
``e01`` epoch). Lines after the window's end are not written (running apps stay open). The log
rolls every ``roll_lines`` lines: ``yarn-resourcemanager.log`` is the newest, ``.log.1``,
``.log.2`` older, and rolls from the third on are gzipped (as logrotate leaves them).
"""

from __future__ import annotations

import gzip
import heapq
import shutil
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from philly_analyze.synth.calibration import Calibration
from philly_analyze.synth.clock import Clock
from philly_analyze.synth.history import History
from philly_analyze.synth.yarn_events import C_APP, C_MGR, C_RM, job_lines

LOG_NAME = "yarn-resourcemanager.log"


def write_yarn(
    out: Path, cal: Calibration, hist: History, clock: Clock, rng: np.random.Generator
) -> list[Path]:
    """Write the rolled RM log files; returns them, oldest first.

    Lines are produced job by job in submission order and merged through a heap (a job's
    lines never precede its submission), so memory holds only the lines of jobs still open."""
    y = cal.section("yarn")
    out.mkdir(parents=True, exist_ok=True)
    est = 12 * hist.wl.num_jobs + 25 * len(hist.ra)
    roll = max(1000, min(int(y["roll_lines"]), -(-est // 4)))
    parts: list[Path] = []
    f = None
    in_file = 0
    batch: list[tuple[int, str]] = []

    def flush() -> None:
        """Write the batched lines, opening the next part when this one is full."""
        nonlocal f, in_file
        if not batch:
            return
        ms = np.array([b[0] for b in batch], dtype=np.int64)
        stamps = clock.strings(hist.window.start_epoch + ms // 1000)
        text = "".join(
            f"{st},{t % 1000:03d} {b[1]}\n"
            for st, t, b in zip(stamps, ms.tolist(), batch, strict=True)
        )
        if f is None or in_file >= roll:
            if f is not None:
                f.close()
            parts.append(out / f".part{len(parts):04d}")
            f = open(parts[-1], "w", newline="")  # noqa: SIM115 (rolled here, closed below)
            in_file = 0
        f.write(text)
        in_file += len(batch)
        batch.clear()

    per_flush = min(20000, roll)
    try:
        for t, msg in _merged(hist, y, rng):
            batch.append((t, msg))
            if len(batch) >= per_flush:
                flush()
        flush()
    finally:
        if f is not None:
            f.close()
    if not parts:
        parts.append(out / ".part0000")
        parts[-1].write_text("")
    return _rotate(out, parts)


def _rotate(out: Path, parts: list[Path]) -> list[Path]:
    """Name the parts as a rolled log: the newest ``LOG_NAME``, the next two ``.1`` and ``.2``,
    older ones gzipped (``mtime=0``, so the bytes do not depend on when they were written)."""
    files: list[Path] = []
    n = len(parts)
    for k, part in enumerate(parts):
        age = n - 1 - k  # 0 = the live file
        if age == 0:
            path = out / LOG_NAME
            part.replace(path)
        elif age <= 2:
            path = out / f"{LOG_NAME}.{age}"
            part.replace(path)
        else:
            path = out / f"{LOG_NAME}.{age}.gz"
            with (
                open(part, "rb") as src,
                open(path, "wb") as raw,
                gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0, compresslevel=1) as gz,
            ):
                shutil.copyfileobj(src, gz, 1 << 20)
            part.unlink()
        files.append(path)
    return files


def _merged(hist: History, y: dict, rng: np.random.Generator) -> Iterator[tuple[int, str]]:
    """All lines in time order (ties: RM lifecycle first, then by job and line order)."""
    heap: list[tuple[int, int, str]] = []
    for item in _lifecycle(hist):
        heapq.heappush(heap, item)
    for j, lines in job_lines(hist, y, rng):
        floor = int(hist.wl.submit[j]) * 1000
        while heap and heap[0][0] < floor:
            t, _, msg = heapq.heappop(heap)
            yield t, msg
        for item in lines:
            heapq.heappush(heap, item)
    while heap:
        t, _, msg = heapq.heappop(heap)
        yield t, msg


def _lifecycle(hist: History) -> list[tuple[int, int, str]]:
    """Shutdown/startup banners and recovery lines of each RM restart."""
    out: list[tuple[int, int, str]] = []
    wl = hist.wl
    end_ms = _job_end_ms(hist)
    submit_ms = wl.submit * 1000
    for at, ts in hist.restarts:
        t2 = ts - hist.window.start_epoch * 1000
        out.append(
            (
                at * 1000,
                -3,
                f"INFO {C_RM}: SHUTDOWN_MSG: \n/************************************************************\n"
                "SHUTDOWN_MSG: Shutting down ResourceManager at rm1/10.0.0.1\n"
                "************************************************************/",
            )
        )
        out.append(
            (
                t2,
                -3,
                f"INFO {C_RM}: STARTUP_MSG: \n/************************************************************\n"
                "STARTUP_MSG: Starting ResourceManager\nSTARTUP_MSG:   host = rm1/10.0.0.1\n"
                "STARTUP_MSG:   args = []\nSTARTUP_MSG:   version = 3.1.0\n"
                "************************************************************/",
            )
        )
        live = np.flatnonzero((submit_ms < t2) & (end_ms > t2) & (hist.app_cluster_ts != ts))
        out.append((t2 + 5, -2, f"INFO {C_MGR}: Recovering {len(live)} applications"))
        starts = hist.ra_start * 1000
        for j in live.tolist():
            n_att = int(((hist.ra_job == j) & (starts < t2)).sum())
            out.append(
                (
                    t2 + 6,
                    -1,
                    f"INFO {C_APP}: Recovering app: {hist.job_ids[j]} with {max(n_att, 1)} attempts and final state = null",
                )
            )
    return out


def _job_end_ms(hist: History) -> np.ndarray:
    """Per job: when it ended (ms from the window start), a huge value while open."""
    wl = hist.wl
    big = np.int64(1) << 62
    end = np.full(wl.num_jobs, big, dtype=np.int64)
    ct = hist.sched.cancel_time
    end[ct >= 0] = ct[ct >= 0] * 1000
    last = np.ones(len(hist.ra_job), dtype=bool)
    last[:-1] = hist.ra_job[:-1] != hist.ra_job[1:]
    li = np.flatnonzero(last)
    done = (hist.ra_end[li] >= 0) & (
        hist.wl.att_idx[hist.ra[li]] == wl.num_attempts[hist.ra_job[li]] - 1
    )
    end[hist.ra_job[li[done]]] = hist.ra_end[li[done]] * 1000
    return end
