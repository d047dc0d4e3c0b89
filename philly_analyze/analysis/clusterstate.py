"""The cluster's state over time, rebuilt from attempts and placements by an event sweep.

Change points are the start and end times of every attempt in the store (all of them, whatever
the report's scope). Between two consecutive change points nothing changes, so the state is a
step function over ``K`` change points, stored as arrays of length ``K + 1`` (index 0 is the
state before the first change: nothing running). For each step it keeps what the locality
constraint and the quotas need, and no more:

- ``max_free``: the most free GPUs on one server;
- ``whole``: the most wholly free servers of the largest size in one rack (whole cluster when
  racks are unknown) -- with ``max_free`` this decides ``locality.fits_strict`` for any demand
  (``locality.fits_strict_headroom``);
- per VC, the GPUs its running attempts hold (computed on demand, one VC at a time).

How (vectorised, no per-event Python loop): per-server deltas are summed per (server, time)
and accumulated in SQL (running sum per server), giving each change's free count before and
after; a change moves a server across free-count levels ``1..largest``, so adding ``+1/-1`` per
level crossed at its time index and taking a cumulative sum gives, per step, how many servers
have at least ``L`` free GPUs; ``max_free`` is the highest level with a server. The same trick
on "wholly free largest server" per rack gives ``whole``.

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
from philly_analyze.locality import fits_strict_headroom


@dataclass
class Timeline:
    """The state as step functions over ``bounds`` (see module docstring)."""

    #: Step j covers [bounds[j], bounds[j+1]) in epoch microseconds; len K + 2.
    bounds: np.ndarray
    max_free: np.ndarray
    whole: np.ndarray
    largest: int
    #: Attempts counted for VC usage: (vc, time index of the change, GPU delta), by VC.
    vc_changes: dict[str, tuple[np.ndarray, np.ndarray]] = field(default_factory=dict)
    attempts_without_placements: int = 0
    #: Whether any machine has a rack (else the whole cluster counts as one rack).
    racks_known: bool = False

    @property
    def steps(self) -> int:
        return len(self.bounds) - 1

    def vc_usage(self, vc: str) -> np.ndarray:
        """GPUs held by ``vc``'s running attempts in each step."""
        usage = np.zeros(self.steps, np.int64)
        ch = self.vc_changes.get(vc)
        if ch is not None:
            np.add.at(usage, ch[0], ch[1])
            usage = np.cumsum(usage)
        return usage

    def fits(self, n: int) -> np.ndarray:
        """Per step: whether a placement of ``n`` GPUs meeting the locality constraint is free."""
        return fits_strict_headroom(self.max_free, self.whole, self.largest, n)

    def measure(self, indicator: np.ndarray, a_us: np.ndarray, b_us: np.ndarray) -> np.ndarray:
        """Seconds of each interval ``[a, b)`` during which ``indicator`` (per step) holds."""
        lengths = np.diff(self.bounds).astype(np.float64)
        ind = indicator.astype(np.float64)
        prefix = np.concatenate([[0.0], np.cumsum(ind * lengths)])

        def integral(t: np.ndarray) -> np.ndarray:
            j = np.clip(np.searchsorted(self.bounds, t, side="right") - 1, 0, self.steps - 1)
            return prefix[j] + ind[j] * (t - self.bounds[j]).astype(np.float64)

        return (integral(b_us) - integral(a_us)) / 1e6


def build(ctx: Context, lo_us: int, hi_us: int) -> Timeline:
    """Sweep every attempt of the store into a ``Timeline`` spanning at least [lo, hi]."""
    con = ctx.store.con
    mach = ctx.df(
        "SELECT machine_id, coalesce(num_gpus, 0)::INTEGER AS size, rack FROM machines "
        "ORDER BY machine_id"
    )
    sizes = mach["size"].to_numpy(np.int64)
    largest = int(sizes.max()) if len(sizes) else 0
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
    times = np.unique(
        np.concatenate([ev["t"].to_numpy(np.int64), vc_ev["t"].to_numpy(np.int64), [lo_us, hi_us]])
    )
    # Step 0 is "before every change"; the last step runs past hi.
    bounds = np.concatenate([[times[0] - 1], times, [times[-1] + 1]])
    k_steps = len(bounds) - 1
    tidx = np.searchsorted(times, ev["t"].to_numpy(np.int64)) + 1
    mi = ev["mi"].to_numpy(np.int64)
    size = sizes[mi]
    after = np.clip(size - ev["busy_after"].to_numpy(np.int64), 0, size)
    before = np.clip(size - (ev["busy_after"] - ev["delta"]).to_numpy(np.int64), 0, size)

    # Servers with >= L free GPUs, per step, for L = 1..largest.
    levels = np.zeros((max(largest, 1), k_steps), np.int32)
    levels[:, 0] = [(sizes >= lv).sum() for lv in range(1, max(largest, 1) + 1)]
    for lv in range(1, largest + 1):
        d = (after >= lv).astype(np.int32) - (before >= lv).astype(np.int32)
        nz = d != 0
        np.add.at(levels[lv - 1], tidx[nz], d[nz])
    levels = np.cumsum(levels, axis=1)
    max_free = (levels > 0).sum(axis=0).astype(np.int64)
    del levels

    # Wholly free servers of the largest size, per rack, per step; then the best rack.
    big = size == largest
    dw = ((after == size) & big).astype(np.int32) - ((before == size) & big).astype(np.int32)
    n_racks = int(rack_codes.max()) + 1 if len(rack_codes) else 1
    whole_r = np.zeros((n_racks, k_steps), np.int32)
    if len(sizes):
        whole_r[:, 0] = np.bincount(rack_codes[sizes == largest], minlength=n_racks)
    nz = dw != 0
    np.add.at(whole_r, (rack_codes[mi[nz]], tidx[nz]), dw[nz])
    whole = np.cumsum(whole_r, axis=1).max(axis=0).astype(np.int64)
    del whole_r

    vc_changes: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    vt = np.searchsorted(times, vc_ev["t"].to_numpy(np.int64)) + 1
    vd = vc_ev["delta"].to_numpy(np.int64)
    for vc, rows in vc_ev.groupby("vc", sort=True).indices.items():
        vc_changes[str(vc)] = (vt[rows], vd[rows])
    return Timeline(
        bounds,
        max_free,
        whole,
        largest,
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
