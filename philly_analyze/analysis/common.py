"""Shared by every analysis: the scope (``--vc``, ``--since``/``--until``), the analysis
context (a store plus scoped temporary tables and cached intermediates), GPU buckets and small
numeric helpers.

Scope rules (one place): a job is in scope when its VC is one of ``vcs`` (if given) and its
submit time is in ``[since, until)`` (if given; jobs without a submit time are then out). Its
attempts and placements come with it. Time series (host CPU/memory) are cut to the same
window. The cluster state used by the queueing decomposition always includes every job, so a
filter never changes why a job waited.

Attempts in time (one rule for every analysis that places runs in time: GPU utilization,
locality, host resources, the cluster state): ``ctx.runs`` / ``ctx.all_runs`` hold the
attempts whose run is a known interval, ``attempts.timing`` in ``schemas.TIMED``: ended ones,
and running ones (the last attempt of a job without a final status), whose interval reaches
the end of the data. An attempt without an end in a job that has a final status (or before a
later attempt) ended at a time the data does not give: it is left out, and ``runs_note``
says how many.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from philly_analyze.schemas import TIMED
from philly_analyze.store import Store

#: SQL predicate over an attempts relation: its run is a known interval (see module docstring).
TIMED_SQL = "timing IN (" + ", ".join(f"'{t}'" for t in TIMED) + ")"

#: GPU-demand buckets of the paper (Figure 3, Table 2, Figure 9): label, lowest, highest.
GPU_BUCKETS: tuple[tuple[str, int, int | None], ...] = (
    ("1", 1, 1),
    ("2-4", 2, 4),
    ("5-8", 5, 8),
    (">8", 9, None),
)
BUCKET_LABELS: tuple[str, ...] = tuple(b[0] for b in GPU_BUCKETS)
#: Final statuses in the paper's order.
STATUSES: tuple[str, ...] = ("passed", "killed", "unsuccessful")


def gpu_bucket_sql(col: str) -> str:
    """SQL CASE expression mapping a GPU count column to its bucket label (NULL for < 1)."""
    whens = []
    for label, lo, hi in GPU_BUCKETS:
        cond = f"{col} >= {lo}" + (f" AND {col} <= {hi}" if hi is not None else "")
        whens.append(f"WHEN {cond} THEN '{label}'")
    return f"(CASE {' '.join(whens)} END)"


def gpu_bucket(n: np.ndarray | Sequence[int]) -> np.ndarray:
    """Bucket label of each GPU count (``None`` below 1)."""
    arr = np.asarray(n, dtype=float)
    out = np.full(arr.shape, None, dtype=object)
    for label, lo, hi in GPU_BUCKETS:
        mask = (arr >= lo) & (arr <= (hi if hi is not None else np.inf))
        out[mask] = label
    return out


@dataclass(frozen=True)
class Scope:
    """Which jobs an analysis looks at (see the module docstring)."""

    vcs: tuple[str, ...] = ()
    since: datetime | None = None
    until: datetime | None = None

    @property
    def is_all(self) -> bool:
        """Whether the scope is the whole store (no VC, no time window)."""
        return not self.vcs and self.since is None and self.until is None

    def job_filter(self, alias: str = "j") -> tuple[str, list[Any]]:
        """SQL predicate over a jobs relation ``alias`` and its ``?`` parameters."""
        preds: list[str] = []
        params: list[Any] = []
        if self.vcs:
            preds.append(f"{alias}.vc IN (SELECT unnest(?::VARCHAR[]))")
            params.append(list(self.vcs))
        if self.since is not None:
            preds.append(f"{alias}.submit_time >= ?")
            params.append(self.since)
        if self.until is not None:
            preds.append(f"{alias}.submit_time < ?")
            params.append(self.until)
        return (" AND ".join(preds) or "true"), params

    def describe(self) -> str:
        """One line for the report header."""
        parts = []
        if self.vcs:
            parts.append("VC " + ", ".join(self.vcs))
        if self.since is not None:
            parts.append(f"submitted from {self.since.isoformat()}")
        if self.until is not None:
            parts.append(f"submitted before {self.until.isoformat()}")
        return "; ".join(parts) or "all jobs"


@dataclass
class Context:
    """A store seen through a scope, with scoped temporary tables and a cache.

    Table names to use in SQL: ``ctx.jobs``, ``ctx.attempts``, ``ctx.placements`` (scoped),
    ``ctx.all_attempts``, ``ctx.all_placements``, ``ctx.all_jobs`` (whole store), and
    ``ctx.runs``/``ctx.all_runs``: the attempts placed in time (module docstring). Temporary
    tables live on the store's connection and are dropped by ``close()``."""

    store: Store
    scope: Scope = field(default_factory=Scope)
    #: A quota file path, a ready mapping, or None to infer (``vcquota.quotas_for_store``).
    vc_quotas: str | Path | dict[str, int] | None = None
    cache: dict[str, Any] = field(default_factory=dict)
    _temp: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        tag = uuid.uuid4().hex[:8]
        con = self.store.con
        pred, params = self.scope.job_filter("j")
        self.jobs = f"_pa_{tag}_jobs"
        self.attempts = f"_pa_{tag}_attempts"
        self.placements = f"_pa_{tag}_placements"
        # Materialised once: the canonical views merge sources on every read.
        con.execute(f"CREATE TEMP TABLE {self.jobs} AS SELECT * FROM jobs j WHERE {pred}", params)
        con.execute(
            f"CREATE TEMP TABLE {self.attempts} AS SELECT a.* FROM attempts a "
            f"SEMI JOIN {self.jobs} j USING (job_id)"
        )
        con.execute(
            f"CREATE TEMP TABLE {self.placements} AS SELECT p.* FROM placements p "
            f"SEMI JOIN {self.jobs} j USING (job_id)"
        )
        self.runs = f"_pa_{tag}_runs"
        con.execute(
            f"CREATE TEMP TABLE {self.runs} AS SELECT * FROM {self.attempts} WHERE {TIMED_SQL}"
        )
        self._temp += [self.jobs, self.attempts, self.placements, self.runs]
        if self.scope.is_all:
            self.all_jobs, self.all_attempts, self.all_placements = (
                self.jobs,
                self.attempts,
                self.placements,
            )
            self.all_runs = self.runs
        else:
            self.all_jobs, self.all_attempts, self.all_placements = "jobs", "attempts", "placements"
            self.all_runs = f"(SELECT * FROM attempts WHERE {TIMED_SQL})"

    def close(self) -> None:
        """Drop the temporary tables."""
        for t in self._temp:
            self.store.con.execute(f"DROP TABLE IF EXISTS {t}")
        self._temp.clear()

    def __enter__(self) -> Context:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ queries
    def df(self, sql: str, params: Sequence[Any] | None = None) -> pd.DataFrame:
        """Run SQL (with ``?`` parameters) and return a DataFrame."""
        return self.store.con.execute(sql, list(params or [])).fetch_df()

    def scalar(self, sql: str, params: Sequence[Any] | None = None) -> Any:
        """The first value of the query's first row; None when it returns no row."""
        row = self.store.con.execute(sql, list(params or [])).fetchone()
        return row[0] if row else None

    def has(self, table: str) -> bool:
        """Whether the store holds rows for a physical table."""
        return self.store.has_rows(table)

    def lacking(self, section: str) -> str:
        """The section's "needs ..." note when the store lacks its inputs, else "" (the one
        definition is ``analysis.inputs.NEEDS``)."""
        from philly_analyze.analysis.inputs import missing_note

        return missing_note(section, self.has, self.store.path)

    def columns(self, relation: str) -> set[str]:
        """Column names of a view or table (stores written before a column was added lack it)."""
        rows = self.store.con.execute(f"DESCRIBE {relation}").fetchall()
        return {r[0] for r in rows}

    def count(self, relation: str) -> int:
        """Rows of a relation (a view or a scoped temp table)."""
        return int(self.scalar(f"SELECT count(*) FROM {relation}") or 0)

    def runs_note(self, whole_store: bool = False) -> str | None:
        """The note of an analysis over ``runs`` (``all_runs`` if ``whole_store``): how many
        attempts it left out because their end is not recorded; None when there are none."""
        rel = self.all_attempts if whole_store else self.attempts
        n = int(self.scalar(f"SELECT count(*) FROM {rel} WHERE timing = 'end_unknown'") or 0)
        if not n:
            return None
        jobs = int(
            self.scalar(f"SELECT count(DISTINCT job_id) FROM {rel} WHERE timing = 'end_unknown'")
        )
        return (
            f"{n:,} attempts of {jobs:,} jobs have no recorded end although the job ended (a "
            "final status or a later attempt): left out, as their run cannot be placed in time"
        )

    def cached(self, key: str, compute: Callable[[], Any]) -> Any:
        """Compute once per context (heavy intermediates shared by several sections)."""
        if key not in self.cache:
            self.cache[key] = compute()
        return self.cache[key]

    @property
    def quotas(self) -> dict[str, int]:
        """VC quotas in GPUs (file, mapping, the store's own ``vc_quotas.csv``, or inferred
        from the whole store: ``vcquota.infer_store_quotas``)."""
        return self._quota_info()[0]

    @property
    def quotas_unknown(self) -> list[str]:
        """VCs whose quota cannot be inferred (none of their jobs that ran has a known GPU
        time): no quota, not a quota of 0. Empty when the quotas are given."""
        return self._quota_info()[1]

    @property
    def quota_source(self) -> str:
        """Where ``quotas`` come from, as the report names it: given, a file, the store's
        ``vc_quotas.csv``, or inferred from GPU-time shares."""
        return self._quota_info()[2]

    def _quota_info(self) -> tuple[dict[str, int], list[str], str]:
        if "quotas" not in self.cache:
            from philly_analyze.vcquota import infer_store_quotas, stored_quotas

            unknown: list[str] = []
            if isinstance(self.vc_quotas, dict):
                quotas, source = dict(self.vc_quotas), "given"
            elif (kept := stored_quotas(self.store, self.vc_quotas)) is not None:
                quotas = kept
                source = f"file {self.vc_quotas}" if self.vc_quotas else "the store's vc_quotas.csv"
            else:
                quotas, unknown = infer_store_quotas(self.store)
                source = "inferred from GPU-time shares (vcquota.infer_quotas)"
            # "quotas" marks that they were read (analysis/__init__ reports their source).
            self.cache["quota_info"] = (quotas, unknown, source)
            self.cache["quotas"] = quotas
        return self.cache["quota_info"]


# ---------------------------------------------------------------------- numeric helpers
def hist_quantiles(bins: np.ndarray, counts: np.ndarray, qs: Sequence[float]) -> list[float | None]:
    """Nearest-rank quantiles of a histogram: the smallest bin value whose cumulative count
    reaches ``q`` of the total. ``bins`` must be sorted."""
    total = float(np.sum(counts))
    if total <= 0:
        return [None for _ in qs]
    cum = np.cumsum(counts)
    out: list[float | None] = []
    for q in qs:
        idx = int(np.searchsorted(cum, q * total - 1e-9, side="left"))
        out.append(float(bins[min(idx, len(bins) - 1)]))
    return out


def quantiles(values: np.ndarray, qs: Sequence[float]) -> list[float | None]:
    """Linear-interpolated quantiles (numpy default), None for an empty array."""
    v = np.asarray(values, dtype=float)
    v = v[~np.isnan(v)]
    if len(v) == 0:
        return [None for _ in qs]
    return [float(x) for x in np.quantile(v, list(qs))]


def ecdf(values: np.ndarray, max_points: int = 400) -> tuple[np.ndarray, np.ndarray]:
    """(x, F(x)) of the empirical CDF, thinned to at most ``max_points`` steps for plotting."""
    v = np.sort(np.asarray(values, dtype=float))
    v = v[~np.isnan(v)]
    if len(v) == 0:
        return np.array([]), np.array([])
    y = np.arange(1, len(v) + 1) / len(v)
    if len(v) > max_points:
        idx = np.unique(np.linspace(0, len(v) - 1, max_points).round().astype(int))
        return v[idx], y[idx]
    return v, y


def pct(part: float, whole: float) -> float | None:
    """100 * part / whole, None when whole is 0."""
    return None if not whole else 100.0 * part / whole


def hist_cdf(
    h: pd.DataFrame, bin_col: str = "ubin", weight: str = "minutes"
) -> tuple[np.ndarray, np.ndarray]:
    """(bin value, cumulative fraction of the weight) of a histogram frame."""
    g = h.groupby(bin_col)[weight].sum().sort_index()
    if g.empty:
        return np.array([]), np.array([])
    c = np.cumsum(g.to_numpy(dtype=float))
    return g.index.to_numpy(dtype=float), c / c[-1]
