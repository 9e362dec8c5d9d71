"""Secrets never reach the logs; JSON lines parse."""

from __future__ import annotations

import json
import logging
import threading

import pytest
from apscheduler.events import EVENT_JOB_MAX_INSTANCES, JobSubmissionEvent
from apscheduler.schedulers.background import BackgroundScheduler

from app.logs import (
    SCHEDULER_LOGGERS,
    JsonFormatter,
    RedactFilter,
    collect_secrets,
    quiet_job_overlaps,
)


def test_collects_tokens_and_receiver_urls_but_not_targets() -> None:
    tree = {
        "api_token": "s3cr3t-token",
        "alerts": {"receivers": [{"url": "https://hooks.slack.test/T000/B000/XXXX"}]},
        "targets": [{"name": "a", "url": "http://127.0.0.1:8000/metrics"}],
    }
    secrets = collect_secrets(tree)
    assert secrets == {"s3cr3t-token", "https://hooks.slack.test/T000/B000/XXXX"}


def test_redact_filter_scrubs_message_and_exception(caplog: pytest.LogCaptureFixture) -> None:
    log = logging.getLogger("test.redact")
    log.addFilter(RedactFilter({"s3cr3t-token"}))
    try:
        with caplog.at_level(logging.INFO, logger="test.redact"):
            log.info("sending with token %s", "s3cr3t-token")
            try:
                raise RuntimeError("bad header Bearer s3cr3t-token")
            except RuntimeError:
                log.exception("failed")
    finally:
        log.filters.clear()
    text = "\n".join(r.getMessage() + (r.exc_text or "") for r in caplog.records)
    assert "s3cr3t-token" not in text and text.count("[redacted]") >= 2


def test_json_formatter_writes_one_object_per_line() -> None:
    rec = logging.LogRecord("x", logging.WARNING, __file__, 1, "hello %s", ("world",), None)
    obj = json.loads(JsonFormatter().format(rec))
    assert obj["msg"] == "hello world" and obj["level"] == "warning" and obj["logger"] == "x"


def test_overlapping_runs_of_quiet_jobs_are_not_logged(caplog: pytest.LogCaptureFixture) -> None:
    """A real scheduler: two jobs block past their next tick; only the one not named as
    quiet has its skipped runs logged."""
    quiet = quiet_job_overlaps(["outbox"])
    release = threading.Event()
    skipped: dict[str, int] = {}
    seen = threading.Condition()

    def on_skip(event: JobSubmissionEvent) -> None:
        with seen:
            skipped[event.job_id] = skipped.get(event.job_id, 0) + 1
            seen.notify_all()

    scheduler = BackgroundScheduler()
    scheduler.add_listener(on_skip, EVENT_JOB_MAX_INSTANCES)
    for job_id in ("outbox", "scrape"):
        scheduler.add_job(
            release.wait, "interval", seconds=0.05, id=job_id, name=job_id, max_instances=1
        )
    caplog.set_level(logging.WARNING, logger="apscheduler")
    scheduler.start()
    try:
        with seen:
            # the scheduler logs a skip before it dispatches the skip's event
            ok = seen.wait_for(
                lambda: min(skipped.get("outbox", 0), skipped.get("scrape", 0)) >= 2, timeout=30
            )
        assert ok, skipped
    finally:
        release.set()
        scheduler.shutdown(wait=True)
        for name in SCHEDULER_LOGGERS:
            logging.getLogger(name).removeFilter(quiet)
    said = [r.getMessage() for r in caplog.records if "skipped" in r.getMessage()]
    assert sum('job "scrape' in m for m in said) >= 2  # the loud job: every skip
    assert not any('job "outbox' in m for m in said)  # the quiet one: none
