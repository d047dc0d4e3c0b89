"""The raw-format files of ``sample_data/`` (YARN RM logs, Ganglia exports) read back by the
raw-log parsers agree with the ground truth and with the published-format files.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
from click.testing import CliRunner

from philly_analyze.cli import main
from philly_analyze.store import Store

SAMPLE = Path(__file__).resolve().parent.parent / "sample_data"
EPOCH = pd.Timestamp(0, tz="UTC")


def _ingest(path: Path, store: Path) -> None:
    res = CliRunner().invoke(main, ["ingest", str(path), "--store", str(store), "-q", "--json"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.output)["rejected"] == 0


def test_yarn_logs_match_ground_truth(tmp_path: Path) -> None:
    store = tmp_path / "store"
    _ingest(SAMPLE / "yarn", store)
    with Store(store, read_only=True) as s:
        jobs = s.df("SELECT job_id, vc, user_id, status FROM jobs")
        att = s.df(
            "SELECT job_id, attempt_idx, epoch(start_time) AS s, epoch(end_time) AS e, outcome "
            "FROM attempts"
        )
        pl = s.df("SELECT job_id, attempt_idx, machine_id FROM placements")
    tj = pd.read_parquet(SAMPLE / "ground_truth" / "jobs.parquet")
    m = jobs.merge(tj, on="job_id", suffixes=("", "_t"))
    assert len(m) == len(tj) == len(jobs)
    assert (m.vc == m.vc_t).all() and (m.user_id == m.user_id_t).all()
    done = m[~m.censored]
    assert (done.status == done.status_t).all()
    ta = pd.read_parquet(SAMPLE / "ground_truth" / "attempts.parquet")
    ta["ts"] = (ta.start_time - EPOCH).dt.total_seconds()
    ta["te"] = (ta.end_time - EPOCH).dt.total_seconds()
    b = att.merge(ta, on=["job_id", "attempt_idx"], suffixes=("", "_t"))
    assert len(b) == len(ta) == len(att)
    # Milliseconds inside the published second; the repeated fall-back hour reads right, also
    # where a rolled file begins inside it (the sample's logs roll during that hour).
    ds = np.floor(b.s) - b.ts
    assert set(np.unique(ds)) == {0}, np.unique(ds)
    ended = b.te.notna()
    de = np.floor(b.e[ended]) - b.te[ended]
    assert set(np.unique(de)) == {0}, np.unique(de)
    assert (b.outcome == b.outcome_t).all()
    # One container per server: the machines of each attempt are the truth's.
    tp = pd.read_parquet(SAMPLE / "ground_truth" / "placements.parquet")
    got = pl.groupby(["job_id", "attempt_idx"]).machine_id.apply(lambda x: sorted(set(x)))
    want = tp.groupby(["job_id", "attempt_idx"]).machine_id.apply(lambda x: sorted(set(x)))
    assert got.to_dict() == want.to_dict()


def test_ganglia_matches_published_minutes(tmp_path: Path) -> None:
    store = tmp_path / "store"
    _ingest(SAMPLE / "ganglia", store)
    host = sorted(p.name for p in (SAMPLE / "ganglia" / "philly").iterdir())[0]
    with Store(store, read_only=True) as s:
        g = s.df(
            "SELECT epoch(time) AS t, gpu_idx, util FROM gpu_util WHERE machine_id = ? "
            "ORDER BY t, gpu_idx",
            [host],
        )
    # The published minutes of the same GPU, by UTC time, averaged over each 6-minute export
    # step; each ingested minute must carry the mean of the step that holds that minute
    # (compared by time, so a step stamped at the wrong end would show).
    with open(SAMPLE / "cluster_gpu_util") as f:
        rows = [ln.rstrip("\n").split(",") for ln in f if ln.split(",", 2)[1] == host]
    offset = {"PDT": 7 * 3600, "PST": 8 * 3600}
    pub_t = np.array(
        [pd.Timestamp(r[0][:19], tz="UTC").timestamp() + offset[r[0][20:]] for r in rows]
    )
    pub_v = pd.to_numeric(pd.Series([r[2] for r in rows]), errors="coerce").to_numpy()
    t0 = pub_t.min()
    step_means = pd.Series(pub_v).groupby((pub_t - t0) // 360).mean()
    g0 = g[g.gpu_idx == 0]
    want = step_means.reindex((g0.t.to_numpy() - t0) // 360).to_numpy()
    ok = ~np.isnan(want)
    assert ok.sum() > 600
    np.testing.assert_allclose(g0.util.to_numpy()[ok], want[ok], atol=1e-3)
