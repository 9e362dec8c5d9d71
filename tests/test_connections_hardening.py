"""Half-open connections (a "slow loris") neither starve the API nor the scrapes.

The service runs as a real process with 1,024 file descriptors; the test holds 2,000
connections that each sent part of a request head and nothing more.
"""

from __future__ import annotations

import errno
import logging
import re
import resource
import socket
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from app.logs import RepeatFilter, Throttled
from app.scrape.client import OUT_OF_DESCRIPTORS, _connect_error
from tests.faults import FaultServer
from tests.realbins import free_port, running
from tests.waiting import wait_for

HALF_OPEN = 2000
SERVER_FILES = 1024


def _metric(text: str, name: str) -> float:
    """The sum of a metric's samples on a /metrics page (0 when absent)."""
    pattern = re.compile(rf"^{re.escape(name)}(?:{{[^}}]*}})? (\S+)$", re.M)
    return sum(float(v) for v in pattern.findall(text))


@pytest.fixture
def many_files() -> Iterator[int]:
    """This process may hold the half-open connections (its soft limit raised)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = HALF_OPEN + 500
    if hard != resource.RLIM_INFINITY and hard < want:
        pytest.skip(f"the hard file descriptor limit is {hard}, under {want}")
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, want), hard))
    try:
        yield want
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def _half_open(port: int, n: int) -> list[socket.socket]:
    """``n`` connections, each with part of a request head sent, nothing more."""
    socks = []
    for _ in range(n):
        s = socket.socket()
        s.settimeout(10)
        try:
            s.connect(("127.0.0.1", port))
            s.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n")
        except OSError:  # reset while connecting: the server made room, as it should
            s.close()
            continue
        socks.append(s)
    return socks


def _closed_by_peer(s: socket.socket) -> bool:
    s.setblocking(False)
    try:
        return s.recv(1) == b""
    except BlockingIOError:
        return False
    except OSError:  # reset: closed too
        return True


def test_half_open_connections_leave_the_api_answering_and_no_round_lost(
    tmp_path: Path, many_files: int
) -> None:
    port = free_port()
    config = tmp_path / "phasewatch.yaml"
    with FaultServer() as target:
        config.write_text(
            f"""
targets:
  - {{name: t, url: "{target.url("/metrics")}"}}
scrape: {{interval: 1.0, timeout: 0.8}}
storage: {{path: "{tmp_path / "pw.db"}"}}
server: {{port: {port}, request_head_timeout: 3}}
alerts: {{enabled: false}}
"""
        )
        cmd = [
            "bash",
            "-c",
            f'ulimit -n {SERVER_FILES} && exec "$0" -m app.cli serve --config "$1"',
            sys.executable,
            str(config),
        ]
        base = f"http://127.0.0.1:{port}"
        log = tmp_path / "serve.log"

        def metrics() -> str:
            return httpx.get(f"{base}/metrics", timeout=10).text

        def rounds() -> float:
            return _metric(metrics(), "phasewatch_scrape_round_duration_seconds_count")

        with running(cmd, log=log, ready_url=f"{base}/healthz"):
            wait_for(lambda: rounds() >= 1, what="a first scrape round")
            held = _half_open(port, HALF_OPEN)
            try:
                start = rounds()  # answered while they are held
                for path in ("/healthz", "/api/v1/targets", "/ui/"):
                    answer = httpx.get(base + path, timeout=10)
                    assert answer.status_code == 200, (path, answer.status_code)
                wait_for(lambda: rounds() >= start + 3, what="three rounds while held")
                page = metrics()
                assert _metric(page, "phasewatch_scrape_rounds_missed_total") == 0
                # Room was made by closing the oldest waiting ones (1,024 descriptors).
                assert _metric(page, 'phasewatch_http_connections_dropped_total{reason="cap"}') > 0
                targets = httpx.get(f"{base}/api/v1/targets", timeout=10).json()
                assert [t["up"] for t in targets] == [True]
                # The head timeout closes every one of them that is still open.
                wait_for(
                    lambda: all(_closed_by_peer(s) for s in held),
                    timeout=60,
                    what="every half-open connection closed by the server",
                )
            finally:
                for s in held:
                    s.close()
            page = metrics()
            timed_out = 'phasewatch_http_connections_dropped_total{reason="head_timeout"}'
            assert _metric(page, timed_out) > 0
    text = log.read_text()
    assert "Traceback" not in text
    assert len(text) < 100_000, f"{len(text)} bytes of log"


def test_a_repeated_traceback_is_logged_once_per_interval_with_a_count() -> None:
    now = [0.0]
    records: list[str] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            records.append(record.getMessage())

    logger = logging.getLogger("test.repeats")
    logger.propagate = False
    handler = Keep()
    handler.addFilter(RepeatFilter(60, clock=lambda: now[0]))
    logger.addHandler(handler)
    try:
        for _ in range(1000):
            try:
                raise OSError(errno.EMFILE, "Too many open files")
            except OSError:
                logger.exception("accept failed")
        logger.warning("a plain warning")
        logger.warning("a plain warning")  # no exception: never held back
        now[0] = 61.0
        try:
            raise OSError(errno.EMFILE, "Too many open files")
        except OSError:
            logger.exception("accept failed")
    finally:
        logger.removeHandler(handler)
    assert records == [
        "accept failed",
        "a plain warning",
        "a plain warning",
        "accept failed (and 999 more like it in the last 61 s, not logged)",
    ]


def test_a_throttled_warning_says_how_many_it_held_back(caplog: pytest.LogCaptureFixture) -> None:
    now = [0.0]
    warn = Throttled(logging.getLogger("test.throttled"), 60, clock=lambda: now[0])
    with caplog.at_level(logging.WARNING, "test.throttled"):
        assert warn.warning("dropped %d", 1)
        assert not any(warn.warning("dropped %d", 1) for _ in range(5))
        now[0] = 60.0
        assert warn.warning("dropped %d", 1)
    assert [r.getMessage() for r in caplog.records] == [
        "dropped 1",
        "dropped 1 (and 5 more since the last such warning)",
    ]


def test_a_fetch_that_lacks_a_descriptor_here_is_named_as_ours_not_the_targets() -> None:
    inner = OSError(errno.EMFILE, "Too many open files")
    outer = ConnectionError("cannot connect")
    outer.__cause__ = ExceptionGroup("all attempts", [inner])
    assert _connect_error(outer)[1] == OUT_OF_DESCRIPTORS
    assert _connect_error(ConnectionError("no route"))[1] == "cannot connect: no route"
