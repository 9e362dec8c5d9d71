"""Pace background work so the scrape loop keeps most of the interpreter.

The alert rounds, SLO evaluations and the UI's cache warmer run in threads; in CPython
only one thread runs Python at a time, so a thread that windows 1,000 streams at once
slows the event loop's scrape round by as much as it runs. :class:`Pacer` is called
between items of such work: once the thread has used ``slice_s`` of CPU (its own
``thread_time``, not the wall clock, which also counts the time it waited for the
interpreter), it sleeps long enough that the work takes at most ``share`` of the wall
time, leaving the rest to the loop. The work takes longer (about ``1/share`` of its CPU
time) but never stalls a round.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

__all__ = ["BACKGROUND_SHARE", "SLO_SHARE", "Pacer", "Stopped", "pace", "paced"]

# The alert rounds and SLO evaluations: at most half the interpreter while they run.
BACKGROUND_SHARE = 0.5
# An SLO refresh in its own thread (a minute to do it in): a quarter.
SLO_SHARE = 0.25


class Stopped(Exception):
    """Raised by :class:`Pacer` between items once its ``stop`` is set: the work's owner
    is shutting down (its store about to close), and the work ends where it stands."""


class Pacer:
    """Call between items of background work; sleeps to keep the work's share, and
    raises :class:`Stopped` once ``stop`` is set."""

    __slots__ = ("share", "slice_s", "stop", "_sleep", "_clock", "_start")

    def __init__(
        self,
        share: float = 0.5,
        slice_s: float = 0.02,
        *,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.thread_time,
        stop: threading.Event | None = None,
    ) -> None:
        if not 0 < share <= 1:
            raise ValueError(f"share must be in (0, 1], got {share}")
        self.share = share
        self.stop = stop
        self.slice_s = slice_s
        self._sleep = sleep
        self._clock = clock
        self._start = clock()

    def __call__(self) -> None:
        if self.stop is not None and self.stop.is_set():
            raise Stopped
        worked = self._clock() - self._start
        if worked >= self.slice_s:
            if self.share < 1:
                self._sleep(worked * (1 - self.share) / self.share)
            self._start = self._clock()


_local = threading.local()


@contextmanager
def paced(pacer: Pacer) -> Iterator[Pacer]:
    """Inside the block, :func:`pace` in this thread calls ``pacer``."""
    before = getattr(_local, "pacer", None)
    _local.pacer = pacer
    try:
        yield pacer
    finally:
        _local.pacer = before


def pace() -> None:
    """Call this thread's pacer (:func:`paced`), if it has one."""
    pacer = getattr(_local, "pacer", None)
    if pacer is not None:
        pacer()
