"""Hints with their predicted effect, attached by the evaluation layer.

The what-if twin (``app.twin``) prices a hint's change on the stream it was given for —
"--max-num-seqs 16: TTFT p99 39 s → 2.1 s (1.6–2.8 s), ITL p99 +8 %". The twin runs the
simulator's scheduler, which this layer may not know (the diagnosis does not know the
simulator), so the evaluation layer declares what it needs, :class:`EffectSource`, and
the service hands it one backed by the twin (``app.read.effects``). A source answers
from what it has already computed and never blocks a round: a stream it has not priced
yet is queued and gets its effects in a later round (an alert's pending period is that
time). :func:`attach` puts the effects on the hints and moves those predicted to change
nothing or to harm after the rest, flagged (``app.diagnose.effects``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from typing import Protocol

from app.diagnose import Diagnosis
from app.diagnose.classes import PROBLEM_CLASSES
from app.diagnose.effects import Effect, rank_by_effect
from app.diagnose.records import Hint
from app.model import Window

Setting = tuple[str, float]


class EffectSource(Protocol):
    def effects(self, window: Window, settings: Sequence[Setting]) -> Mapping[Setting, Effect]:
        """The effects known now of ``settings`` on ``window``'s stream (possibly none);
        the others are computed later. Never blocks for a twin run."""
        ...


def settings_of(d: Diagnosis) -> tuple[Setting, ...]:
    """The settings the diagnosis' hints advise that the twin models (problem classes)."""
    if d.cls not in PROBLEM_CLASSES:
        return ()
    return tuple(dict.fromkeys(h.setting for h in d.hints if h.setting is not None))


def attach(d: Diagnosis, effects: Mapping[Setting, Effect]) -> Diagnosis:
    """``d`` with each hint's effect (where known), flagged hints last."""
    if not effects:
        return d
    hints = tuple(
        dataclasses.replace(h, effect=effects[h.setting])
        if h.setting is not None and h.setting in effects
        else h
        for h in d.hints
    )
    return dataclasses.replace(d, hints=rank_by_effect(hints, _effect))


def _effect(h: Hint) -> Effect | None:
    return h.effect


def with_effects(
    source: EffectSource, compare: Callable[[Window, Diagnosis], Diagnosis] | None
) -> Callable[[Window, Diagnosis], Diagnosis]:
    """A ``compare`` step for :func:`app.evaluate.round.judge` that also attaches effects."""

    def step(w: Window, d: Diagnosis) -> Diagnosis:
        if compare is not None:
            d = compare(w, d)
        if d.cls not in PROBLEM_CLASSES:
            return d
        # Asked for every problem stream, settings or none: the source also prepares its
        # headroom in the background, so a page never waits on a fit.
        return attach(d, source.effects(w, settings_of(d)))

    return step
