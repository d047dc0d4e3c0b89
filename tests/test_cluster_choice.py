"""Silent cluster changes (issue 13): hosts that only placements or utilization name are
reported at ingest, and a replay uses the listed machines unless told otherwise.

Hand-made published-format trace: the machine list names m1 (8 GPUs) and m2 (2 GPUs): 10 GPUs.
The job log also places jobs on m9 (GPUs 0-3: 4 GPUs), and the GPU utilization file has m10
with 2 GPUs reporting; neither is listed. Jobs: A 1 GPU on m9; B 4 GPUs on m1; C 12 GPUs on
m1 (8) + m9 (4), more than the 10 listed GPUs.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from philly_analyze.cli import main
from philly_analyze.sweep.inputs import read_inputs
from tests.philly_files import (
    attempt,
    gpu_row,
    job,
    write_gpu_util,
    write_job_log,
    write_machine_list,
)


def _write(d: Path, *, machine_list: bool = True) -> Path:
    d.mkdir(parents=True)
    if machine_list:
        write_machine_list(d / "cluster_machine_list", [("m1", 8, "24GB"), ("m2", 2, "12GB")])
    t = "2017-10-02 10:{:02d}:00"
    write_job_log(
        d / "cluster_job_log",
        [
            job("A", t.format(0), [attempt(t.format(1), t.format(30), {"m9": [3]})]),
            job("B", t.format(0), [attempt(t.format(2), t.format(40), {"m1": [0, 1, 2, 3]})]),
            job(
                "C",
                t.format(0),
                [attempt(t.format(3), t.format(50), {"m1": list(range(8)), "m9": [0, 1, 2, 3]})],
            ),
        ],
    )
    write_gpu_util(
        d / "cluster_gpu_util", [gpu_row(f"{t.format(m)} PDT", "m10", ["5", "7"]) for m in range(3)]
    )
    return d


def _ingest(d: Path, store: Path) -> dict:
    r = CliRunner().invoke(main, ["ingest", str(d), "--store", str(store), "--json", "-q"])
    assert r.exit_code == 0, r.output
    return json.loads(r.output)


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("cluster")
    s = tmp / "store"
    doc = _ingest(_write(tmp / "trace"), s)
    (s.parent / "notes.json").write_text(json.dumps(doc["notes"]))
    (s.parent / "rows.json").write_text(json.dumps(doc["rows_in_store"]))
    return s


def _replay(store: Path, *extra: str) -> dict:
    r = CliRunner().invoke(
        main, ["replay", "--store", str(store), "--format", "json", "-q", *extra]
    )
    assert r.exit_code == 0, r.output
    return json.loads(r.output)


def test_ingest_says_which_hosts_are_not_listed(store: Path) -> None:
    notes = json.loads((store.parent / "notes.json").read_text())
    # m9 (max GPU index 3 in placements: 4 GPUs) and m10 (2 GPUs reporting utilization).
    assert any(
        n.startswith("2 hosts (6 GPUs) are not in the machine list") and "(m10, m9)" in n
        for n in notes
    ), notes


def test_machines_in_store_count_the_unlisted_hosts(store: Path) -> None:
    """``ingest``'s "in store" and ``info``'s rows are what the analyses see: m1, m2 listed
    and m9, m10 known from placements and utilization (before: 2, the machine list's rows,
    while the report counted 4 machines)."""
    assert json.loads((store.parent / "rows.json").read_text())["machines"] == 4
    r = CliRunner().invoke(main, ["info", "--store", str(store), "--format", "json"])
    assert r.exit_code == 0, r.output
    (row,) = [t for t in json.loads(r.output)["tables"] if t["table"] == "machines"]
    assert (row["rows"], row["rows_read"]) == (4, 2)


def test_ingest_without_machine_list_says_where_the_cluster_came_from(tmp_path: Path) -> None:
    doc = _ingest(_write(tmp_path / "trace", machine_list=False), tmp_path / "store")
    # m1 (8, from placements), m10 (2, utilization), m9 (4, placements).
    assert any(
        n.startswith("no machine list: the cluster's 3 hosts (14 GPUs) are known only")
        for n in doc["notes"]
    ), doc["notes"]
    # Without a machine list a replay uses every host (the only cluster there is).
    res = _replay(tmp_path / "store")
    assert res["cluster"] == {"machines": 3, "gpus": 14}
    assert res["results"][0]["metrics"]["jobs"] == 3


def test_replay_uses_the_listed_machines_by_default(store: Path) -> None:
    res = _replay(store)
    assert res["cluster"] == {"machines": 2, "gpus": 10}
    (r,) = res["results"]
    # A ran on m9 and is replayed on the listed machines; C needs 12 of the 10 GPUs: reported.
    assert r["metrics"]["jobs"] == 2
    notes = " | ".join(r["notes"])
    assert "1 jobs need more GPUs than the cluster has (10) and were not replayed" in notes
    assert "2 hosts (6 GPUs) not in the machine list are left out" in notes


def test_replay_machines_all_adds_the_unlisted_hosts(store: Path) -> None:
    res = _replay(store, "--machines", "all")
    assert res["cluster"] == {"machines": 4, "gpus": 16}
    assert res["results"][0]["metrics"]["jobs"] == 3
    assert not any("not in the machine list" in n for n in res["results"][0]["notes"])


def test_sweep_reads_the_same_choice(store: Path, tmp_path: Path) -> None:
    assert read_inputs(store).cluster.total_gpus == 10
    assert read_inputs(store, machines="all").cluster.total_gpus == 16
    out = tmp_path / "sw"
    r = CliRunner().invoke(
        main,
        [
            "sweep", "--store", str(store), "--policy", "philly", "--machines", "all",
            "--workers", "1", "--out", str(out), "-q", "--no-figures", "--format", "json",
        ],
    )  # fmt: skip
    assert r.exit_code == 0, r.output
    assert json.loads((out / "sweep.json").read_text())["machines"] == "all"


def test_replay_notes_listed_machines_given_more_gpus(tmp_path: Path) -> None:
    """m1 is listed with 2 GPUs, but a job ran on its GPUs 0-7 (as the published list says
    of m51): the replay, like the analyses, gives it 8 GPUs, and says so (before: the
    replayed cluster had 8 GPUs where the list says 2, without a word)."""
    d = tmp_path / "trace"
    d.mkdir()
    write_machine_list(d / "cluster_machine_list", [("m1", 2, "12GB")])
    t = "2017-10-02 10:{:02d}:00"
    write_job_log(
        d / "cluster_job_log",
        [job("E", t.format(0), [attempt(t.format(0), t.format(30), {"m1": list(range(8))})])],
    )
    _ingest(d, tmp_path / "store")
    res = _replay(tmp_path / "store")
    assert res["cluster"] == {"machines": 1, "gpus": 8}
    assert any(
        n.startswith(
            "1 listed machines have more GPUs in placements than in the machine list (6 GPUs more)"
        )
        for n in res["results"][0]["notes"]
    ), res["results"][0]["notes"]


@pytest.fixture(scope="module")
def four_hosts_unlisted(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The machine list names m1 (8 GPUs); four jobs of 8 GPUs x 1 h ran on unlisted hosts m2
    to m5 (8 GPUs each), two in VC va (a1, a2) and two in vb (b1, b2), all submitted at
    10:00. The store's machines have 40 GPUs; the listed cluster 8."""
    d = tmp_path_factory.mktemp("unlisted")
    write_machine_list(d / "cluster_machine_list", [("m1", 8, "24GB")])
    t = "2017-10-02 {}:00:00"
    write_job_log(
        d / "cluster_job_log",
        [
            job(name, t.format(10), [attempt(t.format(10), t.format(11), {host: list(range(8))})],
                vc=vc)
            for name, vc, host in (
                ("a1", "va", "m2"), ("b1", "vb", "m3"), ("a2", "va", "m4"), ("b2", "vb", "m5")
            )
        ],
    )  # fmt: skip
    _ingest(d, d / "store")
    return d / "store"


def test_inferred_quotas_fit_the_replayed_cluster(four_hosts_unlisted: Path) -> None:
    """The replay (listed: m1 alone, 8 GPUs) infers the quotas over its own 8 GPUs: va and vb
    used the same GPU time, so 1 + 3 each = 4 and 4 (before: 20 and 20, sized for the 40 GPUs
    of all hosts, a cluster not replayed). One job at a time runs on m1: a1 10:00-11:00, a2
    11:00-12:00 (va first on ties), b1 12:00-13:00, b2 13:00-14:00. Every waiting moment has
    its VC's usage plus the 8 GPUs asked past its quota of 4: fair-share, 1 + 2 + 3 h =
    21,600 s (before: under quotas of 20 the VCs had room, so all of it was capacity)."""
    res = _replay(four_hosts_unlisted)
    assert res["cluster"] == {"machines": 1, "gpus": 8}
    (r,) = res["results"]
    assert r["quotas"] == {"va": 4, "vb": 4}
    m = r["metrics"]
    assert (m["fair_share_delay_s"], m["capacity_delay_s"]) == (21_600.0, 0.0)
    assert any(
        n.startswith("VC quotas inferred over the replayed cluster's 8 GPUs (the report infers")
        for n in r["notes"]
    ), r["notes"]
    # The sweep reads the same quotas; with every host, 40 GPUs: 20 each, nobody waits.
    assert read_inputs(four_hosts_unlisted).quotas == {"va": 4, "vb": 4}
    assert read_inputs(four_hosts_unlisted, machines="all").quotas == {"va": 20, "vb": 20}


def test_quotas_not_adding_up_to_the_cluster_are_noted(
    four_hosts_unlisted: Path, tmp_path: Path
) -> None:
    """Quotas given for all 40 GPUs on the 8 replayed: the replay uses them as given and says
    they add up to 40. The schedule is the one above; with room under quotas of 20, every
    waiting moment is capacity: 21,600 s."""
    q = tmp_path / "q.csv"
    q.write_text("vc,gpus\nva,20\nvb,20\n")
    (r,) = _replay(four_hosts_unlisted, "--quotas", str(q))["results"]
    assert r["quotas"] == {"va": 20, "vb": 20}
    assert (r["metrics"]["fair_share_delay_s"], r["metrics"]["capacity_delay_s"]) == (
        0.0,
        21_600.0,
    )
    assert "the VC quotas given add up to 40 GPUs; the replayed cluster has 8" in r["notes"]
