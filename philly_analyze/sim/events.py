"""The simulators' one event loop (SimPy-small): a clock, a heap of timed events, a FIFO of
events whose times never decrease, and a stream of pre-sorted arrivals.

The queue engine, the preemptive engine and the GPU-sharing model all run on it::

    loop = EventLoop(arrivals=submit_times)
    loop.schedule(t, KIND, a, b)          # an event at time t (heap)
    loop.run(on_time)                     # on_time(now, arrived) once per distinct event time

``on_time(now, arrived)`` gets the indices of the arrivals due at ``now`` (taken from the
stream) and takes the events due with ``loop.pop(now)`` (heap then FIFO, each in (kind,
order) order, as whole event tuples). It may schedule more events (one scheduled at ``now``
itself makes the loop call it again at ``now``), pull arrivals early with
``take_arrivals(upto)``, and end the run with ``loop.stop()``. Times are ints (microseconds:
the replay engines) or floats (minutes: the sharing model); the loop only compares them.

A simulator with one kind of event far commoner than the rest (the queue engine's attempt
ends) can keep those apart as *grouped* events (``schedule_grouped``: an int payload): a
heap of their distinct times, plain ints, and the payloads at each time in a list. An event
tuple is six objects where a time is one, and ints compare in one step where tuples compare
field by field (the tuple heap was a sixth of a saturated replay). Grouped events come
before every other event of their time, in the order they were scheduled.

Why three sources instead of one heap: a replay has one arrival per job, already sorted by
submit time (a heap entry each would double the heap); and with one locality wait for every
job, timeouts fall due in the order they are made (one per waiting attempt in a saturated
replay: a deque costs O(1) where the heap costs O(log n)). Ties between sources: heap events,
then FIFO events, then arrivals, which is the order the handlers take them in. This loop runs
once per event time, millions of times in a big replay, so it costs one handler call and one
``pop`` per time; handlers unpack the event tuples themselves.

An event is a tuple ``(time, kind, order, a, b)``. ``kind`` is a small int chosen by the
simulator: at one time, smaller kinds come first. ``order`` breaks ties within a kind: a
running sequence number by default (first scheduled, first out), or a key the simulator gives
(the sharing model orders simultaneous completions by job index). ``a`` and ``b`` are the
payload (a job and an attempt, say).
"""

from __future__ import annotations

import gc
import heapq
from bisect import bisect_right
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, Final, Generic, TypeVar

# The heap and bisect functions as Final names: compiled (sim.native), a Final name is a C
# static, where ``heapq.heappush`` is an attribute lookup and an imported name a dict lookup
# at every call (a few percent of a saturated replay).
_heappush: Final = heapq.heappush
_heappop: Final = heapq.heappop
_bisect_right: Final = bisect_right

#: Later than any event (the loop's end of time).
NEVER: Final = 1 << 62

#: The clock's type: int microseconds (replay engines) or float minutes (sharing model).
T = TypeVar("T", int, float)

#: An event: (time, kind, order, a, b).
Event = tuple[T, int, Any, Any, Any]


class EventLoop(Generic[T]):
    """The clock and the pending events of one simulation run (module docstring)."""

    __slots__ = (
        "_stop",
        "arrivals",
        "fifo",
        "group_times",
        "groups",
        "heap",
        "next_arrival",
        "now",
        "seq",
        "wake",
    )

    def __init__(
        self,
        arrivals: Sequence[T] = (),
        *,
        first_seq: int = 0,
        wake_on_arrivals: bool = True,
    ) -> None:
        """``arrivals``: sorted times (one per arriving item, by index). ``first_seq``: the
        first sequence number ``ticket`` hands out (the queue engine numbers arrivals by job
        index and everything else after them). ``wake_on_arrivals=False``: arrivals are not
        events (the loop never stops at one) but are taken in batches by handlers, when
        nothing can happen at an arrival itself (the sharing model without training GPUs)."""
        self.now: T | int = 0
        self.heap: list[Event[T]] = []
        self.fifo: deque[Event[T]] = deque()
        #: Grouped events (``schedule_grouped``): a heap of their distinct times, and the
        #: payloads due at each time.
        self.group_times: list[int] = []
        self.groups: dict[int, list[int]] = {}
        self.seq = first_seq
        self.arrivals: list[T] = list(arrivals)
        self.next_arrival = 0
        self.wake = wake_on_arrivals
        self._stop = False

    # ------------------------------------------------------------------ scheduling
    def ticket(self) -> int:
        """The next sequence number (for ordering items the simulator keeps itself)."""
        self.seq += 1
        return self.seq

    def schedule(self, t: T, kind: int, a: Any = 0, b: Any = 0) -> None:
        """An event at ``t``, after the events of the same time and kind scheduled before."""
        self.seq += 1
        _heappush(self.heap, (t, kind, self.seq, a, b))

    def schedule_keyed(self, t: T, kind: int, order: Any, a: Any = 0, b: Any = 0) -> None:
        """An event at ``t`` ordered by ``order`` among the same time and kind."""
        _heappush(self.heap, (t, kind, order, a, b))

    def schedule_in_order(self, t: T, kind: int, a: Any = 0, b: Any = 0) -> None:
        """An event at ``t`` that the caller knows is no earlier than any it put here before
        (a FIFO, no heap)."""
        self.fifo.append((t, kind, 0, a, b))

    def schedule_grouped(self, t: int, payload: int) -> None:
        """A grouped event (module docstring) at int time ``t``, after those scheduled
        before it at ``t``. Taken with ``pop_grouped``, before the other events of its time."""
        group = self.groups.get(t)
        if group is None:
            self.groups[t] = [payload]
            _heappush(self.group_times, t)
        else:
            group.append(payload)

    def pop_grouped(self, now: int) -> list[int] | None:
        """Remove the grouped events due at ``now``: their payloads in order (None if none)."""
        times = self.group_times
        if times and times[0] == now:
            _heappop(times)
            return self.groups.pop(now)
        return None

    def next_event(self) -> T | int:
        """The time of the next scheduled event (not counting arrivals); ``NEVER`` if none."""
        t: T | int = NEVER
        if self.heap:
            t = self.heap[0][0]
        if self.fifo and self.fifo[0][0] < t:
            t = self.fifo[0][0]
        if self.group_times and self.group_times[0] < t:
            t = self.group_times[0]
        return t

    def stop(self) -> None:
        """End ``run`` once the current handler returns."""
        self._stop = True

    # ------------------------------------------------------------------ taking events
    def pop(self, now: T) -> list[Event[T]]:
        """Remove and return the events due at ``now``: the heap's, then the FIFO's."""
        heap = self.heap
        out: list[Event[T]] = []
        while heap and heap[0][0] == now:
            out.append(_heappop(heap))
        fifo = self.fifo
        while fifo and fifo[0][0] == now:
            out.append(fifo.popleft())
        return out

    def take_arrivals(self, upto: T) -> range:
        """Indices of the arrivals not taken yet whose time is at most ``upto`` (taken now)."""
        lo = self.next_arrival
        arr = self.arrivals
        if lo >= len(arr) or arr[lo] > upto:
            return range(lo, lo)
        # Most times have one arrival: check the next before searching.
        hi = lo + 1 if lo + 1 >= len(arr) or arr[lo + 1] > upto else _bisect_right(arr, upto, lo)
        self.next_arrival = hi
        return range(lo, hi)

    # ------------------------------------------------------------------ running
    def run(self, on_time: Callable[[T, range], None], until: T | int = NEVER) -> None:
        """Call ``on_time(now, arrived)`` at each event time before ``until``, in time order,
        until no event is left or a handler calls ``stop``. ``arrived``: the indices of the
        arrivals due at ``now`` (always empty without ``wake_on_arrivals``)."""
        arrivals = self.arrivals
        n_arr = len(arrivals) if self.wake else 0
        self._stop = False
        # Once per event time: the next event's time, or the next arrival's if no later.
        while True:
            t = self.next_event()
            lo = self.next_arrival
            if lo < n_arr and arrivals[lo] <= t:
                t = arrivals[lo]
                hi = lo + 1
                while hi < n_arr and arrivals[hi] == t:
                    hi += 1
                self.next_arrival = hi
            else:
                hi = lo
            if t is NEVER or t >= until:
                self.next_arrival = lo  # not taken: the run ends before them
                return
            self.now = t
            on_time(t, range(lo, hi))
            if self._stop:
                return


class Deadlines:
    """Times at which items fall due, earliest first, kept apart from the loop's events: the
    simulator takes the due ones when it visits a time (``pop_due``) and schedules a wake-up
    event itself only when one must be visited (the queue engine's locality waits: a
    saturated replay has one per waiting class head, and almost none needs an event). Items
    are ``(time, a, b)``; ``items[0]`` is the earliest."""

    __slots__ = ("items",)

    def __init__(self) -> None:
        self.items: list[tuple[int, int, int]] = []

    def __bool__(self) -> bool:
        return bool(self.items)

    def add(self, t: int, a: int, b: int) -> None:
        """Item ``(a, b)`` falls due at ``t``."""
        _heappush(self.items, (t, a, b))

    def pop(self) -> tuple[int, int, int]:
        """Remove and return the earliest item."""
        return _heappop(self.items)


@contextmanager
def gc_paused() -> Iterator[None]:
    """No cyclic garbage collection inside: a simulation allocates millions of tuples, lists
    and dicts that form no cycles, and the collector would scan every live one again and again
    (a quarter of a saturated million-job replay's time). Reference counting still frees
    everything; the collector runs again on exit."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()
