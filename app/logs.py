"""Logging set-up: level, plain or JSON lines, and secrets scrubbed from every record."""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Iterable
from typing import Any

_SECRET_KEY = re.compile(r"token|password|secret|webhook|receivers|authorization", re.I)


def collect_secrets(tree: Any, *, inside: bool = False) -> set[str]:
    """Every string under a key that names a credential or a notification endpoint."""
    found: set[str] = set()
    if isinstance(tree, dict):
        for key, value in tree.items():
            found |= collect_secrets(value, inside=inside or bool(_SECRET_KEY.search(str(key))))
    elif isinstance(tree, list | tuple):
        for value in tree:
            found |= collect_secrets(value, inside=inside)
    elif inside and isinstance(tree, str) and len(tree) >= 6:
        found.add(tree)
    return found


class RedactFilter(logging.Filter):
    """Replace any configured secret in a log record's message with ``[redacted]``."""

    def __init__(self, secrets: Iterable[str]) -> None:
        super().__init__()
        self.secrets = sorted(set(secrets), key=len, reverse=True)

    def filter(self, record: logging.LogRecord) -> bool:
        if not self.secrets:
            return True
        message = record.getMessage()
        clean = message
        for secret in self.secrets:
            clean = clean.replace(secret, "[redacted]")
        if clean != message:
            record.msg, record.args = clean, None
        if record.exc_info and record.exc_info[1] is not None:
            text = logging.Formatter().formatException(record.exc_info)
            for secret in self.secrets:
                text = text.replace(secret, "[redacted]")
            record.exc_text, record.exc_info = text, None
        return True


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time, level, logger, message (and the exception)."""

    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, Any] = {
            "ts": round(record.created, 3),
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        if record.exc_info:
            out["exc"] = self.formatException(record.exc_info)
        elif record.exc_text:
            out["exc"] = record.exc_text
        return json.dumps(out, ensure_ascii=False)


def setup_logging(level: str, *, json_lines: bool, secrets: Iterable[str] = ()) -> None:
    """Configure the root logger once for the process."""
    handler = logging.StreamHandler()
    handler.setFormatter(
        JsonFormatter()
        if json_lines
        else logging.Formatter("%(asctime)s %(levelname)s %(name)s %(message)s")
    )
    handler.addFilter(RedactFilter(secrets))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    for noisy in ("apscheduler", "httpx", "httpcore"):
        logging.getLogger(noisy).setLevel(max(logging.WARNING, root.level))
