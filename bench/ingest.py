"""Ingest of a public-trace-sized published trace vs DuckDB's own CSV/JSON -> Parquet.

Input: 117,325 jobs, 552 machines (321 x 2 GPUs + 231 x 8 GPUs), 75 days of per-minute
gpu/cpu/mem utilization (~60M machine-minute rows, ~3 GB of cluster_gpu_util), generated once
into bench-out/ingest-input with DuckDB (values are random; the shapes and quirks are the real
ones: trailing comma, NA, PDT/PST). Targets: within 1.5x of the baseline, peak RSS < 2 GB.
Set PHILLY_BENCH_DAYS to a smaller number for a quick run.
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import duckdb

from bench._util import SCRATCH, python_measured

JOBS = 117_325
DAYS = int(os.environ.get("PHILLY_BENCH_DAYS", "75"))
INPUT = SCRATCH / f"ingest-input-{DAYS}d"


def _generate(d: Path) -> None:
    """Write the five files with DuckDB (fast), in the published layout."""
    tmp = d.with_suffix(".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    con = duckdb.connect()
    con.execute("SET TimeZone = 'UTC'")
    con.execute(
        "CREATE TABLE m AS SELECT 'm' || i AS id, CASE WHEN i < 321 THEN 2 ELSE 8 END AS g "
        "FROM range(552) t(i)"
    )
    with open(tmp / "cluster_machine_list", "w") as f:
        f.write("machineId, number of GPUs, single GPU mem\n")
        for mid, g in con.execute("SELECT id, g FROM m ORDER BY id").fetchall():
            f.write(f"{mid},{g}, {'12GB' if g == 2 else '24GB'}\n")
    minutes = DAYS * 1440
    # Wall-clock Pacific with the suffix of the time (the real file's convention).
    ts = (
        "strftime(timezone('America/Los_Angeles', t), '%Y-%m-%d %H:%M:%S') || ' ' || "
        "CASE WHEN epoch(timezone('America/Los_Angeles', t)) - epoch(t) = -25200 THEN 'PDT' "
        "ELSE 'PST' END"
    )
    times = f"SELECT TIMESTAMPTZ '2017-08-07 07:00:00+00' + to_minutes(k) AS t FROM range({minutes}) r(k)"
    vals = ", ".join(
        f"CASE WHEN g > {i} THEN printf('%.9g', random() * 100) ELSE 'NA' END AS g{i}"
        for i in range(8)
    )
    (tmp / "cluster_gpu_util").write_text(
        "time,machineId," + ",".join(f"gpu{i}_util" for i in range(8)) + "\n"
    )
    con.execute(
        f"COPY (SELECT {ts} AS time, id, {vals}, '' AS trailing FROM ({times}) CROSS JOIN m "
        f"ORDER BY t, id) TO '{tmp}/gpu.body' (HEADER false, QUOTE '', DELIMITER ',')"
    )
    _append(tmp / "cluster_gpu_util", tmp / "gpu.body")
    (tmp / "cluster_cpu_util").write_text("time,machine_id,cpu_util\n")
    con.execute(
        f"COPY (SELECT {ts}, id, printf('%.3f', random() * 100) FROM ({times}) CROSS JOIN m "
        f"ORDER BY t, id) TO '{tmp}/cpu.body' (HEADER false, QUOTE '', DELIMITER ',')"
    )
    _append(tmp / "cluster_cpu_util", tmp / "cpu.body")
    (tmp / "cluster_mem_util").write_text("time,machine_id,mem_total,mem_free\n")
    con.execute(
        f"COPY (SELECT {ts}, id, '528272672.0', printf('%.4f', random() * 5e8) FROM ({times}) "
        f"CROSS JOIN m ORDER BY t, id) TO '{tmp}/mem.body' (HEADER false, QUOTE '', DELIMITER ',')"
    )
    _append(tmp / "cluster_mem_util", tmp / "mem.body")
    # Job log: one JSON object per line inside an array, like the published file.
    con.execute(
        f"""COPY (
        SELECT json_object('status', (['Pass','Killed','Failed'])[1 + (k % 3)], 'vc', 'vc' || (k % 15),
          'jobid', 'application_1506638472019_' || k,
          'submitted_time', strftime(TIMESTAMP '2017-08-07' + to_seconds(k * 55), '%Y-%m-%d %H:%M:%S'),
          'user', 'u' || (k % 300),
          'attempts', [json_object('start_time', strftime(TIMESTAMP '2017-08-07' + to_seconds(k * 55 + 60), '%Y-%m-%d %H:%M:%S'),
                                   'end_time', strftime(TIMESTAMP '2017-08-07' + to_seconds(k * 55 + 3660), '%Y-%m-%d %H:%M:%S'),
                                   'detail', [json_object('ip', 'm' || (k % 552), 'gpus', ['gpu0', 'gpu1'])])]) AS j
        FROM range({JOBS}) r(k)) TO '{tmp}/jobs.body' (FORMAT csv, HEADER false, QUOTE '', ESCAPE '')"""
    )
    with open(tmp / "cluster_job_log", "w") as out, open(tmp / "jobs.body") as body:
        out.write("[")
        first = True
        for line in body:
            out.write(("" if first else ",\n") + line.rstrip("\n"))
            first = False
        out.write("]\n")
    for f in tmp.glob("*.body"):
        f.unlink()
    tmp.rename(d)


def _append(dst: Path, body: Path) -> None:
    with open(dst, "ab") as out, open(body, "rb") as src:
        shutil.copyfileobj(src, out, 16 << 20)


BASELINE = """
import duckdb, sys
d, out = sys.argv[1], sys.argv[2]
con = duckdb.connect()
f = "{'time':'VARCHAR','machineId':'VARCHAR'," + ",".join(f"'gpu{i}_util':'FLOAT'" for i in range(8)) + ",'x':'VARCHAR'}"
con.execute(f"COPY (SELECT * FROM read_csv('{d}/cluster_gpu_util', header=false, skip=1, delim=',', auto_detect=false, columns={f}, nullstr='NA')) TO '{out}/gpu.parquet' (FORMAT parquet, COMPRESSION zstd)")
con.execute(f"COPY (SELECT * FROM read_csv('{d}/cluster_cpu_util', header=true, auto_detect=false, columns={{'time':'VARCHAR','machine_id':'VARCHAR','cpu_util':'FLOAT'}}, nullstr='NA')) TO '{out}/cpu.parquet' (FORMAT parquet, COMPRESSION zstd)")
con.execute(f"COPY (SELECT * FROM read_csv('{d}/cluster_mem_util', header=true, auto_detect=false, columns={{'time':'VARCHAR','machine_id':'VARCHAR','mem_total':'DOUBLE','mem_free':'DOUBLE'}}, nullstr='NA')) TO '{out}/mem.parquet' (FORMAT parquet, COMPRESSION zstd)")
con.execute(f"COPY (SELECT * FROM read_json('{d}/cluster_job_log', format='array')) TO '{out}/jobs.parquet' (FORMAT parquet, COMPRESSION zstd)")
"""

OURS = """
import sys
from philly_analyze.cli import main
sys.argv = ["philly-analyze", "ingest", sys.argv[1], "--store", sys.argv[2], "--quiet"]
try:
    main()
except SystemExit as e:
    if e.code:
        raise
"""


def run() -> None:
    if not INPUT.exists():
        print(f"generating {DAYS}-day input in {INPUT} (once) ...", flush=True)
        _generate(INPUT)
    size = sum(f.stat().st_size for f in INPUT.iterdir())
    print(f"input: {size / 1e9:.2f} GB, {JOBS:,} jobs, 552 machines, {DAYS} days", flush=True)
    base_out = SCRATCH / "ingest-baseline"
    store = SCRATCH / "ingest-store"
    for p in (base_out, store):
        shutil.rmtree(p, ignore_errors=True)
    base_out.mkdir(parents=True)
    b_secs, b_rss, _ = python_measured(BASELINE, str(INPUT), str(base_out))
    o_secs, o_rss, _ = python_measured(OURS, str(INPUT), str(store))
    con = duckdb.connect(str(store / "catalog.duckdb"), read_only=True)
    rows = sum(
        con.execute(f"SELECT count(*) FROM {t}").fetchall()[0][0]
        for t in ("jobs", "attempts", "placements", "gpu_util", "cpu_util", "mem_util", "machines")
    )
    con.close()
    print(f"cores: {os.cpu_count()}")
    print(f"duckdb read_csv/read_json -> parquet: {b_secs:8.1f} s  peak RSS {b_rss:7.0f} MB")
    print(
        f"philly-analyze ingest:                {o_secs:8.1f} s  peak RSS {o_rss:7.0f} MB  "
        f"{rows / o_secs:,.0f} rows/s ({rows:,} rows)"
    )
    print(f"ratio: {o_secs / b_secs:.2f}x (target <= 1.5x); peak RSS target < 2048 MB")


if __name__ == "__main__":
    sys.exit(run())
