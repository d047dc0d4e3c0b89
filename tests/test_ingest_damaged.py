"""Damaged inputs a user meets in practice: a cut download, an impossible date, a stray quote,
a folder of symlinks. Each gives a clear message naming the file, never a traceback, and keeps
the good data."""

from __future__ import annotations

import gzip
import tarfile
from pathlib import Path

from click.testing import CliRunner, Result

from philly_analyze.cli import main
from tests.philly_files import attempt, job, write_job_log, write_machine_list
from tests.store_query import q


def ingest(*args: str | Path) -> Result:
    return CliRunner().invoke(main, ["ingest", *map(str, args)])


def _jobs(n: int) -> list[dict]:
    return [
        job(
            f"application_7_{i}",
            "2017-10-01 10:00:00",
            [attempt("2017-10-01 10:01:00", "2017-10-01 10:03:00", {"m1": [0]})],
        )
        for i in range(n)
    ]


def test_cut_gzip_job_log_names_the_file_and_keeps_what_was_read(
    tmp_path: Path, store_dir: Path
) -> None:
    # Bigger than one read of the JSON streamer (4 MB), so some jobs come before the cut.
    plain = write_job_log(tmp_path / "cluster_job_log", _jobs(40000))
    data = gzip.compress(plain.read_bytes())
    cut = tmp_path / "cluster_job_log.gz"
    cut.write_bytes(data[: len(data) // 2])
    r = ingest(cut, "--store", store_dir)
    assert r.exit_code == 1
    assert "Traceback" not in r.output and "Aborted" not in r.output
    err = r.stderr.strip().splitlines()[-1]
    assert err.startswith(f"error: {cut}") and "truncated or corrupt" in err
    # The jobs decoded before the cut are kept, as for a cut plain file.
    kept = q(store_dir, "SELECT count(*) FROM jobs")[0][0]
    assert 0 < kept < 40000


def test_cut_tar_gz_download_fails_clearly(tmp_path: Path, store_dir: Path) -> None:
    d = tmp_path / "t"
    d.mkdir()
    write_machine_list(d / "cluster_machine_list", [("m1", 8, "24GB")])
    # Incompressible-ish content so that the cut lands inside this member.
    rows = "".join(f"2017-10-01 10:{i % 60:02d}:00 PDT,m{i},{i % 97}\n" for i in range(60000))
    (d / "cluster_cpu_util").write_text("time,machine_id,cpu_util\n" + rows)
    archive = tmp_path / "trace-data.tar.gz"
    with tarfile.open(archive, "w:gz") as tf:
        for f in sorted(d.iterdir()):
            tf.add(f, arcname=f"trace-data/{f.name}")
    data = archive.read_bytes()
    archive.write_bytes(data[: len(data) * 2 // 3])
    r = ingest(archive, "--store", store_dir, "--json")
    assert r.exit_code == 1
    assert "Traceback" not in r.output + r.stderr
    statuses = {s["source"].rsplit("/", 1)[-1]: s["status"] for s in _json(r.stdout)["sources"]}
    # The member cut short is an error, not a success; the whole lines before the cut are
    # kept, and the half line at the cut is not read as a row with a cut-off value.
    assert statuses.get("cluster_cpu_util") == "error"
    kept = q(store_dir, "SELECT count(*) FROM cpu_util")[0][0]
    assert 0 < kept < 60000
    wrong = "SELECT count(*) FROM cpu_util WHERE util != CAST(substr(machine_id, 2) AS INT) % 97"
    assert q(store_dir, wrong) == [(0,)]


def _json(text: str) -> dict:
    import json

    return json.loads(text)


def test_impossible_calendar_time_is_a_rejected_row(tmp_path: Path, store_dir: Path) -> None:
    jobs = _jobs(3)
    jobs[1]["submitted_time"] = "2017-02-30 10:00:00"
    f = write_job_log(tmp_path / "cluster_job_log", jobs)
    r = ingest(f, "--store", store_dir)
    assert r.exit_code == 1, r.output  # a reject, beyond --max-rejects 0; the others kept
    assert "1 rejected" in r.stderr
    assert f"error: {f}:2: impossible time '2017-02-30 10:00:00' in submitted_time (1 row" in (
        r.stderr
    )
    assert q(store_dir, "SELECT line_no, reason FROM rejects") == [
        (2, "impossible time '2017-02-30 10:00:00' in submitted_time")
    ]
    assert q(store_dir, "SELECT count(*) FROM jobs") == [(2,)]


def test_gpus_must_be_a_list(tmp_path: Path, store_dir: Path) -> None:
    jobs = _jobs(2)
    jobs[0]["attempts"][0]["detail"][0]["gpus"] = "gpu0"
    f = write_job_log(tmp_path / "cluster_job_log", jobs)
    r = ingest(f, "--store", store_dir, "--max-rejects", "1")  # the bad job accepted
    assert r.exit_code == 0 and "1 rejected" in r.stderr
    assert q(store_dir, "SELECT count(*) FROM jobs") == [(1,)]


def test_stray_quote_in_a_utilization_csv_loses_nothing_else(
    tmp_path: Path, store_dir: Path
) -> None:
    rows = [f"2017-10-01 10:{m:02d}:00 PDT,m1,{m}\n" for m in range(50)]
    rows[3] = '2017-10-01 10:03:00 PDT,"m5,31.8\n'
    f = tmp_path / "cluster_cpu_util"
    f.write_text("time,machine_id,cpu_util\n" + "".join(rows))
    r = ingest(f, "--store", store_dir)
    assert r.exit_code == 0, r.output
    # Every m1 row survives; a quote in these never-quoted files is just a character.
    assert q(store_dir, "SELECT count(*) FROM cpu_util WHERE machine_id = 'm1'") == [(49,)]


def test_symlinked_files_in_a_folder_are_read(tmp_path: Path, store_dir: Path) -> None:
    (tmp_path / "data").mkdir()
    real = write_job_log(tmp_path / "data" / "cluster_job_log", _jobs(2))
    linked = tmp_path / "links"
    linked.mkdir()
    (linked / "cluster_job_log").symlink_to(real)
    r = ingest(linked, "--store", store_dir)
    assert r.exit_code == 0, r.output
    assert q(store_dir, "SELECT count(*) FROM jobs") == [(2,)]
