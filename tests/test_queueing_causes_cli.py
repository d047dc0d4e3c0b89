"""Why jobs waited, through the real CLI on a hand-written published-format trace: ``ingest``,
then ``report --format json --vc-quotas`` (Table 2 and its causes) and ``replay`` (the replay's
true causes and metrics) on the same scenario, worked out by hand minute by minute.

Two 4-GPU servers m0, m1; quotas a = 6, b = 2 GPUs; times in minutes from 10:00.

  job  vc  GPUs  submit  runs        on
  x    b   4     0       [0,30)      m1 0-3   b beyond its quota: borrows a's idle GPUs
  y1   b   2     0       [0,60)      m0 0,1   (within b's quota)
  y2   b   2     0       [0,40)      m0 2,3   borrowed
  a1   a   2     5       [30,60)     m1 0,1
  b0   b   2     10      [30,40)     m1 2,3
  a2   a   4     35      [60,70)     m0 0-3

- a1 waits [5,30): a holds 0, 0 + 2 <= 6 (quota left), but b's jobs hold all 8 GPUs: 0 free
  < 2 -> **capacity** 25 min (the old rule called this fragmentation).
- b0 waits [10,30): b holds 8, 8 + 2 > 2 -> **fair_share** 20 min.
- a2 waits [35,60): a holds 2 (a1), 2 + 4 <= 6. [35,40): m0 full (y1, y2), m1 full (a1, b0):
  0 free -> **capacity** 5 min. [40,60): y2 and b0 ended, 2 free on m0 + 2 on m1 = 4 >= 4 but
  no server with 4 -> **fragmentation** 20 min. At 60 a1 and y1 end: m0 is wholly free.

Totals: fair_share 20 min, fragmentation 20 min, capacity 30 min, other 0 (70 min).
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
from click.testing import CliRunner

from philly_analyze.cli import main
from philly_analyze.store import Store
from tests.philly_files import attempt, job, write_job_log, write_machine_list

IDS = {
    n: f"application_1506000000000_000{i}"
    for i, n in enumerate(("x", "y1", "y2", "a1", "b0", "a2"), start=1)
}
#: 10:00 Pacific daylight time, the published trace's clock, in UTC.
T0 = pd.Timestamp("2017-10-03 17:00:00", tz="UTC")


def _t(minute: int) -> str:
    return f"2017-10-03 {10 + minute // 60:02d}:{minute % 60:02d}:00"


def _trace(d: Path) -> tuple[Path, Path]:
    rows = [  # name, vc, submit, start, end, placement
        ("x", "b", 0, 0, 30, {"m1": [0, 1, 2, 3]}),
        ("y1", "b", 0, 0, 60, {"m0": [0, 1]}),
        ("y2", "b", 0, 0, 40, {"m0": [2, 3]}),
        ("a1", "a", 5, 30, 60, {"m1": [0, 1]}),
        ("b0", "b", 10, 30, 40, {"m1": [2, 3]}),
        ("a2", "a", 35, 60, 70, {"m0": [0, 1, 2, 3]}),
    ]
    d.mkdir()
    jobs = [job(IDS[n], _t(s), [attempt(_t(a), _t(b), pl)], vc=vc) for n, vc, s, a, b, pl in rows]
    write_job_log(d / "cluster_job_log", jobs)
    write_machine_list(d / "cluster_machine_list", [("m0", 4, "12GB"), ("m1", 4, "12GB")])
    quotas = d.parent / "quotas.csv"
    quotas.write_text("vc,gpus\na,6\nb,2\n")
    return d, quotas


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("causes")
    trace, quotas = _trace(root / "trace")
    r = CliRunner().invoke(main, ["ingest", str(trace), "--store", str(root / "store"), "-q"])
    assert r.exit_code == 0, r.output
    return root / "store", quotas


def _tables(doc: dict, names: tuple[str, ...]) -> dict[str, pd.DataFrame]:
    rows = pd.DataFrame(doc["queueing"])
    return {n: rows[rows["table"] == n].dropna(axis=1, how="all") for n in names}


def test_report_splits_waits_three_ways(store: tuple[Path, Path]) -> None:
    path, quotas = store
    args = ["report", "--store", str(path), "--format", "json", "--vc-quotas", str(quotas)]
    r = CliRunner().invoke(main, [*args, "--section", "queueing", "-q"])
    assert r.exit_code == 0, r.output
    t = _tables(json.loads(r.stdout), ("table2", "table2_causes", "wait_seconds"))
    causes = t["table2_causes"].set_index("delay_type")["gpus_2_4"].to_dict()
    # b0 fair-share, a2 fragmentation (20 min against 5 of capacity), a1 capacity.
    assert causes == {
        "fair_share": 1,
        "fragmentation": 1,
        "capacity": 1,
        "other": 0,
        "undetermined": 0,
    }
    # The paper's two-way view: capacity is part of its fragmentation (a1 and a2).
    paper = t["table2"].set_index("delay_type")["gpus_2_4"].to_dict()
    assert paper == {"fair_share": 1, "fragmentation": 2, "other": 0, "undetermined": 0}
    share = t["wait_seconds"].set_index("gpu_bucket").loc["all"]
    assert share["wait_hours"] == pytest.approx(70 / 60)
    assert share["fair_share_pct"] == pytest.approx(100 * 20 / 70)
    assert share["fragmentation_pct"] == pytest.approx(100 * 20 / 70)
    assert share["capacity_pct"] == pytest.approx(100 * 30 / 70)
    assert share["other_pct"] == pytest.approx(0.0)
    assert share["undetermined_pct"] == 0.0


def test_replay_metrics_follow_the_same_causes(store: tuple[Path, Path], tmp_path: Path) -> None:
    """The replay schedules the same jobs exactly as the log shows (philly, best fit; the
    locality wait is raised to 60 min, else a2 would take the 2 + 2 GPUs at 45), and its true
    causes and metrics are the report's."""
    path, quotas = store
    out = tmp_path / "replayed"
    r = CliRunner().invoke(
        main,
        [
            *("replay", "--store", str(path), "--quotas", str(quotas), "--policy", "philly"),
            *("--param", "locality_wait_min=60", "--out", str(out), "--format", "json", "-q"),
        ],
    )
    assert r.exit_code == 0, r.output
    with Store(out, read_only=True) as st:
        starts = dict(st.con.execute("SELECT job_id, start_time FROM attempts").fetchall())
    # The log's starts, minute for minute (x, y1, y2 at 0; a1, b0 at 30; a2 at 60).
    assert {k: (v - T0).total_seconds() / 60 for k, v in starts.items()} == {
        IDS[n]: m for n, m in (("x", 0), ("y1", 0), ("y2", 0), ("a1", 30), ("b0", 30), ("a2", 60))
    }
    m = json.loads(r.stdout)["results"][0]["metrics"]
    assert m["fair_share_delay_s"] == 20 * 60
    assert m["fragmentation_delay_s"] == 20 * 60
    assert m["capacity_delay_s"] == 30 * 60
    assert m["other_delay_s"] == 0
    assert m["fair_share_delay_frac"] == pytest.approx(20 / 70)
    w = pd.read_parquet(out / "waiting.parquet")
    got = {
        (k, c): (s, (a - T0).total_seconds() / 60, (b - T0).total_seconds() / 60)
        for k, c, s, a, b in zip(
            w["job_id"], w["cause"], w["seconds"] / 60, w["start"], w["end"], strict=True
        )
    }
    assert got == {
        (IDS["a1"], "capacity"): (25, 5, 30),
        (IDS["b0"], "fair_share"): (20, 10, 30),
        (IDS["a2"], "capacity"): (5, 35, 40),
        (IDS["a2"], "fragmentation"): (20, 40, 60),
    }
