"""`philly-analyze report` end to end: formats, contract keys, filters, escaping, figures."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pyarrow as pa
import pytest
from click.testing import CliRunner, Result

from philly_analyze.analysis import CONTRACT_KEYS
from philly_analyze.cli import main
from tests.analysis_stores import Att, Job, minutes_util, write_store

EVIL_JOB = "application_1_<script>alert('job')</script>"
EVIL_VC = "<img src=x onerror=alert(1)>|vc"
EVIL_LINE = "Traceback <script>alert('log')</script> & | done"


def _jobs() -> list[Job]:
    g8 = list(range(8))
    return [
        Job("j1", "a", "u1", "passed", 0, [Att(0, 30, "passed", {"m0": g8})]),
        Job("j2", "a", "u1", "passed", 5, [Att(30, 40, "passed", {"m0": [0, 1]})]),
        Job("j3", "b", "u2", "killed", 10, [Att(10, 50, "killed", {"s0": [0]})]),
        Job(
            EVIL_JOB,
            EVIL_VC,
            "u3",
            "unsuccessful",
            20,
            [Att(20, 25, "failed", {"s0": [1]}), Att(26, 28, "failed", {"s0": [1]})],
        ),
    ]


@pytest.fixture(scope="module")
def full_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    util = minutes_util([(m, "m0", g, 40.0 + g) for m in range(40) for g in range(8)])
    fails = pa.Table.from_pylist(
        [
            {
                "job_id": EVIL_JOB,
                "attempt_idx": i,
                "reason": "Syntax error",
                "categories": "IF,U",
                "line_no": 3,
                "message": EVIL_LINE,
            }
            for i in (0, 1)
        ]
    )
    epochs = pa.Table.from_pylist(
        [
            {"job_id": "j1", "attempt_idx": 0, "epoch": i, "unit": "epoch", "loss": 3.0 - i}
            for i in range(3)
        ]
    )
    return write_store(
        tmp_path_factory.mktemp("r") / "store",
        machines={"m0": 8, "s0": 2},
        jobs=_jobs(),
        extra={"gpu_util": util, "failures": fails, "epochs": epochs},
    )


def invoke(*args: str) -> Result:
    return CliRunner().invoke(main, ["report", *args], catch_exceptions=False)


def test_json_contract_keys(full_store: Path) -> None:
    r = invoke("--store", str(full_store), "--format", "json", "-q")
    assert r.exit_code == 0, r.output
    doc = json.loads(r.output)
    for key in CONTRACT_KEYS:
        assert isinstance(doc[key], list), key
        assert all(isinstance(row, dict) and "table" in row for row in doc[key])
    assert isinstance(doc["notes"], str)
    assert doc["status"] and doc["queueing"] and doc["gpu_utilization"] and doc["failures"]
    t6 = {row["status"]: row for row in doc["status"] if row["table"] == "table6"}
    assert t6["passed"]["jobs"] == 2 and t6["passed"]["paper_jobs"] == 66696
    assert "host_resources" in doc  # extra key: no cpu/mem data -> empty list + note
    assert doc["host_resources"] == [] and "host_resources" in doc["notes"]


def test_missing_inputs_are_notes_not_crashes(tmp_path: Path) -> None:
    p = write_store(tmp_path / "s", jobs=[Job("x", "a", "u", "killed", 0, [], num_gpus=1)])
    r = invoke("--store", str(p), "--format", "json", "-q")
    assert r.exit_code == 0, r.output
    doc = json.loads(r.output)
    for key in ("gpu_utilization", "locality", "failures", "convergence"):
        assert doc[key] == [], key
        assert doc["section_notes"][key], key
    assert "failures table" in doc["notes"]


def test_empty_store_every_format(tmp_path: Path) -> None:
    p = write_store(tmp_path / "empty", machines={"m0": 8})
    for fmt in ("json", "md", "html", "table"):
        r = invoke("--store", str(p), "--format", fmt, "-q")
        assert r.exit_code == 0, (fmt, r.output)
    assert json.loads(invoke("--store", str(p), "--format", "json", "-q").output)["summary"]


def test_html_escapes_log_content(full_store: Path, tmp_path: Path) -> None:
    out = tmp_path / "r.html"
    r = invoke("--store", str(full_store), "-o", str(out), "-q")
    assert r.exit_code == 0, r.output
    doc = out.read_text()
    assert doc.startswith("<!DOCTYPE html>")
    assert "<script" not in doc and "<img src=x" not in doc
    assert "&lt;script&gt;alert(&#x27;log&#x27;)&lt;/script&gt;" in doc  # the failure line
    assert "&lt;img src=x onerror=alert(1)&gt;|vc" in doc  # the VC name
    assert 'src="data:image/png;base64,' in doc  # figures inlined
    assert "http://" not in doc and "https://" not in doc  # self-contained


def test_markdown_escapes_log_content(full_store: Path) -> None:
    r = invoke("--store", str(full_store), "--format", "md", "-q")
    assert r.exit_code == 0
    assert "<script" not in r.output and "<img" not in r.output
    assert "&lt;img src=x onerror=alert(1)>\\|vc" in r.output  # | escaped in tables


def test_default_format_when_piped_is_markdown(full_store: Path) -> None:
    r = invoke("--store", str(full_store), "-q")  # CliRunner's stdout is not a terminal
    assert r.output.startswith("# philly-analyze report")
    assert "| status | jobs | (paper) |" in r.output


def test_table_format_has_paper_beside(full_store: Path, tmp_path: Path) -> None:
    out = tmp_path / "r.txt"
    assert invoke("--store", str(full_store), "-o", str(out), "-q").exit_code == 0
    text = out.read_text()
    assert "(paper)" in text and "66,696" in text and "Table 6" in text


def test_section_and_vc_filters(full_store: Path) -> None:
    r = invoke(
        "--store", str(full_store), "--format", "json", "--section", "status", "--vc", "a", "-q"
    )
    doc = json.loads(r.output)
    t6 = {row["status"]: row["jobs"] for row in doc["status"]}
    assert t6 == {"passed": 2, "killed": 0, "unsuccessful": 0, "total": 2}
    assert doc["queueing"] == [] and "not computed" in doc["section_notes"]["queueing"][0]
    assert invoke("--store", str(full_store), "--section", "nope").exit_code == 2


def test_since_until(full_store: Path) -> None:
    # Submits at minutes 0, 5, 10, 20 after 2017-10-02T00:00Z: [00:04, 00:15) keeps j2, j3.
    r = invoke(
        "--store",
        str(full_store),
        "--format",
        "json",
        "--section",
        "status",
        "--since",
        "2017-10-02T00:04",
        "--until",
        "2017-10-02T00:15:00+00:00",
        "-q",
    )
    t6 = {row["status"]: row["jobs"] for row in json.loads(r.output)["status"]}
    assert t6["total"] == 2 and t6["killed"] == 1
    bad = invoke("--store", str(full_store), "--since", "yesterday")
    assert bad.exit_code == 2


def test_quota_file_errors_name_file_and_line(full_store: Path, tmp_path: Path) -> None:
    q = tmp_path / "q.csv"
    q.write_text("vc,gpus\na,8\nb,lots\n")
    r = CliRunner().invoke(main, ["report", "--store", str(full_store), "--vc-quotas", str(q)])
    assert r.exit_code == 1
    assert f"{q}:3:" in r.output and "not an integer" in r.output


def test_missing_store_is_a_user_error(tmp_path: Path) -> None:
    r = CliRunner().invoke(main, ["report", "--store", str(tmp_path / "none")])
    assert r.exit_code == 1 and "no store" in r.output


def test_figures_written_deterministic_and_linked(full_store: Path, tmp_path: Path) -> None:
    out = tmp_path / "rep" / "report.md"
    r1 = invoke("--store", str(full_store), "-o", str(out), "--figures", str(tmp_path / "f1"), "-q")
    r2 = invoke(
        "--store", str(full_store), "--format", "json", "--figures", str(tmp_path / "f2"), "-q"
    )
    assert r1.exit_code == 0 and r2.exit_code == 0
    names = sorted(p.name for p in (tmp_path / "f1").iterdir())
    assert "fig3_queueing_delay.png" in names and "fig3_queueing_delay.svg" in names
    assert "fig5_util_by_status.png" in names and "fig9_retries.svg" in names
    for n in names:  # same data, same bytes (PNG and SVG)
        assert (tmp_path / "f1" / n).read_bytes() == (tmp_path / "f2" / n).read_bytes(), n
    assert (tmp_path / "f1" / "fig3_queueing_delay.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # markdown links the PNGs relative to the report's folder
    assert "![fig9_retries](../f1/fig9_retries.png)" in out.read_text()


def test_replay_store(tmp_path: Path) -> None:
    """A store written by the replay simulator (source "replay") reports the same way."""
    jobs = [
        Job("r1", "a", "u", "passed", 0, [Att(5, 10, "passed", {"m0": [0, 1]})]),
        Job("r2", "a", "u", "unsuccessful", 0, [Att(0, 4, "failed", {"m0": [2]})]),
    ]
    p = write_store(tmp_path / "replay", machines={"m0": 8}, jobs=jobs, source="replay")
    doc = json.loads(invoke("--store", str(p), "--format", "json", "-q").output)
    t6 = {row["status"]: row["jobs"] for row in doc["status"]}
    assert t6["total"] == 2
    summary = {row["metric"]: row["value"] for row in doc["summary"]}
    assert summary["job sources"] == "replay"
    delays = [r for r in doc["queueing"] if r["table"] == "delay_by_vc" and r["vc"] == "all"]
    assert delays[0]["mean_min"] == pytest.approx(2.5)  # r1 waited 5 min, r2 0


def test_cli_section_names_agree_with_the_analyses() -> None:
    from philly_analyze.analysis import ALIASES, SECTIONS
    from philly_analyze.cli.report import SECTION_ALIASES, SECTION_NAMES

    assert tuple(SECTIONS) == SECTION_NAMES
    assert set(SECTION_ALIASES) == set(ALIASES)


def test_terminal_says_which_table7_columns_it_leaves_out(full_store: Path) -> None:
    """Table 7 has 26 columns: on a narrow terminal the compact 8 are shown and the caption
    names the other (computed) ones, by their readable headers, and how to see them; a wider
    terminal shows more of them, in the table's order; a wide one shows all."""
    from philly_analyze.analysis import run
    from philly_analyze.report import terminal
    from philly_analyze.store import Store

    with Store(full_store, read_only=True) as store:
        report = run(store, ["failures"])

    def table7(width: int) -> tuple[str, str]:
        out = terminal.render(report, width=width)
        t7 = out[out.index("[Table 7]") :].split("Failures by category")[0]
        head = "\n".join(ln for ln in t7.splitlines() if ln.startswith("┃"))
        hint = " ".join(t7.split("Not shown, for want of width: ")[1].split())
        return head, hint

    head, hint = table7(100)
    assert head.count("(paper)") == 3 and "users" not in head  # trials, RTF p50, RTF share
    assert hint.startswith(
        "jobs, users, RTF p90 (min), RTF p95 (min), 1 GPU, 2-4 GPUs, >4 GPUs, "
        "RTF x demand (GPU-min), RTF x demand share (%), example (and their paper values). "
        "All 26 columns: --format md, html or json, or a terminal"
    )
    head, hint = table7(250)  # room for more: the next columns of the table, in order
    assert head.count("(paper)") > 3 and "users" in head and "example" not in head
    assert re.fullmatch(
        r"(\S.*, )?example \(and their paper values\)\. All 26 columns: --format md, html "
        r"or json, or a terminal (\d+) characters wide\.",
        hint,
    )
    assert not hint.startswith(("jobs", "users"))
    wide = terminal.render(report, width=1000)
    assert "Not shown" not in wide
    t7 = wide[wide.index("[Table 7]") :]
    top = next(ln for ln in t7.splitlines() if ln.startswith("┏"))
    assert top.count("┳") == 26 - 1  # every column


def test_unknown_vc_is_an_error_naming_the_stores_vcs(full_store: Path) -> None:
    r = CliRunner().invoke(main, ["report", "--store", str(full_store), "--vc", "c", "-q"])
    assert r.exit_code == 1 and r.stdout == ""
    # The store's VCs, sorted: 'a', 'b' and the one with markup in its name (printed as text).
    assert r.stderr == (f"error: {full_store}: no VC 'c' in this store; its VCs: {EVIL_VC}, a, b\n")


def test_unknown_vc_among_many_names_the_closest() -> None:
    from philly_analyze.analysis.selection import _unknown_vcs

    known = [
        f"{h}{i}" for i, h in enumerate(["0e4a", "11b2", "2c9d", "3f70", "4d21", "5a8e", "6b3c"])
    ]
    known += [f"vc{i:02d}" for i in range(10)]  # 17 VCs: too many to list
    # "2c9" is a prefix of 2c9d2 only (difflib ratio with vc09: 2*2/7 = 0.57 < 0.6).
    msg = _unknown_vcs(["2c9"], known)
    assert msg == "no VC '2c9' in this store; closest of its 17 VCs: 2c9d2"
    # No VC starts with "vc1"; vc01 matches "vc" and "1": ratio 2*3/7 = 0.86, vc00 2*2/7.
    assert _unknown_vcs(["vc1"], known) == "no VC 'vc1' in this store; closest of its 17 VCs: vc01"
    assert _unknown_vcs(["x"], []) == "no VC 'x' in this store (it has no job with a VC)"


def test_window_without_jobs_is_a_note(full_store: Path) -> None:
    # Submits at minutes 0, 5, 10 and 20 after 2017-10-02T00:00Z; nothing in 2018.
    r = invoke("--store", str(full_store), "--format", "json", "--since", "2018-01-01")
    assert r.exit_code == 0
    note = (
        "no job was submitted in this window (submitted from 2018-01-01T00:00:00+00:00); the "
        "store's jobs were submitted from 2017-10-02 00:00 to 2017-10-02 00:20 UTC"
    )
    assert json.loads(r.stdout)["section_notes"]["summary"][0] == note
    assert note in " ".join(r.stderr.split())
    r = invoke("--store", str(full_store), "--format", "json", "--vc", "b", "--until",
               "2017-10-02T00:05", "-q")  # fmt: skip
    notes = json.loads(r.stdout)["section_notes"]["summary"]
    assert notes[0].startswith("no job of VC b was submitted in this window (VC b; submitted")
    assert notes[0].endswith("jobs of VC b were submitted from 2017-10-02 00:10 to 2017-10-02 "
                             "00:10 UTC")  # fmt: skip


def test_titles_have_no_nested_parentheses_and_sources_read_as_a_list(tmp_path: Path) -> None:
    """Every table title with its paper reference reads "(paper: Figure 3, as
    percentiles)", never "(paper: Figure 3 (as percentiles))"; the summary lists the job
    sources of the bundled sample (its job log and its YARN logs) with ", " between them."""
    from tests._sweep_data import sample_store

    store = sample_store(tmp_path / "s")
    md = invoke("--store", str(store), "--format", "md", "-q").stdout
    titles = [ln for ln in md.splitlines() if ln.startswith("### ")]
    assert len(titles) >= 15
    assert (
        "### Queueing delay (minutes) per VC and GPU demand (paper: Figure 3, as percentiles)"
        in titles
    )
    assert [t for t in titles if re.search(r"\([^()]*\(", t)] == []
    doc = json.loads(
        invoke("--store", str(store), "--format", "json", "--section", "summary").stdout
    )
    summary = {r["metric"]: r["value"] for r in doc["summary"]}
    assert summary["job sources"] == "philly_job_log, yarn_rm_log"


def test_job_sources_are_split_deduplicated_and_sorted() -> None:
    from philly_analyze.analysis.summary import _sources

    assert _sources("yarn_rm_log,philly_job_log,philly_job_log,yarn_rm_log") == (
        "philly_job_log, yarn_rm_log"
    )
    assert _sources("replay") == "replay"
    assert _sources(None) is None and _sources(float("nan")) is None
