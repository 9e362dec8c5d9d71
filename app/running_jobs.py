"""The scheduler's jobs that are running now, so that a stop can wait for them.

APScheduler's ``shutdown(wait=False)`` cancels the coroutine jobs that run (each logged
as an ERROR, "Error running job … CancelledError") and leaves the threads of the others
running: a roll-up still writing when the store closes logs "roll-up skipped (closed
database)". The service pauses the scheduler (nothing new starts), asks its long jobs to
end early, waits here for the runs in flight — counted from the scheduler's own events —
and only then shuts the scheduler down and closes the store.

Every job must be added with ``coalesce=True`` (one run time a submission, so one event
ends it); the asyncio executor reports both ends on the event loop's thread, in order.
"""

from __future__ import annotations

import threading
from typing import Any

from apscheduler.events import (
    EVENT_JOB_ERROR,
    EVENT_JOB_EXECUTED,
    EVENT_JOB_MISSED,
    EVENT_JOB_SUBMITTED,
    JobEvent,
)

__all__ = ["RunningJobs"]

_ENDED = EVENT_JOB_EXECUTED | EVENT_JOB_ERROR | EVENT_JOB_MISSED


class RunningJobs:
    """How many job runs were submitted and have not ended."""

    def __init__(self) -> None:
        self._running = 0
        self._changed = threading.Condition()

    def attach(self, scheduler: Any) -> None:
        scheduler.add_listener(self._on_event, EVENT_JOB_SUBMITTED | _ENDED)

    def _on_event(self, event: JobEvent) -> None:
        with self._changed:
            self._running += 1 if event.code == EVENT_JOB_SUBMITTED else -1
            self._changed.notify_all()

    @property
    def running(self) -> int:
        with self._changed:
            return self._running

    def wait_idle(self, timeout: float) -> bool:
        """Block until no run is in flight (True) or ``timeout`` seconds pass (False)."""
        with self._changed:
            return self._changed.wait_for(lambda: self._running <= 0, timeout)
