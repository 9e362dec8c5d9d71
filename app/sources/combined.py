"""Several sources read as one: the scraped targets and the probes, side by side.

``targets()`` is every source's targets, in the sources' order (a name is never in two:
the settings refuse a probe named like a target); ``read_round(now)`` reads every
source's round at once and returns the first source's outcomes — the scrapes, which the
service accounts for in its scrape self-metrics; the others store their own outcomes and
account for them themselves (a probe's answers: ``phasewatch_probe_*``). Nothing that
reads targets, windows or diagnoses asks which source a target came from.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterator, Mapping, Sequence

from app.sources.base import Outcome, Source, TargetState

__all__ = ["CombinedSource"]

log = logging.getLogger(__name__)


class _Targets(Mapping[str, TargetState]):
    """The sources' target mappings as one, read through (no copy per call)."""

    def __init__(self, maps: Sequence[Mapping[str, TargetState]]) -> None:
        self._maps = maps

    def __getitem__(self, name: str) -> TargetState:
        for m in self._maps:
            if name in m:
                return m[name]
        raise KeyError(name)

    def __iter__(self) -> Iterator[str]:
        for m in self._maps:
            yield from m

    def __len__(self) -> int:
        return sum(len(m) for m in self._maps)


class CombinedSource:
    """Reads its sources as one (module docstring)."""

    def __init__(self, sources: Sequence[Source]) -> None:
        if not sources:
            raise ValueError("no source to combine")
        self.sources = tuple(sources)

    @property
    def rounds(self) -> int:
        """The first source's rounds (the scrape rounds the service counts)."""
        return self.sources[0].rounds

    @rounds.setter
    def rounds(self, value: int) -> None:
        self.sources[0].rounds = value

    def targets(self) -> Mapping[str, TargetState]:
        return _Targets([s.targets() for s in self.sources])

    async def read_round(self, now: float) -> list[Outcome]:
        """Every source's round; a failing secondary source is logged, never the scrapes'
        undoing (the first source's error is raised as it would be alone)."""
        rounds = await asyncio.gather(
            *(s.read_round(now) for s in self.sources), return_exceptions=True
        )
        for source, got in zip(self.sources[1:], rounds[1:], strict=True):
            if isinstance(got, asyncio.CancelledError):
                raise got
            if isinstance(got, BaseException):
                log.error("%s round failed: %s", type(source).__name__, type(got).__name__)
        first = rounds[0]
        if isinstance(first, BaseException):
            raise first
        return first

    async def aclose(self) -> None:
        for s in self.sources:
            await s.aclose()
