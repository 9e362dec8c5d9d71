"""Each stream's classes over the last minutes, as the evaluation rounds judged them.

The rounds diagnose every stream's latest window anyway; keeping (end, class, sub-cause)
of each for ``keep_s`` seconds gives the overview its class strips without windowing
1,000 streams again (a few hundred bytes a stream). A stream not judged for ``keep_s``
is dropped, so removed targets do not stay.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Iterable

from app.diagnose import Diagnosis
from app.model import Window

Judged = tuple[float, str, str | None]  # window end, class, sub-cause


class RecentClasses:
    def __init__(self, keep_s: float = 960.0) -> None:
        self.keep_s = keep_s
        self._by_stream: dict[tuple[str, str], deque[Judged]] = {}
        self._lock = threading.Lock()

    def add(self, streams: Iterable[tuple[Window, Diagnosis]], now: float) -> None:
        oldest = now - self.keep_s
        with self._lock:
            for w, d in streams:
                ring = self._by_stream.setdefault((w.target, w.model_name), deque())
                if ring and ring[-1][0] >= w.end:
                    continue  # a round at the same end (or a clock step back): kept once
                sub = None if d.sub_cause is None else str(d.sub_cause)
                ring.append((w.end, str(d.cls), sub))
            for key in list(self._by_stream):
                ring = self._by_stream[key]
                while ring and ring[0][0] < oldest:
                    ring.popleft()
                if not ring:
                    del self._by_stream[key]

    def rings(self) -> dict[tuple[str, str], tuple[Judged, ...]]:
        """Every stream's classes, oldest first (what a stopping service keeps)."""
        with self._lock:
            return {k: tuple(ring) for k, ring in self._by_stream.items()}

    def restore(self, rings: dict[tuple[str, str], tuple[Judged, ...]], now: float) -> None:
        """Start from ``rings`` (a former service's), without what is older than
        ``keep_s`` before ``now``; streams already held keep their own."""
        oldest = now - self.keep_s
        with self._lock:
            for key, judged in rings.items():
                kept = deque(j for j in judged if j[0] >= oldest)
                if kept and key not in self._by_stream:
                    self._by_stream[key] = kept

    def get(self, target: str, model: str) -> tuple[Judged, ...]:
        with self._lock:
            return tuple(self._by_stream.get((target, model), ()))

    def __len__(self) -> int:
        with self._lock:
            return len(self._by_stream)
