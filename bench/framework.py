"""Framework-log ingest: MB/s and peak RSS on a large generated input.

Two inputs, generated once into bench-out/ (deterministic, seed 7):
- ``big``: 8 large logs (~40 MB each, ~320 MB in all) mixing CNTK MPI epochs, TF steps,
  PyTorch progress, nvidia-smi noise, benign UCX/NCCL error lines and a failure at the end of
  half of them: the streaming path (8 MB chunks).
- ``many``: 20,000 small attempt folders (``framework/<app>/attempt_<i>/stdout.txt`` and
  ``stderr.txt``, ~2 KB each, ~80 MB in all): the batched path, where per-file cost matters.
Each is ingested into a fresh store by the real CLI in a fresh process. Set
PHILLY_BENCH_FW_SCALE (default 1.0) to shrink both for a quick run.
"""

from __future__ import annotations

import os
import random
import shutil
import sys
from pathlib import Path

from bench._util import SCRATCH, python_measured

SCALE = float(os.environ.get("PHILLY_BENCH_FW_SCALE", "1.0"))
BIG_FILES = 8
BIG_MB = int(40 * SCALE) or 1
SMALL_ATTEMPTS = int(20_000 * SCALE) or 10

NOISE = [
    "| N/A   33C    P0    41W / 250W |   1816MiB / 32480MiB |    100%      Default |",
    "[1594407135.546337] [k69a05298:117  :0]          ib_md.c:1933 UCX  ERROR ibv_open_device(mlx5_9) failed: No such file or directory",
    "k69a05298:149:455 [0] misc/ibvwrap.cc:212 NCCL WARN Call to ibv_open_device failed",
    "/opt/conda/lib/python3.6/site-packages/torch/nn/functional.py:54: UserWarning: size_average and reduce args will be deprecated",
]
FAILS = [
    "RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB (GPU 0; 11.17 GiB total capacity)",
    "ImportError: No module named 'cntk'",
    "mpirun noticed that process rank 0 with PID 77967 on node n342 exited on signal 9 (Killed).",
    "MemoryError",
]


def _progress(rng: random.Random, i: int) -> str:
    k = i % 3
    if k == 0:
        return (
            f"MPI Rank {i % 4}: 08/16/2016 10:09:37: Finished Epoch[{i % 90 + 1:2d} of 90]: [Training] "
            f"CrossEntropyWithSoftmax = {rng.random() * 3:.8f} * 20480; EvalClassificationError = "
            f"0.73432617 * 20480; totalSamplesSeen = 20480; learningRatePerSample = 0.015625"
        )
    if k == 1:
        return f"INFO:tensorflow:loss = {rng.random() * 5:.5f}, step = {i} (1.080 sec)"
    return (
        f"Epoch: [{i // 5005}][{i % 5005:4d}/5005]\tTime  0.412 ( 0.398)\tData  0.001 ( 0.012)\t"
        f"Loss {rng.random() * 7:.4e} (3.2071e+00)\tAcc@1  32.81 ( 31.10)\tAcc@5  58.59 ( 56.72)"
    )


def _generate_big(d: Path) -> None:
    tmp = d.with_suffix(".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    rng = random.Random(7)
    for f in range(BIG_FILES):
        p = (
            tmp
            / "framework"
            / f"application_1506638472019_{f + 1:04d}"
            / "attempt_0"
            / "stdout.txt"
        )
        p.parent.mkdir(parents=True)
        with open(p, "w") as out:
            size, i = 0, 0
            while size < BIG_MB << 20:
                line = _progress(rng, i) if rng.random() < 0.6 else rng.choice(NOISE)
                out.write(line + "\n")
                size += len(line) + 1
                i += 1
            if f % 2:
                out.write("Traceback (most recent call last):\n" + FAILS[f % len(FAILS)] + "\n")
    tmp.rename(d)


def _generate_many(d: Path) -> None:
    tmp = d.with_suffix(".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    rng = random.Random(7)
    for a in range(SMALL_ATTEMPTS):
        folder = (
            tmp / "framework" / f"application_1506638472019_{a // 2 + 1:05d}" / f"attempt_{a % 2}"
        )
        folder.mkdir(parents=True)
        out = [_progress(rng, i) for i in range(15)] + [rng.choice(NOISE) for _ in range(10)]
        (folder / "stdout.txt").write_text("\n".join(out) + "\n")
        err = [rng.choice(NOISE) for _ in range(8)]
        if a % 3 == 0:
            err += ["Traceback (most recent call last):", FAILS[a % len(FAILS)]]
        (folder / "stderr.txt").write_text("\n".join(err) + "\n")
    tmp.rename(d)


def _size_mb(d: Path) -> float:
    return sum(p.stat().st_size for p in d.rglob("*") if p.is_file()) / 1e6


CODE = """
import resource, sys, time
t0 = time.perf_counter()
from click.testing import CliRunner
from philly_analyze.cli import main
r = CliRunner().invoke(main, ["ingest", sys.argv[1], "--store", sys.argv[2], "--quiet"])
assert r.exit_code == 0, r.output
import duckdb
con = duckdb.connect(sys.argv[2] + "/catalog.duckdb", read_only=True)
counts = con.execute("SELECT (SELECT count(*) FROM epochs), (SELECT count(*) FROM failures)").fetchone()
u = resource.getrusage(resource.RUSAGE_SELF)
print(counts[0], counts[1], u.ru_utime + u.ru_stime)
"""


def run() -> None:
    """Print MB/s, files/s and peak RSS for both inputs."""
    for name, gen in (("big", _generate_big), ("many", _generate_many)):
        d = SCRATCH / f"framework-{name}-{SCALE:g}"
        if not d.exists():
            gen(d)
        store = SCRATCH / f"framework-{name}-store"
        shutil.rmtree(store, ignore_errors=True)
        mb = _size_mb(d)
        files = sum(1 for p in d.rglob("*") if p.is_file())
        secs, rss, out = python_measured(CODE, str(d), str(store))
        n_epochs, n_failures, cpu = out.split()
        cpu_s = float(cpu)
        print(
            f"framework_log {name}: {files:,} files, {mb:,.0f} MB: wall {secs:.1f} s = "
            f"{mb / secs:,.1f} MB/s, {files / secs:,.1f} files/s; CPU {cpu_s:.1f} s = "
            f"{mb / cpu_s:,.1f} MB/s per core; peak RSS {rss:,.0f} MB; {int(n_epochs):,} epochs "
            f"rows, {int(n_failures):,} failures rows [{os.cpu_count()} cores, load "
            f"{os.getloadavg()[0]:.1f}]",
            flush=True,
        )


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    run()
