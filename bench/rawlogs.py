"""Raw-source parsers on large generated inputs: MB/s and peak RSS per parser.

Each parser runs ``philly-analyze ingest`` in a fresh process (so its peak RSS is its own) on:

- ``yarn_rm_log``: a generated RM log (Hadoop 3 layout, GPU containers, interleaved apps, half
  of the lines scheduler chatter that carries no state), ``PHILLY_BENCH_YARN_MB`` MB
  (default 1000; the issue's target is 5000 MB under 1 GB RSS);
- ``ganglia_xml``: repeated gmetad dumps of a GPU cluster (``PHILLY_BENCH_GANGLIA_MB``, default
  300);
- ``ganglia_csv``: ganglia-web exports, one per host and metric, 15 s steps (same size).

Printed per parser: MB/s, peak RSS, CPU seconds and CPU ms per MB (steadier than wall time on
a shared machine), rows written. Figures only; nothing is asserted. Set ``PHILLY_BENCH_DIR``
for the scratch folder. ``bench/_ingest_full.py`` compares its YARN and Ganglia steps with these.
"""

from __future__ import annotations

import os
import random
import shutil
import time
from pathlib import Path

from bench._util import SCRATCH, python_measured_cpu
from philly_analyze.store import Store

RM = "org.apache.hadoop.yarn.server.resourcemanager"
YARN_MB = int(os.environ.get("PHILLY_BENCH_YARN_MB", "1000"))
GANGLIA_MB = int(os.environ.get("PHILLY_BENCH_GANGLIA_MB", "300"))
CLUSTER_TS = 1637633166384
T_START = 1637690400  # 2021-11-23 18:00:00 UTC


def _stamp(t: float) -> str:
    # The generated log is written in UTC (ingested with --timezone UTC).
    lt = time.gmtime(int(t))
    return time.strftime("%Y-%m-%d %H:%M:%S", lt) + f",{int((t % 1) * 1000):03d}"


def _app_lines(rng: random.Random, seq: int, t: float) -> list[tuple[float, str]]:
    """~60 lines of one GPU application, half of them state-less chatter."""
    app = f"application_{CLUSTER_TS}_{seq:04d}"
    ids = app.removeprefix("application_")
    user, queue = f"u{rng.randrange(300)}", f"vc{rng.randrange(14)}"
    out: list[tuple[float, str]] = []

    def add(dt: float, cls: str, msg: str) -> None:
        out.append((t + dt, f"INFO {RM}.{cls}: {msg}"))

    def app_state(dt: float, a: str, b: str, ev: str) -> None:
        add(dt, "rmapp.RMAppImpl", f"{app} State change from {a} to {b} on event = {ev}")

    def att_state(dt: float, n: int, a: str, b: str, ev: str) -> None:
        add(
            dt,
            "rmapp.attempt.RMAppAttemptImpl",
            f"appattempt_{ids}_{n:06d} State change from {a} to {b} on event = {ev}",
        )

    add(0, "ClientRMService", f"Allocated new applicationId: {seq}")
    app_state(0.01, "NEW", "NEW_SAVING", "START")
    add(0.02, "recovery.RMStateStore", f"Storing info for app: {app}")
    app_state(0.03, "NEW_SAVING", "SUBMITTED", "APP_NEW_SAVED")
    add(
        0.04,
        "scheduler.capacity.CapacityScheduler",
        f"Accepted application {app} from user: {user}, in queue: {queue}",
    )
    app_state(0.05, "SUBMITTED", "ACCEPTED", "APP_ACCEPTED")
    attempts = 2 if rng.random() < 0.1 else 1
    dt = rng.uniform(1, 600)
    gpus = rng.choice((1, 1, 2, 4, 8, 8, 16))
    for n in range(1, attempts + 1):
        att_state(dt, n, "NEW", "SUBMITTED", "START")
        att_state(dt + 0.01, n, "SUBMITTED", "SCHEDULED", "ATTEMPT_ADDED")
        hosts = [f"m{rng.randrange(1000)}" for _ in range(max(1, gpus // 8))]
        for c, host in enumerate(hosts, 1):
            g = min(gpus, 8)
            cid = f"container_e01_{ids}_{n:02d}_{c:06d}"
            add(
                dt + 1,
                "rmcontainer.RMContainerImpl",
                f"{cid} Container Transitioned from NEW to ALLOCATED",
            )
            add(
                dt + 1,
                "scheduler.SchedulerNode",
                f"Assigned container {cid} of capacity <memory:49152, vCores:8, yarn.io/gpu: {g}>"
                f" on host {host}:45454, which has 1 containers, <memory:49152, vCores:8, "
                f"yarn.io/gpu: {g}> used and <memory:200000, vCores:16, yarn.io/gpu: {8 - g}> "
                "available after allocation",
            )
            add(
                dt + 1,
                "scheduler.capacity.LeafQueue",
                f"assignedContainer application attempt=appattempt_{ids}_{n:06d} container="
                f"{cid} queue={queue} clusterResource=<memory:98304000, vCores:16000, "
                "yarn.io/gpu: 8000> type=NODE_LOCAL requestedPartition=",
            )
            add(
                dt + 1,
                "scheduler.capacity.ParentQueue",
                "assignedContainer queue=root "
                "usedCapacity=0.61 absoluteUsedCapacity=0.61 used=<memory:60000000, vCores:9000>",
            )
            add(
                dt + 2,
                "rmcontainer.RMContainerImpl",
                f"{cid} Container Transitioned from ALLOCATED to ACQUIRED",
            )
            add(
                dt + 5,
                "rmcontainer.RMContainerImpl",
                f"{cid} Container Transitioned from ACQUIRED to RUNNING",
            )
        for a, b, ev in (
            ("SCHEDULED", "ALLOCATED_SAVING", "CONTAINER_ALLOCATED"),
            ("ALLOCATED_SAVING", "ALLOCATED", "ATTEMPT_NEW_SAVED"),
            ("ALLOCATED", "LAUNCHED", "LAUNCHED"),
        ):
            att_state(dt + 1.1, n, a, b, ev)
        add(dt + 1.2, "amlauncher.AMLauncher", f"Launching masterappattempt_{ids}_{n:06d}")
        add(dt + 3, "ApplicationMasterService", f"AM registration appattempt_{ids}_{n:06d}")
        att_state(dt + 3, n, "LAUNCHED", "RUNNING", "REGISTERED")
        if n == 1:
            app_state(dt + 3.1, "ACCEPTED", "RUNNING", "ATTEMPT_REGISTERED")
        for k in range(6):
            add(
                dt + 10 + k,
                "scheduler.AppSchedulingInfo",
                f"checking for deactivate of application :{app}",
            )
        run = rng.uniform(60, 86400)
        dt += run
        if n < attempts:
            att_state(dt, n, "RUNNING", "FAILED", "CONTAINER_FINISHED")
            add(
                dt,
                "scheduler.capacity.CapacityScheduler",
                f"Application Attempt appattempt_{ids}_{n:06d} is done. finalState=FAILED",
            )
            app_state(dt + 0.01, "RUNNING", "ACCEPTED", "ATTEMPT_FAILED")
            dt += rng.uniform(1, 60)
    final, status = rng.choice(
        (("FINISHED", "SUCCEEDED"),) * 7 + (("KILLED", "KILLED"), ("FAILED", "FAILED"))
    )
    app_state(dt, "RUNNING", "FINAL_SAVING", "ATTEMPT_UNREGISTERED")
    att_state(
        dt + 1,
        attempts,
        "RUNNING",
        "FINISHED" if final == "FINISHED" else final,
        "CONTAINER_FINISHED",
    )
    app_state(dt + 1.1, "FINAL_SAVING", final, "APP_UPDATE_SAVED")
    add(
        dt + 1.2,
        "RMAuditLogger",
        f"USER={user}\tOPERATION=Application Finished - Succeeded\t"
        f"TARGET=RMAppManager\tRESULT=SUCCESS\tAPPID={app}",
    )
    add(
        dt + 1.3,
        "RMAppManager$ApplicationSummary",
        f"appId={app},name=job{seq},user={user},queue={queue},state={final},trackingUrl=N/A,"
        f"submitTime={int(t * 1000)},startTime={int(t * 1000)},launchTime={int(t * 1000)},"
        f"finishTime={int((t + dt + 1.1) * 1000)},finalStatus={status},memorySeconds=1,"
        "vcoreSeconds=1,applicationType=TENSORFLOW",
    )
    return out


def write_rm_log(path: Path, mb: int, seed: int = 1) -> int:
    """A generated RM log of about ``mb`` MB; returns the number of applications."""
    rng = random.Random(seed)
    target = mb * 1_000_000
    written = 0
    seq = 0
    with open(path, "w") as f:
        while written < target:
            window: list[tuple[float, str]] = []
            for _ in range(50):  # interleave 50 apps at a time, in time order
                seq += 1
                window += _app_lines(rng, seq, T_START + seq * 3.0)
            window.sort(key=lambda x: x[0])
            text = "".join(f"{_stamp(t)} {msg}\n" for t, msg in window)
            f.write(text)
            written += len(text)
    return seq


def write_gmetad_dumps(path: Path, mb: int, hosts: int = 200) -> int:
    """Repeated gmetad dumps (every 15 s) of a GPU cluster; returns the number of dumps."""
    target = mb * 1_000_000
    written = 0
    n = 0
    rng = random.Random(2)
    with open(path, "w") as f:
        while written < target:
            now = T_START + 15 * n
            parts = [
                '<?xml version="1.0" encoding="ISO-8859-1" standalone="yes"?>\n'
                '<GANGLIA_XML VERSION="3.7.2" SOURCE="gmetad">\n'
                f'<GRID NAME="philly" AUTHORITY="http://gm/" LOCALTIME="{now}">\n'
                f'<CLUSTER NAME="gpu" LOCALTIME="{now}" OWNER="" LATLONG="" URL="">\n'
            ]
            for h in range(hosts):
                parts.append(
                    f'<HOST NAME="m{h}" IP="10.0.{h // 256}.{h % 256}" REPORTED="{now}" TN="0" '
                    'TMAX="20" DMAX="0" LOCATION="" GMOND_STARTED="0">\n'
                )
                metrics = [
                    (f"gpu{g}_{m}", rng.randrange(100))
                    for g in range(8)
                    for m in ("util", "mem_util", "fb_memory", "temp")
                ]
                metrics += [
                    ("cpu_idle", rng.randrange(100)),
                    ("mem_total", 264000000),
                    ("mem_free", rng.randrange(264000000)),
                    ("load_one", 3),
                ]
                for name, v in metrics:
                    parts.append(
                        f'<METRIC NAME="{name}" VAL="{v}" TYPE="float" UNITS="" TN="{rng.randrange(15)}" '
                        'TMAX="60" DMAX="0" SLOPE="both" SOURCE="gmond">\n<EXTRA_DATA>\n'
                        '<EXTRA_ELEMENT NAME="GROUP" VAL="gpu"/>\n</EXTRA_DATA>\n</METRIC>\n'
                    )
                parts.append("</HOST>\n")
            parts.append("</CLUSTER>\n</GRID>\n</GANGLIA_XML>\n")
            text = "".join(parts)
            f.write(text)
            written += len(text)
            n += 1
    return n


def write_ganglia_csvs(root: Path, mb: int, hosts: int = 50) -> int:
    """ganglia-web CSV exports ``<root>/gpu/<host>/gpu<i>_util.csv``, 15 s rows."""
    target = mb * 1_000_000
    per_file = target // (hosts * 8)
    rng = random.Random(3)
    files = 0
    for h in range(hosts):
        d = root / "gpu" / f"m{h}"
        d.mkdir(parents=True, exist_ok=True)
        for g in range(8):
            lines = [f"Timestamp,gpu{g}_util\n"]
            size, i = 0, 0
            while size < per_file:
                t = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(T_START + 15 * i))
                ln = f"{t}+00:00,{rng.randrange(100)}\n"
                lines.append(ln)
                size += len(ln)
                i += 1
            (d / f"gpu{g}_util.csv").write_text("".join(lines))
            files += 1
    return files


_INGEST = """
import sys
from philly_analyze.cli import main
main(["ingest", *sys.argv[1:-1], "--store", sys.argv[-1], "-q", "--timezone", "UTC"],
     standalone_mode=False)
"""


def _measure(label: str, inputs: list[Path], store: Path, nbytes: int, extra: str = "") -> None:
    shutil.rmtree(store, ignore_errors=True)
    secs, rss, cpu, _ = python_measured_cpu(_INGEST, *map(str, inputs), str(store))
    with Store(store, read_only=True) as s:
        rows = int(s.scalar("SELECT coalesce(sum(rows), 0) FROM ingest_log"))
    mb = nbytes / 1e6
    print(
        f"{label:12s} {mb:8,.0f} MB in {secs:7.1f} s = {mb / secs:6.1f} MB/s, "
        f"peak RSS {rss:6.0f} MB, CPU {cpu:6.1f} s ({cpu / mb * 1000:.0f} CPU ms/MB), "
        f"{rows:,} rows ({rows / cpu:,.0f} rows per CPU s){extra}",
        flush=True,
    )


def _size(paths: list[Path]) -> int:
    return sum(
        f.stat().st_size
        for p in paths
        for f in ([p] if p.is_file() else p.rglob("*"))
        if f.is_file()
    )


def run() -> None:
    scratch = SCRATCH / "rawlogs"
    scratch.mkdir(parents=True, exist_ok=True)
    try:
        rm = scratch / "yarn-yarn-resourcemanager-rm1.log"
        t0 = time.perf_counter()
        apps = write_rm_log(rm, YARN_MB)
        print(
            f"# generated {rm.name}: {apps:,} apps in {time.perf_counter() - t0:.0f} s", flush=True
        )
        _measure("yarn_rm_log", [rm], scratch / "store-yarn", _size([rm]), f", {apps:,} apps")
        rm.unlink()
        xml = scratch / "gmetad-dumps.xml"
        dumps = write_gmetad_dumps(xml, GANGLIA_MB)
        _measure("ganglia_xml", [xml], scratch / "store-xml", _size([xml]), f", {dumps:,} dumps")
        xml.unlink()
        csvs = scratch / "csv"
        files = write_ganglia_csvs(csvs, GANGLIA_MB)
        _measure("ganglia_csv", [csvs], scratch / "store-csv", _size([csvs]), f", {files} files")
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
