"""A P/D fleet's truth: what its clients saw, and each pool's class.

Every replica keeps its own accounts (``app.sim.truth``); a pool's truth is the sum of its
replicas' accounts over a window, classified (:func:`pool_truth`). What a client sees —
the fleet's door to the first token on the decode instance, and the requests that failed
— is kept per 5 s interval of the first token (:class:`ClientAccount`), which no
replica's accounts hold.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from app.sim.truth import Verdict, account_from_row, classify, merge

__all__ = ["ClientAccount", "pool_truth"]


@dataclass
class ClientAccount:
    """What the fleet's clients saw in one interval: requests that got their first token
    (by the time of that token) with their TTFT from the fleet's door, and failures."""

    t0: float
    t1: float
    first_tokens: int = 0
    ttft_sum_s: float = 0.0
    ttft_over: int = 0
    failed: int = 0
    ttfts: list[float] = field(default_factory=list)

    def row(self, epoch: float) -> dict[str, Any]:
        values = sorted(self.ttfts)
        p50 = p99 = None
        if values:
            p50 = values[max(0, math.ceil(0.5 * len(values)) - 1)]
            p99 = values[max(0, math.ceil(0.99 * len(values)) - 1)]
        return {
            "t0": epoch + self.t0,
            "t1": epoch + self.t1,
            "first_tokens": self.first_tokens,
            "ttft_sum_s": round(self.ttft_sum_s, 6),
            "ttft_over": self.ttft_over,
            "failed": self.failed,
            "ttft_p50_s": p50,
            "ttft_p99_s": p99,
        }


def pool_truth(
    rows_by_replica: Iterable[list[dict[str, Any]]], start: float, end: float
) -> Verdict:
    """The truth of one pool over ``[start, end)``: its replicas' accounts summed
    (``app.sim.truth.merge``), classified; ValueError when no interval is inside."""
    accounts = [
        account_from_row(r)
        for rows in rows_by_replica
        for r in rows
        if r["t0"] >= start and r["t1"] <= end
    ]
    if not accounts:
        raise ValueError(f"no truth intervals inside [{start}, {end})")
    accounts.sort(key=lambda a: a.t0)
    return classify(merge(accounts))
