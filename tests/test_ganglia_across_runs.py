"""Ganglia rows of one host, metric and minute from two ``ingest`` calls (ganglia_stored.py).

Rows are 60 s steps: a row stamped 00:09:00-07:00 is minute 07:08 UTC, 00:10:00-07:00 is 07:09
(docs/raw-sources.md, resampling). Before this check the second call's rows were simply added:
the gpu_util view held two rows per GPU minute and the analyses counted them twice.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import pandas as pd
from click.testing import CliRunner, Result

from philly_analyze.cli import main
from philly_analyze.store import Store

MIN0 = pd.Timestamp("2017-10-03 07:08:00", tz="UTC")
MIN1 = MIN0 + pd.Timedelta(minutes=1)
MIN2 = MIN0 + pd.Timedelta(minutes=2)


def ingest(store: Path, *args: str | Path) -> Result:
    return CliRunner().invoke(
        main, ["ingest", *map(str, args), "--store", str(store), "--format", "json"]
    )


def df(store: Path, sql: str) -> pd.DataFrame:
    with Store(store, read_only=True) as s:
        return s.df(sql)


def csv(path: Path, column: str, rows: Sequence[tuple[str, float]]) -> Path:
    """A ganglia-web CSV export with rows (local time HH:MM of 2017-10-03, value)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    body = "".join(f"2017-10-03T{t}:00-07:00,{v}\n" for t, v in rows)
    path.write_text(f"Timestamp,{column}\n{body}")
    return path


def test_a_conflicting_export_in_a_later_run_is_rejected_not_added(
    tmp_path: Path, store_dir: Path
) -> None:
    first = csv(
        tmp_path / "a" / "m5" / "gpu0_util.csv", "gpu0_util", [("00:09", 10), ("00:10", 20)]
    )
    r = ingest(store_dir, first)
    assert r.exit_code == 0, r.output
    # Another export of host m5's GPU 0: minute 07:08 differs (40, not 10), 07:09 is the same
    # value (20), 07:10 is new.
    second = csv(
        tmp_path / "b" / "m5" / "gpu0_util_copy.csv",
        "gpu0_util",
        [("00:09", 40), ("00:10", 20), ("00:11", 30)],
    )
    r = ingest(store_dir, second)
    # The conflict is a reject of the second file (beyond --max-rejects 0): exit 1 naming it.
    assert r.exit_code == 1, r.output
    assert r.stderr.splitlines()[-1].startswith(
        f"error: {second}: conflict with the store: host m5, gpu0_util (gpu_util) at "
    )
    assert "(1 row rejected in all (1 of them Ganglia conflicts" in r.stderr
    out = json.loads(r.stdout)
    got = df(store_dir, "SELECT machine_id, gpu_idx, time, util FROM gpu_util ORDER BY time")
    # One row per minute: the stored 10 kept, 20 not added twice, the new minute added.
    assert got.values.tolist() == [
        ["m5", 0, MIN0, 10.0],
        ["m5", 0, MIN1, 20.0],
        ["m5", 0, MIN2, 30.0],
    ]
    assert out["rejected"] == 1
    rej = df(store_dir, "SELECT source, line_no, reason, raw FROM rejects")
    assert len(rej) == 1
    assert rej.source[0] == str(second)
    assert rej.reason[0] == (
        "conflict with the store: host m5, gpu0_util (gpu_util) at 2017-10-03 07:08 UTC is 40.0 "
        "here and 10.0 in the store (an earlier ingest): the stored row kept"
    )
    assert rej.raw[0] == "2017-10-03 07:08:00+00,m5,0,40.0"
    notes = " ".join(out["notes"])
    assert "1 per-minute rows (gpu_util 1) equal rows the store already holds" in notes
    assert "1 per-minute rows (gpu_util 1) differ from the store's rows" in notes
    assert (
        "first: host m5, gpu0_util at 2017-10-03 07:08 UTC: 40.0 in gpu0_util_copy.csv, 10.0 in "
        "the store): the stored rows kept, these in rejects" in notes
    )


def test_a_copy_under_another_name_adds_nothing(tmp_path: Path, store_dir: Path) -> None:
    rows = [("00:09", 10), ("00:10", 20)]
    host = [("00:09", 90), ("00:10", 80)]
    csv(tmp_path / "a" / "m5" / "gpu0_util.csv", "gpu0_util", rows)
    csv(tmp_path / "a" / "m5" / "cpu_idle.csv", "cpu_idle", host)
    assert ingest(store_dir, tmp_path / "a").exit_code == 0
    csv(tmp_path / "b" / "m5" / "gpu0_util.csv", "gpu0_util", rows)
    csv(tmp_path / "b" / "m5" / "cpu_idle.csv", "cpu_idle", host)
    r = ingest(store_dir, tmp_path / "b")
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)
    assert out["rejected"] == 0
    assert df(store_dir, "SELECT count(*) AS n FROM gpu_util").n[0] == 2
    # cpu_util (100 - cpu_idle) and host_metrics (the raw cpu_idle): two rows each, not four.
    assert df(store_dir, "SELECT util FROM cpu_util ORDER BY time").util.tolist() == [10, 20]
    assert df(store_dir, "SELECT count(*) AS n FROM host_metrics").n[0] == 2
    assert "6 per-minute rows (gpu_util 2, cpu_util 2, host_metrics 2) equal rows" in " ".join(
        out["notes"]
    )


def test_a_new_version_of_the_same_file_replaces_its_rows(tmp_path: Path, store_dir: Path) -> None:
    """A file ingested again with other content replaces what it gave: no conflict with its
    own earlier rows."""
    f = csv(tmp_path / "m5" / "gpu0_util.csv", "gpu0_util", [("00:09", 10), ("00:10", 20)])
    assert ingest(store_dir, f).exit_code == 0
    csv(f, "gpu0_util", [("00:09", 11), ("00:10", 21), ("00:11", 31)])
    r = ingest(store_dir, f)
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["rejected"] == 0
    got = df(store_dir, "SELECT util FROM gpu_util ORDER BY time").util.tolist()
    assert got == [11, 21, 31]


def test_other_formats_are_not_compared(tmp_path: Path, store_dir: Path) -> None:
    """Rows of another Ganglia format are merged by source priority (one format per
    machine, store.py), never added together: they are not this check's business."""
    csv(tmp_path / "m5" / "gpu0_util.csv", "gpu0_util", [("00:09", 10)])
    assert ingest(store_dir, tmp_path / "m5").exit_code == 0
    (tmp_path / "m5.json").write_text(
        json.dumps(
            [
                {
                    "host_name": "m5",
                    "metric_name": "gpu0_util",
                    "datapoints": [[55.0, 1507014540]],  # [value, end of the 60 s step]
                }
            ]
        )
    )
    r = ingest(store_dir, tmp_path / "m5.json")
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["rejected"] == 0
    assert df(store_dir, "SELECT util FROM gpu_util").util.tolist() == [10.0]
