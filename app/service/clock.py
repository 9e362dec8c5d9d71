"""The scrape job's schedule and the rounds it missed (pure)."""

from __future__ import annotations

import math
from dataclasses import dataclass

__all__ = ["RoundClock"]


@dataclass
class RoundClock:
    """The scrape job's schedule: rounds are due at ``anchor + k * interval``.

    :meth:`started` maps a round's start time to the slot it serves (the latest one due)
    and counts the slots since the previous round that got no round of their own — a
    round that overran, a stalled loop, or a misfire APScheduler coalesced or skipped.
    """

    anchor: float
    interval: float
    last_slot: float | None = None

    def started(self, now: float) -> tuple[float, int]:
        """Return (the slot this round serves, slots missed since the previous round)."""
        # A timer may fire a hair early; a millisecond of slack keeps it in its own slot.
        k = max(0, math.floor((now - self.anchor) / self.interval + 1e-3 / self.interval))
        slot = self.anchor + k * self.interval
        missed = 0
        if self.last_slot is not None:
            missed = max(0, round((slot - self.last_slot) / self.interval) - 1)
        self.last_slot = slot
        return slot, missed
