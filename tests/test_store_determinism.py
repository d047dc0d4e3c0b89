"""Same store, same answer (issue 14): merges of sources of equal priority follow a total
order (priority, then the later ingested batch, then the value), and the disagreement is
reported at ingest and in the report, not hidden.

Before, ``arg_min(value, priority)`` had no tie-break: with two machine lists disagreeing on
m1 (8 GPUs against 2), successive queries of ``machines`` returned 8, then 2, in one process.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

from click.testing import CliRunner

from philly_analyze.cli import main
from philly_analyze.store import connect
from tests.philly_files import attempt, job, write_job_log, write_machine_list


def _lists(tmp: Path) -> tuple[Path, Path]:
    a = write_machine_list(tmp / "a_machine_list", [("m1", 8, "24GB"), ("m2", 2, "12GB")])
    b = write_machine_list(tmp / "b_machine_list", [("m1", 2, "12GB"), ("m2", 2, "12GB")])
    return a, b


def _ingest(store: Path, *paths: Path) -> dict:
    r = CliRunner().invoke(
        main, ["ingest", *map(str, paths), "--store", str(store), "--json", "-q"]
    )
    assert r.exit_code == 0, r.output
    return json.loads(r.output)


def _m1(store: Path, times: int) -> Counter:
    con = connect(str(store / "catalog.duckdb"), read_only=True)
    try:
        return Counter(
            con.execute(
                "SELECT num_gpus, gpu_mem_gb FROM machines WHERE machine_id = 'm1'"
            ).fetchall()[0]
            for _ in range(times)
        )
    finally:
        con.close()


def test_machine_lists_that_disagree_give_one_answer_and_a_note(tmp_path: Path) -> None:
    a, b = _lists(tmp_path)
    store = tmp_path / "store"
    _ingest(store, a)
    doc = _ingest(store, b)
    # 100 queries in one connection (before: about 70% gave 8 and 30% gave 2), then fresh
    # connections: b was ingested last, so its row wins, whole (2 GPUs of 12 GB).
    assert _m1(store, 100) == Counter({(2, 12.0): 100})
    assert sum((_m1(store, 1) for _ in range(10)), Counter()) == Counter({(2, 12.0): 10})
    (note,) = [n for n in doc["notes"] if "different values" in n]
    assert note.startswith("1 machines are given different values by sources of the same kind")
    assert f"m1 listed_num_gpus: 2 in {b}; 8 in {a}" in note
    assert f"m1 gpu_mem_gb: 12.0 in {b}; 24.0 in {a}" in note
    r = CliRunner().invoke(main, ["report", "--store", str(store), "--format", "json", "-q"])
    assert note in json.loads(r.output)["section_notes"]["summary"]


def test_the_later_ingested_list_wins_whatever_the_file_names(tmp_path: Path) -> None:
    a, b = _lists(tmp_path)
    store = tmp_path / "store"
    _ingest(store, b)
    _ingest(store, a)
    assert _m1(store, 50) == Counter({(8, 24.0): 50})


def test_one_job_in_two_job_logs(tmp_path: Path) -> None:
    """The same job in two job logs (equal priority): its row and its attempts come from the
    later one, never a mix (before: the attempts of both, 3 in all)."""
    t = "2017-10-02 10:{:02d}:00"
    first = write_job_log(
        tmp_path / "log1", [job("J", t.format(0), [attempt(t.format(1), t.format(9), {"m1": [0]})])]
    )
    second = write_job_log(
        tmp_path / "log2",
        [
            job(
                "J",
                t.format(0),
                [
                    attempt(t.format(1), t.format(5), {"m1": [0]}),
                    attempt(t.format(6), t.format(9), {"m1": [1]}),
                ],
                status="Killed",
            )
        ],
    )
    store = tmp_path / "store"
    _ingest(store, first)
    doc = _ingest(store, second)
    con = connect(str(store / "catalog.duckdb"), read_only=True)
    try:
        for _ in range(20):
            assert con.execute("SELECT status, num_attempts FROM jobs").fetchall() == [
                ("killed", 2)
            ]
            assert con.execute("SELECT count(*) FROM placements").fetchall() == [(2,)]
    finally:
        con.close()
    assert any(
        n.startswith("1 jobs are given different values") and "J status: killed in" in n
        for n in doc["notes"]
    ), doc["notes"]


MERGED = ("machines", "jobs", "attempts", "placements")


def _views(store: Path, threads: int) -> dict[str, tuple]:
    """Every row of each merged view, on a new connection with ``threads`` threads."""
    con = connect(str(store / "catalog.duckdb"), read_only=True)
    try:
        con.execute(f"SET threads = {threads}")
        return {v: tuple(con.execute(f"SELECT * FROM {v} ORDER BY ALL").fetchall()) for v in MERGED}
    finally:
        con.close()


def test_every_merged_view_gives_one_answer_over_new_connections(tmp_path: Path) -> None:
    """Machine lists and job logs that disagree (equal priority, separate batches), and one
    job log that lists a job twice: each merged view gives the same rows on 20 new
    connections, one or two threads; and the rule's answer, whatever the rows' order.

    Before: ``jobs.num_gpus`` was ``arg_min(num_gpus, attempt_idx)``, tied when one source
    lists attempt 0 twice: the first row read won (1 GPU here; 4 with the entries swapped)."""
    a, b = _lists(tmp_path)
    t = "2017-10-02 10:{:02d}:00"
    log1 = write_job_log(
        tmp_path / "log1", [job("J", t.format(0), [attempt(t.format(1), t.format(9), {"m1": [0]})])]
    )
    log2 = write_job_log(
        tmp_path / "log2",
        [job("J", t.format(0), [attempt(t.format(2), t.format(8), {"m2": [0, 1]})], "Killed")],
    )
    twice = write_job_log(
        tmp_path / "log3",
        [  # K twice: the later-starting listing of attempt 0 first
            job("K", t.format(0), [attempt(t.format(3), t.format(5), {"m1": [0]})], "Killed"),
            job("K", t.format(0), [attempt(t.format(2), t.format(9), {"m1": [0, 1, 2, 3]})]),
        ],
    )
    store = tmp_path / "store"
    for p in (a, b, log1, log2, twice):
        _ingest(store, p)
    answers = Counter(repr(_views(store, 1 + i % 2)) for i in range(20))
    assert len(answers) == 1, answers
    views = _views(store, 2)
    con = connect(str(store / "catalog.duckdb"), read_only=True)
    try:
        jobs = dict(
            (r[0], r[1:])
            for r in con.execute(
                "SELECT job_id, status, num_gpus, source FROM jobs ORDER BY job_id"
            ).fetchall()
        )
    finally:
        con.close()
    assert jobs["J"][:2] == ("killed", 2)  # log2, ingested after log1
    # K's first attempt: attempt 0, the earliest-starting of its two listings (4 GPUs).
    assert jobs["K"][1] == 4
    assert next(r for r in views["machines"] if r[0] == "m1")[2] == 2  # list b, the later one
