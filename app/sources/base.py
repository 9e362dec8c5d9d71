"""The ``Source`` protocol: anything that yields scrapes, one round at a time.

A source is asked two things. ``targets()``: what it knows of each target now (its
``TargetState``: configuration, last scrape record, last good snapshot, what the last
scrape left out) — the targets API, the UI and the evaluation round ask it every time,
never a list fixed when the service was built. ``read_round(now)``: the scrapes of one
round at ``now`` (Unix seconds), one ``Outcome`` per scrape (its record, its snapshot,
the interval deltas it produced); the service's sources also store them.

Implementations: :class:`app.sources.live.ScrapeSource` (scrape every target),
:class:`app.sources.follow.PrometheusFollower` (read what a Prometheus API received
since the last round; its targets are whatever the series name), and
:class:`app.sources.recording.Recording` (a folder of pages, read up to ``now``).

**Targets that change at run time.** A source may learn or lose targets between rounds:
the Prometheus follower already does. ``ScrapeSource`` takes its list from a
:class:`Discovery` it asks at the start of every round: :class:`StaticTargets` (the
configured ``targets``), or :class:`app.sources.discovery.MergedTargets` (those and
Prometheus' ``file_sd``/``http_sd``: its ``refresh`` reads the files or the endpoints,
keeping the last list when that fails); the source adds a state for each new target
(restored from the store) and drops the states of the gone.

**Active probes.** A probe (send a request, time the answer) is a ``Source`` of its own:
``targets()`` lists what it probes, ``read_round(now)`` runs the probes due and returns
their outcomes. Nothing downstream asks which kind of source produced a scrape.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from app.config import TargetConfig
from app.model import IntervalDelta, Snapshot
from app.store.sqlite import ScrapeRecord

__all__ = ["Discovery", "Outcome", "Source", "StaticTargets", "TargetState"]


@dataclass(frozen=True)
class TargetState:
    """What a source knows about one target between rounds (replaced, never changed)."""

    config: TargetConfig
    last_ok: Snapshot | None = None
    last_record: ScrapeRecord | None = None
    metrics_disabled: bool = False
    # Kinds of what the last scrape left out (``PARTIAL_KINDS``), first one first.
    problems: tuple[str, ...] = ()


@dataclass(frozen=True)
class Outcome:
    """What one target's scrape produced in a round."""

    record: ScrapeRecord
    snapshot: Snapshot | None
    deltas: list[IntervalDelta]
    # When the fetch started (Unix seconds); None when it is not known.
    started: float | None = None


class Source(Protocol):
    """Anything that yields scrapes (module docstring)."""

    # Rounds read so far (liveness, shown by ``/healthz``).
    rounds: int

    def targets(self) -> Mapping[str, TargetState]:
        """Every target the source knows now, by name, in its own order."""
        ...

    async def read_round(self, now: float) -> list[Outcome]:
        """The scrapes of one round at ``now``."""
        ...

    async def aclose(self) -> None:
        """Release what the source holds open (clients); its owner calls it once."""
        ...


class Discovery(Protocol):
    """Where a scraping source's target list comes from, asked every round."""

    def current(self) -> Sequence[TargetConfig]:
        """The targets as last discovered (before the first refresh: the first list)."""
        ...

    async def refresh(self, now: float) -> None:
        """Look again; a failed look keeps the last list."""
        ...


class StaticTargets:
    """The configured ``targets``: a list that never changes."""

    def __init__(self, targets: Sequence[TargetConfig]) -> None:
        self._targets = tuple(targets)

    def current(self) -> Sequence[TargetConfig]:
        return self._targets

    async def refresh(self, now: float) -> None:
        return None
