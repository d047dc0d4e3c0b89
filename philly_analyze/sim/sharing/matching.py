"""Pairing pending offline workers with free online GPUs.

MuxFlow models pairing as a maximum-weight bipartite matching solved with the KM algorithm; here
``scipy.optimize.linear_sum_assignment`` (a Jonker-Volgenant variant, same optimum) on a
rectangular weight matrix: rows are free GPUs, columns are the workers of the jobs at the head
of the queue (a k-GPU job has k columns and is kept only if all k are matched: gang). Large
rounds are cut into blocks of ``block_rows`` GPUs because the solver is cubic; jobs a block
leaves unmatched go to the next. Quality is measured against an oracle that solves the same
block with the true weights."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
from scipy.optimize import linear_sum_assignment

#: Weight of an infeasible pair (memory, or a predicted SLO breach): never kept.
INFEASIBLE = -1.0

WeightFn = Callable[[np.ndarray, np.ndarray], np.ndarray]


def max_weight_assignment(w: np.ndarray, min_weight: float) -> tuple[np.ndarray, np.ndarray]:
    """A maximum-weight matching of ``w`` (rows x cols) using only pairs whose weight is at
    least ``min_weight``: pairs below it are zeroed before solving (so the solver never trades
    a good pair for a forced bad one) and dropped after."""
    if w.size == 0:
        return np.empty(0, np.int64), np.empty(0, np.int64)
    ok = w >= min_weight
    r, c = linear_sum_assignment(np.where(ok, w, 0.0), maximize=True)
    keep = ok[r, c]
    return r[keep], c[keep]


def random_assignment(
    w: np.ndarray, rng: np.random.Generator, min_weight: float | None
) -> tuple[np.ndarray, np.ndarray]:
    """Random pairing (Gandiva-style): columns in queue order get random rows. With
    ``min_weight`` set, pairs under it (infeasible) are dropped; with None, all kept."""
    n = min(w.shape)
    rows = rng.permutation(w.shape[0])[:n]
    cols = np.arange(n)
    if min_weight is not None:
        keep = w[rows, cols] >= min_weight
        rows, cols = rows[keep], cols[keep]
    return rows, cols


def gang_keep(cols: np.ndarray, col_job: np.ndarray, need: dict[int, int]) -> np.ndarray:
    """Mask over assigned columns: True where the column's job got all of its workers."""
    jobs = col_job[cols]
    uniq, counts = np.unique(jobs, return_counts=True)
    full = {int(j) for j, c in zip(uniq, counts, strict=True) if c >= need[int(j)]}
    return np.fromiter((int(j) in full for j in jobs), bool, len(jobs))


@dataclass
class MatchStats:
    """Totals over all rounds of one simulation."""

    rounds: int = 0
    blocks: int = 0
    solver_seconds: float = 0.0
    achieved_true: float = 0.0  # true weight of the chosen assignments (sampled blocks)
    oracle_true: float = 0.0  # true weight of the oracle's assignments (same blocks)
    sampled_blocks: int = 0
    placed_workers: int = 0
    largest_block: tuple[int, int] = field(default=(0, 0))

    def quality(self) -> float | None:
        """Achieved / oracle true weight over the sampled blocks (1.0 = optimal)."""
        return self.achieved_true / self.oracle_true if self.oracle_true > 0 else None


def match_round(
    free_rows: np.ndarray,
    queue_jobs: np.ndarray,
    job_gpus: np.ndarray,
    predicted: WeightFn,
    true: WeightFn,
    *,
    use_matching: bool,
    block_rows: int,
    window_factor: float,
    min_weight: float,
    check_feasible: bool,
    oracle_sample: float,
    rng: np.random.Generator,
    stats: MatchStats,
) -> list[tuple[int, np.ndarray]]:
    """One scheduling round: returns ``[(job, gpus)]`` placements.

    ``free_rows`` are GPU ids, ``queue_jobs`` job ids in queue order (already restricted to jobs
    allowed to share), ``predicted(gpus, worker_jobs)``/``true(...)`` weight matrices."""
    stats.rounds += 1
    placements: list[tuple[int, np.ndarray]] = []
    if len(free_rows) == 0 or len(queue_jobs) == 0:
        return placements
    rows_all = rng.permutation(free_rows)
    pending = list(queue_jobs.tolist())
    for start in range(0, len(rows_all), block_rows):
        rows = rows_all[start : start + block_rows]
        budget = int(np.ceil(window_factor * len(rows)))
        take, workers = [], 0
        while pending and workers < budget:
            j = pending.pop(0)
            take.append(j)
            workers += int(job_gpus[j])
        if not take:
            break
        col_job = np.repeat(np.array(take), job_gpus[np.array(take)])
        # Blind random pairing needs no weights: only the shape.
        need_w = use_matching or check_feasible
        w = predicted(rows, col_job) if need_w else np.zeros((len(rows), len(col_job)))
        t0 = time.perf_counter()
        if use_matching:
            r, c = max_weight_assignment(w, min_weight)
        else:
            r, c = random_assignment(w, rng, min_weight if check_feasible else None)
        stats.solver_seconds += time.perf_counter() - t0
        stats.blocks += 1
        stats.largest_block = max(stats.largest_block, w.shape)
        if oracle_sample > 0 and rng.random() < oracle_sample:
            wt = true(rows, col_job)
            ro, co = max_weight_assignment(wt, min_weight)
            stats.oracle_true += float(np.maximum(wt[ro, co], 0).sum())
            stats.achieved_true += float(np.maximum(wt[r, c], 0).sum())
            stats.sampled_blocks += 1
        need = {int(j): int(job_gpus[j]) for j in take}
        keep = gang_keep(c, col_job, need)
        r, c = r[keep], c[keep]
        placed = set()
        order = np.argsort(col_job[c], kind="stable")
        r, c = r[order], c[order]
        if len(c):
            jobs_c = col_job[c]
            bounds = np.flatnonzero(np.diff(jobs_c)) + 1
            for seg_r, seg_j in zip(np.split(r, bounds), np.split(jobs_c, bounds), strict=True):
                placements.append((int(seg_j[0]), rows[seg_r]))
                placed.add(int(seg_j[0]))
            stats.placed_workers += len(c)
        # Jobs this block left unmatched keep their place at the head of the queue.
        pending = [j for j in take if j not in placed] + pending
    return placements
