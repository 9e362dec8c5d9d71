"""The pacer keeps background work to its share of wall time."""

from __future__ import annotations

import pytest

from app.pacing import Pacer


class FakeTime:
    def __init__(self) -> None:
        self.now = 0.0
        self.sleeps: list[float] = []

    def clock(self) -> float:
        return self.now

    def sleep(self, s: float) -> None:
        self.sleeps.append(s)
        self.now += s


def test_work_takes_its_share_of_wall_time() -> None:
    t = FakeTime()
    pace = Pacer(0.25, 0.019, sleep=t.sleep, clock=t.clock)
    for _ in range(100):  # 100 items of 5 ms of work
        t.now += 0.005
        pace()
    assert sum(t.sleeps) == pytest.approx(3 * 0.5, rel=0.05)  # 0.5 s of work at a quarter
    assert all(s == pytest.approx(0.06) for s in t.sleeps)  # 4 items a slice, 3x that asleep


def test_short_work_never_sleeps_and_a_full_share_never_does() -> None:
    t = FakeTime()
    pace = Pacer(0.5, 0.02, sleep=t.sleep, clock=t.clock)
    for _ in range(3):
        t.now += 0.001
        pace()
    assert t.sleeps == []
    full = Pacer(1.0, 0.02, sleep=t.sleep, clock=t.clock)
    t.now += 1.0
    full()
    assert t.sleeps == []


def test_share_must_be_a_fraction() -> None:
    with pytest.raises(ValueError):
        Pacer(0.0)


def test_pace_calls_the_pacer_of_its_own_thread_only() -> None:
    """``pace()`` inside ``paced`` calls that pacer; outside, or in another thread,
    nothing (the twin's loop calls it whoever runs it)."""
    import threading

    from app.pacing import Pacer, pace, paced

    slept: list[float] = []
    clock = [0.0]
    pacer = Pacer(0.25, slice_s=0.01, sleep=slept.append, clock=lambda: clock[0])
    pace()  # no pacer: nothing
    with paced(pacer):
        clock[0] += 0.02
        other = threading.Thread(target=pace)
        other.start()
        other.join()
        assert slept == [], "another thread's pace() is not this pacer's"
        pace()
    assert slept == [0.02 * 0.75 / 0.25]
    clock[0] += 0.02
    pace()
    assert len(slept) == 1, "outside the block: nothing"


def test_a_pacer_whose_stop_is_set_raises_stopped_between_items() -> None:
    import threading

    from app.pacing import Stopped

    stop = threading.Event()
    pacer = Pacer(0.5, stop=stop, sleep=lambda s: None, clock=lambda: 0.0)
    pacer()  # not stopped: an item passes
    stop.set()
    with pytest.raises(Stopped):
        pacer()
