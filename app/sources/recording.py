"""Recordings: a folder of exposition pages, one per scrape, read page by page.

docs/architecture.md's "Recordings": each page is named by its Unix time in seconds
(``1764403200.000.prom``), as a ``curl`` loop or ``phasewatch sim --record`` writes
them. Every page goes through the service's own :func:`~app.sources.process.process`
(:class:`~app.sources.process.PageFeed`), so a recording is judged exactly as the live
service would have judged it; a page that cannot be used (not Prometheus text, cut in
the middle of a line, unreadable) is a failed scrape.

:class:`Recording` is a ``Source`` (its rounds give the pages up to ``now``);
:func:`read_scrapes` reads a whole folder into :class:`ReplayedScrapes`, the shape the
replays read; :func:`record_into` writes one into a store, as a scrape round would.
"""

from __future__ import annotations

import math
import re
import statistics
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from app.config import ScrapeConfig
from app.model import IntervalDelta
from app.scrape.client import read_file
from app.sources.base import Outcome, TargetState
from app.sources.process import PageFeed
from app.store.sqlite import ScrapeRecord, Store

__all__ = [
    "Recording",
    "ReplayedScrapes",
    "list_pages",
    "read_scrapes",
    "record_into",
    "target_name",
]

_PAGE = re.compile(r"^(\d+(?:\.\d+)?)\.prom$")


def list_pages(folder: Path) -> list[tuple[float, Path]]:
    """The ``<unix-seconds>.prom`` pages of a recording folder, oldest first."""
    pages = []
    for path in folder.iterdir():
        m = _PAGE.match(path.name)
        if m and path.is_file():
            pages.append((float(m.group(1)), path))
    return sorted(pages)


def target_name(folder: Path, default: str = "target") -> str:
    """A target name from a folder's name (letters, digits and ``_.:@-``)."""
    return re.sub(r"[^A-Za-z0-9_.:@-]", "_", folder.resolve().name)[-128:] or default


class Recording:
    """A recording folder as a ``Source`` of one target; ValueError when it has no pages.

    A round at ``now`` gives the pages not read yet whose time is at most ``now``; the
    target is named after the folder unless ``target`` is given.
    """

    def __init__(
        self,
        folder: str | Path,
        target: str | None = None,
        *,
        url: str = "http://recording.invalid/metrics",
        default_name: str = "target",
    ) -> None:
        self.folder = Path(folder)
        self.pages = list_pages(self.folder)
        if not self.pages:
            raise ValueError(f"{self.folder}: no <unix-seconds>.prom pages")
        self.name = target or target_name(self.folder, default_name)
        self.feed = PageFeed(self.name, url)
        self.rounds = 0
        self._next = 0
        self._cap = ScrapeConfig().max_body_bytes

    @property
    def start(self) -> float:
        return self.pages[0][0]

    @property
    def end(self) -> float:
        return self.pages[-1][0]

    def targets(self) -> Mapping[str, TargetState]:
        return {self.name: self.feed.state}

    def read_until(self, now: float) -> list[Outcome]:
        """The outcomes of the pages not read yet whose time is at most ``now``."""
        out = []
        while self._next < len(self.pages) and self.pages[self._next][0] <= now:
            ts, path = self.pages[self._next]
            out.append(self.feed(ts, read_file(path, max_bytes=self._cap)))
            self._next += 1
        self.rounds += 1
        return out

    async def read_round(self, now: float) -> list[Outcome]:
        return self.read_until(now)

    async def aclose(self) -> None:
        return None


@dataclass
class ReplayedScrapes:
    """Every scrape of one target over a span: its record and the deltas it produced
    (a recording read page by page, a URL watched, a Prometheus range), and each
    stream's ``cache_config_info`` labels where they changed (``infos``: time, labels)."""

    target: str
    records: list[ScrapeRecord] = field(default_factory=list)
    deltas: dict[str, list[IntervalDelta]] = field(default_factory=dict)
    infos: dict[str, list[tuple[float, dict[str, str]]]] = field(default_factory=dict)

    def add(self, outcome: Outcome) -> None:
        """Append one scrape's outcome (in time order)."""
        self.records.append(outcome.record)
        for d in outcome.deltas:
            self.deltas.setdefault(d.model_name, []).append(d)
        if outcome.snapshot is not None:
            for model, stream in outcome.snapshot.streams.items():
                seen = self.infos.setdefault(model, [])
                if stream.info and (not seen or seen[-1][1] != stream.info):
                    seen.append((outcome.snapshot.ts, dict(stream.info)))

    def info_at(self, model: str, t: float) -> dict[str, str]:
        """The stream's ``cache_config_info`` labels of the latest page at or before ``t``
        (the first page's before it; empty: the pages never showed them)."""
        seen = self.infos.get(model, [])
        found = seen[0][1] if seen else {}
        for ts, info in seen:
            if ts > t:
                break
            found = info
        return found

    @property
    def start(self) -> float:
        return self.records[0].ts if self.records else 0.0

    @property
    def end(self) -> float:
        return self.records[-1].ts if self.records else 0.0

    def record_at(self, t: float) -> ScrapeRecord | None:
        """The latest scrape at or before ``t`` (None: none yet)."""
        found = None
        for rec in self.records:
            if rec.ts > t:
                break
            found = rec
        return found

    def counts(self, start: float, end: float) -> tuple[int, int]:
        """(failed, attempted) scrapes in ``(start, end]``."""
        inside = [r for r in self.records if start < r.ts <= end]
        return sum(1 for r in inside if not r.ok), len(inside)

    def stale_after(self) -> float:
        """Three typical scrape intervals: a target scraped longer ago is stale."""
        gaps = [b.ts - a.ts for a, b in zip(self.records, self.records[1:], strict=False)]
        return 3.0 * (statistics.median(gaps) if gaps else 5.0)


def read_scrapes(folder: Path, target: str | None = None) -> ReplayedScrapes:
    """Read a recording folder; ValueError when it has no pages."""
    recording = Recording(folder, target)
    out = ReplayedScrapes(recording.name)
    for outcome in recording.read_until(math.inf):
        out.add(outcome)
    return out


def record_into(store: Store, folder: str | Path, target: str) -> tuple[TargetState, float, float]:
    """Write a recording folder into ``store`` as target ``target``, page by page.

    Each page is written as a scrape round would write it (its record, its deltas and
    the target's snapshot), so failed pages count as failed scrapes. Returns the
    target's final state and the times of the first and last page; ValueError when the
    folder holds no ``<unix-seconds>.prom`` page.
    """
    recording = Recording(folder, target)
    for outcome in recording.read_until(math.inf):
        snaps = []
        if outcome.snapshot is not None:
            snaps = [(target, outcome.record.ts, s) for s in outcome.snapshot.streams.values()]
        store.write_round([outcome.record], outcome.deltas, snaps)
    return recording.feed.state, recording.start, recording.end
