"""Caps on the streams (target, model_name) phasewatch keeps, per target and in all.

Every stream costs memory for as long as the process runs (the store's stream map and
last snapshot, the windows, SLO and fleet state built from ``store.streams()``), and a
target decides how many it shows: one inventing new ``model_name`` values every scrape
grew 29,001 streams in 100 s. ``scrape.max_series`` bounds one page, not what pages add
up to; these caps bound the sum.

A stream is admitted at its first scrape while both caps allow it, and is known from
then on (a restarted service knows the streams in its store). Past a cap, new streams
are refused in the order they arrive (a page's in page order, pages in the order they
are processed); the known ones keep flowing. A refused stream is not stored anywhere:
it is asked about again at its next scrape, and stays refused while the caps are full.
The caps count the streams of the targets scraped now: a target that is removed from the
list (discovery, a reload) takes its streams out of the count (:meth:`forget`), though
the store keeps their history. Raise the caps to admit more.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace

from app.model import ErrorKind, Problem, Snapshot

__all__ = ["StreamAdmission"]


class StreamAdmission:
    """The streams known per target, and the caps new ones must fit under."""

    __slots__ = ("_known", "_total", "max_per_target", "max_total")

    def __init__(self, max_per_target: int, max_total: int) -> None:
        """Admit at most ``max_per_target`` streams of a target, ``max_total`` in all."""
        self.max_per_target = max_per_target
        self.max_total = max_total
        self._known: dict[str, set[str]] = {}
        self._total = 0

    @property
    def total(self) -> int:
        """How many streams are known, over every target."""
        return self._total

    def known(self, target: str) -> frozenset[str]:
        """The streams of ``target`` admitted so far."""
        return frozenset(self._known.get(target, ()))

    def know(self, target: str, models: Iterable[str]) -> None:
        """Take streams as known without the caps (restored from the store)."""
        known = self._known.setdefault(target, set())
        before = len(known)
        known.update(models)
        self._total += len(known) - before

    def forget(self, target: str) -> None:
        """Drop a target's streams from the count (it is no longer scraped)."""
        self._total -= len(self._known.pop(target, ()))

    def admit(self, snap: Snapshot) -> Snapshot:
        """Return ``snap`` without the new streams the caps refuse, naming them in a
        ``too_many_streams`` problem; ``snap`` itself when every stream is admitted."""
        known = self._known.setdefault(snap.target, set())
        refused: list[str] = []
        cap = ""
        for model in snap.streams:
            if model in known:
                continue
            if len(known) >= self.max_per_target:
                cap = cap or f"{self.max_per_target} for the target"
            elif self._total >= self.max_total:
                cap = cap or f"{self.max_total} over all targets"
            else:
                known.add(model)
                self._total += 1
                continue
            refused.append(model)
        if not refused:
            return snap
        detail = f"{len(refused)} new stream(s) refused, the cap of {cap} is reached"
        detail += f" (first: model_name={refused[0]!r})"
        left = set(refused)
        return replace(
            snap,
            streams={m: s for m, s in snap.streams.items() if m not in left},
            problems=(*snap.problems, Problem(ErrorKind.TOO_MANY_STREAMS, detail)),
        )
