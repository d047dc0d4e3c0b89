"""The replay's input: jobs as numpy columns, attempts in CSR form (no per-job Python objects).

Times are integer microseconds since the Unix epoch (the store's ``timestamp[us]``), so a
schedule written to a store and read back is bit-identical (see the fidelity test).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa

from philly_analyze.schemas import ATTEMPT_OUTCOMES

if TYPE_CHECKING:  # pandas only for from_frame: importing it costs ~0.5 s per process
    import pandas as pd

#: Outcome codes: index into ``schemas.ATTEMPT_OUTCOMES``; -1 unknown.
OUTCOME_CODE = {o: i for i, o in enumerate(ATTEMPT_OUTCOMES)}
FAILED = OUTCOME_CODE["failed"]
#: VC name of jobs without one: they form one queue with no quota (they can only borrow) and
#: are written back with a NULL vc.
NO_VC = ""


@dataclass
class Workload:
    """Jobs sorted by (submit time, job id). Attempt ``k`` of job ``j`` is row
    ``att_ptr[j] + k`` of the ``att_*`` arrays.

    - ``att_dur_us``: observed duration (microseconds) of each attempt;
    - ``att_outcome``: outcome code (``OUTCOME_CODE``), -1 unknown;
    - ``att_servers``: servers the attempt spanned in the data (0 = unknown), used to take
      the locality slowdown out of observed durations;
    - ``obs_start_us``: observed first start (for the fidelity error), ``MISSING`` if unknown.
    """

    job_ids: np.ndarray
    submit_us: np.ndarray
    vc: np.ndarray
    vc_names: tuple[str, ...]
    user: np.ndarray
    user_names: tuple[str, ...]
    num_gpus: np.ndarray
    att_ptr: np.ndarray
    att_dur_us: np.ndarray
    att_outcome: np.ndarray
    att_servers: np.ndarray
    obs_start_us: np.ndarray
    status: list[str | None] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    #: The input's data-quality flags per job (``jobs.flags``; empty when unknown), written
    #: back with the replayed jobs (e.g. ``attempts_unknown`` of job-list jobs).
    flags: list[list[str] | None] = field(default_factory=list)

    MISSING = np.iinfo(np.int64).min

    def __len__(self) -> int:
        return len(self.job_ids)

    @property
    def num_attempts(self) -> np.ndarray:
        """Attempts per job."""
        return np.diff(self.att_ptr)

    def subset(self, mask: np.ndarray) -> Workload:
        """The jobs where ``mask`` is true (attempts follow)."""
        return self.take(np.flatnonzero(mask))

    def take(self, idx: np.ndarray) -> Workload:
        """The jobs at positions ``idx``, in that order (attempts follow). The caller keeps
        the (submit time, job id) order the engines expect (``subset`` does; a sweep that
        perturbs submit times passes the new sort order)."""
        idx = np.asarray(idx, dtype=np.int64)
        counts = self.num_attempts[idx]
        ptr = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
        rows = (
            np.concatenate([np.arange(self.att_ptr[j], self.att_ptr[j + 1]) for j in idx])
            if len(idx)
            else np.zeros(0, np.int64)
        )
        rows = rows.astype(np.int64)
        return Workload(
            self.job_ids[idx],
            self.submit_us[idx],
            self.vc[idx],
            self.vc_names,
            self.user[idx],
            self.user_names,
            self.num_gpus[idx],
            ptr,
            self.att_dur_us[rows],
            self.att_outcome[rows],
            self.att_servers[rows],
            self.obs_start_us[idx],
            [self.status[i] for i in idx] if self.status else [],
            list(self.notes),
            flags=[self.flags[i] for i in idx] if self.flags else [],
        )

    # ------------------------------------------------------------------ constructors
    @classmethod
    def from_columns(
        cls,
        job_id: Sequence[str],
        submit_us: Sequence[int],
        vc: Sequence[str | None],
        num_gpus: Sequence[int],
        durations_us: Sequence[Sequence[int]],
        outcomes: Sequence[Sequence[str | None]] | None = None,
        servers: Sequence[Sequence[int]] | None = None,
        user: Sequence[str | None] | None = None,
        obs_start_us: Sequence[int | None] | None = None,
        status: Sequence[str | None] | None = None,
    ) -> Workload:
        """Build from per-job columns; ``durations_us[j]`` lists job j's attempt durations.
        Jobs are sorted by (submit, job_id); attempt outcomes default to failed for all but
        the last (which is unknown)."""
        n = len(job_id)
        ids = np.asarray(job_id, dtype=object)
        sub = np.asarray(submit_us, dtype=np.int64)
        order = np.lexsort((ids.astype(str), sub)) if n else np.zeros(0, np.int64)
        vc_codes, vc_names = _codes([vc[i] for i in order], NO_VC)
        user_codes, user_names = _codes(
            [user[i] for i in order] if user is not None else [None] * n, None
        )
        counts = np.asarray([len(durations_us[i]) for i in order], dtype=np.int64)
        ptr = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
        dur = np.asarray([d for i in order for d in durations_us[i]], dtype=np.int64)
        if outcomes is None:
            oc = [FAILED if k < c - 1 else -1 for c in counts for k in range(c)]
        else:
            oc = [OUTCOME_CODE.get(o, -1) if o else -1 for i in order for o in outcomes[i]]
        srv = [s or 0 for i in order for s in servers[i]] if servers is not None else [0] * len(dur)
        obs = (
            [cls.MISSING if obs_start_us[i] is None else obs_start_us[i] for i in order]
            if obs_start_us is not None
            else [cls.MISSING] * n
        )
        return cls(
            ids[order],
            sub[order],
            vc_codes,
            vc_names,
            user_codes,
            user_names,
            np.asarray(num_gpus, dtype=np.int64)[order],
            ptr,
            dur,
            np.asarray(oc, dtype=np.int8),
            np.asarray(srv, dtype=np.int64),
            np.asarray(obs, dtype=np.int64),
            [status[i] for i in order] if status is not None else [],
        )

    @classmethod
    def from_frame(cls, df: pd.DataFrame) -> Workload:
        """From a DataFrame with columns ``job_id, submit_time, vc, num_gpus`` and either
        ``duration_s`` (one attempt per job) or ``durations_s`` (a list per job, with optional
        ``outcomes`` lists); optional ``user_id``. ``submit_time`` is a datetime (naive = UTC)
        or seconds since the epoch."""
        import pandas as pd

        sub = df["submit_time"]
        submit_us: pd.Series
        if pd.api.types.is_datetime64_any_dtype(sub):
            ts = pd.to_datetime(sub, utc=True)
            submit_us = (ts - pd.Timestamp(0, tz="UTC")) // pd.Timedelta(microseconds=1)
        else:
            submit_us = (sub.astype(float) * 1e6).round()
        if "durations_s" in df:
            durs = [[round(float(x) * 1e6) for x in d] for d in df["durations_s"]]
        else:
            durs = [[round(float(x) * 1e6)] for x in df["duration_s"]]
        return cls.from_columns(
            df["job_id"].astype(str).tolist(),
            submit_us.astype(np.int64).tolist(),
            df["vc"].tolist() if "vc" in df else [None] * len(df),
            df["num_gpus"].astype(int).tolist(),
            durs,
            outcomes=df["outcomes"].tolist() if "outcomes" in df else None,
            user=df["user_id"].tolist() if "user_id" in df else None,
        )

    @classmethod
    def from_store(cls, store: Any) -> Workload:
        """Jobs with a submit time, GPUs and at least one attempt with a duration (one query
        over the merged views). Excluded jobs are counted in ``notes``."""

        # One pass over the merged views (each costs seconds at a million jobs): every job
        # with its attempts, filtered here. A job with an attempt whose end is not recorded
        # is left out whole: replaying its other attempts would give it another outcome
        # (docs/replay.md).
        t = store.arrow(
            """
            WITH a AS (SELECT job_id, attempt_idx, duration_s, outcome, num_machines, timing
                       FROM attempts)
            SELECT j.job_id, epoch_us(j.submit_time) AS submit_us, j.vc, j.user_id,
                   j.num_gpus::BIGINT AS num_gpus,
                   coalesce(epoch_us(j.first_start), ?) AS obs_start, j.status, j.flags,
                   round(a.duration_s * 1e6)::BIGINT AS dur_us, a.outcome,
                   coalesce(a.num_machines, 0)::BIGINT AS servers,
                   coalesce(a.timing = 'end_unknown', false) AS end_unknown,
                   coalesce(j.submit_time IS NOT NULL AND j.num_gpus > 0
                            AND a.duration_s >= 0, false) AS usable
            FROM jobs j LEFT JOIN a USING (job_id)
            ORDER BY submit_us, j.job_id, a.attempt_idx""",
            [int(cls.MISSING)],
        )
        t, job_of_row, total, end_unknown = _usable_rows(t)
        new_job = np.r_[True, job_of_row[1:] != job_of_row[:-1]] if t.num_rows else job_of_row
        first = np.flatnonzero(new_job)
        n = len(first)
        ptr = np.r_[first, t.num_rows].astype(np.int64)
        take = pa.array(first)
        jobs = {c: t.column(c).take(take) for c in ("job_id", "vc", "user_id", "status", "flags")}
        vc_codes, vc_names = _arrow_codes(jobs["vc"], NO_VC)
        user_codes, user_names = _arrow_codes(jobs["user_id"], None)
        outcome = _index_in(t.column("outcome"), ATTEMPT_OUTCOMES).astype(np.int8)

        def col(name: str, idx: np.ndarray | None = None) -> np.ndarray:
            arr = t.column(name).to_numpy()
            return arr[idx] if idx is not None else arr

        wl = cls(
            jobs["job_id"].to_numpy(zero_copy_only=False).astype(object),
            col("submit_us", first).astype(np.int64),
            vc_codes,
            vc_names,
            user_codes,
            user_names,
            col("num_gpus", first).astype(np.int64),
            ptr,
            col("dur_us").astype(np.int64),
            outcome,
            col("servers").astype(np.int64),
            col("obs_start", first).astype(np.int64),
            jobs["status"].to_pylist(),
            flags=jobs["flags"].to_pylist(),
        )
        if end_unknown:
            wl.notes.append(
                f"{end_unknown:,} jobs not replayed: an attempt of theirs has no recorded end "
                "although the job ended (its duration is unknown)"
            )
        no_start = int((wl.obs_start_us == cls.MISSING).sum())
        if no_start:
            wl.notes.append(
                f"{no_start:,} of {n:,} replayed jobs have no observed start (e.g. from a job "
                "list): the fidelity metrics leave them out (absent when no job has one)"
            )
        if total - end_unknown > n:
            wl.notes.append(
                f"{total - end_unknown - n:,} of {total:,} jobs not replayed (no submit time, "
                "no GPUs, or no attempt with a duration)"
            )
        return wl


def _usable_rows(t: pa.Table) -> tuple[pa.Table, np.ndarray, int, int]:
    """The rows of ``from_store``'s query that replay (usable attempts of jobs without an
    attempt of unknown end), each one's job (a number counting the query's jobs: rows of one
    job share it), the number of jobs and the number left out for an unknown end. Rows are
    sorted by job, so a job's rows are contiguous."""
    import pyarrow.compute as pc

    if t.num_rows == 0:
        return t, np.zeros(0, np.int64), 0, 0
    ids = t.column("job_id")
    new = np.r_[
        True,
        pc.not_equal(ids.slice(1), ids.slice(0, t.num_rows - 1)).to_numpy(zero_copy_only=False),
    ]
    first = np.flatnonzero(new)
    job_of_row = np.cumsum(new) - 1
    unknown = np.logical_or.reduceat(t.column("end_unknown").to_numpy(zero_copy_only=False), first)
    usable = t.column("usable").to_numpy(zero_copy_only=False) & ~unknown[job_of_row]
    return t.filter(pa.array(usable)), job_of_row[usable], len(first), int(unknown.sum())


def _index_in(arr: pa.ChunkedArray, names: Sequence[str]) -> np.ndarray:
    """Position of each value in ``names`` (-1: null or not there), vectorised."""
    import pyarrow.compute as pc

    idx = pc.index_in(arr, value_set=pa.array(list(names), pa.string()))
    return np.asarray(pc.fill_null(idx, -1).to_numpy(zero_copy_only=False), dtype=np.int64)


def _arrow_codes(arr: pa.ChunkedArray, fill: str | None) -> tuple[np.ndarray, tuple[str, ...]]:
    """``_codes`` of an Arrow column without a Python object per value (a million jobs)."""
    import pyarrow.compute as pc

    arr = pc.cast(arr, pa.string())
    if fill is not None:
        arr = pc.fill_null(arr, fill)
    names = tuple(sorted(pc.unique(arr).drop_null().to_pylist()))
    return _index_in(arr, names), names


def _codes(values: Sequence[Any], fill: str | None) -> tuple[np.ndarray, tuple[str, ...]]:
    """Dense int codes in sorted-name order; None becomes ``fill`` (or code -1)."""
    vals = [
        fill if (v is None or (isinstance(v, float) and np.isnan(v))) else str(v) for v in values
    ]
    names = tuple(sorted({v for v in vals if v is not None}))
    idx = {nm: i for i, nm in enumerate(names)}
    return np.asarray([idx[v] if v is not None else -1 for v in vals], dtype=np.int64), names
