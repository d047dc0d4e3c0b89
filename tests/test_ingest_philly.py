"""Ingest of the published Philly trace: every quirk of formats.md §1, through the real CLI."""

from __future__ import annotations

import datetime as dt
import gzip
import json
import tarfile
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from philly_analyze.cli import main
from philly_analyze.store import Store
from tests.philly_files import (
    attempt,
    gpu_row,
    job,
    write_gpu_util,
    write_job_log,
    write_machine_list,
)
from tests.store_query import q  # plain duckdb, read-only, as any user would

UTC = dt.UTC


def ingest(*args: str | Path) -> Result:
    result = CliRunner().invoke(main, ["ingest", *map(str, args)])
    return result


def utc(y: int, mo: int, d: int, h: int = 0, mi: int = 0, s: int = 0) -> dt.datetime:
    return dt.datetime(y, mo, d, h, mi, s, tzinfo=UTC)


# ---------------------------------------------------------------------------- machine list
def test_machine_list_spaces_and_listed_vs_observed(tmp_path: Path, store_dir: Path) -> None:
    d = tmp_path / "trace"
    d.mkdir()
    write_machine_list(
        d / "cluster_machine_list", [("m50", 8, "24GB"), ("m51", 2, "12GB"), ("m52", 2, "12GB")]
    )
    # An 8-GPU job on m51, which the list says has 2 GPUs (the real trace has this).
    write_job_log(
        d / "cluster_job_log",
        [
            job(
                "application_1_1",
                "2017-10-01 10:00:00",
                [attempt("2017-10-01 10:00:30", "2017-10-01 11:00:30", {"m51": list(range(8))})],
            )
        ],
    )
    r = ingest(d, "--store", store_dir)
    assert r.exit_code == 0, r.output
    rows = q(
        store_dir,
        "SELECT machine_id, num_gpus, listed_num_gpus, observed_num_gpus, gpu_mem_gb FROM machines ORDER BY 1",
    )
    assert rows == [
        ("m50", 8, 8, None, 24.0),
        ("m51", 8, 2, 8, 12.0),  # analyses use 8: the scheduler handed out gpu7
        ("m52", 2, 2, None, 12.0),
    ]


# ---------------------------------------------------------------------------- job log
def test_job_log_quirks(tmp_path: Path, store_dir: Path) -> None:
    jobs = [
        # Two attempts: the first failed and was retried.
        job(
            "application_1_1",
            "2017-10-07 01:11:39",
            [
                attempt("2017-10-07 01:12:09", "2017-10-07 01:13:23", {"m1": [0, 1, 2, 3]}),
                attempt("2017-10-07 01:13:30", "2017-10-09 06:53:12", {"m1": [0, 1], "m2": [4, 5]}),
            ],
        ),
        # A last attempt without an end, given as the string "None", in a job with a final
        # status: it ended, when is not recorded (not running: docs/analyses.md).
        job(
            "application_1_2",
            "2017-10-08 00:00:00",
            [attempt("2017-10-08 00:10:00", "None", {"m3": [0]})],
            "Killed",
        ),
        # JSON null and empty-string end times.
        job(
            "application_1_3",
            "2017-10-08 00:00:00",
            [attempt("2017-10-08 00:01:00", None, {"m3": [1]})],
            "Failed",
        ),
        job(
            "application_1_4",
            "2017-10-08 00:00:00",
            [attempt("2017-10-08 00:02:00", "", {"m3": [1]})],
            "Pass",
        ),
        # No attempts at all: key missing, empty list, null.
        job("application_1_5", "2017-10-08 00:00:00", None, "Failed"),
        job("application_1_6", "2017-10-08 00:00:00", [], "Killed"),
        {**job("application_1_7", "None", None, "Failed"), "attempts": None},
    ]
    write_job_log(tmp_path / "cluster_job_log", jobs, pretty=True)
    r = ingest(tmp_path / "cluster_job_log", "--store", store_dir)
    assert r.exit_code == 0, r.output
    got = {
        row[0]: row[1:]
        for row in q(
            store_dir,
            """
        SELECT job_id, status, num_gpus, num_attempts, submit_time, first_start, last_end,
               queue_delay_s, run_time_s, gpu_time_s, flags FROM jobs""",
        )
    }
    # 2017-10-07 01:11:39 PDT = 08:11:39 UTC. Delay 30 s. Run 01:12:09 -> 10-09 06:53:12.
    s1, e1 = utc(2017, 10, 7, 8, 12, 9), utc(2017, 10, 9, 13, 53, 12)
    assert got["application_1_1"] == (
        "passed",
        4,
        2,
        utc(2017, 10, 7, 8, 11, 39),
        s1,
        e1,
        30.0,
        (e1 - s1).total_seconds(),
        # attempt 0: 74 s x 4 GPUs; attempt 1: (01:13:30 -> 10-09 06:53:12) x 4 GPUs
        74 * 4 + (utc(2017, 10, 9, 13, 53, 12) - utc(2017, 10, 7, 8, 13, 30)).total_seconds() * 4,
        None,
    )
    assert got["application_1_2"][:3] == ("killed", 1, 1)
    assert got["application_1_2"][5] is None  # end not recorded: no last_end
    assert got["application_1_2"][8] is None  # so its GPU time is unknown, not 0
    assert got["application_1_2"][9] == ["end_unknown"]
    assert got["application_1_3"][5] is None and got["application_1_4"][5] is None
    for jid in ("application_1_5", "application_1_6", "application_1_7"):
        assert got[jid][2] == 0  # no attempts
        assert "no_attempts" in got[jid][9]
    assert got["application_1_7"][3] is None and "no_submit" in got["application_1_7"][9]
    assert got["application_1_5"][0] == "unsuccessful"
    outcomes = q(
        store_dir, "SELECT job_id, attempt_idx, outcome, num_machines FROM attempts ORDER BY 1, 2"
    )
    assert outcomes == [
        ("application_1_1", 0, "failed", 1),
        ("application_1_1", 1, "passed", 2),
        # No end, but the job's status gives the last attempt's outcome (not "running").
        ("application_1_2", 0, "killed", 1),
        ("application_1_3", 0, "failed", 1),
        ("application_1_4", 0, "passed", 1),
    ]
    assert q(store_dir, "SELECT count(*) FROM placements") == [(4 + 4 + 3,)]


def test_fall_back_hour_keeps_each_job_in_order(tmp_path: Path, store_dir: Path) -> None:
    # 2017-11-05 01:00-01:59 happens twice in Los Angeles (PDT then PST).
    jobs = [
        # Submitted 01:50 (first occurrence, 08:50 UTC), started "01:10": only the second
        # occurrence (09:10 UTC) comes after the submission.
        job(
            "application_2_1",
            "2017-11-05 01:50:00",
            [attempt("2017-11-05 01:10:00", "2017-11-05 03:00:00", {"m1": [0]})],
        ),
        # Both in the first occurrence, already in order: kept as daylight time.
        job(
            "application_2_2",
            "2017-11-05 01:05:00",
            [attempt("2017-11-05 01:06:00", "2017-11-05 01:20:00", {"m1": [1]})],
        ),
    ]
    write_job_log(tmp_path / "cluster_job_log", jobs)
    assert ingest(tmp_path / "cluster_job_log", "--store", store_dir).exit_code == 0
    rows = dict(
        (r[0], r[1:])
        for r in q(store_dir, "SELECT job_id, submit_time, first_start, last_end FROM jobs")
    )
    assert rows["application_2_1"] == (
        utc(2017, 11, 5, 8, 50),
        utc(2017, 11, 5, 9, 10),
        utc(2017, 11, 5, 11, 0),
    )
    assert rows["application_2_2"] == (
        utc(2017, 11, 5, 8, 5),
        utc(2017, 11, 5, 8, 6),
        utc(2017, 11, 5, 8, 20),
    )


# ---------------------------------------------------------------------------- util files
def test_gpu_util_trailing_comma_na_and_zone_suffixes(tmp_path: Path, store_dir: Path) -> None:
    f = write_gpu_util(
        tmp_path / "cluster_gpu_util",
        [
            gpu_row(
                "2017-10-03 00:08:00 PDT",
                "m29",
                [
                    "60.8",
                    "99.366666667",
                    "100.0",
                    "63.333333333",
                    "100.0",
                    "100.0",
                    "100.0",
                    "100.0",
                ],
            ),
            gpu_row("2017-11-05 01:08:00 PDT", "m1", ["1.5", "NA"]),  # gpu1 offline
            gpu_row("2017-11-05 01:08:00 PST", "m1", ["2.5", ""]),  # same wall clock, an hour later
        ],
    )
    r = ingest(f, "--store", store_dir)
    assert r.exit_code == 0, r.output
    rows = q(
        store_dir,
        "SELECT time, machine_id, gpu_idx, util FROM gpu_util WHERE machine_id = 'm1' ORDER BY time",
    )
    assert rows == [(utc(2017, 11, 5, 8, 8), "m1", 0, 1.5), (utc(2017, 11, 5, 9, 8), "m1", 0, 2.5)]
    assert (
        q(
            store_dir,
            "SELECT count(*), min(util), max(util) FROM gpu_util WHERE machine_id = 'm29'",
        )[0][0]
        == 8
    )
    assert q(
        store_dir, "SELECT num_gpus, observed_num_gpus FROM machines WHERE machine_id = 'm29'"
    ) == [(8, 8)]
    assert q(store_dir, "SELECT count(*) FROM rejects") == [(0,)]


def test_gpu_util_is_stored_wide_and_read_long(tmp_path: Path, store_dir: Path) -> None:
    """Philly's rows are stored one per machine-minute and the gpu_util view unpivots them;
    counts (summary, _files, has_rows) are long rows, and NaN is not a value."""
    f = write_gpu_util(
        tmp_path / "cluster_gpu_util",
        [
            gpu_row(
                "2017-10-03 00:08:00 PDT", "m2", ["10", "NaN", "nan", "NA", "", "50", "60", "7"]
            ),
            gpu_row("2017-10-03 00:09:00 PDT", "m2", ["NA"] * 8),  # no value: no gpu_util row
            gpu_row("2017-10-31 23:59:00 PDT", "m3", ["1", "2"]),  # UTC: November
        ],
    )
    r = CliRunner().invoke(main, ["ingest", str(f), "--store", str(store_dir), "--json"])
    assert r.exit_code == 0, r.output
    assert q(
        store_dir, "SELECT gpu_idx, util FROM gpu_util WHERE machine_id = 'm2' ORDER BY 1"
    ) == [
        (0, 10.0),
        (5, 50.0),
        (6, 60.0),
        (7, 7.0),
    ]
    assert q(store_dir, "SELECT count(*) FROM gpu_util") == [(6,)]
    summary = json.loads(r.stdout)
    assert summary["rows_added"]["gpu_util"] == summary["rows_in_store"]["gpu_util"] == 6
    # Physically: three wide rows in monthly partitions, listed as six gpu_util rows.
    files = sorted(
        p.relative_to(store_dir).parts[:3] for p in (store_dir / "parquet").rglob("*.parquet")
    )
    assert ("parquet", "gpu_util_wide", "month=2017-10") in files
    assert ("parquet", "gpu_util_wide", "month=2017-11") in files
    assert not any(part[1] == "gpu_util" for part in files)
    assert q(store_dir, "SELECT count(*) FROM internal.gpu_util_wide_all") == [(3,)]
    with Store(store_dir, read_only=True) as s:
        assert s.has_rows("gpu_util")
        assert s.row_counts()["gpu_util"] == 6
        assert "gpu_util_wide" not in s.row_counts()
    assert q(store_dir, "SELECT machine_id, observed_num_gpus FROM machines ORDER BY 1") == [
        ("m2", 8),
        ("m3", 2),
    ]


def test_gpu_util_with_more_gpus_than_the_wide_form(tmp_path: Path, store_dir: Path) -> None:
    """A header with gpu0..gpu15 is unpivoted at ingest instead (column position = index)."""
    header = "time,machineId," + ",".join(f"gpu{i}_util" for i in range(16)) + "\n"
    values = ["NA"] * 16
    values[0], values[9], values[15] = "5", "9.5", "15"
    f = tmp_path / "cluster_gpu_util"
    f.write_text(header + "2017-10-03 00:08:00 PDT,m7," + ",".join(values) + ",\n")
    r = ingest(f, "--store", store_dir)
    assert r.exit_code == 0, r.output
    assert q(store_dir, "SELECT gpu_idx, util FROM gpu_util ORDER BY 1") == [
        (0, 5.0),
        (9, 9.5),
        (15, 15.0),
    ]
    assert q(store_dir, "SELECT observed_num_gpus FROM machines") == [(16,)]
    assert q(store_dir, "SELECT count(*) FROM internal.gpu_util_wide_all") == [(0,)]


def test_cpu_and_mem_util(tmp_path: Path, store_dir: Path) -> None:
    (tmp_path / "cpu").write_text(
        "time,machine_id,cpu_util\n2017-11-27 00:04:00 PST,m29,31.845\n2017-11-27 00:05:00 PST,m29,NA\n"
    )
    (tmp_path / "mem").write_text(
        "time,machine_id,mem_total,mem_free\n2017-10-03 00:06:00 PDT,m29,528272672.0,2030730.6667\n"
        "2017-10-03 00:07:00 PDT,m29,0,0\n2017-10-03 00:08:00 PDT,m29,NA,NA\n"
    )
    assert ingest(tmp_path / "cpu", tmp_path / "mem", "--store", store_dir).exit_code == 0
    assert q(store_dir, "SELECT time, machine_id, util FROM cpu_util") == [
        (utc(2017, 11, 27, 8, 4), "m29", pytest.approx(31.845))
    ]
    assert q(store_dir, "SELECT time, mem_total, mem_free FROM mem_util") == [
        (utc(2017, 10, 3, 7, 6), 528272672.0, 2030730.6667)
    ]


# ---------------------------------------------------------------------------- containers
def _five_files(d: Path) -> Path:
    d.mkdir(parents=True, exist_ok=True)
    write_machine_list(d / "cluster_machine_list", [("m1", 8, "24GB"), ("m2", 2, "12GB")])
    write_job_log(
        d / "cluster_job_log",
        [
            job(
                "application_3_1",
                "2017-10-01 10:00:00",
                [attempt("2017-10-01 10:01:00", "2017-10-01 10:03:00", {"m1": [0, 1]})],
            )
        ],
    )
    write_gpu_util(
        d / "cluster_gpu_util",
        [
            gpu_row("2017-10-01 10:01:00 PDT", "m1", ["50"] * 8),
            gpu_row("2017-10-01 10:01:00 PDT", "m2", ["5", "6"]),
        ],
    )
    (d / "cluster_cpu_util").write_text("time,machine_id,cpu_util\n2017-10-01 10:01:00 PDT,m1,20\n")
    (d / "cluster_mem_util").write_text(
        "time,machine_id,mem_total,mem_free\n2017-10-01 10:01:00 PDT,m1,100,50\n"
    )
    return d


EXPECTED_COUNTS = {
    "machines": 2,
    "jobs": 1,
    "attempts": 1,
    "placements": 2,
    "gpu_util": 10,
    "cpu_util": 1,
    "mem_util": 1,
}


def _counts(store: Path) -> dict[str, int]:
    return {t: q(store, f"SELECT count(*) FROM {t}")[0][0] for t in EXPECTED_COUNTS}


def test_detection_by_content_not_name(tmp_path: Path, store_dir: Path) -> None:
    d = _five_files(tmp_path / "t")
    for i, f in enumerate(sorted(d.iterdir())):
        f.rename(d / f"file{i}.dat")
    r = ingest(d, "--store", store_dir)
    assert r.exit_code == 0, r.output
    assert _counts(store_dir) == EXPECTED_COUNTS
    formats = {row[0] for row in q(store_dir, "SELECT format FROM ingest_log")}
    assert formats == {
        "philly_machine_list",
        "philly_job_log",
        "philly_gpu_util",
        "philly_cpu_util",
        "philly_mem_util",
    }


def test_input_format_skips_detection(tmp_path: Path, store_dir: Path) -> None:
    """--input-format NAME reads every file as NAME; --format NAME is its former spelling
    (still accepted, with a note); an unknown name is a usage error naming both kinds."""
    d = _five_files(tmp_path / "t")
    machines = d / "cluster_machine_list"
    r = ingest(machines, "--store", store_dir, "--input-format", "philly_machine_list")
    assert r.exit_code == 0, r.output
    assert q(store_dir, "SELECT format FROM ingest_log") == [("philly_machine_list",)]
    old = ingest(machines, "--store", tmp_path / "s2", "--format", "philly_machine_list")
    assert old.exit_code == 0, old.output
    assert "deprecated --format philly_machine_list: use --input-format" in old.stderr
    bad = ingest(machines, "--store", store_dir, "--format", "nope")
    assert bad.exit_code == 2
    assert (
        "'nope' is neither a summary format (table, md, html, json, csv) nor an input format"
        in bad.stderr
    )
    bad = ingest(machines, "--store", store_dir, "--input-format", "nope")
    assert bad.exit_code == 2 and "unknown input format 'nope'" in bad.stderr


def test_gz_files_and_streamed_tar_gz(tmp_path: Path) -> None:
    d = _five_files(tmp_path / "t")
    gzdir = tmp_path / "gz"
    gzdir.mkdir()
    for f in d.iterdir():
        (gzdir / (f.name + ".gz")).write_bytes(gzip.compress(f.read_bytes()))
    archive = tmp_path / "trace-data.tar.gz"
    with tarfile.open(archive, "w:gz") as tf:
        for f in sorted(d.iterdir()):
            tf.add(f, arcname=f"trace-data/{f.name}")
    for src, store in ((gzdir, tmp_path / "s1"), (archive, tmp_path / "s2")):
        r = ingest(src, "--store", store)
        assert r.exit_code == 0, r.output
        assert _counts(store) == EXPECTED_COUNTS
    names = [r[0] for r in q(tmp_path / "s2", "SELECT source FROM ingest_log ORDER BY 1")]
    assert all("trace-data.tar.gz!trace-data/cluster_" in n for n in names)
    # sha256 is of the decompressed bytes, so the .gz and the tar member agree with the file.
    import hashlib

    sha = hashlib.sha256((d / "cluster_job_log").read_bytes()).hexdigest()
    for store in (tmp_path / "s1", tmp_path / "s2"):
        assert q(store, "SELECT count(*) FROM ingest_log WHERE sha256 = ?", [sha]) == [(1,)]


# ---------------------------------------------------------------------------- idempotence
def test_reingest_changes_nothing_and_replace_rereads(tmp_path: Path, store_dir: Path) -> None:
    d = _five_files(tmp_path / "t")
    assert ingest(d, "--store", store_dir).exit_code == 0
    log1 = q(store_dir, "SELECT source, batch_id FROM ingest_log ORDER BY 1")
    r = ingest(d, "--store", store_dir)
    assert r.exit_code == 0 and "already ingested" in r.stderr
    assert _counts(store_dir) == EXPECTED_COUNTS
    assert q(store_dir, "SELECT source, batch_id FROM ingest_log ORDER BY 1") == log1
    # A copy of the same bytes under another name is recognised after reading.
    (tmp_path / "copy").write_bytes((d / "cluster_job_log").read_bytes())
    r = ingest(tmp_path / "copy", "--store", store_dir)
    assert "same content already ingested" in r.stderr
    assert _counts(store_dir) == EXPECTED_COUNTS
    r = ingest(d, "--store", store_dir, "--replace")
    assert r.exit_code == 0
    assert _counts(store_dir) == EXPECTED_COUNTS
    log2 = q(store_dir, "SELECT source, batch_id FROM ingest_log ORDER BY 1")
    assert [s for s, _ in log2] == [s for s, _ in log1]
    assert all(b1 != b2 for (_, b1), (_, b2) in zip(log1, log2, strict=True))
    # Old files were deleted: only the live ones remain on disk.
    on_disk = sorted(
        str(p.relative_to(store_dir)) for p in (store_dir / "parquet").rglob("*.parquet")
    )
    assert on_disk == sorted(r[0] for r in q(store_dir, "SELECT path FROM internal._files"))


def test_changed_file_replaces_its_previous_version(tmp_path: Path, store_dir: Path) -> None:
    f = write_job_log(
        tmp_path / "cluster_job_log", [job("application_4_1", "2017-10-01 10:00:00", [])]
    )
    assert ingest(f, "--store", store_dir).exit_code == 0
    write_job_log(
        f,
        [
            job("application_4_1", "2017-10-01 10:00:00", []),
            job("application_4_2", "2017-10-01 11:00:00", []),
        ],
    )
    assert ingest(f, "--store", store_dir).exit_code == 0
    assert q(store_dir, "SELECT count(*) FROM internal.jobs_all") == [(2,)]
    assert q(store_dir, "SELECT count(*) FROM ingest_log") == [(1,)]


# ---------------------------------------------------------------------------- bad input
def test_truncated_json_keeps_jobs_read_before(tmp_path: Path, store_dir: Path) -> None:
    f = write_job_log(
        tmp_path / "cluster_job_log",
        [job(f"application_5_{i}", "2017-10-01 10:00:00", []) for i in range(3)],
    )
    text = f.read_text()
    f.write_text(text[: text.rindex('{"status"') + 40])  # cut inside the third job (line 3)
    r = ingest(f, "--store", store_dir)
    assert r.exit_code == 1
    assert "Traceback" not in r.output + r.stderr
    err = r.stderr.strip().splitlines()[-1]
    assert err.startswith("error: ") and f"{f}:3: truncated JSON" in err
    assert q(store_dir, "SELECT job_id FROM jobs ORDER BY 1") == [
        ("application_5_0",),
        ("application_5_1",),
    ]
    assert q(store_dir, "SELECT line_no FROM rejects") == [(3,)]


def test_bad_rows_go_to_rejects_with_line_numbers(tmp_path: Path, store_dir: Path) -> None:
    f = write_gpu_util(
        tmp_path / "cluster_gpu_util",
        [
            gpu_row("2017-10-03 00:08:00 PDT", "m1", ["1", "2"]),
            "2017-10-03 00:09:00 PDT,m1,60.8,1,2\n",  # line 3: wrong number of fields
            gpu_row("2017-10-0x 00:10:00 PDT", "m1", ["1", "2"]),  # line 4: unparsable time
            gpu_row("2017-10-03 00:11:00 PDT", "m1", ["abc", "2"]),  # line 5: not a number
            gpu_row("2017-10-03 00:12:00 PDT", "m1", ["3", "4"]),
        ],
    )
    r = ingest(f, "--store", store_dir)
    assert r.exit_code == 1, r.output  # 3 rejects, beyond --max-rejects 0: the first named
    assert "3 rejected" in r.stderr
    assert r.stderr.splitlines()[-1].startswith(f"error: {f}:3: ")
    assert "(3 rows rejected in all" in r.stderr
    rej = q(store_dir, "SELECT line_no, reason FROM rejects ORDER BY 1")
    assert [x[0] for x in rej] == [3, 4, 5]
    assert "unparsable time" in rej[1][1]
    assert q(store_dir, "SELECT count(*) FROM gpu_util") == [(4,)]  # lines 2 and 6, two GPUs each

    jl = write_job_log(
        tmp_path / "cluster_job_log",
        [
            job("application_6_1", "2017-10-01 10:00:00", []),
            job("application_6_2", "yesterday", []),
            job("application_6_3", "2017-10-01 10:00:00", []),
        ],
    )
    # Only the job log's own reject counts (the gpu util's 3 are another source's).
    r = ingest(jl, "--store", store_dir, "--max-rejects", "1")
    assert r.exit_code == 0 and "1 rejected" in r.stderr
    assert q(store_dir, "SELECT line_no, reason FROM rejects WHERE source LIKE '%job_log'") == [
        (2, "unparsable time 'yesterday' in submitted_time")
    ]
    assert q(store_dir, "SELECT count(*) FROM jobs") == [(2,)]


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"", "empty file"),
        (bytes(range(256)) * 10, "binary file"),
        (b"hello, world\nthis is not a trace\n", "unrecognised format"),
    ],
)
def test_unreadable_files_fail_clearly(
    tmp_path: Path, store_dir: Path, content: bytes, message: str
) -> None:
    f = tmp_path / "input"
    f.write_bytes(content)
    r = ingest(f, "--store", store_dir)
    assert r.exit_code == 1
    assert r.stderr.strip().splitlines()[-1].startswith(f"error: {f}: {message}")
    assert "Traceback" not in r.stderr


def test_unknown_files_in_a_folder_are_listed_and_skipped(tmp_path: Path, store_dir: Path) -> None:
    d = _five_files(tmp_path / "t")
    (d / "notes.txt").write_text("a readme\n")
    (d / "image.bin").write_bytes(bytes(range(256)))
    r = ingest(d, "--store", store_dir)
    assert r.exit_code == 0
    assert "notes.txt" in r.stderr and "unrecognised format" in r.stderr
    assert "image.bin" in r.stderr and "binary file" in r.stderr
    assert _counts(store_dir) == EXPECTED_COUNTS


# ---------------------------------------------------------------------------- output
def test_json_summary_on_stdout_and_help_example(tmp_path: Path, store_dir: Path) -> None:
    d = _five_files(tmp_path / "t")
    r = ingest(d, "--store", store_dir, "--format", "json", "--quiet")
    assert r.exit_code == 0
    data = json.loads(r.stdout)
    assert data["rows_in_store"]["gpu_util"] == 10 and data["rejected"] == 0
    assert r.stderr == ""
    # --json (the former spelling) still works, with a note on stderr
    old = ingest(d, "--store", store_dir, "--json")
    assert json.loads(old.stdout)["rows_in_store"] == data["rows_in_store"]
    assert "note: deprecated --json: use --format json" in old.stderr
    h = CliRunner().invoke(main, ["ingest", "--help"])
    assert "Examples:" in h.output and "philly-analyze ingest" in h.output


def test_store_is_queryable_from_anywhere_and_after_a_move(
    tmp_path: Path, store_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    d = _five_files(tmp_path / "t")
    assert ingest(d, "--store", store_dir).exit_code == 0
    monkeypatch.chdir(tmp_path)
    assert q(store_dir, "SELECT count(*) FROM gpu_util") == [(10,)]
    moved = tmp_path / "elsewhere"
    store_dir.rename(moved)
    # Plain duckdb sees stale absolute paths until philly-analyze opens the store once...
    with Store(moved, read_only=True) as s:  # read-only open re-points views in its session
        assert s.df("SELECT count(*) AS n FROM gpu_util")["n"][0] == 10
    Store(moved).close()  # a write open fixes the catalog for everyone
    assert q(moved, "SELECT count(*) FROM gpu_util") == [(10,)]
