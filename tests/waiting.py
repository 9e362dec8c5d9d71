"""The suite's one way to wait: poll a condition until it holds or a bound runs out.

A test never sleeps for a fixed time; it waits for the event it needs (a round counted,
a row written, a page served). The bound is for a busy machine, not a timing claim: a
condition that holds in 50 ms on a quiet machine may take seconds with both cores busy.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")

__all__ = ["wait_for"]


def wait_for(
    pred: Callable[[], T],
    timeout: float = 60.0,
    what: str = "condition",
    *,
    every: float = 0.05,
    retry_on: tuple[type[BaseException], ...] = (),
) -> T:
    """Call ``pred`` every ``every`` seconds until it returns something truthy; return it.

    Fails with ``what`` after ``timeout`` seconds. Exceptions of the types in
    ``retry_on`` (a server not listening yet, say) count as "not yet"; the last one is
    named in the failure.
    """
    deadline = time.monotonic() + timeout
    last: object = None
    while True:
        try:
            got = pred()
            if got:
                return got
            last = got
        except retry_on as exc:
            last = exc
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} not met within {timeout:g} s (last: {last!r})")
        time.sleep(every)
