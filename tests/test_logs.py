"""Secrets never reach the logs; JSON lines parse."""

from __future__ import annotations

import json
import logging

import pytest

from app.logs import JsonFormatter, RedactFilter, collect_secrets


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
