"""Whole-GPU placement: the free-GPU state of a ``Cluster`` and the rules that choose GPUs,
in O(servers touched). Every simulator places with it: the queue engine (philly, relaxed,
fifo), the preemptive engine (las, srtf) and the sharing model's training GPUs.

``FreeState`` keeps servers bucketed by their free-GPU count (sorted lists of server indices),
so the rules below are an incremental implementation of ``philly_analyze.locality.fits_strict``
(the one definition of the constraint; the tests check the two agree on random states):

- strict, ``n <= L`` (L = largest server): best fit, the server with the fewest free GPUs that
  still has ``n``; ties go to the lowest server index.
- strict, ``n > L``: ``k = servers_needed(n, L)`` wholly free L-GPU servers in one rack; the
  rack with the fewest such servers that still has ``k`` (ties: lowest rack id), its ``k``
  lowest-index servers, filled L GPUs each (the last takes the rest).
- relaxed: servers by most free GPUs first (ties: lowest index), taking GPUs until ``n``.
On every server the lowest free GPU indices are taken.
"""

from __future__ import annotations

from bisect import bisect_left, insort
from typing import Final

import numpy as np

from philly_analyze.locality import servers_needed
from philly_analyze.sim.cluster import Cluster

# Final names: compiled (sim.native), C statics instead of a dict lookup at every call.
_insort: Final = insort
_bisect_left: Final = bisect_left

#: Placement: list of (server index, [gpu indices]).
Placement = list[tuple[int, list[int]]]


class FreeState:
    """Mutable free-GPU state of a ``Cluster`` (see the module docstring for the rules)."""

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster
        self.size = [int(x) for x in cluster.gpus]
        self.rack = [int(x) for x in cluster.rack]
        self.largest = cluster.largest
        self.free = list(self.size)
        self.free_gpus: list[list[int]] = [list(range(s)) for s in self.size]
        self.free_total = sum(self.size)
        #: buckets[f]: sorted server indices with exactly f free GPUs, for f >= 1. Full servers
        #: are in no bucket (``buckets[0]`` stays empty): no rule looks for one, and in a
        #: saturated cluster most servers are full, so keeping them sorted cost a search and a
        #: move in the longest list at nearly every allocation and release.
        self.buckets: list[list[int]] = [[] for _ in range(self.largest + 1)]
        #: whole[r]: sorted indices of wholly free largest-size servers in rack r.
        self.whole: list[list[int]] = [[] for _ in range(len(cluster.rack_names))]
        for i, s in enumerate(self.size):
            if s:
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

    def strict_limit(self) -> int:
        """The smallest demand with no placement meeting the locality constraint now; every
        smaller demand has one (strict fits are monotone in the demand). ``n <= L`` fits
        while some server has ``n`` GPUs free; a larger ``n`` while a rack has
        ``servers_needed(n, L)`` wholly free L-GPU servers, i.e. ``n <= L x W`` for the most
        such servers ``W`` in one rack (a server with L GPUs free is one of them)."""
        b = self.buckets
        largest = self.largest
        for f in range(largest, 0, -1):
            if b[f]:
                if f < largest:
                    return f + 1
                return largest * max(len(w) for w in self.whole) + 1
        return 1

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
        if choice is not None:
            return self._allocate(n, choice)
        return self.place_relaxed(n) if relaxed else None

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
                    if f > n:
                        _insort(b[f - n], i)
                    self.free[i] = f - n
                    self._taken_from(i, f)
                    self.free_total -= n
                    return [(i, gpus)]
            return None
        choice = self._strict(n)
        return None if choice is None else self._allocate(n, choice)

    def place_relaxed(self, n: int) -> Placement | None:
        """Allocate ``n`` GPUs anywhere (fewest servers first), or None if fewer are free:
        servers by most free GPUs (ties: lowest index), each wholly until the last, which
        gives what is left. The servers taken wholly from a bucket are its first ones, so
        they leave it in one slice and hand over their free-GPU lists whole (a relaxed
        placement in a busy cluster gathers GPUs from many servers)."""
        if n > self.free_total:
            return None
        out: Placement = []
        buckets, free, free_gpus = self.buckets, self.free, self.free_gpus
        largest = self.largest
        left = n
        for f in range(largest, 0, -1):
            b = buckets[f]
            if not b:
                continue
            whole = left // f
            if whole > len(b):
                whole = len(b)
            for i in b[:whole]:
                out.append((i, free_gpus[i]))
                free_gpus[i] = []
                free[i] = 0
                self._taken_from(i, f)
            del b[:whole]
            left -= whole * f
            if left and b and left < f:
                # The last server gives part of its GPUs (the lowest indices).
                i = b[0]
                fg = free_gpus[i]
                out.append((i, fg[:left]))
                del fg[:left]
                del b[0]
                _insort(buckets[f - left], i)
                free[i] = f - left
                self._taken_from(i, f)
                left = 0
            if not left:
                break
        self.free_total -= n
        return out

    def _allocate(self, n: int, choice: list[tuple[int, int]]) -> Placement:
        """Take the chosen GPUs, moving each server to its new free-count bucket (inline:
        relaxed placements touch many servers)."""
        out: Placement = []
        buckets, free, free_gpus = self.buckets, self.free, self.free_gpus
        for i, take in choice:
            fg = free_gpus[i]
            gpus = fg[:take]
            del fg[:take]
            old = free[i]
            new = old - take
            b = buckets[old]
            del b[_bisect_left(b, i)]
            if new:
                _insort(buckets[new], i)
            free[i] = new
            self._taken_from(i, old)
            out.append((i, gpus))
        self.free_total -= n
        return out

    def _taken_from(self, i: int, had: int) -> None:
        """GPUs were taken from server ``i``, which had ``had`` free: if it was wholly free
        (a largest-size server with all its GPUs free), it no longer is."""
        if had == self.largest and self.size[i] == had:
            w = self.whole[self.rack[i]]
            del w[_bisect_left(w, i)]

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

    def release(self, placement: Placement) -> None:
        """Give back the GPUs of a placement, moving each server to its new free-count bucket
        (inline: this runs at every attempt end)."""
        buckets, free, largest = self.buckets, self.free, self.largest
        for i, gpus in placement:
            k = len(gpus)
            fg = self.free_gpus[i]
            if k == 1:
                _insort(fg, gpus[0])
            else:
                fg.extend(gpus)
                fg.sort()
            old = free[i]
            new = old + k
            if old:
                b = buckets[old]
                del b[_bisect_left(b, i)]
            _insort(buckets[new], i)
            free[i] = new
            if new == largest and self.size[i] == largest:
                _insort(self.whole[self.rack[i]], i)
            self.free_total += k

    def free_array(self) -> np.ndarray:
        """Free GPUs per server as an array (for checks against ``locality.fits_strict``)."""
        return np.asarray(self.free, dtype=np.int64)
