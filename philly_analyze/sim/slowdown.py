"""The locality model: how much slower a gang job runs when spread over more servers or racks.

The multiplier depends on the *spread* ``m / m_min``: servers used over the fewest servers that
could hold the job (``locality.servers_needed``). Points come from
``philly_analyze/data/locality_slowdown.csv`` (each row cites its source, Tables 4 and 5 of the
paper) and are interpolated linearly in log2(spread), held constant past the last point. Jobs
that fit on one server use the Table 4 curve; larger jobs the Table 5 curve. Spanning ``r``
racks multiplies by ``rack_slowdown ** (r - 1)`` (the paper gives no figure: default 1.0).

Durations in the data were observed under their own placement: the engine divides an
observed duration by the slowdown of the observed server count (when known) to get the job's
intrinsic run time, and multiplies by the slowdown of the replayed placement.
"""

from __future__ import annotations

import csv
import itertools
import math
from dataclasses import dataclass, field
from importlib import resources

from philly_analyze.locality import servers_needed

DATA_FILE = "locality_slowdown.csv"


def load_curves() -> dict[str, list[tuple[float, float]]]:
    """``{job_class: [(spread, slowdown), ...]}`` sorted by spread, from the data file."""
    text = resources.files("philly_analyze").joinpath("data", DATA_FILE).read_text()
    curves: dict[str, list[tuple[float, float]]] = {}
    for row in csv.DictReader(text.splitlines()):
        curves.setdefault(row["job_class"], []).append(
            (float(row["spread"]), float(row["slowdown"]))
        )
    return {k: sorted(v) for k, v in curves.items()}


def _interp(points: list[tuple[float, float]], spread: float) -> float:
    if spread <= points[0][0]:
        return points[0][1]
    for (x0, y0), (x1, y1) in itertools.pairwise(points):
        if spread <= x1:
            f = (math.log2(spread) - math.log2(x0)) / (math.log2(x1) - math.log2(x0))
            return y0 + f * (y1 - y0)
    return points[-1][1]


@dataclass
class SlowdownModel:
    """Run-time multiplier of a placement. ``enabled=False`` makes every placement 1.0."""

    largest: int
    enabled: bool = True
    rack_slowdown: float = 1.0
    curves: dict[str, list[tuple[float, float]]] = field(default_factory=load_curves)
    _cache: dict[tuple[int, int, int], float] = field(default_factory=dict, repr=False)

    def factor(self, n: int, servers: int, racks: int = 1) -> float:
        """Multiplier for ``n`` GPUs on ``servers`` servers in ``racks`` racks (>= 1.0)."""
        key = (n, servers, racks)
        f = self._cache.get(key)
        if f is None:
            f = self._compute(n, servers, racks)
            self._cache[key] = f
        return f

    def _compute(self, n: int, servers: int, racks: int) -> float:
        if not self.enabled or servers <= 0 or self.largest <= 0:
            return 1.0
        need = servers_needed(n, self.largest)
        spread = max(1.0, servers / need)
        cls = "fits_one_server" if n <= self.largest else "multi_server"
        f = _interp(self.curves[cls], spread)
        return max(1.0, f * self.rack_slowdown ** max(0, racks - 1))
