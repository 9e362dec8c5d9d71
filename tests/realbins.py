"""Start real components (Prometheus, Alertmanager, Chromium…) for integration tests.

Binaries come from Debian's packages (`make test` installs them as root). Under
``CI=true`` a missing binary fails the test; elsewhere it is skipped with the reason.
Every server binds 127.0.0.1 on a free port.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

from tests.waiting import wait_for


def require_binary(name: str) -> str:
    """Return the binary's path, or fail (CI) / skip (elsewhere) naming the package."""
    path = shutil.which(name)
    if path:
        return path
    msg = f"{name} not installed (Debian package; `make test` installs it as root)"
    if os.environ.get("CI") == "true":
        pytest.fail(msg)
    pytest.skip(msg)


def free_port() -> int:
    """A port free on 127.0.0.1 right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_http(url: str, timeout: float = 20.0) -> None:
    """Wait until ``url`` answers 2xx, or fail."""
    wait_for(
        lambda: httpx.get(url, timeout=1.0).is_success,
        timeout,
        f"{url} coming up",
        retry_on=(httpx.HTTPError,),
    )


# A process's start on a busy machine: a service importing its stack took over 20 s at a
# load of 15, and a start is told from a failure by the process exiting, not by the clock.
START_TIMEOUT_S = 120.0


def _up_or_exited(proc: subprocess.Popen[bytes], url: str) -> bool:
    if proc.poll() is not None:
        return True
    try:
        return httpx.get(url, timeout=1.0).is_success
    except httpx.HTTPError:
        return False


@contextmanager
def running(
    cmd: Sequence[str], *, log: Path, ready_url: str | None = None
) -> Iterator[subprocess.Popen[bytes]]:
    """Run ``cmd`` with output to ``log``; wait for ``ready_url`` (or for it to exit,
    a failure at once); always stop it."""
    with log.open("wb") as out:
        proc = subprocess.Popen(list(cmd), stdout=out, stderr=subprocess.STDOUT)
        try:
            if ready_url:
                try:
                    wait_for(
                        lambda: _up_or_exited(proc, ready_url),
                        START_TIMEOUT_S,
                        f"{ready_url} coming up",
                    )
                    if proc.poll() is not None:
                        raise AssertionError(f"exited with {proc.returncode}")
                except AssertionError:
                    raise AssertionError(
                        f"{cmd[0]} failed to start:\n{log.read_text()[-2000:]}"
                    ) from None
            yield proc
        finally:
            proc.terminate()
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(5)
