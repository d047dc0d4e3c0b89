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
    assert r.exit_code == 0, r.output
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


def test_gavel_traces_with_throughputs(reference: Path, store_dir: Path) -> None:
    traces = sorted((reference / "gavel-msr-traces").glob("*.trace"))
    thr_file = reference / "colocation/gavel_simulation_throughputs.json"
    r = ingest(store_dir, reference / "gavel-msr-traces", thr_file)
    assert r.exit_code == 0, r.output
    lines = [ln for t in traces for ln in t.read_text().splitlines() if ln.strip()]
    thr = json.loads(thr_file.read_text())["p100"]
    first = (reference / "gavel-msr-traces/795a4c.trace").read_text().splitlines()[0].split("\t")
    want_first = int(first[4]) / thr[str((first[0], int(first[6])))]["null"]
    # A 16-GPU job: Gavel measured up to 8 GPUs, so throughput scales 8 -> 16 linearly.
    big = next(
        (t.stem, i + 1, ln.split("\t"))
        for t in traces
        for i, ln in enumerate(t.read_text().splitlines())
        if ln.split("\t")[6] == "16" and str((ln.split("\t")[0], 8)) in thr
    )
    want_big = int(big[2][4]) / (thr[str((big[2][0], 8))]["null"] * 2)
    with Store(store_dir, read_only=True) as st:
        assert st.df("SELECT count(*) AS n FROM jobs")["n"][0] == len(lines) == 15_264
        d = dict(st.con.execute("SELECT job_id, duration_s FROM attempts").fetchall())
        sub = st.df("SELECT epoch(submit_time) AS t, vc FROM jobs WHERE job_id = '795a4c-1'").iloc[
            0
        ]
    assert abs(d["795a4c-1"] - want_first) < 1e-6
    assert abs(d[f"{big[0]}-{big[1]}"] - want_big) < 1e-6
    assert sub["t"] == datetime(2017, 10, 1, tzinfo=UTC).timestamp() + float(first[5])
    assert sub["vc"] == "795a4c"


def test_gavel_traces_without_throughputs_fail_clearly(reference: Path, store_dir: Path) -> None:
    r = ingest(store_dir, reference / "gavel-msr-traces/795a4c.trace")
    assert r.exit_code == 1
    assert "gavel_simulation_throughputs.json" in r.output
