"""The service's source when ``source.kind`` is ``prometheus``: follow a Prometheus API.

Instead of scraping, each round reads from the Prometheus API what arrived since the
previous round (up to ``now - source.lag``, Prometheus' ingestion delay) and stores it
exactly as a scrape round would: one ``ScrapeRecord`` per page (ok) or per failed scrape
Prometheus saw (``up == 0``), the interval deltas, and the last snapshot of every stream.
Targets are discovered: every value of ``source.target_label`` that matches the
selector becomes a target (``TargetState``), so ``/api/v1/targets``, windows, diagnoses
and alerts see them as if they were configured.

The first round reads back one window length (``window.length``), so a restarted service
has windows at once; later rounds continue from the last page read. In ``range`` mode
the query steps are multiples of ``step`` (Grafana-style alignment), so consecutive rounds
continue one grid.
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import replace

from app.config import SourceConfig, TargetConfig
from app.model import ErrorKind, IntervalDelta, Snapshot
from app.redact import redact_url
from app.sources.base import Outcome, TargetState
from app.sources.promapi import PrometheusError
from app.sources.prometheus import History, PrometheusSource
from app.store.sqlite import ScrapeRecord, Store

__all__ = ["PrometheusFollower"]

log = logging.getLogger(__name__)


class PrometheusFollower:
    """A ``Source`` whose rounds read a Prometheus API instead of scraping targets."""

    def __init__(
        self,
        config: SourceConfig,
        targets: Sequence[TargetConfig],
        store: Store,
        *,
        length: float,
        interval: float,
        reader: PrometheusSource | None = None,
    ) -> None:
        """``targets``: the configured ones (others are discovered); ``length``: how far
        the first round reads back (``window.length``); ``interval``: the step when
        ``source.step`` is unset (``scrape.interval``)."""
        self.config = config
        self.length = length
        self.store = store
        self.reader = reader or PrometheusSource(config)
        self.step = config.step or interval
        self.read_until: float | None = None
        self.last_error: str | None = None
        self.rounds = 0
        self.states: dict[str, TargetState] = {t.name: TargetState(t) for t in targets}
        for target, (ts, streams) in store.last_snapshots().items():
            snap = Snapshot(target=target, ts=ts, streams=streams)
            self.states[target] = replace(self._state(target), last_ok=snap)
            self.read_until = max(self.read_until or ts, ts)
        for target, rec in store.last_scrapes().items():
            if target in self.states:
                self.states[target] = replace(self.states[target], last_record=rec)

    def targets(self) -> Mapping[str, TargetState]:
        return self.states

    def _state(self, target: str) -> TargetState:
        state = self.states.get(target)
        if state is None:
            source = redact_url(self.config.url or "")
            url = f"{source} {self.config.target_label}={target}"
            # ``url`` here is a label for people (the source and the series), never fetched:
            # it is not validated as a URL.
            config = TargetConfig.model_construct(name=target, url=url, labels={})
            state = self.states[target] = TargetState(config)
        return state

    async def aclose(self) -> None:
        await self.reader.aclose()

    def _range(self, now: float) -> tuple[float, float] | None:
        """The next range to read: after the last one, up to ``now - lag``."""
        end = now - self.config.lag
        if self.config.mode == "range":
            end = math.floor(end / self.step) * self.step
        if self.read_until is None:
            start = end - self.length - self.step
        elif self.config.mode == "range":
            start = self.read_until + self.step
        else:
            start = self.read_until + 0.001  # raw ranges include their edges
        if end < start:
            return None
        return start, end

    async def read_round(self, now: float) -> list[Outcome]:
        """Read what arrived since the last round; store it like a scrape round."""
        span = self._range(now)
        if span is None:
            return []
        start, end = span
        t0 = time.perf_counter()
        previous = {t: s.last_ok for t, s in self.states.items() if s.last_ok is not None}
        try:
            history = await self.reader.read(start, end, step=self.step, previous=previous)
        except PrometheusError as exc:
            self.last_error = str(exc)
            log.warning("reading Prometheus failed: %s", exc)
            return []
        self.last_error = None
        outcomes = self._outcomes(history, time.perf_counter() - t0)
        self.read_until = end
        await asyncio.to_thread(
            self.store.write_round,
            [o.record for o in outcomes],
            [d for o in outcomes for d in o.deltas],
            [
                (o.snapshot.target, o.snapshot.ts, s)
                for o in outcomes
                if o.snapshot is not None
                for s in o.snapshot.streams.values()
            ],
        )
        self.rounds += 1
        return outcomes

    def _outcomes(self, history: History, duration: float) -> list[Outcome]:
        outcomes: list[Outcome] = []
        for target, hist in sorted(history.items()):
            state = self._state(target)
            by_end: dict[float, list[IntervalDelta]] = {}
            for d in hist.deltas:
                by_end.setdefault(d.end, []).append(d)
            for snap in hist.snapshots:
                rec = ScrapeRecord(target, snap.ts, True, None, None, duration, 0, 0)
                outcomes.append(Outcome(rec, snap, by_end.get(snap.ts, [])))
                state = replace(state, last_ok=snap, last_record=rec)
            for t in hist.failed:
                rec = ScrapeRecord(
                    target,
                    t,
                    False,
                    ErrorKind.OTHER.value,
                    "Prometheus recorded a failed scrape (up == 0)",
                    0.0,
                    0,
                    0,
                )
                outcomes.append(Outcome(rec, None, []))
                if state.last_record is None or t >= state.last_record.ts:
                    state = replace(state, last_record=rec)
            self.states[target] = state
        return outcomes
