"""The simulated cluster's shape: servers (natural id order), GPUs per server, racks.

``Cluster`` is static; the mutable allocation state every simulator updates on each start and
end, and the placement rules, are ``philly_analyze.sim.placement.FreeState``. The
synthesizer's cluster (``synth.cluster.SynthCluster``) is a ``Cluster`` with what its machine
list says beside it, so the replay engine schedules it as it is.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa


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
        """Servers."""
        return len(self.machine_ids)

    @property
    def total_gpus(self) -> int:
        """GPUs of all servers."""
        return int(self.gpus.sum())

    @property
    def largest(self) -> int:
        """GPUs of the largest server (0 without servers)."""
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
