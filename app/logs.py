"""Logging set-up: level, plain or JSON lines, and secrets scrubbed from every record.

Every record is one line, whatever it carries: JSON lines escape as JSON does (and the
C1 controls and U+2028/U+2029, which some readers take for line breaks); plain text
writes a control character as ``\\n``, ``\\r``, ``\\t`` or ``\\xNN``, a traceback
included, so a newline in a scraped label value cannot forge a second record.
uvicorn's loggers go through the same handler, filter and format as phasewatch's own.
"""

from __future__ import annotations

import json
import logging
import math
import re
import time
from collections.abc import Callable, Iterable
from typing import Any, TextIO

from app.redact import redact_url, url_secrets

# Every value under `headers` too: a header may carry a key whatever its name (X-Api-Key).
_SECRET_KEY = re.compile(r"token|password|secret|webhook|receivers|authorization|headers", re.I)
# Shorter strings would scrub ordinary words from every line.
_MIN_SECRET = 6
UVICORN_LOGGERS = ("uvicorn", "uvicorn.error", "uvicorn.access")
PLAIN_FORMAT = "%(asctime)s %(levelname)s %(name)s %(message)s"

# C0 controls, DEL, C1 controls and the Unicode line/paragraph separators.
_ESCAPES: dict[int, str] = {c: f"\\x{c:02x}" for c in (*range(0x20), 0x7F, *range(0x80, 0xA0))}
_ESCAPES.update({0x09: "\\t", 0x0A: "\\n", 0x0D: "\\r", 0x2028: "\\u2028", 0x2029: "\\u2029"})
# Inside a JSON string (json.dumps already escaped C0): the same code points as \\uXXXX.
_JSON_ESCAPES = {c: f"\\u{c:04x}" for c in (0x7F, *range(0x80, 0xA0), 0x2028, 0x2029)}


def escape_controls(text: str) -> str:
    """``"a\\nb\\x1b"`` → ``"a\\\\nb\\\\x1b"``: the text on one line, with no terminal codes."""
    return text.translate(_ESCAPES)


def collect_secrets(tree: Any, *, inside: bool = False) -> set[str]:
    """Every string under a key that names a credential or a notification endpoint, and
    the password or secret query value of every URL (a target's, ``source.url``)."""
    found: set[str] = set()
    if isinstance(tree, dict):
        for key, value in tree.items():
            found |= collect_secrets(value, inside=inside or bool(_SECRET_KEY.search(str(key))))
    elif isinstance(tree, list | tuple):
        for value in tree:
            found |= collect_secrets(value, inside=inside)
    elif isinstance(tree, str):
        if inside and len(tree) >= _MIN_SECRET:
            found.add(tree)
        found |= {s for s in url_secrets(tree) if len(s) >= _MIN_SECRET}
    return found


class RedactFilter(logging.Filter):
    """Replace any configured secret in a log record's message with ``[redacted]``, and
    the password of any URL in it with ``***`` (:func:`app.redact.redact_url`)."""

    def __init__(self, secrets: Iterable[str]) -> None:
        super().__init__()
        self.secrets = sorted(set(secrets), key=len, reverse=True)

    def _clean(self, text: str) -> str:
        text = redact_url(text)
        for secret in self.secrets:
            text = text.replace(secret, "[redacted]")
        return text

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        clean = self._clean(message)
        if clean != message:
            record.msg, record.args = clean, None
        if record.exc_info and record.exc_info[1] is not None:
            text = logging.Formatter().formatException(record.exc_info)
            record.exc_text, record.exc_info = self._clean(text), None
        elif record.exc_text:
            record.exc_text = self._clean(record.exc_text)
        if record.stack_info:
            record.stack_info = self._clean(record.stack_info)
        return True


class RepeatFilter(logging.Filter):
    """Let a repeated traceback (or asyncio's own error) through once per ``interval``
    seconds, the next one saying how many were held back.

    Records repeat when they come from one logger with one message template and one
    exception type: a server out of file descriptors logs ``accept`` failing thousands
    of times a second, a job raising the same error every round. Records without an
    exception (other than asyncio's) always pass. At most ``max_keys`` kinds are
    remembered (the oldest forgotten first).
    """

    def __init__(
        self,
        interval: float = 60.0,
        *,
        clock: Callable[[], float] = time.monotonic,
        max_keys: int = 1000,
    ) -> None:
        super().__init__()
        self.interval = interval
        self.clock = clock
        self.max_keys = max_keys
        self._seen: dict[tuple[str, str, str], list[float]] = {}  # key → [since, held back]

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        if exc is None and record.name != "asyncio":
            return True
        key = (record.name, str(record.msg), type(exc).__name__)
        now = self.clock()
        seen = self._seen.get(key)
        if seen is not None and now - seen[0] < self.interval:
            seen[1] += 1
            return False
        if seen is not None and seen[1]:
            record.msg = f"{record.getMessage()} (and {int(seen[1])} more like it "
            record.msg += f"in the last {now - seen[0]:.0f} s, not logged)"
            record.args = None
        self._seen.pop(key, None)
        self._seen[key] = [now, 0]
        while len(self._seen) > self.max_keys:
            del self._seen[next(iter(self._seen))]
        return True


class Throttled:
    """One warning per ``interval`` seconds for one recurring event, with a count of
    those in between (a connection dropped, a round that failed)."""

    def __init__(
        self,
        logger: logging.Logger,
        interval: float = 60.0,
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.logger = logger
        self.interval = interval
        self.clock = clock
        self._last = -math.inf
        self._held = 0

    def warning(self, msg: str, *args: object, exc_info: bool = False) -> bool:
        """Log ``msg`` unless one was logged within the interval; True when logged."""
        now = self.clock()
        if now - self._last < self.interval:
            self._held += 1
            return False
        if self._held:
            msg += f" (and {self._held} more since the last such warning)"
        self.logger.warning(msg, *args, exc_info=exc_info)
        self._last, self._held = now, 0
        return True


class PlainFormatter(logging.Formatter):
    """``time level logger message``, one line per record (controls escaped)."""

    def __init__(self) -> None:
        super().__init__(PLAIN_FORMAT)

    def format(self, record: logging.LogRecord) -> str:
        return escape_controls(super().format(record))


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
        if record.stack_info:
            out["stack"] = record.stack_info
        return json.dumps(out, ensure_ascii=False).translate(_JSON_ESCAPES)


# APScheduler's loggers that say a job's run was skipped or late (its scheduler, its
# executors).
SCHEDULER_LOGGERS = ("apscheduler.scheduler", "apscheduler.executors.default")


class QuietJobOverlaps(logging.Filter):
    """Drop APScheduler's "skipped: maximum number of running instances" and "was missed
    by" warnings for the jobs named: jobs that run again on their next tick, whose late or
    skipped run loses nothing (an outbox sent every second, a memory trim), and that at
    1,000 targets would log several times a minute while a scrape round holds the loop.
    Jobs not named keep their warnings (the scrape rounds also count theirs:
    ``phasewatch_scrape_rounds_missed_total``)."""

    def __init__(self, job_ids: Iterable[str]) -> None:
        super().__init__()
        self.job_ids = frozenset(job_ids)

    def filter(self, record: logging.LogRecord) -> bool:
        args = record.args
        job = args[0] if isinstance(args, tuple) and args else None
        return getattr(job, "id", None) not in self.job_ids


def quiet_job_overlaps(job_ids: Iterable[str]) -> QuietJobOverlaps:
    """Install :class:`QuietJobOverlaps` for ``job_ids`` on APScheduler's loggers (once
    per process: a later call replaces the earlier filter); return it."""
    quiet = QuietJobOverlaps(job_ids)
    for name in SCHEDULER_LOGGERS:
        logger = logging.getLogger(name)
        for old in [f for f in logger.filters if isinstance(f, QuietJobOverlaps)]:
            logger.removeFilter(old)
        logger.addFilter(quiet)
    return quiet


def setup_logging(
    level: str, *, json_lines: bool, secrets: Iterable[str] = (), stream: TextIO | None = None
) -> None:
    """Configure the root logger once for the process (on ``stream``, default stderr).

    uvicorn's loggers lose the handlers its own logging config gives them and propagate
    to the root, so their records (tracebacks too) are filtered and formatted like ours;
    start uvicorn with ``log_config=None`` so that it does not put its handlers back.
    """
    handler = logging.StreamHandler(stream)
    handler.setFormatter(JsonFormatter() if json_lines else PlainFormatter())
    handler.addFilter(RepeatFilter())  # first: the redaction turns exc_info into text
    handler.addFilter(RedactFilter(secrets))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    for name in UVICORN_LOGGERS:
        uvicorn_logger = logging.getLogger(name)
        uvicorn_logger.handlers.clear()
        uvicorn_logger.propagate = True
    for noisy in ("apscheduler", "httpx", "httpcore"):
        logging.getLogger(noisy).setLevel(max(logging.WARNING, root.level))
