"""The one event loop (``sim.events.EventLoop``) on hand-made schedules: the order of times,
kinds and sources, arrivals in batches, events scheduled while handling, ``stop`` and
``until``, and arrivals that are not events."""

from __future__ import annotations

from philly_analyze.sim.events import EventLoop


def record(loop: EventLoop, until: int | None = None) -> list[tuple]:
    """Run the loop; one entry per handler call: (now, arrivals, [(kind, a) of the events])."""
    seen: list[tuple] = []

    def on_time(now: int, arrived: range) -> None:
        seen.append((now, list(arrived), [(e[1], e[3]) for e in loop.pop(now)]))

    if until is None:
        loop.run(on_time)
    else:
        loop.run(on_time, until)
    return seen


def test_times_in_order_then_kinds_then_first_scheduled() -> None:
    loop = EventLoop(arrivals=[0, 5, 5, 9])
    loop.schedule(5, 1, "b")
    loop.schedule(5, 0, "a")  # a smaller kind comes first at one time
    loop.schedule(5, 1, "c")  # same time and kind: after b, scheduled before it
    loop.schedule(3, 2, "d")
    loop.schedule_in_order(5, 0, "fifo")  # after the heap's events of the same time
    assert record(loop) == [
        (0, [0], []),
        (3, [], [(2, "d")]),
        (5, [1, 2], [(0, "a"), (1, "b"), (1, "c"), (0, "fifo")]),
        (9, [3], []),
    ]
    assert loop.now == 9 and loop.next_arrival == 4


def test_keyed_order_and_sequence_numbers() -> None:
    loop: EventLoop[float] = EventLoop(first_seq=10)
    assert loop.ticket() == 11  # after the first_seq numbers the caller gave out itself
    loop.schedule_keyed(1.5, 0, order=7, a="seven")
    loop.schedule_keyed(1.5, 0, order=2, a="two")
    assert [(k, a) for _, k, _, a, _ in loop.pop(1.5)] == [(0, "two"), (0, "seven")]


def test_an_event_scheduled_at_now_is_handled_at_now_again() -> None:
    loop = EventLoop()
    loop.schedule(4, 0, "first")
    calls: list[tuple[int, list[str]]] = []

    def on_time(now: int, arrived: range) -> None:
        events = [e[3] for e in loop.pop(now)]
        calls.append((now, events))
        if events == ["first"]:
            loop.schedule(now, 0, "same time")
            loop.schedule(now + 1, 0, "later")

    loop.run(on_time)
    assert calls == [(4, ["first"]), (4, ["same time"]), (5, ["later"])]


def test_stop_and_until_leave_what_is_not_due() -> None:
    loop = EventLoop(arrivals=[2, 8])
    for t in (1, 4, 6):
        loop.schedule(t, 0, t)
    assert record(loop, until=6) == [(1, [], [(0, 1)]), (2, [0], []), (4, [], [(0, 4)])]
    assert loop.next_arrival == 1  # the arrival at 8 was not taken
    stopped = []

    def on_time(now: int, arrived: range) -> None:
        loop.pop(now)
        stopped.append(now)
        loop.stop()

    loop.run(on_time)
    assert stopped == [6]
    assert loop.take_arrivals(100) == range(1, 2)


def test_arrivals_that_are_not_events_are_taken_by_handlers() -> None:
    # The sharing model without training GPUs: the loop never stops at an arrival; a
    # handler takes those due so far, in one batch.
    loop: EventLoop[float] = EventLoop([0.0, 0.5, 0.5, 1.7, 3.0], wake_on_arrivals=False)
    loop.schedule(1.0, 0)
    loop.schedule(2.0, 0)
    taken: list[tuple[float, list[int]]] = []

    def on_time(now: float, arrived: range) -> None:
        assert not arrived
        loop.pop(now)
        taken.append((now, list(loop.take_arrivals(now))))

    loop.run(on_time)
    assert taken == [(1.0, [0, 1, 2]), (2.0, [3])]
    assert loop.take_arrivals(2.5) == range(4, 4)


def test_grouped_events_come_first_at_their_time_in_the_order_scheduled() -> None:
    loop = EventLoop(arrivals=[4])
    loop.schedule(4, 0, "heap")  # kind 0, yet after the grouped events of time 4
    loop.schedule_grouped(4, 30)
    loop.schedule_grouped(2, 7)
    loop.schedule_grouped(4, 10)  # same time: after 30, scheduled before it
    loop.schedule_in_order(6, 0, "fifo")
    assert loop.next_event() == 2
    seen: list[tuple] = []

    def on_time(now: int, arrived: range) -> None:
        grouped = loop.pop_grouped(now)
        seen.append((now, list(arrived), grouped, [e[3] for e in loop.pop(now)]))
        assert loop.pop_grouped(now) is None  # taken once

    loop.run(on_time)
    assert seen == [
        (2, [], [7], []),
        (4, [0], [30, 10], ["heap"]),
        (6, [], None, ["fifo"]),
    ]
    assert loop.next_event() > 6  # NEVER: nothing left
