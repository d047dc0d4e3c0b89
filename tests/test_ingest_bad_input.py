"""Damaged and hostile inputs of issue 14 ("Bad input"), each through the real CLI: lines
ended by CR alone, CSV fields over 128 KB, an XML declaration naming an unknown encoding, and
numbers or dates out of every range (``data/input_bounds.toml``). Each gave a traceback (or
silently lost rows) before; now a bad row is a ``rejects`` row naming its line and the rest is
kept, the run exiting 1 with one line naming the first reject (``--max-rejects`` 0), and a
file that cannot be read at all gives exit 1 with one line naming the file and the line."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from philly_analyze.cli import main
from tests.cli_ingest import ingest, ok, one_error_line, one_job, rejected, rejects, rm_line
from tests.philly_files import write_job_log, write_machine_list
from tests.store_query import q


# --------------------------------------------------------------------------- CR line endings
def test_job_list_with_cr_line_endings(tmp_path: Path, store_dir: Path) -> None:
    f = tmp_path / "jobs.csv"
    f.write_bytes(
        b"submit_time,duration,num_gpus\r2017-10-01 10:00:00,100,1\r2017-10-01 11:00:00,200,2\r"
    )
    out = ok(ingest(store_dir, f, "--timezone", "UTC"))
    assert out["rejected"] == 0
    assert q(store_dir, "SELECT num_gpus, epoch(submit_time) FROM jobs ORDER BY 2") == [
        (1, 1506852000.0),  # 2017-10-01 10:00 UTC
        (2, 1506855600.0),
    ]


def test_cr_only_file_in_a_folder_does_not_stop_the_others(tmp_path: Path, store_dir: Path) -> None:
    d = tmp_path / "d"
    d.mkdir()
    (d / "a.csv").write_bytes(b"submit_time,duration,num_gpus\r2017-10-01 10:00:00,100,1\r")
    (d / "b.csv").write_text("submit_time,duration,num_gpus\n2017-10-01 10:00:00,100,4\n")
    ok(ingest(store_dir, d))
    assert q(store_dir, "SELECT sum(num_gpus), count(*) FROM jobs") == [(5, 2)]


def test_cpu_and_gpu_util_with_cr_line_endings(tmp_path: Path, store_dir: Path) -> None:
    cpu = tmp_path / "cluster_cpu_util"
    cpu.write_bytes(
        b"time,machine_id,cpu_util\r2017-10-01 10:00:00 PDT,m1,5\r2017-10-01 10:01:00 PDT,m1,6\r"
    )
    gpu = tmp_path / "cluster_gpu_util"
    gpu.write_bytes(
        b"time,machineId,gpu0_util,gpu1_util\r"
        b"2017-10-01 10:00:00 PDT,m1,5,6,\r2017-10-01 10:01:00 PDT,m1,7,8,\r"
    )
    ok(ingest(store_dir, cpu, gpu))
    assert q(store_dir, "SELECT util FROM cpu_util ORDER BY time") == [(5.0,), (6.0,)]
    assert q(store_dir, "SELECT gpu_idx, util FROM gpu_util ORDER BY time, gpu_idx") == [
        (0, 5.0),
        (1, 6.0),
        (0, 7.0),
        (1, 8.0),
    ]


def test_a_huge_unexpected_header_is_quoted_short(tmp_path: Path, store_dir: Path) -> None:
    f = tmp_path / "cluster_gpu_util"
    f.write_text("time,machineId,gpu0_util," + "x" * 70_000 + "\n2017-10-01 10:00:00 PDT,m1,5,\n")
    err = one_error_line(ingest(store_dir, f), f, 1)
    assert "unexpected header 'time,machineId,gpu0_util,xxx" in err
    assert len(err) < 500


# --------------------------------------------------------------------------- big CSV fields
def test_job_list_field_over_128_kb_is_a_rejected_row(tmp_path: Path, store_dir: Path) -> None:
    f = tmp_path / "jobs.csv"
    f.write_text(
        "submit_time,duration,num_gpus,vc\n"
        "2017-10-01 10:00:00,100,1,a\n"
        f'2017-10-01 10:00:00,100,1,"{"v" * 200_000}"\n'  # line 3: one quoted 200 KB field
        "2017-10-01 10:00:00,100,2,b\n"
    )
    out = rejected(ingest(store_dir, f), f, 3, 1)
    assert out["rejected"] == 1
    assert rejects(store_dir) == [
        (3, "bad row: unreadable CSV line: field larger than field limit (131072)")
    ]
    assert q(store_dir, "SELECT vc, num_gpus FROM jobs ORDER BY vc") == [("a", 1), ("b", 2)]


def test_machine_list_field_over_128_kb_is_a_rejected_row(tmp_path: Path, store_dir: Path) -> None:
    f = tmp_path / "cluster_machine_list"
    f.write_text(
        "machineId, number of GPUs, single GPU mem\n"
        f'm1,8, 24GB\n"{"m" * 200_000}",8, 24GB\nm2,2, 12GB\n'
    )
    out = rejected(ingest(store_dir, f), f, 3, 1)
    assert out["rejected"] == 1
    assert rejects(store_dir) == [
        (3, "unreadable CSV line: field larger than field limit (131072)")
    ]
    assert q(store_dir, "SELECT machine_id, listed_num_gpus FROM machines ORDER BY 1") == [
        ("m1", 8),
        ("m2", 2),
    ]


# --------------------------------------------------------------------------- XML encodings
def test_gmond_xml_with_an_unknown_encoding(tmp_path: Path, store_dir: Path) -> None:
    f = tmp_path / "gmond.xml"
    f.write_text(
        "Trying 10.0.0.1...\n"  # a telnet capture: the document starts on line 2
        '<?xml version="1.0" encoding="X-BOGUS-99"?>\n'
        '<GANGLIA_XML VERSION="3.7.2" SOURCE="gmond"><CLUSTER NAME="c" LOCALTIME="1507014480">'
        '<HOST NAME="m1" REPORTED="1507014480" TN="0"><METRIC NAME="load_one" VAL="1" TN="0"/>'
        "</HOST></CLUSTER></GANGLIA_XML>\n"
    )
    err = one_error_line(ingest(store_dir, f), f, 2)
    assert "unknown encoding: X-BOGUS-99" in err and "save it as UTF-8" in err


def test_rrdtool_xport_with_an_unknown_encoding(tmp_path: Path, store_dir: Path) -> None:
    d = tmp_path / "m1"
    d.mkdir()
    f = d / "load_one.xml"
    f.write_text(
        '<?xml version="1.0" encoding="UTF-17"?>\n<xport>\n<meta><step>60</step>'
        "<legend><entry>load_one</entry></legend></meta>\n"
        "<data><row><t>1507014480</t><v>1.0</v></row></data>\n</xport>\n"
    )
    err = one_error_line(ingest(store_dir, f), f, 1)
    assert "unknown encoding: UTF-17" in err


# --------------------------------------------------------------------------- numbers out of range
def test_machine_list_absurd_gpu_counts(tmp_path: Path, store_dir: Path) -> None:
    f = tmp_path / "cluster_machine_list"
    f.write_text(
        "machineId, number of GPUs, single GPU mem\n"
        "m1,99999999999999999999, 24GB\n"  # 2: would overflow any integer column
        "m2,3000000000, 24GB\n"  # 3: would overflow int16 (ArrowInvalid before)
        "m3,-1, 24GB\n"  # 4
        "m4,8, 1e400GB\n"  # 5: infinite memory
        "m5,8, 24GB\n"
    )
    out = rejected(ingest(store_dir, f), f, 2, 4)
    assert out["rejected"] == 4
    assert rejects(store_dir) == [
        (2, "GPUs of a machine '99999999999999999999' out of range (0 to 1,024)"),
        (3, "GPUs of a machine '3000000000' out of range (0 to 1,024)"),
        (4, "GPUs of a machine '-1' out of range (0 to 1,024)"),
        (5, "GPU memory (GB) '1e400GB' out of range (0 to 4,096)"),
    ]
    assert q(store_dir, "SELECT machine_id, listed_num_gpus FROM machines") == [("m5", 8)]


def test_job_log_gpu_names_out_of_range_reject_theone_job(tmp_path: Path, store_dir: Path) -> None:
    names = ["gpu3", "gpu99999999999999999999", "gpu-5", "gpuinf", "gpu3000000000", "gpu7"]
    f = write_job_log(tmp_path / "cluster_job_log", [one_job(i, g) for i, g in enumerate(names)])
    out = rejected(ingest(store_dir, f), f, 2, 4)
    assert out["rejected"] == 4
    assert rejects(store_dir) == [  # one job per line of the file
        (2, "GPU index '99999999999999999999' out of range (0 to 1,023) in attempts[0].detail"),
        (3, "GPU name 'gpu-5' in attempts[0].detail is not gpu<N>"),
        (4, "GPU name 'gpuinf' in attempts[0].detail is not gpu<N>"),
        (5, "GPU index '3000000000' out of range (0 to 1,023) in attempts[0].detail"),
    ]
    assert q(store_dir, "SELECT job_id, gpu_idx FROM placements ORDER BY 1") == [
        ("application_7_0", 3),
        ("application_7_5", 7),
    ]


def test_job_log_year_9999(tmp_path: Path, store_dir: Path) -> None:
    jobs = [one_job(0), one_job(1, submitted="9999-12-31 23:59:59"), one_job(2)]
    jobs[2]["attempts"][0]["end_time"] = "9999-12-31 23:00:00"
    f = write_job_log(tmp_path / "cluster_job_log", jobs)
    out = rejected(ingest(store_dir, f), f, 2, 2)
    assert out["rejected"] == 2
    assert rejects(store_dir) == [
        (2, "time '9999-12-31 23:59:59' out of range (1970-01-01 to 2200-01-01) in submitted_time"),
        (
            3,
            "time '9999-12-31 23:00:00' out of range (1970-01-01 to 2200-01-01) in "
            "attempts[0].end_time",
        ),
    ]
    assert q(store_dir, "SELECT job_id FROM jobs") == [("application_7_0",)]


def test_job_list_dates_and_durations_out_of_range(tmp_path: Path, store_dir: Path) -> None:
    f = tmp_path / "philly.csv"  # Pollux's layout
    f.write_text(
        "timestamp,duration,num_gpus,gpu_time,cluster\n"
        "2017-10-01 10:00:00,100,1,100,vc1\n"
        "9999-12-31 23:59:59,100,1,100,vc1\n"  # 3: year 9999 (tz conversion traceback before)
        "2017-10-01 10:00:00,1e23,1,1e23,vc1\n"  # 4: accepted before, then replay crashed
        "2017-10-01 10:00:00,-5,1,0,vc1\n"  # 5
        "1960-01-01 00:00:00,100,1,100,vc1\n"  # 6: before 1970
        "2017-10-01 11:00:00,7200,2,14400,vc1\n"
    )
    out = rejected(ingest(store_dir, f), f, 3, 4)
    assert out["rejected"] == 4
    assert rejects(store_dir) == [
        (3, "bad row: submit time '9999-12-31 23:59:59' out of range (1970-01-01 to 2200-01-01)"),
        (4, "bad row: duration (s) '1e23' out of range (0 to 1e10)"),
        (5, "bad row: duration (s) '-5' out of range (0 to 1e10)"),
        (6, "bad row: submit time '1960-01-01 00:00:00' out of range (1970-01-01 to 2200-01-01)"),
    ]
    assert q(store_dir, "SELECT duration_s FROM attempts ORDER BY 1") == [(100.0,), (7200.0,)]
    # The store replays (a duration of 1e23 s made replay's BIGINT microseconds overflow).
    replays(store_dir, tmp_path)


def test_job_list_relative_time_beyond_2200_from_origin(tmp_path: Path, store_dir: Path) -> None:
    f = tmp_path / "arrivals.csv"
    # 6e9 s from the 2017-10-01 origin is in 2207; 1e9 s is in 2049.
    f.write_text("arrival time (sec),duration (sec),size\n1e9,60,1\n6e9,60,1\n")
    out = rejected(ingest(store_dir, f), f, 3, 1)
    assert rejects(store_dir) == [
        (
            3,
            "bad row: submit time '6e9' out of range (1970-01-01 to 2200-01-01) (counted from "
            "--origin)",
        )
    ]
    assert out["rejected"] == 1
    assert q(store_dir, "SELECT year(submit_time) FROM jobs") == [(2049,)]


def test_gavel_durations_out_of_range(tmp_path: Path, store_dir: Path) -> None:
    trace = tmp_path / "t.trace"
    trace.write_text(
        "A3C\tpython3 main.py\t--max_steps\t0\t1100\t0\t1\n"  # 1100 / 11 = 100 s
        "A3C\tpython3 main.py\t--max_steps\t0\t1e23\t0\t1\n"  # 1e23 / 11 s: out of range
        "A3C\tpython3 main.py\t--max_steps\t0\t22\t5\t1\n"  # 2 s
    )
    thr = tmp_path / "thr.json"
    thr.write_text('{"v100": {"(\'A3C\', 1)": {"null": 11.0}}}')
    out = rejected(ingest(store_dir, trace, "--gavel-throughputs", thr), trace, 2, 1)
    assert out["rejected"] == 1
    assert rejects(store_dir) == [
        (
            2,
            "duration (s) '9.09090909090909e+21' out of range (0 to 1e10) (total_steps 1e+23 / throughput)",
        )
    ]
    assert q(store_dir, "SELECT duration_s FROM attempts ORDER BY 1") == [(2.0,), (100.0,)]
    replays(store_dir, tmp_path)


def replays(store: Path, tmp_path: Path) -> None:
    """``replay`` runs on the store (with a machine list of two 8-GPU machines)."""
    ml = write_machine_list(
        tmp_path / "cluster_machine_list", [("m1", 8, "24GB"), ("m2", 8, "24GB")]
    )
    ok(ingest(store, ml))
    r = CliRunner().invoke(main, ["replay", "--store", str(store), "--policy", "philly"])
    assert r.exit_code == 0, r.output


def test_yarn_resources_attempts_and_dates_out_of_range(tmp_path: Path, store_dir: Path) -> None:
    app = "application_1637633166384_0001"
    cont = "container_1637633166384_0001_01_00000{}"
    assigned = (
        "scheduler.SchedulerNode: Assigned container {c} of capacity "
        "<memory:2048, vCores:1, yarn.io/gpu: {g}> on host m1:45454, which has 1 container, "
        "<memory:2048, vCores:1, yarn.io/gpu: {g}> used and "
        "<memory:0, vCores:0, yarn.io/gpu: 0> available after allocation"
    )
    lines = [
        rm_line(
            "2021-11-23 10:00:00,000", f"rmapp.RMAppImpl: {app} State change from NEW to NEW_SAVING"
        ),
        rm_line(
            "9999-12-31 10:00:00,010",
            f"rmapp.RMAppImpl: {app} State change from NEW_SAVING to SUBMITTED",
        ),
        rm_line("2021-11-23 10:00:01,000", assigned.format(c=cont.format(1), g=2)),
        rm_line("2021-11-23 10:00:01,100", assigned.format(c=cont.format(2), g=3000000000)),
        rm_line(
            "2021-11-23 10:00:01,200",
            "rmapp.attempt.RMAppAttemptImpl: appattempt_1637633166384_0001_99999999999999 "
            "State change from NEW to SUBMITTED",
        ),
        rm_line(
            "2021-11-23 10:00:02,000",
            f"rmapp.RMAppImpl: {app} State change from NEW_SAVING to SUBMITTED",
        ),
    ]
    log = tmp_path / "yarn-rm.log"
    log.write_text("\n".join(lines) + "\n")
    out = rejected(ingest(store_dir, log), log, 2, 3)
    assert out["rejected"] == 3
    assert rejects(store_dir) == [
        (2, "time '9999-12-31T10:00:00.010' out of range (1970-01-01 to 2200-01-01)"),
        (4, "yarn.io/gpu: GPUs of a machine '3000000000' out of range (0 to 1,024)"),
        (5, "attempt: attempt number '99999999999999' out of range (0 to 1,000,000)"),
    ]
    # The good lines are kept: the app submitted at line 1, its container with 2 GPUs.
    assert q(store_dir, "SELECT job_id, epoch(submit_time) FROM jobs") == [
        (app, 1637690400.0)  # NEW -> NEW_SAVING at 2021-11-23 10:00:00 PST = 18:00 UTC
    ]
    assert q(store_dir, "SELECT count(*) FROM placements") == [(2,)]


def test_ganglia_tn_out_of_range(tmp_path: Path, store_dir: Path) -> None:
    t0 = 1507014480  # 2017-10-03 07:08:00 UTC
    f = tmp_path / "gmond.xml"
    f.write_text(
        '<?xml version="1.0"?>\n<GANGLIA_XML VERSION="3.7.2" SOURCE="gmond">\n'
        f'<CLUSTER NAME="c" LOCALTIME="{t0}">\n<HOST NAME="m1" REPORTED="{t0}" TN="0">\n'
        '<METRIC NAME="gpu0_util" VAL="50" TN="99999999999999999999999"/>\n'
        '<METRIC NAME="gpu1_util" VAL="60" TN="10"/>\n'
        '<METRIC NAME="gpu99999_util" VAL="70" TN="10"/>\n'  # GPU index beyond any machine
        "</HOST>\n</CLUSTER>\n</GANGLIA_XML>\n"
    )
    out = rejected(ingest(store_dir, f), f, None, 2)
    assert out["rejected"] == 2
    assert rejects(store_dir) == [
        (None, "1 samples of m1/gpu0_util: time out of range (1970-01-01 to 2200-01-01)"),
        (
            None,
            "1 samples of m1/gpu99999_util: GPU index of the metric name out of range (0 to 1,023)",
        ),
    ]
    # gpu1 measured at t0 - 10 s: minute 07:07.
    assert q(store_dir, "SELECT gpu_idx, util, epoch(time) FROM gpu_util") == [(1, 60.0, t0 - 60)]


def test_framework_step_counters_and_dates_out_of_range(tmp_path: Path, store_dir: Path) -> None:
    log = tmp_path / "framework" / "application_1_0001" / "attempt_0" / "stdout.txt"
    log.parent.mkdir(parents=True)
    log.write_text(
        "INFO:tensorflow:loss = 2.5, step = 1\n"
        "INFO:tensorflow:loss = 2.4, step = 99999999999999999999999\n"  # 2: overflowed int64
        "INFO:tensorflow:loss = 2.3, step = 3000000000000\n"  # 3: above 1e12
        "9999-12-31 10:00:00 INFO:tensorflow:loss = 2.2, step = 4\n"  # 4: tz traceback before
        "Epoch: [99999999999][ 1/99999999999]\tLoss 1.0 (1.0)\n"  # 5: epoch x iterations > 1e12
        "INFO:tensorflow:loss = 2.1, step = 6\n"
    )
    out = rejected(ingest(store_dir, log, "--timezone", "UTC"), log, 2, 4)
    assert out["rejected"] == 4
    assert rejects(store_dir) == [
        (2, "progress line: step or epoch counter out of range (0 to 1e12)"),
        (3, "progress line: step or epoch counter out of range (0 to 1e12)"),
        (4, "progress line: time out of range (1970-01-01 to 2200-01-01)"),
        (5, "progress line: step or epoch counter out of range (0 to 1e12)"),
    ]
    assert q(store_dir, "SELECT epoch, loss, line_no FROM epochs ORDER BY line_no") == [
        (1, 2.5, 1),
        (6, 2.1, 6),
    ]


def test_framework_counters_negative_infinite_or_fractional_are_rejects(
    tmp_path: Path, store_dir: Path
) -> None:
    # Each shape's counter as a sign, inf, nan or a fraction: before, the counter's pattern
    # (digits only) did not match and the line was passed over without a reject (and
    # "step = 1.5" was read as step 1).
    log = tmp_path / "framework" / "application_1_0002" / "attempt_0" / "stdout.txt"
    log.parent.mkdir(parents=True)
    log.write_text(
        "INFO:tensorflow:loss = 2.5, step = 1\n"
        "INFO:tensorflow:loss = 2.4, step = -5\n"  # 2
        "INFO:tensorflow:global step inf: loss = 2.3\n"  # 3
        "INFO:tensorflow:loss = 2.2, step = 1.5\n"  # 4
        "iteration -3/ 1000 | lm loss: 1.2E+01 |\n"  # 5
        "Epoch: [1][ -1/100]\tLoss 1.0 (1.0)\n"  # 6
        "Epoch[nan] Train-cross-entropy=1.2\n"  # 7
        "INFO:tensorflow:loss = 2.1, step = 8.\n"  # a sentence's dot: step 8
    )
    r = ingest(store_dir, log, "--timezone", "UTC", "--max-rejects", "6")
    out = ok(r)
    assert out["rejected"] == 6
    counter = "progress line: step or epoch counter out of range (0 to 1e12)"
    assert rejects(store_dir) == [(n, counter) for n in (2, 3, 4, 5, 6, 7)]
    assert q(store_dir, "SELECT epoch, loss, line_no FROM epochs ORDER BY line_no") == [
        (1, 2.5, 1),
        (8, 2.1, 8),
    ]
    # Without --max-rejects, the default 0: exit 1 naming the first.
    again = ingest(tmp_path / "s2", log, "--timezone", "UTC")
    assert one_error_line(again, log, 2).startswith(f"error: {log}:2: {counter} (6 rows rejected")
