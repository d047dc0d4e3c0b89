"""``ingest`` exits 1 when its sources have more rejected rows than ``--max-rejects`` (default
0), with one line naming the first reject; the good rows are kept either way, and a re-run of
the same command (its sources skipped as already ingested) gives the same exit status.

The utilization files are hand-made: in ``cpu_util`` below, lines 3 and 5 are bad (a time
that does not parse, a value that is not a number), lines 2 and 4 good.
"""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner, Result

from philly_analyze.cli import main
from tests.store_query import q

HEADER = "time,machine_id,cpu_util\n"
GOOD = "2017-10-01 10:00:00 PDT,m1,5.0\n"
GOOD2 = "2017-10-01 10:01:00 PDT,m1,6.0\n"


def ingest(store: Path, *args: str | Path) -> Result:
    return CliRunner().invoke(
        main, ["ingest", *map(str, args), "--store", str(store), "--format", "json"]
    )


def cpu_util(folder: Path, *lines: str) -> Path:
    """``folder/cluster_cpu_util`` holding the header and ``lines``."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "cluster_cpu_util"
    path.write_text(HEADER + "".join(lines))
    return path


def two_bad_lines(folder: Path) -> Path:
    return cpu_util(folder, GOOD, "garbage,m1,6.0\n", GOOD2, "2017-10-01 10:02:00 PDT,m1,x\n")


def errors(r: Result) -> list[str]:
    return [ln for ln in r.stderr.splitlines() if ln.startswith("error:")]


def test_two_bad_lines_exit_1_naming_the_first_and_keep_the_good_rows(
    tmp_path: Path, store_dir: Path
) -> None:
    path = two_bad_lines(tmp_path)
    r = ingest(store_dir, path)
    assert r.exit_code == 1, r.output
    assert "Traceback" not in r.output + r.stderr
    assert errors(r) == [
        f"error: {path}:3: unparsable time 'garbage' (2 rows rejected in all, kept in the "
        "store's rejects table; the good rows were ingested; --max-rejects 2 accepts them)"
    ]
    # The summary is still printed, on stdout as JSON, with the count.
    out = json.loads(r.stdout)
    assert out["rejected"] == 2
    assert out["source_rejects"] == {
        "rows": 2,
        "conflicts": 0,
        "first": {"source": str(path), "line_no": 3, "reason": "unparsable time 'garbage'"},
    }
    assert q(store_dir, "SELECT machine_id, util FROM cpu_util ORDER BY time") == [
        ("m1", 5.0),
        ("m1", 6.0),
    ]
    assert [r[0] for r in q(store_dir, "SELECT line_no FROM rejects ORDER BY line_no")] == [3, 5]


def test_max_rejects_sets_how_many_are_accepted(tmp_path: Path) -> None:
    path = two_bad_lines(tmp_path)
    assert ingest(tmp_path / "s2", path, "--max-rejects", "2").exit_code == 0
    assert ingest(tmp_path / "sall", path, "--max-rejects", "all").exit_code == 0
    r = ingest(tmp_path / "s1", path, "--max-rejects", "1")
    assert r.exit_code == 1, r.output
    assert errors(r)[0].startswith(f"error: {path}:3: unparsable time 'garbage' (2 rows")
    # Either way the same rows are kept.
    for s in ("s1", "s2", "sall"):
        assert q(tmp_path / s, "SELECT count(*) FROM cpu_util") == [(2,)]
        assert q(tmp_path / s, "SELECT count(*) FROM rejects") == [(2,)]


def test_a_re_run_gives_the_same_exit_status(tmp_path: Path, store_dir: Path) -> None:
    path = two_bad_lines(tmp_path)
    first = ingest(store_dir, path)
    again = ingest(store_dir, path)
    assert first.exit_code == again.exit_code == 1
    assert json.loads(again.stdout)["sources"][0]["status"] == "skipped"
    assert errors(again) == errors(first)
    # Accepted by the limit on the re-run too, and nothing was added twice.
    assert ingest(store_dir, path, "--max-rejects", "2").exit_code == 0
    assert q(store_dir, "SELECT count(*) FROM rejects") == [(2,)]


def test_a_clean_file_exits_0(tmp_path: Path, store_dir: Path) -> None:
    r = ingest(store_dir, cpu_util(tmp_path, GOOD, GOOD2))
    assert r.exit_code == 0, r.output
    assert errors(r) == []
    assert json.loads(r.stdout)["source_rejects"] == {"rows": 0, "conflicts": 0, "first": None}


def test_only_the_sources_named_count(tmp_path: Path, store_dir: Path) -> None:
    # b's bad line 2 comes before a's bad line 4 in b, but a's file name sorts first.
    bad_a = cpu_util(tmp_path / "a", GOOD, GOOD2, "later,m1,1.0\n")
    bad_b = cpu_util(tmp_path / "b", "soon,m1,1.0\n", GOOD)
    clean = cpu_util(tmp_path / "c", GOOD)
    r = ingest(store_dir, bad_b, bad_a)
    assert r.exit_code == 1
    assert errors(r)[0].startswith(f"error: {bad_a}:4: unparsable time 'later' (2 rows rejected")
    # A later run of a clean file is not failed by the rejects of the others.
    assert ingest(store_dir, clean).exit_code == 0
    r = ingest(store_dir, clean, bad_b)
    assert r.exit_code == 1
    assert errors(r)[0].startswith(f"error: {bad_b}:2: unparsable time 'soon' (1 row rejected")


def test_ganglia_conflicts_count_and_say_so(tmp_path: Path, store_dir: Path) -> None:
    # One folder read as one host: the two files give 10 and 70, 20 and 80 for the same two
    # minutes, four conflicting samples (test_ganglia_hosts.py), none kept.
    export = tmp_path / "export"
    export.mkdir()
    for name, v0, v1 in (("m0_gpu0_util.csv", 10, 20), ("m1_gpu0_util.csv", 70, 80)):
        (export / name).write_text(
            f"Timestamp,gpu0_util\n2017-10-03T00:09:00-07:00,{v0}\n2017-10-03T00:10:00-07:00,{v1}\n"
        )
    r = ingest(store_dir, export, "--ganglia-host-pattern", "folder")
    assert r.exit_code == 1, r.output
    assert errors(r) == [
        f"error: {export / 'm0_gpu0_util.csv'}: conflict: samples of host export, metric "
        "gpu0_util for [2017-10-03 07:08:00, 2017-10-03 07:09:00) UTC differ (10.0 to 70.0): "
        "none kept (4 rows rejected in all (4 of them Ganglia conflicts: values not kept), kept "
        "in the store's rejects table; the good rows were ingested; --max-rejects 4 accepts them)"
    ]
    assert json.loads(r.stdout)["source_rejects"]["conflicts"] == 4
    # Re-run: the grouped files are skipped as already ingested, the same status and line.
    again = ingest(store_dir, export, "--ganglia-host-pattern", "folder")
    assert {s["status"] for s in json.loads(again.stdout)["sources"]} == {"skipped"}
    assert again.exit_code == 1 and errors(again) == errors(r)


def test_bad_max_rejects_is_a_usage_error(tmp_path: Path, store_dir: Path) -> None:
    path = cpu_util(tmp_path, GOOD)
    for bad in ("-1", "some", "1.5"):
        r = ingest(store_dir, path, "--max-rejects", bad)
        assert r.exit_code == 2, (bad, r.output)
        assert "Invalid value for '--max-rejects'" in r.stderr
