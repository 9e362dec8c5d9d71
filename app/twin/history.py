"""How much history a span holds, and whether it is enough to fit a twin on (pure).

A twin fitted on a span whose windows are mostly empty — the service began scraping
the stream a few minutes ago, the target was down, or the server had no traffic for
most of the span — rests on a handful of windows: its step time, its lengths and its
arrival timeline change with every window that arrives, and so does every answer read
from it (a headroom's k moved 2.95 → 3.51 between two runs of the same live server
whose 15-minute span was mostly empty). The callers that fit on their own schedule (the
headroom and the hints' pricing, ``app.read.twincache``) refuse such a span: they say
how much history it holds and when, if the traffic keeps up, it will hold enough.

A window *counts* when the scrapes covered at least half of it and the server had
traffic in it (requests arriving, finishing or running).
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass

from app.model import Window
from app.twin.fit import FitError

# A window counts when the scrapes covered at least this share of it.
COVERED = 0.5


@dataclass(frozen=True, slots=True)
class History:
    """A span's windows: how many seconds the scrapes covered, and of those how many
    had traffic (``busy_s``, the windows that count); ``counted``: each window's
    (start, end, counts)."""

    start: float
    end: float
    covered_s: float
    busy_s: float
    counted: tuple[tuple[float, float, bool], ...]

    def to_dict(self) -> dict[str, float]:
        return {
            "span_s": round(self.end - self.start, 1),
            "covered_s": round(self.covered_s, 1),
            "busy_s": round(self.busy_s, 1),
        }


def counts(w: Window) -> bool:
    """Whether a window is history a twin can rest on (module docstring)."""
    length = w.end - w.start
    if length <= 0 or w.covered < COVERED * length:
        return False
    d = w.derived
    traffic = (d.arrival_rate or 0.0, d.completion_rate or 0.0, d.running_avg or 0.0)
    return any(v > 0 for v in traffic) or w.observations.get("e2e", 0.0) > 0


def history_of(tiles: Sequence[Window], start: float, end: float) -> History:
    """The history the span's ``tiles`` hold over ``(start, end]``."""
    covered = sum(min(t.covered, t.end - t.start) for t in tiles)
    counted = tuple((t.start, t.end, counts(t)) for t in tiles)
    busy = sum(e - s for s, e, ok in counted if ok)
    return History(start, end, covered, busy, counted)


class ThinHistory(FitError):
    """A span with less history than a twin needs (module docstring): how much it has,
    how much is needed, and from when (Unix seconds) it will have enough if the traffic
    keeps up (None: not within a span's length)."""

    def __init__(self, history: History, need_s: float, answer_at: float | None) -> None:
        self.history = history
        self.need_s = need_s
        self.answer_at = answer_at
        super().__init__(self.text())

    def text(self) -> str:
        h = self.history
        span = h.end - h.start
        have = (
            f"thin history: {_minutes(h.busy_s)} of the last {_minutes(span)} had traffic and "
            f"metrics ({_minutes(h.covered_s)} scraped); the twin needs {_minutes(self.need_s)}"
        )
        if self.answer_at is None:
            return have + ": no answer until the stream has that much traffic within a span"
        wait = max(self.answer_at - h.end, 0.0)
        at = time.strftime("%H:%M UTC", time.gmtime(self.answer_at))
        return f"{have}: it answers from {at} (in {_minutes(wait)}) if the traffic keeps up"

    def to_dict(self) -> dict[str, float | None]:
        return {
            **self.history.to_dict(),
            "need_s": self.need_s,
            "answer_at": self.answer_at,
        }


def _minutes(s: float) -> str:
    return f"{s:.0f} s" if s < 90 else f"{s / 60:.3g} min"


def answer_at(history: History, need_s: float, step_s: float) -> float | None:
    """The first span end — the next ``step_s`` boundaries after this span's — whose span
    of the same length holds ``need_s`` of history, every window from now on counting
    (the traffic keeps up); None within one span's length."""
    span = history.end - history.start
    for j in range(1, math.ceil(span / step_s) + 2):
        end = history.end + j * step_s
        start = end - span
        kept = sum(e - max(s, start) for s, e, ok in history.counted if ok and e > start)
        if kept + (end - history.end) >= need_s:
            return end
    return None


def require(
    tiles: Sequence[Window], start: float, end: float, need_s: float, step_s: float
) -> History:
    """The span's history; :class:`ThinHistory` when it holds less than ``need_s``
    seconds of windows that count. ``step_s``: how often the caller fits again (its
    span's end moves by it), for when it will answer."""
    h = history_of(tiles, start, end)
    if h.busy_s + 1e-9 >= need_s:
        return h
    raise ThinHistory(h, need_s, answer_at(h, need_s, step_s))
