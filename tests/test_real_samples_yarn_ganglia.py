"""Every real YARN and Ganglia sample (../shared/reference/real-samples, PROVENANCE.md) is
ingested with the right content or skipped with a message saying why. Read in place."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
from click.testing import CliRunner, Result

from philly_analyze.cli import main
from philly_analyze.store import Store

APP = "application_1497832133857_0330"
OLD_APP = "application_1497832133857_0194"


def ingest(store: Path, *paths: Path, args: tuple[str, ...] = ()) -> Result:
    return CliRunner().invoke(
        main, ["ingest", *map(str, paths), "--store", str(store), "--json", *args]
    )


def utc(s: str) -> pd.Timestamp:
    return pd.Timestamp(s, tz="UTC")


@pytest.fixture(scope="module")
def samples(reference: Path) -> Path:
    return reference / "real-samples"


def test_every_yarn_and_ganglia_sample_is_ingested_or_explained(
    samples: Path, store_dir: Path
) -> None:
    files = sorted((samples / "yarn").iterdir()) + sorted((samples / "ganglia").iterdir())
    r = ingest(store_dir, samples / "yarn", samples / "ganglia")
    assert r.exit_code == 0, r.output
    by_name = {Path(s["source"]).name: s for s in json.loads(r.stdout)["sources"]}
    for f in files:
        o = by_name[f.name]
        assert o["status"] in ("ingested", "skipped"), (f.name, o)
        assert o["status"] == "ingested" or o["message"], f.name
    assert by_name["logpai__loghub__Hadoop_2k.log"]["status"] == "skipped"
    assert by_name["logpai__loghub__Hadoop_2k.log"]["message"].startswith(
        "a MapReduce ApplicationMaster log (MRAppMaster), not a YARN ResourceManager log"
    )
    formats = {n: o["format"] for n, o in by_name.items()}
    assert formats["apache__hadoop__resourceestimator_rmLog.txt"] == "yarn_rm_log"
    assert formats["DataDog__dd-agent__ganglia.txt"] == "ganglia_xml"
    assert formats["oetiker__rrdtool-1.x__xport1.xml.output"] == "rrdtool_xport"
    assert formats["oetiker__rrdtool-1.x__xport1.json.output"] == "rrdtool_xport"
    assert formats["oetiker__rrdtool-1.x__tune1-testorg.dump"] == "rrdtool_dump"


@pytest.mark.parametrize("timezone", ["America/Los_Angeles", "Asia/Tokyo"])
def test_microsoft_2017_rm_log(samples: Path, store_dir: Path, timezone: str) -> None:
    """Wrapped lines carry an exact FILETIME (TS=0x...), so the zone does not matter."""
    log = samples / "yarn" / "apache__hadoop__resourceestimator_rmLog.txt"
    r = ingest(store_dir, log, args=("--timezone", timezone))
    assert r.exit_code == 0, r.output
    with Store(store_dir, read_only=True) as s:
        jobs = s.df("SELECT * FROM jobs").set_index("job_id")
        atts = s.df("SELECT * FROM attempts").set_index("job_id")
        ev = s.df("SELECT * FROM scheduler_events WHERE entity = 'app' ORDER BY time")
    j = jobs.loc[APP]
    assert (j.vc, j.user_id, j.status, j.num_attempts) == ("PROD", "hadoop", "passed", 1)
    assert pd.isna(j["flags"])
    # ApplicationSummary: startTime=1498061413073 ms; the NEW -> NEW_SAVING line's TS is
    # 0x01D2EAA8DD060D14 = 16:10:13.073230 UTC: the same instant to the millisecond.
    assert j.submit_time.floor("ms") == pd.Timestamp(1498061413073, unit="ms", tz="UTC")
    a = atts.loc[APP]
    # The RM (Hadoop 2.x) schedules no GPU resource: the attempt's GPU count is unknown.
    assert a.outcome == "passed" and a.num_machines == 1 and pd.isna(a.num_gpus)
    # Starts when its AM container is stored (TS 0x01D2EAA8DD11F8F0), ends when the app
    # FINISHED (TS 0x01D2EAAA089569FD = 2017-06-21 16:18:35.651532 UTC).
    assert a.start_time == utc("2017-06-21 16:10:13.151358")
    assert a.end_time == utc("2017-06-21 16:18:35.651532")
    assert ev["to_state"].tolist() == [
        "NEW_SAVING",
        "SUBMITTED",
        "ACCEPTED",
        "RUNNING",
        "FINAL_SAVING",
        "FINISHING",
        "FINISHED",
    ]
    # The out-of-order last line: another app's attempt, done with finalState=FAILED.
    old = jobs.loc[OLD_APP]
    assert pd.isna(old.status) and list(old["flags"]) == ["no_submit", "no_end"]
    assert atts.loc[OLD_APP].outcome == "failed"
    assert atts.loc[OLD_APP].end_time == utc("2017-06-20 22:30:21.912497")


def test_gmetad_dump_from_ec2(samples: Path, store_dir: Path) -> None:
    r = ingest(store_dir, samples / "ganglia" / "DataDog__dd-agent__ganglia.txt")
    assert r.exit_code == 0, r.output
    host = "ip-10-12-6-205.ec2.internal"
    with Store(store_dir, read_only=True) as s:
        cpu = s.df("SELECT * FROM cpu_util WHERE machine_id = ?", [host])
        mem = s.df("SELECT * FROM mem_util WHERE machine_id = ?", [host])
        hosts = s.df("SELECT DISTINCT machine_id FROM host_metrics")
        load = s.df(
            "SELECT time, value FROM host_metrics WHERE machine_id = ? AND metric = 'load_one'",
            [host],
        )
    # CLUSTER LOCALTIME 1337745300; cpu_idle VAL 90.5 TN 8 -> 1337745292 = 03:54:52 UTC.
    assert cpu[["time", "util"]].values.tolist() == [[utc("2012-05-23 03:54"), 9.5]]
    # mem_free 495296 (TN 38 -> 03:54:22) with mem_total 7885740 (TN 686 -> 03:43:34).
    assert mem[["time", "mem_total", "mem_free"]].values.tolist() == [
        [utc("2012-05-23 03:54"), 7885740.0, 495296.0]
    ]
    # 8 HOST elements, two of them empty.
    assert len(hosts) == 6
    assert load["value"].tolist() == [0.06]
    assert any("24 text metric values" in n for n in json.loads(r.stdout)["notes"])


def test_rrdtool_xport_xml_and_json_agree(samples: Path, tmp_path: Path) -> None:
    got = []
    for name in (
        "oetiker__rrdtool-1.x__xport1.xml.output",
        "oetiker__rrdtool-1.x__xport1.json.output",
    ):
        store = tmp_path / name
        assert ingest(store, samples / "ganglia" / name).exit_code == 0
        with Store(store, read_only=True) as s:
            got.append(s.df("SELECT * FROM host_metrics ORDER BY metric, time"))
    pd.testing.assert_frame_equal(got[0], got[1])
    hm = got[0]
    # No host inside: the folder name; the legend entries dv, wh are the metrics.
    assert set(hm.machine_id) == {"ganglia"} and set(hm.metric) == {"dv", "wh"}
    # Row <t>1300000800</t> (step 600, v0 = -5.4883500e-03) covers [1300000200, 1300000800):
    # ten minutes from 2011-03-13 07:10:00 UTC.
    dv = hm[hm.metric == "dv"].set_index("time")["value"]
    first = pd.Timestamp(1300000200, unit="s", tz="UTC")
    assert dv.index[0] == first
    assert dv.loc[first : first + pd.Timedelta("9min")].tolist() == [-5.48835e-03] * 10
    assert len(dv) == 25 * 10  # 26 rows, the first all NaN


def test_rrdtool_dump_times_match_its_comments(samples: Path, store_dir: Path) -> None:
    f = samples / "ganglia" / "oetiker__rrdtool-1.x__tune1-testorg.dump"
    assert ingest(store_dir, f).exit_code == 0
    with Store(store_dir, read_only=True) as s:
        a = s.df("SELECT time, value FROM host_metrics WHERE metric = 'a' ORDER BY time")
        b = s.df("SELECT count(*) AS n FROM host_metrics WHERE metric = 'b'")
    series = a.set_index("time")["value"]
    # The 60 s archive: comment "2011-03-13 08:48:00 CET / 1300002480" -> 4.2e+02, the
    # minute that ends there; the last row ends at lastupdate 1300003020 with 5.1e+02.
    assert series[pd.Timestamp(1300002480 - 60, unit="s", tz="UTC")] == 420.0
    assert series[pd.Timestamp(1300003020 - 60, unit="s", tz="UTC")] == 510.0
    # The 300 s archive fills the time before: "/ 1300000200" -> 3.0e+01 for 5 minutes.
    start = pd.Timestamp(1300000200 - 300, unit="s", tz="UTC")
    assert series.index[0] == start
    assert series[start : start + pd.Timedelta("4min")].tolist() == [30.0] * 5
    # ... up to where the 60 s archive starts (1300002420): the row "/ 1300002600" (420)
    # gives its first two minutes only; the row "/ 1300002900" is covered by the 60 s rows.
    assert series[pd.Timestamp(1300002300, unit="s", tz="UTC")] == 420.0
    assert series[pd.Timestamp(1300002360, unit="s", tz="UTC")] == 420.0
    assert len(series) == (1300003020 - (1300000200 - 300)) // 60  # every minute, no gap
    assert b["n"][0] == 0  # data source b is NaN throughout
