"""The simulated cluster: servers, racks and free GPUs, with placement in O(servers touched).

``Cluster`` is the static shape (ids, GPUs per server, rack per server). ``FreeState`` is the
mutable allocation state the engine updates on every start and end. It keeps servers bucketed
by their free-GPU count (sorted lists of server indices), so the placement rules below are an
incremental implementation of ``philly_analyze.locality.fits_strict`` (the one definition of
the constraint; the tests check the two agree on random states):

- strict, ``n <= L`` (L = largest server): best fit, the server with the fewest free GPUs that
  still has ``n``; ties go to the lowest server index.
- strict, ``n > L``: ``k = servers_needed(n, L)`` wholly free L-GPU servers in one rack; the
  rack with the fewest such servers that still has ``k`` (ties: lowest rack id), its ``k``
  lowest-index servers, filled L GPUs each (the last takes the rest).
- relaxed: servers by most free GPUs first (ties: lowest index), taking GPUs until ``n``.
On every server the lowest free GPU indices are taken.
"""

from __future__ import annotations

import re
from bisect import bisect_left, insort
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa

from philly_analyze.locality import servers_needed

#: Placement: list of (server index, [gpu indices]).
Placement = list[tuple[int, list[int]]]


def _natural_key(s: str) -> tuple[object, ...]:
    return tuple(int(p) if p.isdigit() else p for p in re.split(r"(\d+)", s))


@dataclass(frozen=True)
class Cluster:
    """Static cluster shape. ``rack[i]`` is a dense int rack id (0..num_racks-1)."""

    machine_ids: tuple[str, ...]
    gpus: np.ndarray
    rack: np.ndarray
    rack_names: tuple[str, ...]

    @property
    def num_machines(self) -> int:
        return len(self.machine_ids)

    @property
    def total_gpus(self) -> int:
        return int(self.gpus.sum())

    @property
    def largest(self) -> int:
        return int(self.gpus.max()) if len(self.gpus) else 0

    @classmethod
    def build(
        cls,
        machine_ids: Sequence[str],
        gpus: Sequence[int],
        racks: int | Sequence[str | None] | None = None,
    ) -> Cluster:
        """Servers in natural id order (m2 < m10). ``racks``: None (from nothing: one rack),
        an int K (servers split into K racks of consecutive ids, as racks are usually filled),
        or a rack name per server (None entries join rack ``unknown``)."""
        order = sorted(range(len(machine_ids)), key=lambda i: _natural_key(str(machine_ids[i])))
        ids = tuple(str(machine_ids[i]) for i in order)
        g = np.asarray([int(gpus[i]) for i in order], dtype=np.int64)
        if (g <= 0).any():
            keep = g > 0
            ids = tuple(m for m, k in zip(ids, keep, strict=True) if k)
            g = g[keep]
            order = [o for o, k in zip(order, keep, strict=True) if k]
        n = len(ids)
        if racks is None:
            rack = np.zeros(n, dtype=np.int64)
            names: tuple[str, ...] = ("rack0",)
        elif isinstance(racks, int):
            if racks < 1:
                raise ValueError("racks must be >= 1")
            k = min(racks, max(n, 1))
            rack = (np.arange(n) * k) // max(n, 1)
            names = tuple(f"rack{i}" for i in range(k))
        else:
            raw = [racks[i] for i in order]
            labels = ["unknown" if r is None else str(r) for r in raw]
            names = tuple(sorted(set(labels), key=_natural_key)) or ("rack0",)
            idx = {nm: i for i, nm in enumerate(names)}
            rack = np.asarray([idx[x] for x in labels], dtype=np.int64)
        return cls(ids, g, rack.astype(np.int64), names)

    @classmethod
    def from_counts(
        cls, shape: Mapping[int, int] | None = None, racks: int | None = None
    ) -> Cluster:
        """A cluster of ``{gpus_per_server: servers}``; default Philly's 321x2 + 231x8
        (2,490 GPUs, the public ``cluster_machine_list``)."""
        shape = dict(shape or {2: 321, 8: 231})
        ids: list[str] = []
        g: list[int] = []
        for size, count in sorted(shape.items()):
            for _ in range(count):
                ids.append(f"m{len(ids)}")
                g.append(size)
        return cls.build(ids, g, racks)

    @classmethod
    def from_store(
        cls, store: object, racks: int | None = None, machines: str | None = None
    ) -> Cluster:
        """Servers of a store's ``machines`` view (num_gpus). ``machines``: ``listed`` (only
        the machine list's), ``all`` (also hosts known only from placements or utilization),
        None for ``machines_choice``'s default. Racks: ``racks`` if given, else the store's
        rack column when every server has one, else one rack."""
        from philly_analyze.store import Store

        assert isinstance(store, Store)
        only_listed = machines_choice(store, machines) == "listed"
        rows = store.con.execute(
            "SELECT machine_id, num_gpus, rack FROM machines WHERE coalesce(num_gpus, 0) > 0 "
            "AND (listed_num_gpus IS NOT NULL OR NOT ?)",
            [only_listed],
        ).fetchall()
        ids = [r[0] for r in rows]
        gpus = [int(r[1]) for r in rows]
        rk: int | list[str | None] | None = racks
        if racks is None and rows and all(r[2] is not None for r in rows):
            rk = [r[2] for r in rows]
        return cls.build(ids, gpus, rk)

    def to_machines_table(self) -> pa.Table:
        """The ``machines`` rows of this cluster (source ``replay``)."""
        return pa.table(
            {
                "machine_id": list(self.machine_ids),
                "listed_num_gpus": pa.array(self.gpus, pa.int16()),
                "rack": [self.rack_names[r] for r in self.rack],
                "source": ["replay"] * self.num_machines,
            }
        )


#: ``replay --machines``: which of the store's machines a replay uses.
MACHINE_CHOICES = ("listed", "all")


def machines_choice(store: Any, machines: str | None) -> str:
    """``machines`` checked, or the default: ``listed`` when the store has a machine list
    (any machine with a listed GPU count), else ``all``."""
    if machines is not None:
        if machines not in MACHINE_CHOICES:
            from philly_analyze.errors import UserError

            raise UserError(f"--machines must be one of {', '.join(MACHINE_CHOICES)}")
        return machines
    has_list = store.scalar("SELECT count(*) FROM machines WHERE listed_num_gpus IS NOT NULL")
    return "listed" if has_list else "all"


def cluster_notes(store: Any, machines: str | None) -> list[str]:
    """How the replayed cluster differs from the machine list: the hosts ``--machines
    listed`` leaves out (hosts and GPUs), and listed machines that placements gave more GPUs
    than listed (the replay, like the analyses, gives them ``num_gpus``)."""
    choice = machines_choice(store, machines)
    hosts, gpus, bigger, extra = store.con.execute(
        "SELECT count(*) FILTER (WHERE listed_num_gpus IS NULL AND coalesce(num_gpus, 0) > 0),"
        " coalesce(sum(num_gpus) FILTER (WHERE listed_num_gpus IS NULL), 0),"
        " count(*) FILTER (WHERE num_gpus > listed_num_gpus),"
        " coalesce(sum(num_gpus - listed_num_gpus) FILTER (WHERE num_gpus > listed_num_gpus), 0)"
        " FROM machines"
    ).fetchone()
    notes = []
    if choice == "listed" and hosts:
        notes.append(
            f"{int(hosts):,} hosts ({int(gpus):,} GPUs) not in the machine list are left out of "
            "the replayed cluster (--machines listed); their jobs are replayed on the listed "
            "machines. --machines all keeps them"
        )
    if bigger:
        notes.append(
            f"{int(bigger):,} listed machines have more GPUs in placements than in the machine "
            f"list ({int(extra):,} GPUs more): the replayed cluster gives them the GPUs jobs "
            "used, as the analyses do (num_gpus)"
        )
    return notes


class FreeState:
    """Mutable free-GPU state of a ``Cluster`` (see module docstring for the rules)."""

    def __init__(self, cluster: Cluster):
        self.cluster = cluster
        self.size = [int(x) for x in cluster.gpus]
        self.rack = [int(x) for x in cluster.rack]
        self.largest = cluster.largest
        self.free = list(self.size)
        self.free_gpus: list[list[int]] = [list(range(s)) for s in self.size]
        self.free_total = sum(self.size)
        #: buckets[f]: sorted server indices with exactly f free GPUs.
        self.buckets: list[list[int]] = [[] for _ in range(self.largest + 1)]
        #: whole[r]: sorted indices of wholly free largest-size servers in rack r.
        self.whole: list[list[int]] = [[] for _ in range(len(cluster.rack_names))]
        for i, s in enumerate(self.size):
            self.buckets[s].append(i)
            if s == self.largest:
                self.whole[self.rack[i]].append(i)

    # ------------------------------------------------------------------ queries
    def max_free(self) -> int:
        """Most free GPUs on any one server."""
        b = self.buckets
        for f in range(self.largest, 0, -1):
            if b[f]:
                return f
        return 0

    def fits(self, n: int, relaxed: bool) -> bool:
        """Whether ``n`` GPUs can be placed now (strict: the locality constraint)."""
        if n > self.free_total:
            return False
        if relaxed:
            return True
        if n <= self.largest:
            return self.max_free() >= n
        k = servers_needed(n, self.largest)
        return any(len(w) >= k for w in self.whole)

    # ------------------------------------------------------------------ placement
    def place(self, n: int, relaxed: bool) -> Placement | None:
        """Choose and allocate ``n`` GPUs: strict first, then relaxed if allowed; None if
        neither fits (nothing changes then)."""
        if n > self.free_total:
            return None
        choice = self._strict(n)
        if choice is None and relaxed:
            choice = self._relaxed(n)
        if choice is None:
            return None
        return self._allocate(n, choice)

    def place_strict(self, n: int) -> Placement | None:
        """Allocate a placement meeting the locality constraint, or None."""
        if n > self.free_total:
            return None
        if n <= self.largest:
            # Inlined best fit on one server (the common case; same rule as _strict).
            b = self.buckets
            for f in range(n, self.largest + 1):
                if b[f]:
                    i = b[f][0]
                    fg = self.free_gpus[i]
                    gpus = fg[:n]
                    del fg[:n]
                    # Move i from bucket f to f - n (i is the first of bucket f).
                    del b[f][0]
                    insort(b[f - n], i)
                    self.free[i] = f - n
                    if f == self.largest and self.size[i] == f:
                        w = self.whole[self.rack[i]]
                        del w[bisect_left(w, i)]
                    self.free_total -= n
                    return [(i, gpus)]
            return None
        choice = self._strict(n)
        return None if choice is None else self._allocate(n, choice)

    def place_relaxed(self, n: int) -> Placement | None:
        """Allocate ``n`` GPUs anywhere (fewest servers first), or None if fewer are free."""
        return None if n > self.free_total else self._allocate(n, self._relaxed(n))

    def _allocate(self, n: int, choice: list[tuple[int, int]]) -> Placement:
        """Take the chosen GPUs, moving each server to its new free-count bucket (inline:
        relaxed placements touch many servers)."""
        out: Placement = []
        buckets, free, largest, free_gpus = self.buckets, self.free, self.largest, self.free_gpus
        for i, take in choice:
            fg = free_gpus[i]
            gpus = fg[:take]
            del fg[:take]
            old = free[i]
            new = old - take
            b = buckets[old]
            del b[bisect_left(b, i)]
            insort(buckets[new], i)
            free[i] = new
            if old == largest and self.size[i] == largest:
                w = self.whole[self.rack[i]]
                del w[bisect_left(w, i)]
            out.append((i, gpus))
        self.free_total -= n
        return out

    def _strict(self, n: int) -> list[tuple[int, int]] | None:
        largest = self.largest
        if n <= largest:
            b = self.buckets
            for f in range(n, largest + 1):
                if b[f]:
                    return [(b[f][0], n)]
            return None
        k = servers_needed(n, largest)
        best = -1
        for r, w in enumerate(self.whole):
            if len(w) >= k and (best < 0 or len(w) < len(self.whole[best])):
                best = r
        if best < 0:
            return None
        servers = self.whole[best][:k]
        return [(s, largest if j < k - 1 else n - largest * (k - 1)) for j, s in enumerate(servers)]

    def _relaxed(self, n: int) -> list[tuple[int, int]]:
        out: list[tuple[int, int]] = []
        left = n
        for f in range(self.largest, 0, -1):
            for i in self.buckets[f]:
                take = min(f, left)
                out.append((i, take))
                left -= take
                if left == 0:
                    return out
        raise AssertionError("free_total said the GPUs exist")

    def release(self, placement: Placement) -> None:
        """Give back the GPUs of a placement, moving each server to its new free-count bucket
        (inline: this runs at every attempt end)."""
        buckets, free, largest = self.buckets, self.free, self.largest
        for i, gpus in placement:
            k = len(gpus)
            fg = self.free_gpus[i]
            if k == 1:
                insort(fg, gpus[0])
            else:
                fg.extend(gpus)
                fg.sort()
            old = free[i]
            new = old + k
            b = buckets[old]
            del b[bisect_left(b, i)]
            insort(buckets[new], i)
            free[i] = new
            if new == largest and self.size[i] == largest:
                insort(self.whole[self.rack[i]], i)
            self.free_total += k

    def free_array(self) -> np.ndarray:
        """Free GPUs per server as an array (for checks against ``locality.fits_strict``)."""
        return np.asarray(self.free, dtype=np.int64)
