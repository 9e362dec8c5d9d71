"""What the service reports of itself: liveness (the scheduler, the rounds done) and the
health of the components it needs besides its targets (store, outbox, receivers)."""

from __future__ import annotations

import logging
import sqlite3
from dataclasses import asdict
from typing import TYPE_CHECKING, Any

from app.alerts.outbox import ReceiverHealth
from app.store.health import error_kind

if TYPE_CHECKING:
    from app.service.core import Service

__all__ = ["components", "liveness"]

log = logging.getLogger(__name__)


def liveness(svc: Service, now: float) -> dict[str, Any]:
    """Whether the scheduler runs (``starting`` until it does), the rounds each job has
    finished so far (scrape, alert evaluation, outbox send) and the components' status."""
    return {
        "status": "ok" if svc.scheduler.running else "starting",
        "targets": len(svc.source.targets()),
        "rounds": svc.source.rounds,
        "evaluations": svc.evaluation.evaluations,
        "send_rounds": svc.alerting.send_rounds,
        "schema_version": svc.store.schema_version,
        "components": components(svc, now)["status"],
    }


def components(svc: Service, now: float) -> dict[str, Any]:
    """Health of what the service needs besides its targets: the store's write path,
    the outbox backlog and each receiver (this process's last attempt). ``status`` is
    ``degraded`` while the store refuses writes or a receiver's last attempt failed;
    target health is summarised (``down`` counts targets per error kind)."""
    store = svc.store.health()
    backlog: int | None = None
    oldest_age: float | None = None
    try:
        backlog, oldest = svc.alerting.outbox.backlog()
        oldest_age = None if oldest is None else max(0.0, now - oldest)
    except sqlite3.Error as exc:
        log.warning("outbox backlog unreadable (store %s: %s)", error_kind(exc), exc)
    receivers = []
    for r in svc.alerting.engine.receivers:
        h = svc.alerting.sender.health.get(r.id, ReceiverHealth())
        receivers.append({"id": r.id, "kind": r.kind, "ok": h.ok, **asdict(h)})
    down: dict[str, int] = {}
    problems: dict[str, int] = {}  # what up targets' last scrapes left out
    up = 0
    targets = svc.source.targets()
    for state in targets.values():
        rec = state.last_record
        if rec is not None and rec.ok:
            up += 1
            for kind in state.problems:
                problems[kind] = problems.get(kind, 0) + 1
        else:
            kind = rec.error_kind or "other" if rec is not None else "not_scraped"
            down[kind] = down.get(kind, 0) + 1
    ok = store.ok and all(r["ok"] for r in receivers) and svc.reload_status.successful
    discovery = getattr(svc.scraped.discovery, "health", None) if svc.scraped else None
    return {
        "status": "ok" if ok else "degraded",
        "config": asdict(svc.reload_status),
        "discovery": discovery() if discovery is not None else [],
        "store": asdict(store),
        "outbox": {"backlog": backlog, "oldest_undelivered_age_s": oldest_age},
        "receivers": receivers,
        "targets": {
            "total": len(targets),
            "up": up,
            "down": down,
            "problems": problems,
        },
    }
