"""The running service: store, source, evaluation, alerting, scheduler and self-metrics.

The source yields scrapes into the store (``app.sources``); the evaluation round reads
them back (``app.evaluate``); the alert engine judges the round's instances
(``app.alerts``); the read side serves them (``app.read``).

Built by :func:`app.main.create_app` inside the FastAPI lifespan (never at import), so
tests and the CLI can build as many independent services as they like. :mod:`.core`
holds :class:`Service` and its jobs, :mod:`.health` what it reports of itself,
:mod:`.clock` the scrape schedule.
"""

from app.service.clock import RoundClock
from app.service.core import Service

__all__ = ["RoundClock", "Service"]
