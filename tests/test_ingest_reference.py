"""The store's derived job columns agree with an independent computation of the official
notebook's definitions (num_gpus from the first attempt; queueing delay = first attempt start
- submit; run time = last attempt end - first attempt start) on random traces."""

from __future__ import annotations

import datetime as dt
import random
from pathlib import Path
from zoneinfo import ZoneInfo

import duckdb
import pytest
from click.testing import CliRunner

from philly_analyze.cli import main
from tests.philly_files import attempt, job, write_job_log

LA = ZoneInfo("America/Los_Angeles")


def _random_trace(seed: int, n: int) -> list[dict]:
    rng = random.Random(seed)
    base = dt.datetime(2017, 8, 7)
    jobs = []
    for i in range(n):
        submit = base + dt.timedelta(seconds=rng.randrange(0, 100 * 86400))
        t = submit
        atts = []
        for _ in range(rng.choice([0, 1, 1, 1, 2, 3])):
            t += dt.timedelta(seconds=rng.randrange(0, 20000))
            start = t
            t += dt.timedelta(seconds=rng.randrange(1, 200000))
            n_machines = rng.choice([1, 1, 2, 4])
            per = rng.choice([1, 2, 4, 8]) if n_machines == 1 else 8
            detail = {f"m{rng.randrange(500)}_{k}": list(range(per)) for k in range(n_machines)}
            atts.append(
                attempt(
                    start.strftime("%Y-%m-%d %H:%M:%S"), t.strftime("%Y-%m-%d %H:%M:%S"), detail
                )
            )
        jobs.append(
            job(
                f"application_{seed}_{i}",
                submit.strftime("%Y-%m-%d %H:%M:%S"),
                atts,
                rng.choice(["Pass", "Killed", "Failed"]),
            )
        )
    return jobs


def _utc(s: str) -> dt.datetime:
    return dt.datetime.strptime(s, "%Y-%m-%d %H:%M:%S").replace(tzinfo=LA).astimezone(dt.UTC)


def _in_fall_back_hour(s: str) -> bool:
    naive = dt.datetime.strptime(s, "%Y-%m-%d %H:%M:%S")
    return (
        naive.replace(tzinfo=LA, fold=0).utcoffset() != naive.replace(tzinfo=LA, fold=1).utcoffset()
    )


def _expected(j: dict) -> tuple:
    """The official notebook's definitions, computed here with the standard library."""
    atts = j["attempts"]
    num_gpus = sum(len(d["gpus"]) for d in atts[0]["detail"]) if atts else None
    if not atts:
        return (num_gpus, None, None)
    first, last = _utc(atts[0]["start_time"]), _utc(atts[-1]["end_time"])
    return (
        num_gpus,
        (first - _utc(j["submitted_time"])).total_seconds(),
        (last - first).total_seconds(),
    )


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_derived_columns_match_official_definitions(tmp_path: Path, seed: int) -> None:
    jobs = [
        j
        for j in _random_trace(seed, 400)
        if not any(
            _in_fall_back_hour(t)
            for t in [
                j["submitted_time"],
                *(a[k] for a in j["attempts"] for k in ("start_time", "end_time")),
            ]
        )
    ]
    f = write_job_log(tmp_path / "cluster_job_log", jobs)
    store = tmp_path / "store"
    r = CliRunner().invoke(main, ["ingest", str(f), "--store", str(store), "--quiet"])
    assert r.exit_code == 0, r.stderr
    con = duckdb.connect(str(store / "catalog.duckdb"), read_only=True)
    got = {
        row[0]: row[1:]
        for row in con.execute(
            "SELECT job_id, num_gpus, queue_delay_s, run_time_s FROM jobs"
        ).fetchall()
    }
    assert len(got) == len(jobs)
    for j in jobs:
        assert got[j["jobid"]] == _expected(j), j["jobid"]
