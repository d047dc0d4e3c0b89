"""Broken RM logs: bad lines become rejects with their line numbers, the rest is kept;
unreadable files give one clear error naming file and line."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

from click.testing import CliRunner, Result

from philly_analyze.cli import main
from philly_analyze.store import Store

RM = "org.apache.hadoop.yarn.server.resourcemanager"
APP = "application_1637633166384_0001"


def good(ts: str, a: str, b: str) -> str:
    return f"2021-11-23 {ts} INFO {RM}.rmapp.RMAppImpl: {APP} State change from {a} to {b}"


def ingest(store: Path, *paths: Path) -> Result:
    return CliRunner().invoke(main, ["ingest", *map(str, paths), "--store", str(store), "--json"])


def test_bad_lines_are_rejected_with_line_numbers(tmp_path: Path, store_dir: Path) -> None:
    lines = [  # line numbers after the 200 filler lines below
        good("10:00:00,000", "NEW", "NEW_SAVING"),  # 1
        good("10:00:00,010", "NEW_SAVING", "SUBMITTED")[:-5],  # 2 truncated: "SUBM"
        "2021-13-45 25:61:00,000 INFO x.RMAppImpl: "
        + APP
        + " State change from NEW_SAVING to SUBMITTED",  # 3
        "\x00\x01\x02 garbage \x00 State change from",  # 4 binary
        "##### State change from nowhere #####",  # 5 garbage, not a record: ignored
        "\tat org.apache.hadoop.yarn.server.resourcemanager.RMAppManager.submit(X.java:1)",  # 6
        good("10:00:00,020", "NEW_SAVING", "SUBMITTED"),  # 7
        f"2021-11-23 10:00:00,030 INFO {RM}.scheduler.SchedulerNode: Assigned container "
        "container_1637633166384_0001_01_000001 of capacity <memory:2048, vCores:1",  # 8 cut
        good("10:00:01,000", "SUBMITTED", "ACCEPTED"),  # 9
    ]
    # 200 stack-trace lines first: a NUL byte in the first 8 KB would make the whole file
    # "binary" (not a log); further in, it is one bad line.
    filler = [f"\tat org.apache.hadoop.ipc.Server$Handler.run(Server.java:{i})" for i in range(200)]
    log = tmp_path / "rm.log"
    log.write_bytes(("\n".join(filler + lines) + "\n").encode("utf-8"))
    r = ingest(store_dir, log)
    assert r.exit_code == 1, r.output  # the 4 rejects below, beyond --max-rejects 0
    assert r.stderr.splitlines()[-1].startswith(f"error: {log}:202: ")
    assert "(4 rows rejected in all" in r.stderr
    out = json.loads(r.stdout)
    assert out["rejected"] == 4
    with Store(store_dir, read_only=True) as s:
        rej = s.df("SELECT line_no, reason FROM rejects ORDER BY line_no")
        ev = s.df("SELECT to_state FROM scheduler_events ORDER BY line_no")
        jobs = s.df("SELECT * FROM jobs")
    assert rej["line_no"].tolist() == [202, 203, 204, 208]
    reasons = rej["reason"].tolist()
    assert "unknown app state 'SUBM'" in reasons[0]
    assert reasons[1].startswith("unparsable time '2021-13-45T25:61:00.000'")
    assert reasons[2] == "binary data in a text log"
    assert "Assigned container" in reasons[3]
    assert ev["to_state"].tolist() == ["NEW_SAVING", "SUBMITTED", "ACCEPTED"]
    assert jobs["job_id"].tolist() == [APP]


def test_truncated_gzip_keeps_what_was_read(tmp_path: Path, store_dir: Path) -> None:
    body = "\n".join(
        good(f"10:{m:02d}:00,000", "SUBMITTED", "ACCEPTED") for m in range(60)
    ).encode()
    data = gzip.compress(body * 200)
    log = tmp_path / "yarn-rm.log.2.gz"
    log.write_bytes(data[: len(data) // 2])
    r = ingest(store_dir, log)
    assert r.exit_code == 1
    err = r.stderr.strip().splitlines()[-1]
    assert err.startswith(f"error: {log}:") and "cannot read past this line" in err
    src = json.loads(r.stdout)["sources"][0]
    assert src["status"] == "error"
    with Store(store_dir, read_only=True) as s:
        n = s.df("SELECT count(*) AS n FROM scheduler_events")["n"][0]
        stop = s.df("SELECT line_no, reason FROM rejects")
    line = int(err.removeprefix(f"error: {log}:").split(":", 1)[0])
    assert n == line - 1  # every complete line before the cut was kept
    assert stop["reason"][0].startswith("source stopped here")


def test_empty_binary_and_unknown_files(tmp_path: Path, store_dir: Path) -> None:
    d = tmp_path / "logs"
    d.mkdir()
    (d / "empty.log").write_bytes(b"")
    (d / "blob.bin").write_bytes(bytes(range(256)) * 10)
    (d / "notes.txt").write_text("nothing to see here\n")
    (d / "yarn-rm.log").write_text(good("10:00:00,000", "NEW", "NEW_SAVING") + "\n")
    r = ingest(store_dir, d)
    assert r.exit_code == 0, r.output
    by_name = {Path(s["source"]).name: s for s in json.loads(r.stdout)["sources"]}
    assert by_name["empty.log"]["message"] == "empty file"
    assert by_name["blob.bin"]["message"].startswith("binary file")
    assert by_name["notes.txt"]["status"] == "unknown"
    assert by_name["yarn-rm.log"]["format"] == "yarn_rm_log"
    # Named explicitly, an empty file is an error with a one-line message.
    r2 = ingest(tmp_path / "s2", d / "empty.log")
    assert r2.exit_code == 1 and r2.stderr.strip().endswith("empty.log: empty file")
