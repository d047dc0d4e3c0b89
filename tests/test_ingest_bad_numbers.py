"""More of issue 14's "Bad input" list, through the real CLI: `inf`, negative and huge numbers
in Pollux job lists, YARN resources and Ganglia TN, and a 0xff byte past the first 8 KB of a
Gavel throughputs JSON. A bad value rejects its row (``rejects``: the line, or the series, and
the reason), the good rows are kept, exit 0; never a traceback and never a value read as
something else without a word (the cases in ``test_ingest_bad_input.py`` cover the others)."""

from __future__ import annotations

import json
from pathlib import Path

from tests.cli_ingest import ingest, ok, rejected, rejects, rm_line
from tests.store_query import q


def test_pollux_list_with_inf_nan_negative_and_huge_gpu_counts(
    tmp_path: Path, store_dir: Path
) -> None:
    f = tmp_path / "philly.csv"  # Pollux's layout
    f.write_text(
        "timestamp,duration,num_gpus,gpu_time,cluster\n"
        "2017-10-01 10:00:00,100,1,100,vc1\n"
        "2017-10-01 10:00:00,100,inf,100,vc1\n"  # 3
        "2017-10-01 10:00:00,100,-inf,100,vc1\n"  # 4
        "2017-10-01 10:00:00,100,nan,100,vc1\n"  # 5
        "2017-10-01 10:00:00,100,-5,100,vc1\n"  # 6
        "2017-10-01 10:00:00,100,1e400,100,vc1\n"  # 7
        "2017-10-01 10:00:00,100,99999999999999999999999,100,vc1\n"  # 8
        "2017-10-01 10:00:00,inf,1,100,vc1\n"  # 9
        "2017-10-01 11:00:00,200,2,400,vc1\n"
    )
    out = rejected(ingest(store_dir, f, "--timezone", "UTC"), f, 3, 7)
    assert out["rejected"] == 7
    assert rejects(store_dir) == [
        (3, "bad row: GPUs 'inf' is not a whole number"),
        (4, "bad row: GPUs '-inf' is not a whole number"),
        (5, "bad row: GPUs 'nan' is not a whole number"),
        (6, "bad row: GPUs of a job '-5' out of range (0 to 1,000,000)"),
        (7, "bad row: GPUs '1e400' is not a whole number"),
        (8, "bad row: GPUs of a job '99999999999999999999999' out of range (0 to 1,000,000)"),
        (9, "bad row: duration 'inf' is not a number"),
    ]
    assert q(store_dir, "SELECT num_gpus, epoch(submit_time) FROM jobs ORDER BY 2") == [
        (1, 1506852000.0),  # 2017-10-01 10:00 UTC
        (2, 1506855600.0),
    ]


def test_yarn_gpu_counts_that_are_not_whole_numbers(tmp_path: Path, store_dir: Path) -> None:
    """``yarn.io/gpu: -1`` or ``inf`` was read as "an RM that counts no GPUs" (unknown GPUs,
    no reject): the container's GPUs were lost without a word. Now the line is rejected."""
    app = "application_1637633166384_0001"

    def assigned(n: int, memory: str, gpus: str) -> str:
        return rm_line(
            f"2021-11-23 10:00:0{n},000",
            f"scheduler.SchedulerNode: Assigned container container_1637633166384_0001_01_00000"
            f"{n} of capacity <memory:{memory}, vCores:1, yarn.io/gpu: {gpus}> on host m1:45454, "
            "which has 1 container, <memory:2048, vCores:1, yarn.io/gpu: 2> used and "
            "<memory:0, vCores:0, yarn.io/gpu: 0> available after allocation",
        )

    lines = [
        rm_line(
            "2021-11-23 10:00:00,000", f"rmapp.RMAppImpl: {app} State change from NEW to NEW_SAVING"
        ),
        assigned(1, "2048", "2"),  # 2
        assigned(2, "2048", "-1"),  # 3
        assigned(3, "2048", "inf"),  # 4
        assigned(4, "2048", "1.5"),  # 5
        assigned(5, "inf", "1"),  # 6
        assigned(6, "-2048", "1"),  # 7
        assigned(7, "2048", "1"),  # 8
    ]
    log = tmp_path / "yarn-rm.log"
    log.write_text("\n".join(lines) + "\n")
    out = rejected(ingest(store_dir, log, "--timezone", "UTC"), log, 3, 5)
    cap = "<memory:{}, vCores:1, yarn.io/gpu: {}>"
    assert rejects(store_dir) == [
        (3, f"yarn.io/gpu in '{cap.format(2048, -1)}' is not a whole number"),
        (4, f"yarn.io/gpu in '{cap.format(2048, 'inf')}' is not a whole number"),
        (5, f"yarn.io/gpu in '{cap.format(2048, 1.5)}' is not a whole number"),
        (6, f"unparsable resource '{cap.format('inf', 1)}'"),
        (7, f"unparsable resource '{cap.format(-2048, 1)}'"),
    ]
    assert out["rejected"] == 5
    # The good containers: 2 GPUs (line 2) and 1 GPU (line 8).
    assert q(store_dir, "SELECT job_id, num_gpus FROM jobs") == [(app, 3)]


def test_ganglia_tn_inf_nan_negative(tmp_path: Path, store_dir: Path) -> None:
    """A gmond TN that is not a whole number of seconds >= 0 was read as 0: the sample landed
    at LOCALTIME, or after it, without a word. Now the sample is rejected, by series."""
    t0 = 1507014480  # 2017-10-03 07:08:00 UTC
    f = tmp_path / "gmond.xml"
    f.write_text(
        '<?xml version="1.0"?>\n<GANGLIA_XML VERSION="3.7.2" SOURCE="gmond">\n'
        f'<CLUSTER NAME="c" LOCALTIME="{t0}">\n<HOST NAME="m1" REPORTED="{t0}" TN="0">\n'
        '<METRIC NAME="gpu0_util" VAL="50" TN="inf"/>\n'
        '<METRIC NAME="gpu1_util" VAL="60" TN="-5"/>\n'
        '<METRIC NAME="gpu2_util" VAL="70" TN="1e400"/>\n'
        '<METRIC NAME="gpu3_util" VAL="80" TN="nan"/>\n'
        '<METRIC NAME="gpu4_util" VAL="90" TN="10"/>\n'
        '<METRIC NAME="gpu5_util" VAL="95"/>\n'  # no TN: read just now
        "</HOST>\n</CLUSTER>\n</GANGLIA_XML>\n"
    )
    out = rejected(ingest(store_dir, f), f, None, 4)
    assert out["rejected"] == 4
    why = "is not a whole number of seconds >= 0"
    assert rejects(store_dir) == [
        (None, f"1 samples of m1/gpu0_util: TN 'inf' {why}"),
        (None, f"1 samples of m1/gpu1_util: TN '-5' {why}"),
        (None, f"1 samples of m1/gpu2_util: TN '1e400' {why}"),
        (None, f"1 samples of m1/gpu3_util: TN 'nan' {why}"),
    ]
    # gpu4 read 10 s before t0: minute 07:07; gpu5 at t0: minute 07:08.
    assert q(store_dir, "SELECT gpu_idx, util, epoch(time) FROM gpu_util ORDER BY 1") == [
        (4, 90.0, t0 - 60),
        (5, 95.0, t0),
    ]


def test_gavel_throughputs_with_a_0xff_byte_past_its_first_8_kb(
    tmp_path: Path, store_dir: Path
) -> None:
    """The byte is in a job type's name (a JSON string): decoded as U+FFFD, the file is read;
    it is counted as damage in the summary, and the durations of the trace are computed."""
    pad = {f"('Pad{i}', 1)": {"null": 1.0} for i in range(400)}
    body = json.dumps({"v100": pad})[:-2].encode()
    thr = tmp_path / "in" / "thr.json"
    thr.parent.mkdir()
    thr.write_bytes(body + b', "(\'B\xff\', 1)": {"null": 1.0}, "(\'A3C\', 1)": {"null": 11.0}}}')
    assert thr.read_bytes().index(b"\xff") > 8192
    trace = tmp_path / "in" / "t.trace"
    trace.write_text(
        "A3C\tpython3 main.py\t--max_steps\t0\t1100\t0\t1\n"  # 1100 / 11 = 100 s
        "A3C\tpython3 main.py\t--max_steps\t0\t22\t5\t1\n"  # 2 s
    )
    for args in ([trace, "--gavel-throughputs", thr], [tmp_path / "in"]):
        out = ok(ingest(store_dir, *args, "--replace"))
        assert out["rejected"] == 0
        assert q(store_dir, "SELECT duration_s FROM attempts ORDER BY 1") == [(2.0,), (100.0,)]
