"""The evaluation round as the service's own job: alerts on or off, diagnoses are stored.

Every ``alerts.evaluation_interval`` (the first run shortly after start-up, so that the
first scrape is stored) the round windows and diagnoses every stream and writes the
diagnosis rows; with alerts enabled, the alert engine judges the same round's instances
before it is saved (:meth:`app.service.Service.evaluate_round`). The round runs off the
event loop; a failed one is logged and the next one redoes it (it saves in one
transaction, so it either saved or not).
"""

from __future__ import annotations

import asyncio
import logging
import sqlite3
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from app.store.health import error_kind

__all__ = ["EVALUATION_JOB_ID", "FIRST_EVALUATION_DELAY_S", "EvaluationJob"]

log = logging.getLogger(__name__)

# The scheduler's id of the round (kept from when alerting started it: logs and filters
# that name it keep working).
EVALUATION_JOB_ID = "alerts"
# The first round waits this long after start-up so the first scrape is stored.
FIRST_EVALUATION_DELAY_S = 2.0


class EvaluationJob:
    """Runs ``evaluate(now)`` on a schedule; counts the rounds finished (``/healthz``)."""

    def __init__(self, evaluate: Callable[[float], object]) -> None:
        self.evaluate = evaluate
        self.evaluations = 0  # rounds finished, saved or not: the job's liveness

    async def run(self) -> None:
        """One round, off the event loop."""
        try:
            await asyncio.to_thread(self.evaluate, time.time())
        except asyncio.CancelledError:
            log.info("evaluation round interrupted by shutdown")
        except sqlite3.Error as exc:
            # Nothing was saved and the state did not move on: the next round redoes it.
            log.warning("evaluation round not saved (store %s: %s)", error_kind(exc), exc)
        except Exception:
            log.exception("evaluation round failed")
        finally:
            self.evaluations += 1

    def schedule(self, scheduler: Any, interval: float) -> None:
        """Add the job to an APScheduler scheduler."""
        scheduler.add_job(
            self.run,
            "interval",
            seconds=interval,
            id=EVALUATION_JOB_ID,
            next_run_time=datetime.now(UTC) + timedelta(seconds=FIRST_EVALUATION_DELAY_S),
            max_instances=1,
            coalesce=True,
            misfire_grace_time=max(1, int(interval)),
        )

    def reschedule(self, scheduler: Any, interval: float) -> None:
        """Take a new interval (a reload)."""
        if scheduler.running and scheduler.get_job(EVALUATION_JOB_ID) is not None:
            scheduler.reschedule_job(EVALUATION_JOB_ID, trigger="interval", seconds=interval)
