"""The two kinds of instance of a P/D fleet (``app.sim.pd``): prefill and decode.

A prefill replica keeps a finished request's KV blocks until the decode side has read
them (``Replica.hold_kv``, ``release_held``); a decode replica reads each request's KV
over a link of its own, shows its waiting requests by KV-load stage (vLLM's
``vllm:num_requests_kv_fetch_by_stage``) and has room for another request while fewer
than ``max_num_queued_reqs`` wait. Both carry the NIXL connector's metric state
(``app.sim.connector``).
"""

from __future__ import annotations

from typing import Any

from app.sim.connector import ConnectorState
from app.sim.engine import Replica

__all__ = ["DecodeReplica", "PrefillReplica"]


class PrefillReplica(Replica):
    """A prefill instance: finished requests keep their KV until the decode side read it."""

    hold_kv = True

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.connector = ConnectorState()


class DecodeReplica(Replica):
    """A decode instance: reads each request's KV over its link, then decodes it."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.connector = ConnectorState()
        self.link_free = 0.0
        # Requests whose transfer fails: not queued here, shown in progress until it does.
        self.failing: list[tuple[float, float]] = []
        self.kv_fetch = {
            "waiting_to_start": lambda: 0.0,
            "in_progress": lambda: float(self._stage(True)),
            "completed_waiting": lambda: float(self._stage(False)),
        }

    def _stage(self, moving: bool) -> int:
        now = self.now
        n = sum(1 for r in self.sched.waiting if r.external and (r.ready > now) == moving)
        if moving:
            n += sum(1 for start, end in self.failing if start <= now < end)
        return n

    @property
    def load(self) -> int:
        return len(self.sched.running) + len(self.sched.waiting)

    def has_room(self) -> bool:
        cap = self.sched.max_queued
        return cap is None or len(self.sched.waiting) < cap
