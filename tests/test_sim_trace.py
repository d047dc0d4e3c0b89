"""The replay engines' ``Trace`` on hand-made starts: a row's record holds its first
placement segment (and a one-GPU segment's GPU), further segments and every other GPU go to
``seg``/``seg_gpus``; ``columns``, ``segments`` and ``placements`` give the rows and
placements back whole, and reserved outcomes are trimmed to the rows recorded."""

from __future__ import annotations

from philly_analyze.sim.core import ROW_FIELDS, Trace

#: (job, attempt, ready, start, end, placement, intrinsic) per start, every shape of
#: placement: one GPU, several GPUs on one server, several servers whose further segments
#: have one GPU or several, and a first segment of several GPUs followed by a one-GPU one.
STARTS = [
    (0, 0, 10, 10, 50, [(3, [5])], 40),
    (1, 0, 11, 12, 40, [(0, [0, 1, 2, 3])], 28),
    (2, 1, 5, 20, 90, [(4, [7]), (1, [2]), (6, [0, 3])], 70),
    (3, 0, 0, 30, 31, [(2, [1, 6]), (5, [4])], 1),
    (4, 2, 1, 40, 41, [(7, [0])], 1),
]


def _recorded(reserve: int | None = None) -> Trace:
    tr = Trace()
    if reserve is not None:
        tr.reserve(reserve)
    for i, (j, k, ready, start, end, pl, intr) in enumerate(STARTS):
        assert tr.record_start(j, k, ready, start, end, pl, intr) == i
    return tr


def test_rows_and_placements_come_back_as_recorded() -> None:
    tr = _recorded()
    assert len(tr) == 5
    assert tr.columns().shape == (len(ROW_FIELDS), 5)
    assert tr.columns().T.tolist() == [
        [j, k, ready, start, end, len(pl), intr] for j, k, ready, start, end, pl, intr in STARTS
    ]
    assert tr.placements() == [s[5] for s in STARTS]
    row, server, n, gpus = tr.segments()
    assert row.tolist() == [0, 1, 2, 2, 2, 3, 3, 4]
    assert server.tolist() == [3, 0, 4, 1, 6, 2, 5, 7]
    assert n.tolist() == [1, 4, 1, 1, 2, 2, 1, 1]
    assert gpus.tolist() == [5, 0, 1, 2, 3, 7, 2, 0, 3, 1, 6, 4, 0]
    # Only the GPUs of segments that are not a one-GPU first segment are kept apart.
    assert list(tr.seg_gpus) == [0, 1, 2, 3, 2, 0, 3, 1, 6, 4]
    assert list(tr.outcome) == [-1] * 5


def test_reserved_outcomes_are_trimmed_to_the_rows() -> None:
    tr = _recorded(reserve=8)
    assert len(tr.outcome) == 8 and len(tr) == 5
    tr.outcome[2] = 1
    tr.trim()
    assert list(tr.outcome) == [-1, -1, 1, -1, -1]
    assert tr.placements() == _recorded().placements()


def test_cut_changes_the_end_and_the_work_of_a_row() -> None:
    tr = _recorded()
    tr.cut(2, 60, 35)
    assert tr.end_of(2) == 60
    assert tr.columns()[:, 2].tolist() == [2, 1, 5, 20, 60, 3, 35]
    assert tr.placements()[2] == STARTS[2][5]
