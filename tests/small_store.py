"""A small, fixed store made from hand-written published-format files (for `info` and the
moved-store tests). Every count below is worked out by hand in the docstring of ``write``."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner, Result

from philly_analyze.cli import main
from tests.philly_files import (
    attempt,
    gpu_row,
    job,
    write_gpu_util,
    write_job_log,
    write_machine_list,
)


def write(d: Path) -> Path:
    """Three files in ``d`` (Pacific wall-clock times; PDT = UTC-7 on 2017-10-03):

    - machine list: m1 8 GPUs, m2 2, m3 2 (12 GPUs listed).
    - job log: j1 (vc vcA, user u1) submitted 10:00, one attempt 10:05-11:05 on m1 GPUs 0-3,
      passed: 1 h x 4 GPUs = 4 GPU hours. j2 (vcA, u2) submitted 10:10, one attempt
      10:20-10:50 on m9 (a host the list does not have) GPUs 0-1, failed: 0.5 h x 2 = 1 GPU
      hour. j3 (vcB, u1) submitted 12:00, never ran, killed.
    - gpu util: m1 at 10:06 with GPUs 0-2 reporting, m2 at 10:07 with GPUs 0-2 reporting
      (3 values, the list says 2 GPUs), and one row whose time does not parse (a reject).
    """
    d.mkdir(parents=True, exist_ok=True)
    write_machine_list(
        d / "cluster_machine_list", [("m1", 8, "24GB"), ("m2", 2, "12GB"), ("m3", 2, "12GB")]
    )
    write_job_log(
        d / "cluster_job_log",
        [
            job(
                "application_1_1",
                "2017-10-03 10:00:00",
                [attempt("2017-10-03 10:05:00", "2017-10-03 11:05:00", {"m1": [0, 1, 2, 3]})],
                vc="vcA",
                user="u1",
            ),
            job(
                "application_1_2",
                "2017-10-03 10:10:00",
                [attempt("2017-10-03 10:20:00", "2017-10-03 10:50:00", {"m9": [0, 1]})],
                status="Failed",
                vc="vcA",
                user="u2",
            ),
            job("application_1_3", "2017-10-03 12:00:00", [], status="Killed", vc="vcB"),
        ],
    )
    write_gpu_util(
        d / "cluster_gpu_util",
        [
            gpu_row("2017-10-03 10:06:00 PDT", "m1", ["10.0", "20.0", "30.0"]),
            gpu_row("2017-10-03 10:07:00 PDT", "m2", ["40.0", "50.0", "60.0"]),
            gpu_row("garbage", "m1", ["1.0"]),
        ],
    )
    return d


#: ``ingest`` options accepting the one deliberate reject of ``write`` (without them, ingest
#: exits 1 naming it: test_ingest_max_rejects.py).
ACCEPT_REJECT = ("--max-rejects", "1")


def cli(*args: str | Path) -> Result:
    """Run ``philly-analyze ARGS`` in-process."""
    return CliRunner().invoke(main, [str(a) for a in args])


def make(tmp: Path, store: Path) -> Path:
    """Write the files under ``tmp/src`` and ingest them into ``store``; returns the folder."""
    src = write(tmp / "src")
    # The gpu util's unparsable time is the store's one reject (info shows it): accepted.
    r = cli("ingest", src, "--store", store, "--quiet", *ACCEPT_REJECT)
    assert r.exit_code == 0, r.output
    return src
