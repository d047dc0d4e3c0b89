"""The cluster's state over time, rebuilt from attempts and placements by an event sweep.

Change points are the start and end times of every attempt in the store (all of them, whatever
the report's scope). Between two consecutive change points nothing changes, so the state is a
step function (``waitcause.Steps``, index 0 the state before the first change: nothing
running). For each step it keeps what the causes of waiting need, and no more:

- ``free_total``: the free GPUs of the whole cluster;
- ``max_free``: the most free GPUs on one server;
- ``whole``: the most wholly free servers of the largest size in one rack (whole cluster when
  racks are unknown) -- with ``max_free`` this decides ``locality.fits_strict`` for any demand
  (``locality.fits_strict_headroom``);
- per VC, the GPUs its running attempts hold (computed on demand, one VC at a time).

How (vectorised, no per-event Python loop): per-server deltas are summed per (server, time)
and accumulated in SQL (running sum per server), giving each change's free count before and
after; ``waitcause.build_steps`` turns these into the per-step arrays (cumulative sums of the
changes per step; see there).

Data quirks: only attempts placed in time count (``Context.all_runs``, see ``analysis.common``):
a running attempt (the last of a job without a final status) holds its GPUs to the end of the
data, an attempt without a recorded end in a job that ended holds nothing (noted by the
queueing analysis); one whose end is not after its start holds nothing; a server booked beyond its size counts as 0 free; attempts
without placements count for their VC's usage but occupy no known server (reported by the
queueing analysis).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from philly_analyze.analysis.common import Context
from philly_analyze.waitcause import Steps, build_steps, sorted_unique, step_index, usage_steps


@dataclass
class Timeline:
    """The state as step functions (see module docstring)."""

    steps: Steps
    #: Attempts counted for VC usage: (step of the change, GPU delta), by VC.
    vc_changes: dict[str, tuple[np.ndarray, np.ndarray]] = field(default_factory=dict)
    attempts_without_placements: int = 0
    #: Whether any machine has a rack (else the whole cluster counts as one rack).
    racks_known: bool = False

    def vc_usage(self, vc: str) -> np.ndarray:
        """GPUs held by ``vc``'s running attempts in each step."""
        ch = self.vc_changes.get(vc)
        if ch is None:
            return np.zeros(self.steps.steps, np.int64)
        return usage_steps(self.steps, ch[0], ch[1])


def build(ctx: Context, lo_us: int, hi_us: int) -> Timeline:
    """Sweep every attempt of the store into a ``Timeline`` spanning at least [lo, hi]."""
    con = ctx.store.con
    mach = ctx.df(
        "SELECT machine_id, coalesce(num_gpus, 0)::INTEGER AS size, rack FROM machines "
        "ORDER BY machine_id"
    )
    sizes = mach["size"].to_numpy(np.int64)
    rack_codes, rack_known = _racks(mach["rack"])
    idx_table = f"_cs_{ctx.jobs}"
    con.register(idx_table, mach.assign(mi=np.arange(len(mach)))[["machine_id", "mi"]])
    try:
        ev = ctx.df(
            f"""WITH att AS (
                SELECT job_id, attempt_idx, epoch_us(start_time) AS s,
                       epoch_us(end_time) AS e
                FROM {ctx.all_runs} WHERE end_time IS NULL OR end_time > start_time),
            per AS (
                SELECT m.mi, a.s, a.e, count(*) AS c
                FROM {ctx.all_placements} p JOIN att a USING (job_id, attempt_idx)
                JOIN {idx_table} m USING (machine_id)
                GROUP BY p.job_id, p.attempt_idx, m.mi, a.s, a.e),
            d AS (
                SELECT mi, s AS t, c AS delta FROM per
                UNION ALL SELECT mi, e AS t, -c AS delta FROM per WHERE e IS NOT NULL),
            g AS (SELECT mi, t, sum(delta) AS delta FROM d GROUP BY mi, t)
            SELECT mi, t, delta,
                   sum(delta) OVER (PARTITION BY mi ORDER BY t ROWS UNBOUNDED PRECEDING)
                       AS busy_after
            FROM g WHERE delta <> 0"""
        )
    finally:
        con.unregister(idx_table)
    vc_ev = ctx.df(
        f"""WITH a AS (
            SELECT coalesce(j.vc, '') AS vc, epoch_us(a.start_time) AS s,
                   epoch_us(a.end_time) AS e,
                   coalesce(pc.n, a.num_gpus, j.num_gpus, 0) AS n, pc.n IS NULL AS unplaced
            FROM {ctx.all_runs} a JOIN {ctx.all_jobs} j USING (job_id)
            LEFT JOIN (SELECT job_id, attempt_idx, count(*) AS n FROM {ctx.all_placements}
                       GROUP BY ALL) pc USING (job_id, attempt_idx)
            WHERE a.end_time IS NULL OR a.end_time > a.start_time)
        SELECT vc, s AS t, n AS delta, unplaced FROM a
        UNION ALL SELECT vc, e AS t, -n AS delta, false AS unplaced FROM a WHERE e IS NOT NULL"""
    )
    times = sorted_unique(
        np.concatenate([ev["t"].to_numpy(np.int64), vc_ev["t"].to_numpy(np.int64), [lo_us, hi_us]])
    )
    steps = build_steps(
        times,
        sizes,
        rack_codes,
        ev["mi"].to_numpy(np.int64),
        step_index(times, ev["t"].to_numpy(np.int64)),
        ev["delta"].to_numpy(np.int64),
        ev["busy_after"].to_numpy(np.int64),
    )
    vc_changes: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    vt = step_index(times, vc_ev["t"].to_numpy(np.int64))
    vd = vc_ev["delta"].to_numpy(np.int64)
    for vc, rows in vc_ev.groupby("vc", sort=True).indices.items():
        vc_changes[str(vc)] = (vt[rows], vd[rows])
    return Timeline(
        steps,
        vc_changes,
        attempts_without_placements=int(vc_ev["unplaced"].sum()),
        racks_known=rack_known,
    )


def _racks(rack: object) -> tuple[np.ndarray, bool]:
    """Integer rack codes per machine; unknown racks share one code (whole cluster when none
    is known)."""
    import pandas as pd

    r = pd.Series(rack, dtype=object)
    known = bool(r.notna().any())
    if not known:
        return np.zeros(len(r), np.int64), False
    codes, _ = pd.factorize(r.fillna("\0unknown"), sort=True)
    return codes.astype(np.int64), True
