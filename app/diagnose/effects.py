"""A hint's predicted effect: what the what-if twin says its change does to this stream.

A hint whose action sets an engine knob the twin models carries ``Hint.setting`` (the
twin's key and the value the hint advises). The evaluation layer asks the twin for the
stream's TTFT p99 and ITL p99 with that change and attaches an :class:`Effect`; this
module only says what a prediction means (pure):

* **helps** — a p99 falls by more than :data:`MOVE` (10 %); a figure that rises at the
  same time is named as the price (``ITL p99 +8 %``), and one the change pushes over its
  SLO is named as a trade-off;
* **no effect** — neither p99 moves by :data:`MOVE`;
* **harms** — one rises by more than :data:`MOVE` and none falls.

Hints predicted to change nothing or to harm are flagged and moved after the others
(:func:`rank_by_effect`); they are not dropped, so the reader sees what was considered.
Among the hints that help, those priced are ordered by how much they help (the p99
furthest over its SLO falls most first; during a growing queue, the soonest back under
the SLO first), in the places the priced hints held.

Where the stream's queue grows through the window, a p99 has no steady value to predict:
the effect is said in the incident's terms (:class:`Backlog`: the backlog drains in
``drain_s``, TTFT p99 is under the SLO ``under_slo_after_s`` after the change serves,
or the queue still grows by ``still_grows_by`` a second). A change that does not end
the growth is flagged as changing nothing that matters.

Every prediction carries the twin's replay error beside it; above :data:`UNRELIABLE`
(25 %) it is marked unreliable with the reason, and an alert's text leaves it out.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, TypeVar

MOVE = 0.10
UNRELIABLE = 0.25

H = TypeVar("H")


class Verdict(StrEnum):
    HELPS = "helps"
    NO_EFFECT = "no_effect"
    HARMS = "harms"


@dataclass(frozen=True, slots=True)
class Figure:
    """One p99: today's (the twin's replay, measured when there is no replay), the
    prediction and its interval, in seconds; ``slo`` the stream's objective."""

    now: float
    predicted: float
    low: float
    high: float
    slo: float | None = None

    @property
    def ratio(self) -> float:
        return self.predicted / self.now if self.now > 0 else math.inf

    def to_dict(self) -> dict[str, float | None]:
        return {
            "now": _r(self.now),
            "predicted": _r(self.predicted),
            "low": _r(self.low),
            "high": _r(self.high),
            "slo": self.slo,
        }


@dataclass(frozen=True, slots=True)
class Backlog:
    """A change's effect on a growing queue (module docstring); seconds from the moment
    the change serves; None: never."""

    backlog: float
    replicas: int
    drain_s: float | None
    under_slo_after_s: float | None
    still_grows_by: float
    slo: float
    text: str  # "the 272 queued drain in ≈ 40 s; TTFT p99 under 2 s from ≈ 35 s"

    def to_dict(self) -> dict[str, Any]:
        return {
            "backlog": round(self.backlog, 1),
            "replicas": self.replicas,
            "drain_s": None if self.drain_s is None else round(self.drain_s, 1),
            "under_slo_after_s": (
                None if self.under_slo_after_s is None else round(self.under_slo_after_s, 1)
            ),
            "still_grows_by": round(self.still_grows_by, 4),
        }


@dataclass(frozen=True, slots=True)
class Effect:
    """The twin's prediction of one hint's change on one stream."""

    change: str  # the twin's words: "max_num_seqs=16"
    ttft_p99: Figure | None
    itl_p99: Figure | None
    replay_error: float | None = None  # how far the twin's replay was from the measured
    error: str | None = None  # the twin could not say (why)
    backlog: Backlog | None = None  # the queue grows: the incident's terms

    @property
    def unreliable(self) -> str | None:
        """Why not to trust the p99 prediction (None: within :data:`UNRELIABLE`)."""
        e = self.replay_error
        if self.backlog is not None or e is None or e <= UNRELIABLE:
            return None
        return f"replay error {e:.0%}, over {UNRELIABLE:.0%}"

    def rebased(self, ttft_now: float | None, itl_now: float | None) -> Effect:
        """The effect from the values shown beside it: each p99's "now" replaced by the
        shown one, the prediction and its interval moved by the same factor."""
        return dataclasses.replace(
            self,
            ttft_p99=_rebase(self.ttft_p99, ttft_now),
            itl_p99=_rebase(self.itl_p99, itl_now),
        )

    def score(self) -> float:
        """How much it helps, lower first: the seconds until TTFT p99 is back under the SLO
        for a growing queue; else the ratio of the p99 furthest over its SLO (or of the
        larger fall)."""
        b = self.backlog
        if b is not None:
            return math.inf if b.under_slo_after_s is None else b.under_slo_after_s
        figs = [f for f in (self.ttft_p99, self.itl_p99) if f is not None]
        over = [f for f in figs if f.slo is not None and f.now > f.slo]
        pick = over or figs
        return min((f.ratio for f in pick), default=math.inf)

    @property
    def verdict(self) -> Verdict | None:
        if self.error is not None:
            return None
        if self.backlog is not None:
            return Verdict.HELPS if self.backlog.drain_s is not None else Verdict.NO_EFFECT
        figs = [f for f in (self.ttft_p99, self.itl_p99) if f is not None]
        if not figs:
            return None
        falls = any(f.ratio < 1 - MOVE for f in figs)
        rises = any(f.ratio > 1 + MOVE for f in figs)
        if falls:
            return Verdict.HELPS
        return Verdict.HARMS if rises else Verdict.NO_EFFECT

    @property
    def flagged(self) -> bool:
        return self.verdict in (Verdict.NO_EFFECT, Verdict.HARMS)

    def text(self) -> str:
        """``TTFT p99 39 s → 2.1 s (1.6–2.8 s), ITL p99 +8 %`` and the verdict's words."""
        if self.error is not None:
            return f"predicted effect: cannot tell — {self.error}"
        if self.backlog is not None:
            return f"predicted: {self.backlog.text}"
        v = self.verdict
        if v is None:
            return "predicted effect: cannot tell"
        parts = [
            _figure_text(name, f)
            for name, f in (("TTFT p99", self.ttft_p99), ("ITL p99", self.itl_p99))
            if f is not None
        ]
        head = {
            Verdict.HELPS: "predicted",
            Verdict.NO_EFFECT: "predicted to change nothing",
            Verdict.HARMS: "predicted to harm",
        }[v]
        out = f"{head}: {', '.join(parts)}"
        broken = [
            name
            for name, f in (("TTFT p99", self.ttft_p99), ("ITL p99", self.itl_p99))
            if f is not None and f.slo is not None and f.ratio > 1 + MOVE and f.predicted > f.slo
        ]
        if broken and v is Verdict.HELPS:
            out += f" — trade-off: {' and '.join(broken)} over its SLO"
        if self.replay_error is not None:
            out += f" (replay error {self.replay_error:.0%})"
        if self.unreliable is not None:
            out = f"unreliable — {out}"
        return out

    def to_dict(self) -> dict[str, Any]:
        return {
            "change": self.change,
            "verdict": None if self.verdict is None else str(self.verdict),
            "ttft_p99": None if self.ttft_p99 is None else self.ttft_p99.to_dict(),
            "itl_p99": None if self.itl_p99 is None else self.itl_p99.to_dict(),
            "replay_error": None if self.replay_error is None else round(self.replay_error, 4),
            "reliable": self.unreliable is None,
            "unreliable": self.unreliable,
            "error": self.error,
            "regime": "steady" if self.backlog is None else "growing",
            **({} if self.backlog is None else self.backlog.to_dict()),
            "text": self.text(),
        }


def _rebase(f: Figure | None, now: float | None) -> Figure | None:
    if f is None or now is None or now <= 0 or f.now <= 0:
        return f
    k = now / f.now
    return Figure(now, f.predicted * k, f.low * k, f.high * k, f.slo)


def _r(v: float) -> float:
    return float(f"{v:.4g}")


def _s(v: float) -> str:
    if v >= 1:
        return f"{v:.3g} s"
    return f"{v * 1000:.3g} ms"


def _figure_text(name: str, f: Figure) -> str:
    r = f.ratio
    if abs(r - 1) <= MOVE:
        return f"{name} {'+' if r >= 1 else '−'}{abs(r - 1) * 100:.0f} %"
    if r > 1 and r < 2 and f.now < 1 and f.predicted < 1:
        return f"{name} +{(r - 1) * 100:.0f} % ({_s(f.now)} → {_s(f.predicted)})"
    return f"{name} {_s(f.now)} → {_s(f.predicted)} ({_range(f.low, f.high)})"


def _range(lo: float, hi: float) -> str:
    if lo >= 1 and hi >= 1:
        return f"{lo:.3g}–{hi:.3g} s"
    if lo < 1 and hi < 1:
        return f"{lo * 1000:.3g}–{hi * 1000:.3g} ms"
    return f"{_s(lo)}–{_s(hi)}"


def rank_by_effect(hints: Sequence[H], effect_of: Callable[[H], Effect | None]) -> tuple[H, ...]:
    """``hints`` in their order, those flagged by their effect (``effect_of(h)``: an
    :class:`Effect` or None) moved after the rest; the priced ones that help ordered by
    :meth:`Effect.score` in the places they held (module docstring)."""
    keep = [h for h in hints if not _flag(effect_of(h))]
    flagged = [h for h in hints if _flag(effect_of(h))]
    slots = [i for i, h in enumerate(keep) if _helps(effect_of(h))]
    ranked = sorted((keep[i] for i in slots), key=lambda h: _score(effect_of(h)))
    for i, h in zip(slots, ranked, strict=True):
        keep[i] = h
    return (*keep, *flagged)


def _helps(e: Effect | None) -> bool:
    return e is not None and e.verdict is Verdict.HELPS


def _score(e: Effect | None) -> float:
    return math.inf if e is None else e.score()


def _flag(e: Effect | None) -> bool:
    return e is not None and e.flagged
