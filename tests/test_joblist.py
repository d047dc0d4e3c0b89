"""job_list_csv and gavel_trace ingest: real reference files and hand-made edge cases."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

from click.testing import CliRunner

from philly_analyze.cli import main
from philly_analyze.store import Store


def ingest(store: Path, *paths: Path):
    return CliRunner().invoke(main, ["ingest", *map(str, paths), "--store", str(store), "-q"])


def test_pollux_job_list(reference: Path, store_dir: Path) -> None:
    r = ingest(store_dir, reference / "philly/pollux_philly_jobs.csv")
    assert r.exit_code == 0, r.output
    with Store(store_dir, read_only=True) as st:
        assert st.df("SELECT count(*) AS n FROM jobs")["n"][0] == 82_247
        row = st.df(
            "SELECT j.vc, j.num_gpus, epoch(j.submit_time) AS t, a.duration_s, j.source "
            "FROM jobs j JOIN attempts a USING (job_id) WHERE job_id = 'pollux_philly_jobs-2'"
        ).iloc[0]
    # Line 2: "2017-10-09 07:01:55,66.0,1,66.0,11cb48" in Pacific daylight time (UTC-7).
    assert row["t"] == datetime(2017, 10, 9, 14, 1, 55, tzinfo=UTC).timestamp()
    assert (row["vc"], row["num_gpus"], row["duration_s"]) == ("11cb48", 1, 66.0)
    assert row["source"] == "job_list_csv"


def test_job_list_columns_ids_status_and_rejects(tmp_path: Path) -> None:
    f = tmp_path / "jobs.csv"
    f.write_text(
        "job_id,submit_time,duration_s,gpus,vc,user,status\n"
        "x1,2017-11-01 10:00:00,100,4,vcA,u1,Pass\n"
        "x2,not a time,100,4,vcA,u1,Pass\n"
        "x3,2017-11-01 10:05:00,-5,4,vcA,u1,Pass\n"
        "x4,2017-11-01 10:06:00,50,2,,,Failed\n"
    )
    r = CliRunner().invoke(
        main, ["ingest", str(f), "--store", str(tmp_path / "s"), "--timezone", "UTC", "--json"]
    )
    assert r.exit_code == 1, r.output  # x2 and x3 rejected, beyond --max-rejects 0
    assert r.stderr.splitlines()[-1].startswith(
        f"error: {f}:3: bad row: submit time 'not a time' is not a date and time (2 rows"
    )
    assert json.loads(r.stdout)["rejected"] == 2
    with Store(tmp_path / "s", read_only=True) as st:
        got = st.con.execute(
            "SELECT job_id, vc, user_id, status, num_gpus FROM jobs ORDER BY job_id"
        ).fetchall()
        out = st.df("SELECT job_id, outcome FROM attempts ORDER BY job_id")
        rej = st.df("SELECT line_no FROM rejects ORDER BY line_no")["line_no"].tolist()
    assert got == [("x1", "vcA", "u1", "passed", 4), ("x4", None, None, "unsuccessful", 2)]
    assert out["outcome"].tolist() == ["passed", "failed"]
    assert rej == [3, 4]


ORIGIN_PDT = "2017-11-01T08:00:00-07:00"
EPOCH_UTC = ("--origin", "epoch", "--timezone", "UTC")


def test_submit_seconds_from_an_origin(tmp_path: Path) -> None:
    f = tmp_path / "arrivals.csv"
    f.write_text(
        "id,submit_time_s,duration (min),gpus\n"
        "a,0.25,1.5,2\n"  # origin + 0.25 s; 1.5 min = 90 s
        "b,3600.000001,0.5,1\n"  # origin + 1 h + 1 µs; 30 s
        "c,soon,1,1\n"  # not a number: rejected
        "d,1e300,1,1\n"  # beyond any date: rejected
        "e,1,1,1e12\n"  # more GPUs than the store's int32 holds: rejected
    )
    r = CliRunner().invoke(
        main,
        ["ingest", str(f), "--store", str(tmp_path / "s"), "--json", "--origin", ORIGIN_PDT,
         "--max-rejects", "3"],  # the three bad rows below are made on purpose
    )  # fmt: skip
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)
    assert out["rejected"] == 3
    with Store(tmp_path / "s", read_only=True) as st:
        got = st.con.execute(
            "SELECT job_id, epoch_us(submit_time), a.duration_s, j.num_gpus "
            "FROM jobs j JOIN attempts a USING (job_id) ORDER BY 1"
        ).fetchall()
        rej = st.con.execute("SELECT line_no, reason FROM rejects ORDER BY 1").fetchall()
    t0 = int(datetime(2017, 11, 1, 15, tzinfo=UTC).timestamp()) * 1_000_000  # 08:00 PDT
    assert got == [("a", t0 + 250_000, 90.0, 2), ("b", t0 + 3_600_000_001, 30.0, 1)]
    assert rej == [
        (4, "bad row: submit time 'soon' is not a number of seconds"),
        (5, "bad row: submit time: relative time (s) '1e300' out of range (-1e10 to 1e10)"),
        (6, "bad row: GPUs of a job '1e12' out of range (0 to 1,000,000)"),
    ]
    assert (
        "job_list_csv: arrivals.csv: 'submit_time_s' counted from 2017-11-01T15:00:00+00:00 "
        "(--origin)"
    ) in out["notes"]


def test_unix_times_and_subsecond_datetimes(tmp_path: Path) -> None:
    unix = tmp_path / "unix.csv"
    unix.write_text("timestamp,duration,num_gpus\n1507014480.5,60,1\n")
    r = CliRunner().invoke(main, ["ingest", str(unix), "--store", str(tmp_path / "s"), "--json"])
    assert r.exit_code == 0, r.output
    assert (
        "job_list_csv: unix.csv: 'timestamp' counted from 2017-10-01T00:00:00+00:00 (--origin); "
        "they look like Unix times: use --origin epoch"
    ) in json.loads(r.stdout)["notes"]
    dated = tmp_path / "dated.csv"
    dated.write_text("submit_time,duration,num_gpus\n2017-10-03 07:08:00.125,60,1\n")
    r = CliRunner().invoke(
        main,
        ["ingest", str(unix), str(dated), "--store", str(tmp_path / "e"), "-q", *EPOCH_UTC],
    )
    assert r.exit_code == 0, r.output
    with Store(tmp_path / "e", read_only=True) as st:
        got = dict(st.con.execute("SELECT job_id, epoch_us(submit_time) FROM jobs").fetchall())
    # 1507014480 s = 2017-10-03 07:08:00 UTC: the Unix time and the datetime differ by 0.375 s.
    assert got == {"unix-2": 1_507_014_480_500_000, "dated-2": 1_507_014_480_125_000}


def test_rfold_arrivals(reference: Path, store_dir: Path) -> None:
    f = reference / "philly/rfold_philly_arrivals.csv"
    r = CliRunner().invoke(main, ["ingest", str(f), "--store", str(store_dir), "--json"])
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["rejected"] == 0
    with Store(store_dir, read_only=True) as st:
        n = st.scalar("SELECT count(*) FROM jobs")
        row = st.con.execute(
            "SELECT epoch(submit_time), jobs.num_gpus, duration_s FROM jobs JOIN attempts "
            "USING (job_id) WHERE job_id = '1'"
        ).fetchone()
        span = st.scalar("SELECT epoch(max(submit_time)) - epoch(min(submit_time)) FROM jobs")
    # Line 3: "1,266563.0,CLOS,1,1,3222990.0": 266,563 s after the default origin, 1 GPU.
    assert n == 111_549
    assert row == (datetime(2017, 10, 1, tzinfo=UTC).timestamp() + 266_563, 1, 3_222_990.0)
    assert span == 11_176_511  # the last arrival (the first is 0): 129.4 days


def test_datetimes_with_an_offset_are_instants(tmp_path: Path) -> None:
    """A submit time that names its UTC offset is that instant; only times without one are
    read in --timezone. Worked out by hand: 07:01:55+05:00 is 02:01:55 UTC; 06:13:03 in
    US/Pacific (PDT, UTC-7, in October) is 13:13:03 UTC, as is 06:13:03-0700; ``Z`` is
    UTC. The old reading gave 09:01:55 for the first (numpy made it 02:01:55, then the list's
    zone was applied on top) and printed numpy's warning."""
    f = tmp_path / "tz.csv"
    f.write_text(
        "timestamp,duration,num_gpus\n"
        "2017-10-09 07:01:55+05:00,60,1\n"
        "2017-10-09 06:13:03,60,1\n"
        "2017-10-09T06:13:03.5Z,60,1\n"
        "2017-10-09 06:13:03-0700,60,1\n"
    )
    r = CliRunner().invoke(
        main,
        ["ingest", str(f), "--store", str(tmp_path / "s"), "-q", "--timezone", "US/Pacific"],
    )
    assert r.exit_code == 0, r.output
    assert "Warning" not in (r.stderr or "")
    with Store(tmp_path / "s", read_only=True) as st:
        got = dict(st.con.execute("SELECT job_id, submit_time FROM jobs").fetchall())
    assert got == {
        "tz-2": datetime(2017, 10, 9, 2, 1, 55, tzinfo=UTC),
        "tz-3": datetime(2017, 10, 9, 13, 13, 3, tzinfo=UTC),
        "tz-4": datetime(2017, 10, 9, 6, 13, 3, 500_000, tzinfo=UTC),
        "tz-5": datetime(2017, 10, 9, 13, 13, 3, tzinfo=UTC),
    }
