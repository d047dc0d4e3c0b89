"""Figure 7 (host CPU and memory of servers running GPU jobs) by hand."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

from philly_analyze.analysis import run
from philly_analyze.store import Store
from tests.analysis_stores import Att, Job, t, write_store


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """h1 on m0 [0,3); h2 on s0 [1,2) and h3 on s0 [1,3) (overlap: s0 minute 1 counts once);
    s1 runs nothing. CPU per minute 0..3: m0 10,20,30,40 -> minutes 0-2 count: 10,20,30;
    s0 50,60,70,80 -> minutes 1-2: 60,70; s1 99 (never busy). Memory: m0 minute 0 75% used
    (100 total, 25 free), minute 1 total 0 (skipped); s0 minute 1 25% used (200, 150)."""
    jobs = [
        Job("h1", "v", "u", "passed", 0, [Att(0, 3, "passed", {"m0": [0]})]),
        Job("h2", "v", "u", "passed", 1, [Att(1, 2, "passed", {"s0": [0]})]),
        Job("h3", "v", "u", "passed", 1, [Att(1, 3, "passed", {"s0": [1]})]),
    ]
    cpu = (
        [(m, "m0", 10.0 * (m + 1)) for m in range(4)]
        + [(m, "s0", 50.0 + 10 * m) for m in range(4)]
        + [(m, "s1", 99.0) for m in range(4)]
    )
    mem = [(0, "m0", 100.0, 25.0), (1, "m0", 0.0, 0.0), (1, "s0", 200.0, 150.0)]
    ts = pa.timestamp("us", tz="UTC")
    return write_store(
        tmp_path_factory.mktemp("h") / "store",
        machines={"m0": 8, "s0": 2, "s1": 2},
        jobs=jobs,
        extra={
            "cpu_util": {
                "time": pa.array([t(r[0]) for r in cpu], ts),
                "machine_id": [r[1] for r in cpu],
                "util": pa.array([r[2] for r in cpu], pa.float32()),
            },
            "mem_util": {
                "time": pa.array([t(r[0]) for r in mem], ts),
                "machine_id": [r[1] for r in mem],
                "mem_total": [r[2] for r in mem],
                "mem_free": [r[3] for r in mem],
            },
        },
    )


def test_host_resources(store: Path) -> None:
    with Store(store, read_only=True) as s:
        rep = run(s, ["host_resources"])
    h = rep["host_resources"].frame("host").set_index(["metric", "servers"])
    # CPU samples 10, 20, 30, 60, 70: mean 38; nearest rank p50 = 3rd -> 30; p90 = 5th -> 70.
    assert h.loc[
        ("cpu", "all"), ["minutes", "mean", "p50", "p90"]
    ].to_numpy().tolist() == pytest.approx([5, 38, 30, 70])
    assert h.loc[("cpu", "8-GPU"), "mean"] == pytest.approx(20)
    assert h.loc[("cpu", "2-GPU"), "mean"] == pytest.approx(65)
    assert h.loc[("mem", "all"), ["minutes", "mean"]].to_numpy().tolist() == pytest.approx([2, 50])


def test_since_until_cut_samples(store: Path) -> None:
    from philly_analyze.analysis import Scope

    # Jobs submitted in [1, 2) min: h2, h3 (s0 busy [1,3)); samples cut to [1, 2): s0 min 1.
    with Store(store, read_only=True) as s:
        rep = run(s, ["host_resources"], Scope(since=t(1), until=t(2)))
    h = rep["host_resources"].frame("host").set_index(["metric", "servers"])
    assert h.loc[("cpu", "all"), ["minutes", "mean"]].to_numpy().tolist() == pytest.approx([1, 60])
