"""`philly-analyze info` on hand-made stores, through the CLI. The small store's numbers are
worked out by hand in tests/small_store.py."""

from __future__ import annotations

import json
import re
from pathlib import Path

from philly_analyze import info as store_info
from philly_analyze.analysis import SECTIONS
from philly_analyze.analysis.inputs import NEEDS, missing_note
from philly_analyze.store import Store
from tests import small_store
from tests.small_store import cli

#: The whole table output on tests/small_store.py, pinned like sqlite-utils pins its outputs.
#: <TMP> stands for the test's folder and <SIZE> for the Parquet bytes (compression output
#: may change with library versions). The SHA-256 prefixes are those of the three files
#: (checked with sha256sum).
EXPECTED = """\
store   <TMP>/store
layout  store version 1, views version 6
data    7 Parquet files, <SIZE>

Tables (rows: as the analyses see them, sources merged; read: from every source; times UTC)
table             rows  read  files              from                to
machines             4     3      1                 –                 –
jobs                 3     3      1  2017-10-03 17:00  2017-10-03 19:00
attempts             2     2      1  2017-10-03 17:05  2017-10-03 18:05
placements           6     6      1                 –                 –
gpu_util             6     6      1  2017-10-03 17:06  2017-10-03 17:07
gpu_metrics          0     0      0                 –                 –
cpu_util             0     0      0                 –                 –
mem_util             0     0      0                 –                 –
host_metrics         0     0      0                 –                 –
scheduler_events     0     0      0                 –                 –
epochs               0     0      0                 –                 –
failures             0     0      0                 –                 –
rejects              1     1      1                 –                 –
ingest_log           3     3      0                 –                 –

Sources (3 in ingest_log)
source                    format               rows  rejected        sha256
src/cluster_gpu_util      philly_gpu_util         8         1  5b2fe5571a56
src/cluster_job_log       philly_job_log         11         0  ed01b8b94653
src/cluster_machine_list  philly_machine_list     3         0  656d883862d5

Machines
                                        machines  GPUs
in the machine list                            3    12
seen in data (placements, utilization)         3     9
used by the analyses and replay                4    14
not in the machine list: 1; listed but never seen in data: 1; more GPUs seen than listed: 1
shapes: 3 x 2 GPUs, 1 x 8 GPUs

Virtual clusters (2)
vc   jobs  users  GPU hours      first submit       last submit
vcA     2      2        5.0  2017-10-03 17:00  2017-10-03 17:10
vcB     1      1        0.0  2017-10-03 19:00  2017-10-03 19:00

Rejected input rows: 1 (the rows are in the rejects table)
reason                     rows  sources
unparsable time 'garbage'     1        1

Report sections
section          can compute  what is missing
summary          yes
status           yes
queueing         partly       without scheduler_events: no jobs that ended in the queue before any attempt
gpu_utilization  yes
locality         yes
host_resources   no           needs per-minute host metrics and placements; missing: cpu_util or mem_util
failures         no           needs the failures table: ingest the jobs' framework logs (stdout/stderr), whose errors are classified by the signature rules; missing: failures
retries          yes
convergence      no           needs the epochs table: ingest framework logs that print a loss per epoch or step; missing: epochs
gpu_sharing      no           needs the output of a sharing replay: `philly-analyze replay --policy muxflow --out DIR` (then `report --store DIR`); missing: sharing replay output
"""


def _normalized(text: str, tmp: Path) -> str:
    text = re.sub(r"Parquet files, [0-9.,]+ (bytes|KB|MB)", "Parquet files, <SIZE>", text)
    return text.replace(str(tmp), "<TMP>")


def test_table_output_of_a_small_store_is_pinned(tmp_path: Path, monkeypatch) -> None:
    store = tmp_path / "store"
    small_store.make(tmp_path, store)
    monkeypatch.chdir(tmp_path)  # sources below the working directory are shown relative
    r = cli("info", "--store", store)
    assert r.exit_code == 0, r.output
    assert _normalized(r.output, tmp_path) == EXPECTED


def test_json_holds_the_numbers_worked_out_by_hand(tmp_path: Path) -> None:
    store = tmp_path / "store"
    small_store.make(tmp_path, store)
    r = cli("info", "--store", store, "--format", "json")
    assert r.exit_code == 0, r.output
    got = json.loads(r.stdout)  # stdout is one JSON object, nothing else
    tables = {t["table"]: t for t in got["tables"]}
    # 3 jobs, 2 attempts, 4 + 2 placements, 3 + 3 GPU values; one source each, so read = rows.
    assert {k: tables[k]["rows"] for k in ("jobs", "attempts", "placements", "gpu_util")} == {
        "jobs": 3,
        "attempts": 2,
        "placements": 6,
        "gpu_util": 6,
    }
    # 10:00 and 12:00 PDT = 17:00 and 19:00 UTC; attempts 10:05 to 11:05 PDT.
    assert (tables["jobs"]["first"], tables["jobs"]["last"]) == (
        "2017-10-03T17:00:00+00:00",
        "2017-10-03T19:00:00+00:00",
    )
    assert (tables["attempts"]["first"], tables["attempts"]["last"]) == (
        "2017-10-03T17:05:00+00:00",
        "2017-10-03T18:05:00+00:00",
    )
    # Listed: m1 8 + m2 2 + m3 2 = 12 GPUs. Seen: m1 4 (placement GPUs 0-3; its utilization
    # shows 3), m2 3 (utilization), m9 2 (placement): 9. Used: m1 8, m2 2, m3 2, m9 2 = 14.
    m = got["machines"]
    assert (m["listed"], m["listed_gpus"], m["observed"], m["observed_gpus"]) == (3, 12, 3, 9)
    assert (m["machines"], m["gpus"]) == (4, 14)
    assert (m["not_listed"], m["listed_never_observed"], m["observed_above_listed"]) == (1, 1, 1)
    assert m["shapes"] == [{"num_gpus": 2, "machines": 3}, {"num_gpus": 8, "machines": 1}]
    # vcA: j1 4 GPU hours + j2 1 GPU hour; vcB: j3 never ran.
    assert [(v["vc"], v["jobs"], v["users"], v["gpu_hours"]) for v in got["vcs"]] == [
        ("vcA", 2, 2, 5.0),
        ("vcB", 1, 1, 0.0),
    ]
    assert got["rejects"] == {
        "rows": 1,
        "by_reason": [{"reason": "unparsable time 'garbage'", "rows": 1, "sources": 1}],
    }
    sources = {Path(s["source"]).name: s for s in got["sources"]}
    assert sources["cluster_job_log"]["format"] == "philly_job_log"
    assert len(sources["cluster_job_log"]["sha256"]) == 64
    can = {s["section"]: s["can_compute"] for s in got["sections"]}
    assert can == {
        "summary": "yes",
        "status": "yes",
        "queueing": "partly",
        "gpu_utilization": "yes",
        "locality": "yes",
        "host_resources": "no",
        "failures": "no",
        "retries": "yes",
        "convergence": "no",
        "gpu_sharing": "no",
    }
    assert got["store"]["repaired"] is None


def test_the_report_and_info_say_the_same_about_missing_inputs(tmp_path: Path) -> None:
    """One definition (analysis.inputs.NEEDS): the report's note for a section that cannot run
    is the note info shows."""
    store = tmp_path / "store"
    small_store.make(tmp_path, store)
    r = cli("report", "--store", store, "--format", "json")
    assert r.exit_code == 0, r.output
    report = json.loads(r.stdout)
    info = json.loads(cli("info", "--store", store, "--format", "json").stdout)
    checked = []
    for s in info["sections"]:
        if s["can_compute"] == "no" and s["section"] != "gpu_sharing":  # optional: not run
            assert s["note"] in report["section_notes"][s["section"]], s["section"]
            checked.append(s["section"])
    assert checked == ["host_resources", "failures", "convergence"]
    assert set(NEEDS) == set(SECTIONS)


def test_an_empty_store(tmp_path: Path) -> None:
    Store(tmp_path / "s").close()
    r = cli("info", "--store", tmp_path / "s")
    assert r.exit_code == 0, r.output
    assert "Sources (0 in ingest_log)\nnone: ingest something" in r.output
    assert "Virtual clusters (0)" in r.output and "shapes: none" in r.output
    got = json.loads(cli("info", "--store", tmp_path / "s", "--format", "json").stdout)
    assert [s["section"] for s in got["sections"] if s["can_compute"] != "no"] == ["summary"]
    assert all(t["rows"] == 0 for t in got["tables"])


def test_no_store_is_one_line_and_exit_1(tmp_path: Path) -> None:
    r = cli("info", "--store", tmp_path / "nothing")
    assert r.exit_code == 1
    assert r.output.count("\n") == 1 and "no store at" in r.output


def test_many_sources_are_summed_per_format(tmp_path: Path) -> None:
    Store(tmp_path / "s").close()
    with Store(tmp_path / "s", read_only=True) as s:
        info = store_info.describe(s)
    info["store"]["repaired"] = "the store was moved or copied from /old: views rebuilt"
    info["sources"] = [
        {
            "source": f"/l/{i}.log",
            "format": "framework_log",
            "sha256": "ab",
            "rows": 2,
            "rejected": i % 2,
            "ingested_at": None,
        }
        for i in range(21)
    ] + [
        {
            "source": "/rm.log",
            "format": "yarn_rm_log",
            "sha256": "cd",
            "rows": 5,
            "rejected": 0,
            "ingested_at": None,
        }
    ]
    text = store_info.render_text(info)
    assert "repaired  the store was moved or copied from /old: views rebuilt\n" in text
    # 21 framework logs of 2 rows each, 10 of them with one rejected row (the odd i < 21).
    assert "framework_log       21    42        10" in text
    assert "yarn_rm_log          1     5         0" in text
    assert "/l/0.log" not in text


def test_note_of_a_section_names_what_is_missing() -> None:
    assert missing_note("host_resources", lambda t: t == "placements") == (
        "needs per-minute host metrics and placements; missing: cpu_util or mem_util"
    )
    assert missing_note("host_resources", lambda t: t in ("placements", "mem_util")) == ""
    assert missing_note("gpu_utilization", lambda t: False).endswith(
        "missing: gpu_util, placements"
    )
