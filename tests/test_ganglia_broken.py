"""Broken Ganglia exports: rejects with line numbers, or one clear error naming file and line."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner, Result

from philly_analyze.cli import main
from philly_analyze.store import Store

T0 = 1507014480


def ingest(store: Path, *paths: Path) -> Result:
    return CliRunner().invoke(main, ["ingest", *map(str, paths), "--store", str(store), "--json"])


def test_csv_bad_rows_are_rejected(tmp_path: Path, store_dir: Path) -> None:
    host = tmp_path / "gpu" / "m47"
    host.mkdir(parents=True)
    f = host / "gpu0_util.csv"
    f.write_text(
        "Timestamp,gpu0_util\n"
        "2017-10-03T00:08:15-07:00,10\n"  # 2
        "2017-10-03T00:08:30-07:00,20,99\n"  # 3: one field too many
        "yesterday,30\n"  # 4: not a time
        "2017-10-03T00:08:60-07:00,30\n"  # 5: second 60 (shaped like a time, invalid)
        "2017-10-03T00:09:00-07:00,40\n"  # 6
        "2017-10-03T00:09:15-07:00,50\n"  # 7
        "2017-10-03T00:09:30-07:00,60\n"  # 8
    )
    r = ingest(store_dir, f)
    assert r.exit_code == 1, r.output  # 3 rejects, beyond --max-rejects 0
    assert r.stderr.splitlines()[-1].startswith(
        f"error: {f}:3: expected 2 fields, found 3 (3 rows rejected in all"
    )
    with Store(store_dir, read_only=True) as s:
        rej = s.df("SELECT line_no, reason FROM rejects ORDER BY line_no")
        n = s.df("SELECT count(*) AS n FROM gpu_util")["n"][0]
    assert rej["line_no"].tolist() == [3, 4, 5]
    assert rej["reason"][0] == "expected 2 fields, found 3"
    assert rej["reason"][1] == "unparsable time 'yesterday'"
    # Step 15 s (most common gap): lines 2 and 6 are minute 07:08, lines 7 and 8 minute 07:09.
    assert n == 2


def test_csv_mixing_hosts_is_refused(tmp_path: Path, store_dir: Path) -> None:
    d = tmp_path / "gpu" / "aggregate"
    d.mkdir(parents=True)
    f = d / "gpu0_util.csv"
    f.write_text("Timestamp,gpu0_util,gpu0_util\n2017-10-03T00:08:15-07:00,1,2\n")
    r = ingest(store_dir, f)
    assert r.exit_code == 1
    assert r.stderr.strip().splitlines()[-1] == (
        f"error: {f}:1: column 'gpu0_util' appears more than once: an aggregate graph of "
        "several hosts cannot be told apart in CSV (export it as JSON, which names each host)"
    )


def test_truncated_and_malformed_xml(tmp_path: Path, store_dir: Path) -> None:
    doc = (
        '<?xml version="1.0"?>\n<GANGLIA_XML VERSION="3.7.2" SOURCE="gmond">\n'
        f'<CLUSTER NAME="c" LOCALTIME="{T0 + 30}" OWNER="" LATLONG="" URL="">\n'
        '<HOST NAME="m1" IP="1" REPORTED="0" TN="0" TMAX="20" DMAX="0" LOCATION="" '
        'GMOND_STARTED="0">\n'
        '<METRIC NAME="gpu0_util" VAL="10" TYPE="uint32" UNITS="%" TN="0" TMAX="60" DMAX="0" '
        'SLOPE="both" SOURCE="gmond"/>\n'
    )
    truncated = tmp_path / "a" / "gmond1.xml"
    truncated.parent.mkdir()
    truncated.write_text(doc)  # ends inside <HOST>
    broken = tmp_path / "a" / "gmond2.xml"
    broken.write_text(doc + "<METRIC NAME=oops>\n</HOST></CLUSTER></GANGLIA_XML>\n")
    r = ingest(store_dir, truncated, broken)
    assert r.exit_code == 1
    by_name = {Path(s["source"]).name: s for s in json.loads(r.stdout)["sources"]}
    assert by_name["gmond1.xml"]["message"].startswith(f"{truncated}:6: truncated XML")
    assert by_name["gmond2.xml"]["message"].startswith(f"{broken}:6: malformed XML")
    # What was read before the problem is kept (one sample of gpu0_util at T0+30).
    with Store(store_dir, read_only=True) as s:
        assert s.df("SELECT util FROM gpu_util")["util"].tolist() == [10.0]


def test_invalid_json_and_summary_folder(tmp_path: Path, store_dir: Path) -> None:
    bad = tmp_path / "graph.json"
    bad.write_text('[{"host_name": "m1", "metric_name": "gpu0_util", "datapoints": [[1, 2]\n')
    summary = tmp_path / "gpu" / "__SummaryInfo__"
    summary.mkdir(parents=True)
    (summary / "cpu_idle.csv").write_text("Timestamp,cpu_idle\n2017-10-03T00:08:15-07:00,90\n")
    r = ingest(store_dir, bad, summary / "cpu_idle.csv")
    by_name = {Path(s["source"]).name: s for s in json.loads(r.stdout)["sources"]}
    assert by_name["graph.json"]["status"] == "error"
    assert "truncated JSON" in by_name["graph.json"]["message"]
    assert by_name["cpu_idle.csv"]["status"] == "skipped"
    assert "cluster summary" in by_name["cpu_idle.csv"]["message"]


def test_prose_that_mentions_ganglia_tags_is_not_a_dump(tmp_path: Path, store_dir: Path) -> None:
    d = tmp_path / "docs"
    d.mkdir()
    (d / "NOTES.md").write_text(
        '# Notes\n| file | what |\n|---|---|\n| dump.txt | `<GANGLIA_XML VERSION="3.1.2">` |\n'
    )
    r = ingest(store_dir, d)
    assert r.exit_code == 0
    assert json.loads(r.stdout)["sources"][0]["status"] == "unknown"


def test_xport_step_among_the_rows_is_counted_not_taken(tmp_path: Path, store_dir: Path) -> None:
    # A <step> after the first row (rrdtool puts it in <meta>) once replaced the rows' step:
    # "x" made it None and the next row raised a TypeError (a traceback, found by mypy).
    host = tmp_path / "m47"
    host.mkdir()
    f = host / "xport.xml"
    f.write_text(
        "<xport><meta><step>15</step><legend><entry>gpu0_util</entry></legend></meta><data>"
        f"<row><t>{T0}</t><v>1.0</v></row>"
        "<step>x</step>"
        f"<row><t>{T0 + 15}</t><v>2.0</v></row>"
        "</data></xport>\n"
    )
    r = ingest(store_dir, f)
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["rejected"] == 1  # the stray <step>
    with Store(store_dir, read_only=True) as s:
        got = s.df("SELECT epoch(time) AS t, util FROM gpu_util ORDER BY time")
    # Both rows keep step 15: [T0-15, T0) lies in minute T0-60, [T0, T0+15) in minute T0
    # (T0 is a whole minute).
    assert got["t"].tolist() == [T0 - 60, T0]
    assert got["util"].tolist() == [1.0, 2.0]
