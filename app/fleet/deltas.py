"""Where a fleet's interval deltas come from: the ``DeltaSource`` protocol (the store has
it), and ``MemorySource``, deltas held in memory (a recording being replayed)."""

from __future__ import annotations

import bisect
from collections.abc import Mapping, Sequence
from typing import Protocol

from app.model import IntervalDelta

__all__ = ["DeltaSource", "MemorySource", "Stream"]

# (target, model_name)
Stream = tuple[str, str]


class DeltaSource(Protocol):
    """Where interval deltas come from: ``Store`` has this method."""

    def intervals(
        self, target: str, model_name: str, start: float, end: float
    ) -> list[IntervalDelta]: ...


class MemorySource:
    """Deltas held in memory (a recording being replayed), per (target, model_name)."""

    def __init__(self, deltas: Mapping[tuple[str, str], Sequence[IntervalDelta]]) -> None:
        self._deltas = {k: sorted(v, key=lambda d: d.end) for k, v in deltas.items()}
        self._ends = {k: [d.end for d in v] for k, v in self._deltas.items()}

    def intervals(
        self, target: str, model_name: str, start: float, end: float
    ) -> list[IntervalDelta]:
        ends = self._ends.get((target, model_name))
        if not ends:
            return []
        lo = bisect.bisect_right(ends, start)
        hi = bisect.bisect_right(ends, end)
        return self._deltas[(target, model_name)][lo:hi]

    def streams(self) -> list[tuple[str, str]]:
        return sorted(self._deltas)

    def first_end(self, target: str, model_name: str) -> float | None:
        """The end of a stream's oldest delta (None: it has none)."""
        ends = self._ends.get((target, model_name))
        return ends[0] if ends else None

    def earliest(self) -> float | None:
        """The start of the oldest delta held (nothing older exists)."""
        starts = [v[0].start for v in self._deltas.values() if v]
        return min(starts) if starts else None
