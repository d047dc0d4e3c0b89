"""Host of host-less Ganglia exports (file name or folder) and samples that sources disagree on.

Rows are 60 s steps: a row stamped 00:09:00-07:00 is the average of [00:08, 00:09) local =
minute 07:08 UTC (docs/raw-sources.md, resampling); 00:10:00-07:00 is minute 07:09 UTC.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pandas as pd
from click.testing import CliRunner, Result

from philly_analyze.cli import main
from philly_analyze.ingest.ganglia_hosts import HostNamer
from philly_analyze.store import Store

MIN0 = pd.Timestamp("2017-10-03 07:08:00", tz="UTC")
MIN1 = MIN0 + pd.Timedelta(minutes=1)


def ingest(store: Path, *args: str | Path) -> Result:
    return CliRunner().invoke(main, ["ingest", *map(str, args), "--store", str(store), "--json"])


def df(store: Path, sql: str) -> pd.DataFrame:
    with Store(store, read_only=True) as s:
        return s.df(sql)


def csv(path: Path, column: str, v0: float, v1: float) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        f"Timestamp,{column}\n2017-10-03T00:09:00-07:00,{v0}\n2017-10-03T00:10:00-07:00,{v1}\n"
    )
    return path


def two_hosts(folder: Path) -> None:
    csv(folder / "m0_gpu0_util.csv", "gpu0_util", 10, 20)
    csv(folder / "m1_gpu0_util.csv", "gpu0_util", 70, 80)


def test_hosts_named_in_file_names_of_one_folder(tmp_path: Path, store_dir: Path) -> None:
    two_hosts(tmp_path / "export")
    r = ingest(store_dir, tmp_path / "export")
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)
    assert out["rejected"] == 0
    got = df(store_dir, "SELECT machine_id, time, util FROM gpu_util ORDER BY 1, 2")
    assert got.values.tolist() == [
        ["m0", MIN0, 10.0],
        ["m0", MIN1, 20.0],
        ["m1", MIN0, 70.0],
        ["m1", MIN1, 80.0],
    ]
    assert "host of 2 files from their file name, 0 from their folder" in " ".join(out["notes"])


def test_hosts_given_one_folder_conflict_into_rejects(tmp_path: Path, store_dir: Path) -> None:
    two_hosts(tmp_path / "export")
    r = ingest(store_dir, tmp_path / "export", "--ganglia-host-pattern", "folder")
    # Conflicts are rejects (beyond --max-rejects 0): exit 1 naming the first, the JSON still
    # on stdout (the one line's whole text: test_ingest_max_rejects.py).
    assert r.exit_code == 1, r.output
    assert r.stderr.splitlines()[-1].startswith(
        f"error: {tmp_path / 'export' / 'm0_gpu0_util.csv'}: conflict: samples of host export"
    )
    out = json.loads(r.stdout)
    # Both files give host 'export' 10 and 70 for minute 07:08, 20 and 80 for 07:09: four
    # conflicting samples, none kept.
    assert out["rejected"] == 4
    assert df(store_dir, "SELECT count(*) AS n FROM gpu_util")["n"][0] == 0
    rej = df(store_dir, "SELECT source, line_no, reason, raw FROM rejects ORDER BY raw")
    assert [Path(s).name for s in rej["source"]] == [
        "m0_gpu0_util.csv",
        "m1_gpu0_util.csv",
        "m0_gpu0_util.csv",
        "m1_gpu0_util.csv",
    ]
    assert rej["raw"].tolist()[:2] == [
        "export,gpu0_util,2017-10-03 07:08:00,2017-10-03 07:09:00,10.0",
        "export,gpu0_util,2017-10-03 07:08:00,2017-10-03 07:09:00,70.0",
    ]
    assert rej["reason"][0] == (
        "conflict: samples of host export, metric gpu0_util for "
        "[2017-10-03 07:08:00, 2017-10-03 07:09:00) UTC differ (10.0 to 70.0): none kept"
    )
    note = next(n for n in out["notes"] if "conflict" in n)
    assert note.startswith(
        "ganglia_csv: 4 samples of 1 series conflict (different values for the same host, "
        "metric and time; first: host export, metric gpu0_util from m0_gpu0_util.csv, "
        "m1_gpu0_util.csv): none of them kept, each in rejects."
    )
    assert "--ganglia-host-pattern" in note


def test_two_exports_of_one_host_that_disagree(tmp_path: Path, store_dir: Path) -> None:
    # The gmetad layout, two exports of m0: they agree on minute 07:09 (20) and disagree on
    # 07:08 (10 vs 11). 07:09 is one sample given twice (a duplicate), 07:08 a conflict.
    csv(tmp_path / "a" / "gpu" / "m0" / "gpu0_util.csv", "gpu0_util", 10, 20)
    csv(tmp_path / "b" / "gpu" / "m0" / "gpu0_util.csv", "gpu0_util", 11, 20)
    r = ingest(store_dir, tmp_path / "a", tmp_path / "b")
    assert r.exit_code == 1, r.output  # the 2 conflicting samples, beyond --max-rejects 0
    assert "(2 rows rejected in all (2 of them Ganglia conflicts: values not kept)" in r.stderr
    out = json.loads(r.stdout)
    assert out["rejected"] == 2
    got = df(store_dir, "SELECT machine_id, time, util FROM gpu_util")
    assert got.values.tolist() == [["m0", MIN1, 20.0]]
    assert "ganglia_csv: 1 samples repeated with the same value" in " ".join(out["notes"])


def test_the_same_export_twice_is_merged_and_counted(tmp_path: Path, store_dir: Path) -> None:
    f = csv(tmp_path / "a" / "m0" / "gpu0_util.csv", "gpu0_util", 10, 20)
    (tmp_path / "b" / "m0").mkdir(parents=True)
    shutil.copy(f, tmp_path / "b" / "m0" / "gpu0_util.csv")
    r = ingest(store_dir, tmp_path / "a", tmp_path / "b")
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)
    assert out["rejected"] == 0
    got = df(store_dir, "SELECT machine_id, time, util FROM gpu_util ORDER BY time")
    assert got.values.tolist() == [["m0", MIN0, 10.0], ["m0", MIN1, 20.0]]
    assert (
        "ganglia_csv: 2 samples repeated with the same value (a file given twice, a dump "
        "captured twice) counted once"
    ) in out["notes"]


def test_a_pattern_naming_host_and_metric(tmp_path: Path, store_dir: Path) -> None:
    # 'sum' is a generic series name (gmetad RRDs): the pattern's metric group names it.
    csv(tmp_path / "x" / "m3-gpu1_util.csv", "sum", 30, 40)
    csv(tmp_path / "x" / "m4" / "cpu_idle.csv", "cpu_idle", 75, 50)  # no match: its folder
    r = ingest(
        store_dir, tmp_path / "x", "--ganglia-host-pattern", r"(?P<host>m\d+)-(?P<metric>.+)"
    )
    assert r.exit_code == 0, r.output
    gpu = df(store_dir, "SELECT machine_id, gpu_idx, time, util FROM gpu_util ORDER BY time")
    assert gpu.values.tolist() == [["m3", 1, MIN0, 30.0], ["m3", 1, MIN1, 40.0]]
    cpu = df(store_dir, "SELECT machine_id, time, util FROM cpu_util ORDER BY time")
    assert cpu.values.tolist() == [["m4", MIN0, 25.0], ["m4", MIN1, 50.0]]  # 100 - idle
    notes = json.loads(r.stdout)["notes"]
    assert (
        r"ganglia_csv: host of 1 files from their file name, 1 from their folder "
        r"(--ganglia-host-pattern (?P<host>m\d+)-(?P<metric>.+))"
    ) in notes


def test_auto_file_names() -> None:
    def names(path: str, columns: list[str]) -> list[tuple[str, str]]:
        return HostNamer(path, "auto")(columns)

    # HOST<sep>METRIC with the file's one column as METRIC; hosts may hold dots and dashes.
    assert names("/e/ip-10-0-0-1.ec2.internal_cpu_idle.csv", ["cpu_idle"]) == [
        ("ip-10-0-0-1.ec2.internal", "cpu_idle")
    ]
    assert names("/e/m7.gpu3_temp.csv.gz", ["gpu3_temp"]) == [("m7", "gpu3_temp")]
    assert names("/e/m7-gpu3_temp.csv", ["gpu3_temp"]) == [("m7", "gpu3_temp")]
    # ganglia-web report graphs: several columns, HOST_<graph>_report.
    assert names("/e/m5_cpu_report.csv", ["cpu_user", "cpu_idle"]) == [
        ("m5", "cpu_user"),
        ("m5", "cpu_idle"),
    ]
    # A file named after its metric alone, or unrelated to it: its folder (gmetad's tree).
    assert names("/gpu/m9/cpu_idle.csv", ["cpu_idle"]) == [("m9", "cpu_idle")]
    assert names("/gpu/m9/gpu0_util.csv", ["cpu_idle"]) == [("m9", "cpu_idle")]
    assert HostNamer("/gpu/m9/m1_gpu0_util.csv", "folder")(["gpu0_util"]) == [("m9", "gpu0_util")]


def test_bad_patterns_are_usage_errors(tmp_path: Path, store_dir: Path) -> None:
    two_hosts(tmp_path / "export")
    r = ingest(store_dir, tmp_path / "export", "--ganglia-host-pattern", "(?P<host")
    assert r.exit_code == 2
    assert "not a regular expression" in r.stderr
    r = ingest(store_dir, tmp_path / "export", "--ganglia-host-pattern", "(.+)_(.+)")
    assert r.exit_code == 2
    assert "needs a named group (?P<host>...)" in r.stderr
    assert not store_dir.exists()
