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

How (vectorised, no per-event Python loop): per (attempt, server) GPU counts come from SQL;
``waitcause.server_events`` sums them per (server, time) and accumulates each server's booked
GPUs, giving each change's free count before and after; ``waitcause.build_steps`` turns these
into the per-step arrays (cumulative sums of the changes per step; see there).

Data quirks: attempts placed in time count (``Context.all_runs``, see ``analysis.common``): a
running attempt (the last of a job without a final status) holds its GPUs to the end of the
data. What the data leaves open is kept as two bounds, the least and the most the cluster can
have held (``waitcause``, *Incomplete data*): an attempt without a recorded end in a job that
ended (``attempts.timing = 'end_unknown'``) holds nothing in the least and, in the most, from
its start to its job's next attempt's start (attempts run one after another), or to the end of
the data for a last attempt; an attempt whose GPU count is unknown (no placements, no count)
holds 1 GPU for its VC in the least and any number in the most. One whose end is not after its
start holds nothing; a server booked beyond its size counts as 0 free; attempts without
placements count for their VC's usage but occupy no known server (reported by the queueing
analysis).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from philly_analyze.analysis.common import Context
from philly_analyze.waitcause import (
    UNBOUNDED,
    MostHeld,
    Steps,
    build_steps,
    seconds_where,
    server_events,
    sorted_unique,
    step_index,
    usage_steps,
)

_NO_END = np.iinfo(np.int64).max


@dataclass
class Timeline:
    """The state as step functions (see module docstring): ``steps``/``vc_changes`` the least
    the cluster can have held, ``most``/``vc_changes_most`` the most (None: the same)."""

    steps: Steps
    #: Attempts counted for VC usage: (step of the change, GPU delta), by VC.
    vc_changes: dict[str, tuple[np.ndarray, np.ndarray]] = field(default_factory=dict)
    attempts_without_placements: int = 0
    #: Whether any machine has a rack (else the whole cluster counts as one rack).
    racks_known: bool = False
    most: Steps | None = None
    vc_changes_most: dict[str, tuple[np.ndarray, np.ndarray]] | None = None
    #: Attempts whose end is unknown (``attempts.timing = 'end_unknown'``) and the steps each
    #: may have held its GPUs over: (step of its start, step of its latest end or no end).
    end_unknown: int = 0
    end_unknown_span: tuple[np.ndarray, np.ndarray] = (np.zeros(0, np.int64),) * 2
    #: Attempts counted for VC usage whose GPU count is unknown (1 at least, any at most).
    gpus_unknown: int = 0

    def vc_usage(self, vc: str) -> np.ndarray:
        """GPUs held by ``vc``'s running attempts in each step (the least)."""
        return self._usage(self.vc_changes, vc)

    def vc_usage_most(self, vc: str) -> np.ndarray:
        """The most GPUs ``vc``'s attempts can have held in each step."""
        return self._usage(self.vc_changes_most or self.vc_changes, vc)

    def _usage(self, changes: dict[str, tuple[np.ndarray, np.ndarray]], vc: str) -> np.ndarray:
        ch = changes.get(vc)
        if ch is None:
            return np.zeros(self.steps.steps, np.int64)
        return usage_steps(self.steps, ch[0], ch[1])

    def most_held(self) -> MostHeld:
        """The upper bound for ``waitcause.split_waits``."""
        usage = self.vc_usage_most if self.vc_changes_most is not None else None
        return MostHeld(self.most, usage)

    def end_unknown_us(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        """Microseconds of each interval ``[a, b)`` during which an attempt whose end is
        unknown may have held GPUs."""
        s, e = self.end_unknown_span
        ended = e != _NO_END
        held = usage_steps(
            self.steps,
            np.concatenate([s, e[ended]]),
            np.concatenate([np.ones(len(s)), -np.ones(int(ended.sum()))]),
        )
        return seconds_where(self.steps, held > 0, a, b)


def build(ctx: Context, lo_us: int, hi_us: int) -> Timeline:
    """Sweep every attempt of the store into a ``Timeline`` spanning at least [lo, hi]."""
    mach = ctx.df(
        "SELECT machine_id, coalesce(num_gpus, 0)::INTEGER AS size, rack FROM machines "
        "ORDER BY machine_id"
    )
    sizes = mach["size"].to_numpy(np.int64)
    rack_codes, rack_known = _racks(mach["rack"])
    att = _attempts(ctx)
    held = _placed(ctx, mach)
    t_end = held["e"].to_numpy(np.int64, na_value=_NO_END)
    a_end = att["e"].to_numpy(np.int64, na_value=_NO_END)
    times = sorted_unique(
        np.concatenate(
            [
                held["s"].to_numpy(np.int64),
                t_end[t_end != _NO_END],
                att["s"].to_numpy(np.int64),
                a_end[a_end != _NO_END],
                [lo_us, hi_us],
            ]
        )
    )

    def idx(t: np.ndarray) -> np.ndarray:
        """Step index of each time; open ends stay open."""
        return np.where(t == _NO_END, _NO_END, step_index(times, t))

    mi, c = held["mi"].to_numpy(np.int64), held["c"].to_numpy(np.int64)
    hs, he = idx(held["s"].to_numpy(np.int64)), idx(t_end)
    sure = ~held["unknown_end"].to_numpy(bool)
    steps = build_steps(
        times, sizes, rack_codes, *server_events(mi[sure], hs[sure], he[sure], c[sure])
    )
    unknown = att["unknown_end"].to_numpy(bool)
    most = None
    if unknown.any():
        most = build_steps(times, sizes, rack_codes, *server_events(mi, hs, he, c))
    s_idx, e_idx = idx(att["s"].to_numpy(np.int64)), idx(a_end)
    n = att["n"].to_numpy(np.float64, na_value=np.nan)
    known = ~np.isnan(n)
    least = _vc_changes(att["vc"], s_idx, e_idx, np.where(known, n, 1), ~unknown)
    most_ch = None
    if unknown.any() or not known.all():
        most_ch = _vc_changes(att["vc"], s_idx, e_idx, np.where(known, n, UNBOUNDED), None)
    return Timeline(
        steps,
        least,
        attempts_without_placements=int(att["unplaced"].sum()),
        racks_known=rack_known,
        most=most,
        vc_changes_most=most_ch,
        end_unknown=int(unknown.sum()),
        end_unknown_span=(s_idx[unknown], e_idx[unknown]),
        gpus_unknown=int((~known).sum()),
    )


def _attempts(ctx: Context) -> pd.DataFrame:
    """Every attempt that held GPUs, or may have: its VC, start, end (its latest possible end
    when it is unknown: its job's next start, else none), GPUs (NULL when unknown), whether
    it has no placements and whether its end is unknown."""
    return ctx.df(
        f"""WITH a AS ({_held_sql(ctx)})
        SELECT coalesce(j.vc, '') AS vc, a.s, a.e,
               coalesce(pc.n, a.num_gpus, j.num_gpus) AS n, pc.n IS NULL AS unplaced,
               a.unknown_end
        FROM a JOIN {ctx.all_jobs} j USING (job_id)
        LEFT JOIN (SELECT job_id, attempt_idx, count(*) AS n FROM {ctx.all_placements}
                   GROUP BY ALL) pc USING (job_id, attempt_idx)
        ORDER BY a.job_id, a.attempt_idx"""
    )


def _placed(ctx: Context, mach: pd.DataFrame) -> pd.DataFrame:
    """Per (attempt, server): the server's index in ``mach``, the attempt's start and end (as
    ``_attempts``), the GPUs it held there and whether its end is unknown."""
    con = ctx.store.con
    idx_table = f"_cs_{ctx.jobs}"
    con.register(idx_table, mach.assign(mi=np.arange(len(mach)))[["machine_id", "mi"]])
    try:
        return ctx.df(
            f"""WITH a AS ({_held_sql(ctx)})
            SELECT m.mi, a.s, a.e, count(*) AS c, a.unknown_end
            FROM {ctx.all_placements} p JOIN a USING (job_id, attempt_idx)
            JOIN {idx_table} m USING (machine_id)
            GROUP BY p.job_id, p.attempt_idx, m.mi, a.s, a.e, a.unknown_end"""
        )
    finally:
        con.unregister(idx_table)


def _held_sql(ctx: Context) -> str:
    """The attempts placed in time (``Context.all_runs``: ended, or running to the end of the
    data) and those whose end is unknown, with their latest possible end: the next start of
    their job (attempts run one after another), none for the last. Holdings whose end is not
    after their start hold nothing."""
    return f"""SELECT * FROM (
        SELECT job_id, attempt_idx, num_gpus, epoch_us(start_time) AS s,
               epoch_us(CASE WHEN timing = 'end_unknown' THEN next_start ELSE end_time END) AS e,
               timing = 'end_unknown' AS unknown_end
        FROM (SELECT *, min(start_time) OVER (
                  PARTITION BY job_id ORDER BY attempt_idx
                  ROWS BETWEEN 1 FOLLOWING AND UNBOUNDED FOLLOWING) AS next_start
              FROM {ctx.all_attempts})
        WHERE timing IN ('ended', 'running', 'end_unknown'))
        WHERE e IS NULL OR e > s"""


def _vc_changes(
    vc: pd.Series, s: np.ndarray, e: np.ndarray, n: np.ndarray, keep: np.ndarray | None
) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Per VC: (step of each change, GPU delta) of attempts holding ``n`` over steps
    ``[s, e)`` (``e`` ``_NO_END``: to the end), the rows ``keep`` only (all if None)."""
    rows = np.arange(len(s)) if keep is None else np.flatnonzero(keep)
    out: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    groups = vc.iloc[rows].groupby(vc.iloc[rows].to_numpy(), sort=True).indices
    for v, r in groups.items():
        sel = rows[r]
        ended = sel[e[sel] != _NO_END]
        t = np.concatenate([s[sel], e[ended]])
        d = np.concatenate([n[sel], -n[ended]]).astype(np.int64)
        out[str(v)] = (t, d)
    return out


def _racks(rack: object) -> tuple[np.ndarray, bool]:
    """Integer rack codes per machine; unknown racks share one code (whole cluster when none
    is known)."""
    r = pd.Series(rack, dtype=object)
    known = bool(r.notna().any())
    if not known:
        return np.zeros(len(r), np.int64), False
    codes, _ = pd.factorize(r.fillna("\0unknown"), sort=True)
    return codes.astype(np.int64), True
