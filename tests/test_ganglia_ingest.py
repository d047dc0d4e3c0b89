"""Ganglia sources end to end through the real CLI, on files shaped like formats.md §3.

T0 = 1507014480 s = 2017-10-03 07:08:00 UTC = 2017-10-03T00:08:00-07:00 (formats.md's example
time), a minute boundary. Expected values are worked out by hand in the comments.
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
from click.testing import CliRunner, Result

from philly_analyze.cli import main
from philly_analyze.store import Store

T0 = 1507014480
MIN0 = pd.Timestamp("2017-10-03 07:08:00", tz="UTC")
MIN1 = MIN0 + pd.Timedelta(minutes=1)


def ingest(store: Path, *paths: Path) -> Result:
    return CliRunner().invoke(main, ["ingest", *map(str, paths), "--store", str(store), "--json"])


def df(store: Path, sql: str) -> pd.DataFrame:
    with Store(store, read_only=True) as s:
        return s.df(sql)


def metric(name: str, val: str, tn: int, type_: str = "float", units: str = "") -> str:
    return (
        f'<METRIC NAME="{name}" VAL="{val}" TYPE="{type_}" UNITS="{units}" TN="{tn}" TMAX="60" '
        'DMAX="0" SLOPE="both" SOURCE="gmond">\n<EXTRA_DATA>\n'
        '<EXTRA_ELEMENT NAME="GROUP" VAL="gpu"/>\n</EXTRA_DATA>\n</METRIC>'
    )


def gmetad_dump(localtime: int, m47: list[str], m48: list[str]) -> str:
    return "\n".join(
        [
            '<?xml version="1.0" encoding="ISO-8859-1" standalone="yes"?>',
            '<GANGLIA_XML VERSION="3.7.2" SOURCE="gmetad">',
            f'<GRID NAME="philly" AUTHORITY="http://gm/ganglia/" LOCALTIME="{localtime + 3}">',
            f'<CLUSTER NAME="gpu" LOCALTIME="{localtime}" OWNER="msr" LATLONG="" URL="">',
            f'<HOST NAME="m47" IP="10.0.0.47" REPORTED="{localtime - 5}" TN="5" TMAX="20" '
            'DMAX="0" LOCATION="" GMOND_STARTED="0">',
            *m47,
            "</HOST>",
            f'<HOST NAME="m48" IP="10.0.0.48" REPORTED="{localtime}" TN="0" TMAX="20" DMAX="0" '
            'LOCATION="" GMOND_STARTED="0">',
            *m48,
            "</HOST>",
            "</CLUSTER>",
            "</GRID>",
            "</GANGLIA_XML>",
        ]
    )


def test_gmetad_dumps(tmp_path: Path, store_dir: Path) -> None:
    # Capture 1 at LOCALTIME T0+50, capture 2 at T0+65, in one telnet session log.
    cap1 = gmetad_dump(
        T0 + 50,
        [
            metric("gpu0_util", "80", 10, "uint32", "%"),  # T0+40
            metric("gpu1_util", "20", 10, "uint32", "%"),  # T0+40
            metric("gpu0_mem_util", "50", 10, "uint32", "%"),
            metric("gpu0_fb_memory", "1024", 10, "uint32", "MB"),
            metric("cpu_idle", "70.0", 20, "float", "%"),  # T0+30
            metric("mem_total", "1000", 500, "float", "KB"),  # T0-450: minute T0-8min
            metric("mem_free", "400", 10, "float", "KB"),  # T0+40
            metric("load_one", "1.5", 10),
            metric("os_name", "Linux", 600, "string"),
        ],
        [metric("cpu_idle", "90.0", 5)],  # T0+45
    )
    cap2 = gmetad_dump(
        T0 + 65,
        [
            metric("gpu0_util", "90", 10, "uint32", "%"),  # T0+55: minute T0 again
            metric("gpu1_util", "NaN", 10, "uint32", "%"),  # missing
            metric("cpu_idle", "40.0", 0),  # T0+65: minute T0+1
        ],
        [],
    )
    f = tmp_path / "gmetad-capture.txt"
    f.write_text(
        "Trying 10.0.0.1...\nConnected to gm.\nEscape character is '^]'.\n"
        f"{cap1}\n{cap2}\nConnection closed by foreign host.\n"
    )
    r = ingest(store_dir, f)
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["sources"][0]["format"] == "ganglia_xml"
    gpu = df(store_dir, "SELECT machine_id, gpu_idx, time, util FROM gpu_util ORDER BY 1, 2, 3")
    assert gpu.values.tolist() == [["m47", 0, MIN0, 85.0], ["m47", 1, MIN0, 20.0]]
    gm = df(store_dir, "SELECT gpu_idx, metric, value FROM gpu_metrics ORDER BY metric")
    assert gm.values.tolist() == [[0, "fb_memory", 1024.0], [0, "mem_util", 50.0]]
    cpu = df(store_dir, "SELECT machine_id, time, util FROM cpu_util ORDER BY 1, 2")
    assert cpu.values.tolist() == [["m47", MIN0, 30.0], ["m47", MIN1, 60.0], ["m48", MIN0, 10.0]]
    mem = df(store_dir, "SELECT machine_id, time, mem_total, mem_free FROM mem_util")
    assert mem.values.tolist() == [["m47", MIN0, 1000.0, 400.0]]
    hm = df(store_dir, "SELECT machine_id, metric, value FROM host_metrics ORDER BY 1, 2, 3")
    assert ["m47", "load_one", 1.5] in hm.values.tolist()
    assert "os_name" not in set(hm.metric) and "mem_total" not in set(hm.metric)
    machines = df(store_dir, "SELECT machine_id, num_gpus, observed_num_gpus FROM machines")
    assert sorted(machines.values.tolist()) == [["m47", 2, 2], ["m48", 0, 0]]
    notes = json.loads(r.stdout)["notes"]
    assert any("1 text metric values" in n for n in notes)


def test_ganglia_web_csv_exports(tmp_path: Path, store_dir: Path) -> None:
    host = tmp_path / "rrds" / "gpu" / "m47"
    host.mkdir(parents=True)
    (host / "gpu0_util.csv").write_text(
        "Timestamp,gpu0_util\n"
        "2017-10-03T00:08:15-07:00,10\n"  # covers [T0, T0+15)
        "2017-10-03T00:08:30-07:00,20\n"
        "2017-10-03T00:08:45-07:00,NaN\n"
        "2017-10-03T00:09:00-07:00,40\n"  # [T0+45, T0+60)
        "2017-10-03T00:09:15-07:00,50\n"  # [T0+60, T0+75): next minute
    )
    other = tmp_path / "rrds" / "gpu" / "m48"
    other.mkdir()
    (other / "cpu_report.csv").write_text(
        "Timestamp,cpu_user,cpu_system,cpu_idle\n"
        f"{T0 + 60},20.0,5.0,75.0\n"  # epoch seconds; 60 s step: minute T0
        f"{T0 + 120},,,\n"
        f"{T0 + 180},1.0,2.0,\n"  # no cpu_idle: user + system
    )
    r = ingest(store_dir, tmp_path / "rrds")
    assert r.exit_code == 0, r.output
    assert {s["format"] for s in json.loads(r.stdout)["sources"]} == {"ganglia_csv"}
    gpu = df(store_dir, "SELECT machine_id, gpu_idx, time, util FROM gpu_util ORDER BY time")
    assert gpu["util"].tolist()[0] == pd.Series([70 / 3], dtype="float32")[0]  # (10+20+40)/3
    assert gpu.values.tolist()[1] == ["m47", 0, MIN1, 50.0]
    cpu = df(store_dir, "SELECT machine_id, time, util FROM cpu_util ORDER BY time")
    assert cpu.values.tolist() == [["m48", MIN0, 25.0], ["m48", MIN0 + pd.Timedelta("2min"), 3.0]]


def test_ganglia_web_json_and_rrdtool_xport(tmp_path: Path, store_dir: Path) -> None:
    d = tmp_path / "exports"
    (d / "gpu" / "m50").mkdir(parents=True)
    (d / "graph.json").write_text(
        json.dumps(
            [
                {
                    "ds_name": "a0",
                    "cluster_name": "gpu",
                    "graph_type": "stack",
                    "host_name": "m49",
                    "metric_name": "gpu3_util",
                    "datapoints": [
                        [55.0, T0 + 60],
                        [None, T0 + 120],
                        ["NaN", T0 + 180],
                        [65, T0 + 240],
                    ],
                }
            ]
        )
    )
    (d / "gpu" / "m50" / "gpu1_util.xml").write_text(
        '<?xml version="1.0" encoding="ISO-8859-1"?>\n<xport>\n  <meta>\n'
        f"    <start>{T0 + 60}</start>\n    <end>{T0 + 180}</end>\n    <step>60</step>\n"
        "    <rows>3</rows>\n    <columns>1</columns>\n"
        "    <legend>\n      <entry>gpu1_util</entry>\n    </legend>\n  </meta>\n  <data>\n"
        f"    <row><t>{T0 + 60}</t><v>1.2000000e+01</v></row>\n"
        f"    <row><t>{T0 + 120}</t><v>NaN</v></row>\n"
        f"    <row><t>{T0 + 180}</t><v>1.4000000e+01</v></row>\n  </data>\n</xport>\n"
    )
    r = ingest(store_dir, d)
    assert r.exit_code == 0, r.output
    fmts = {Path(s["source"]).name: s["format"] for s in json.loads(r.stdout)["sources"]}
    assert fmts["graph.json"] == "ganglia_json" and fmts["gpu1_util.xml"] == "rrdtool_xport"
    gpu = df(store_dir, "SELECT machine_id, gpu_idx, time, util FROM gpu_util ORDER BY 1, 3")
    min2, min3 = MIN0 + pd.Timedelta("2min"), MIN0 + pd.Timedelta("3min")
    assert gpu.values.tolist() == [
        ["m49", 3, MIN0, 55.0],  # row at T0+60 is the minute before it
        ["m49", 3, min3, 65.0],
        ["m50", 1, MIN0, 12.0],
        ["m50", 1, min2, 14.0],
    ]
    with Store(store_dir, read_only=True) as s:
        log = s.df("SELECT format, provided FROM ingest_log ORDER BY format")
    assert log["provided"].str.startswith("2 samples, 1 series (gpu").all()


def test_gmetad_rrd_dump_with_sum_data_source(tmp_path: Path, store_dir: Path) -> None:
    host = tmp_path / "gpu" / "m51"
    host.mkdir(parents=True)
    rows = "\n".join(
        f"\t\t\t<!-- {T0 + 15 * i} --> <row><v>{v}</v></row>"
        for i, v in [(1, "1.0e+01"), (2, "3.0e+01"), (3, "NaN"), (4, "5.0e+01")]
    )
    (host / "gpu0_util.xml").write_text(
        '<?xml version="1.0" encoding="utf-8"?>\n<!DOCTYPE rrd SYSTEM "rrdtool.dtd">\n'
        "<!-- Round Robin Database Dump -->\n<rrd>\n\t<version>0003</version>\n"
        f"\t<step>15</step>\n\t<lastupdate>{T0 + 62}</lastupdate>\n"
        "\t<ds>\n\t\t<name> sum </name>\n\t\t<type> GAUGE </type>\n\t</ds>\n"
        "\t<rra>\n\t\t<cf>AVERAGE</cf>\n\t\t<pdp_per_row>1</pdp_per_row>\n"
        f"\t\t<database>\n{rows}\n\t\t</database>\n\t</rra>\n</rrd>\n"
    )
    r = ingest(store_dir, host / "gpu0_util.xml")
    assert r.exit_code == 0, r.output
    # lastupdate T0+62 -> newest 15 s row ends at T0+60; rows end at T0+15, +30, +45, +60:
    # minute T0 = mean(10, 30, 50) = 30.
    gpu = df(store_dir, "SELECT machine_id, gpu_idx, time, util FROM gpu_util")
    assert gpu.values.tolist() == [["m51", 0, MIN0, 30.0]]


def test_mixed_folder_prints_what_each_file_was_taken_to_be(
    tmp_path: Path, store_dir: Path
) -> None:
    d = tmp_path / "mixed"
    (d / "rrds" / "gpu" / "m47").mkdir(parents=True)
    (d / "rrds" / "gpu" / "m47" / "gpu0_util.csv").write_text(
        "Timestamp,gpu0_util\n2017-10-03T00:08:15-07:00,10\n"
    )
    (d / "gmond.xml").write_text(gmetad_dump(T0 + 50, [metric("gpu0_util", "5", 0)], []))
    (d / "yarn-yarn-resourcemanager-rm1.log").write_text(
        "2021-11-23 10:00:00,000 INFO org.apache.hadoop.yarn.server.resourcemanager.rmapp."
        "RMAppImpl: application_1637633166384_0001 State change from NEW to NEW_SAVING\n"
    )
    (d / "cluster_machine_list").write_text(
        "machineId, number of GPUs, single GPU mem\nm47,8, 24GB\n"
    )
    (d / "README").write_text("hello\n")
    r = CliRunner().invoke(main, ["ingest", str(d), "--store", str(store_dir)])
    assert r.exit_code == 0, r.output
    shown = {
        Path(ln.split()[1]).name: ln.split()[2]
        for ln in r.stderr.splitlines()
        if ln.strip().startswith(("ingested", "unknown")) and "assembled" not in ln
    }
    assert shown == {
        "gpu0_util.csv": "(ganglia_csv)",
        "gmond.xml": "(ganglia_xml)",
        "yarn-yarn-resourcemanager-rm1.log": "(yarn_rm_log)",
        "cluster_machine_list": "(philly_machine_list)",
        "README": "(?)",
    }
