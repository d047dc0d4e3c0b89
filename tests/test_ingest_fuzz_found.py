"""Inputs the parser fuzz tests (``test_fuzz_parsers.py``) found to fail, each cut down by hand
to a small case through the real CLI: a traceback (or silently lost rows) before, now a
``rejects`` row naming the line and the rest kept, or exit 1 with one line naming the file."""

from __future__ import annotations

import json
from pathlib import Path

from tests.cli_ingest import ingest, ok, one_error_line, one_job, rejected, rejects, rm_line
from tests.store_query import q


def test_ganglia_csv_time_with_an_odd_offset(tmp_path: Path, store_dir: Path) -> None:
    d = tmp_path / "m47"
    d.mkdir()
    f = d / "gpu_util.csv"
    f.write_text(
        "Timestamp,gpu0_util\n"
        "2017-10-03T00:08:15-1:00,10\n"  # 2: an offset of one digit (pandas: mixed time zones)
        "2017-10-03T00:08:30-07:00,20\n"
        "2017-10-03T00:08:45-07:00,30\n"
    )
    out = rejected(ingest(store_dir, f), f, 2, 1)
    assert out["rejected"] == 1
    assert rejects(store_dir) == [(2, "unparsable time '2017-10-03T00:08:15-1:00'")]
    # Lines 3 and 4 (step 15 s) both fall in minute 07:08 UTC: one row, their average.
    assert q(store_dir, "SELECT util FROM gpu_util") == [(25.0,)]


def test_gavel_throughputs_with_impossible_scale_factors(tmp_path: Path, store_dir: Path) -> None:
    trace = tmp_path / "t.trace"
    trace.write_text("A3C\tpython3 main.py\t--max_steps\t0\t1100\t0\t1\n")
    for key in ("('A3C', 1e400)", "('A3C', 0)"):  # OverflowError, ZeroDivisionError before
        thr = tmp_path / "thr.json"
        thr.write_text(json.dumps({"v100": {"('A3C', 1)": {"null": 11.0}, key: {"null": 5.0}}}))
        r = ingest(store_dir, trace, "--gavel-throughputs", thr)
        assert r.exit_code == 1, r.output
        err = [ln for ln in r.stderr.splitlines() if ln.startswith("error:")]
        assert err == [
            f"error: {thr}: key {key!r} is not a ('job type', scale factor) pair with a scale "
            "factor of 1 to 1,000,000 GPUs (nothing kept of the gavel_trace file of this run)"
        ]


def test_job_log_number_of_thousands_of_digits(tmp_path: Path, store_dir: Path) -> None:
    f = tmp_path / "cluster_job_log"
    jobs = [json.dumps(one_job(i)) for i in range(3)]
    jobs[1] = jobs[1].replace('"gpu0"', "9" * 5000)  # Python refuses ints of > 4,300 digits
    f.write_text("[" + ",\n".join(jobs) + "]\n")
    out = rejected(ingest(store_dir, f), f, 2, 1)
    assert out["rejected"] == 1
    assert rejects(store_dir) == [(2, "GPU name 'inf' in attempts[0].detail is not gpu<N>")]
    assert q(store_dir, "SELECT count(*) FROM jobs") == [(2,)]


def test_gpu_util_header_repeating_a_column(tmp_path: Path, store_dir: Path) -> None:
    f = tmp_path / "cluster_gpu_util"
    f.write_text("time,machineId,gpu0_util,gpu0_util\n2017-10-03 00:08:00 PDT,m1,10,20,\n")
    err = one_error_line(ingest(store_dir, f), f, 1)  # a DuckDB BinderException before
    assert "a column repeated in the header 'time,machineId,gpu0_util,gpu0_util'" in err


def test_reasons_quoting_a_long_line_are_cut(tmp_path: Path, store_dir: Path) -> None:
    f = tmp_path / "cluster_cpu_util"
    f.write_text(
        "time,machine_id,cpu_util\n" + "x" * 60_000 + ",m1,5\n2017-10-03 00:08:00 PDT,m1,5\n"
    )
    out = rejected(ingest(store_dir, f), f, 2, 1)
    assert out["rejected"] == 1
    ((line, reason),) = rejects(store_dir)
    assert line == 2 and reason.startswith("unparsable time 'xxx")
    # 'unparsable time ' + the 60,000 x quoted: 60,018 characters, cut to 400. (A line over
    # 64 KB is refused before its time is read: tests/test_csv_line_bounds.py.)
    assert reason.endswith("... (60,018 characters)") and len(reason) <= 400
    assert q(store_dir, "SELECT util FROM cpu_util") == [(5.0,)]


def test_gavel_scale_factor_of_hundreds_of_digits(tmp_path: Path, store_dir: Path) -> None:
    trace = tmp_path / "t.trace"
    trace.write_text(
        "A3C\tpython3 main.py\t--max_steps\t0\t1100\t0\t1\n"
        f"A3C\tpython3 main.py\t--max_steps\t0\t1100\t0\t{'9' * 400}\n"  # OverflowError before
    )
    thr = tmp_path / "thr.json"
    thr.write_text('{"v100": {"(\'A3C\', 1)": {"null": 11.0}}}')
    out = rejected(ingest(store_dir, trace, "--gavel-throughputs", thr), trace, 2, 1)
    assert out["rejected"] == 1
    ((line, reason),) = rejects(store_dir)
    assert line == 2 and reason.startswith("scale_factor: GPUs of a job '9999")
    assert reason.endswith("... (400 characters) out of range (0 to 1,000,000)")
    assert q(store_dir, "SELECT duration_s FROM attempts") == [(100.0,)]


def test_json_numbers_of_thousands_of_digits(tmp_path: Path, store_dir: Path) -> None:
    # A throughputs JSON and an rrdtool xport JSON: ValueError (int of > 4,300 digits) before.
    trace = tmp_path / "t.trace"
    trace.write_text("A3C\tpython3 main.py\t--max_steps\t0\t1100\t0\t1\n")
    thr = tmp_path / "thr.json"
    thr.write_text('{"v100": {"(\'A3C\', 1)": {"null": 11.0, "(\'B\', 1)": [' + "9" * 5000 + "]}}}")
    ok(ingest(store_dir, trace, "--gavel-throughputs", thr))
    assert q(store_dir, "SELECT duration_s FROM attempts") == [(100.0,)]
    d = tmp_path / "m47"
    d.mkdir()
    xport = d / "xport.json"
    xport.write_text(
        '{"about": "RRDtool graph JSON output", "meta": {"start": ' + "9" * 5000 + ', "step": 60, '
        '"legend": ["load_one"]}, "data": [[1.0]]}'
    )
    err = one_error_line(ingest(store_dir, xport, "--input-format", "rrdtool_xport"), xport, None)
    assert err.endswith("rrdtool xport JSON without integer meta.start/step")


def test_a_group_that_cannot_be_assembled_does_not_lose_the_others(
    tmp_path: Path, store_dir: Path
) -> None:
    # Gavel traces without a throughputs JSON cannot be assembled; the YARN log given with
    # them was lost too (the error left ingest before the YARN group was assembled).
    d = tmp_path / "d"
    d.mkdir()
    (d / "a.trace").write_text("A3C\tpython3 main.py\t--max_steps\t0\t1100\t0\t1\n")
    app = "application_1637633166384_0001"
    (d / "yarn-rm.log").write_text(
        rm_line(
            "2021-11-23 10:00:00,000", f"rmapp.RMAppImpl: {app} State change from NEW to NEW_SAVING"
        )
        + "\n"
    )
    r = ingest(store_dir, d)
    assert r.exit_code == 1
    errors = [ln for ln in r.stderr.splitlines() if ln.startswith("error:")]
    assert errors == [
        "error: gavel_trace: Gavel traces need a Gavel throughputs JSON for durations "
        "(gavel_simulation_throughputs.json): give --gavel-throughputs FILE or name it in the "
        "same ingest command (nothing kept of the gavel_trace file of this run)"
    ]
    assert q(store_dir, "SELECT job_id FROM jobs") == [(app,)]
    assert q(store_dir, "SELECT count(*) FROM ingest_log WHERE source LIKE '%.trace'") == [(0,)]


def test_ganglia_json_time_of_hundreds_of_digits(tmp_path: Path, store_dir: Path) -> None:
    f = tmp_path / "graph.json"
    points = [[10, 1507014495], [30, int("9" * 400)]]  # OverflowError (int to float) before
    f.write_text(
        json.dumps([{"host_name": "m47", "metric_name": "gpu0_util", "datapoints": points}])
    )
    # The point without a usable time is a rejects row (it was only counted, with no row,
    # so the run exited 0 despite --max-rejects 0).
    out = rejected(ingest(store_dir, f), f, None, 1)
    assert out["rejected"] == 1
    assert rejects(store_dir) == [
        (None, "1 samples of m47/gpu0_util: datapoint without a finite time")
    ]
    assert q(store_dir, "SELECT util FROM gpu_util") == [(10.0,)]


def test_ganglia_json_datapoints_that_are_not_pairs_are_rejects(
    tmp_path: Path, store_dir: Path
) -> None:
    f = tmp_path / "graph.json"
    points = [[10, 1507014495], [20], "x", [30, 1507014555, 1]]  # 3 not [value, time]
    f.write_text(
        json.dumps([{"host_name": "m47", "metric_name": "gpu0_util", "datapoints": points}])
    )
    out = rejected(ingest(store_dir, f, "--max-rejects", "0"), f, None, 1)
    assert out["rejected"] == 3
    assert rejects(store_dir) == [
        (None, "3 samples of m47/gpu0_util: datapoint that is not [value, time]")
    ]
    assert q(store_dir, "SELECT util FROM gpu_util") == [(10.0,)]


def test_gmond_xml_host_name_of_a_thousand_characters(tmp_path: Path, store_dir: Path) -> None:
    # The source's line of the summary listed its hosts in full: 1,144 characters (found by
    # test_ingest_survives_mutants[ganglia_xml]); messages are one line of at most 400.
    t0 = 1507014480
    host = "x" * 1000
    f = tmp_path / "gmond.xml"
    f.write_text(
        '<?xml version="1.0"?>\n<GANGLIA_XML VERSION="3.7.2" SOURCE="gmond">\n'
        f'<CLUSTER NAME="c" LOCALTIME="{t0}">\n<HOST NAME="{host}" REPORTED="{t0}" TN="0">\n'
        '<METRIC NAME="gpu0_util" VAL="50" TN="0"/>\n</HOST>\n</CLUSTER>\n</GANGLIA_XML>\n'
    )
    out = ok(ingest(store_dir, f))
    (src,) = [s for s in out["sources"] if s["source"] == str(f)]
    assert src["status"] == "ingested"
    assert src["message"].startswith("1 samples, 1 series (gpu0_util) on host xxx")
    assert len(src["message"]) <= 400 and "\n" not in src["message"]
    assert q(store_dir, "SELECT machine_id FROM gpu_util") == [(host,)]
