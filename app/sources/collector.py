"""The service's collection job when ``source.kind`` is ``prometheus``.

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

import httpx

from app.collector import Collector, Outcome, TargetState
from app.config import Settings, TargetConfig
from app.model import ErrorKind, IntervalDelta, Snapshot
from app.redact import redact_url
from app.sources.promapi import PrometheusError
from app.sources.prometheus import History, PrometheusSource
from app.store.sqlite import ScrapeRecord, Store

log = logging.getLogger(__name__)


class PrometheusCollector(Collector):
    """A ``Collector`` whose rounds read a Prometheus API instead of scraping targets."""

    def __init__(
        self,
        settings: Settings,
        store: Store,
        client: httpx.AsyncClient,
        source: PrometheusSource | None = None,
    ) -> None:
        super().__init__(settings, store, client)
        self.source = source or PrometheusSource(settings.source)
        self.step = settings.source.step or settings.scrape.interval
        self.read_until: float | None = None
        self.last_error: str | None = None
        for target, (ts, streams) in store.last_snapshots().items():
            state = self._state(target)
            state.last_ok = Snapshot(target=target, ts=ts, streams=streams)
            self.read_until = max(self.read_until or ts, ts)

    def _state(self, target: str) -> TargetState:
        state = self.states.get(target)
        if state is None:
            source = redact_url(self.settings.source.url or "")
            url = f"{source} {self.settings.source.target_label}={target}"
            # ``url`` here is a label for people (the source and the series), never fetched:
            # it is not validated as a URL.
            config = TargetConfig.model_construct(name=target, url=url, labels={})
            state = self.states[target] = TargetState(config)
        return state

    async def aclose(self) -> None:
        await self.source.aclose()

    def _range(self, now: float) -> tuple[float, float] | None:
        """The next range to read: after the last one, up to ``now - lag``."""
        end = now - self.settings.source.lag
        if self.settings.source.mode == "range":
            end = math.floor(end / self.step) * self.step
        if self.read_until is None:
            start = end - self.settings.window.length - self.step
        elif self.settings.source.mode == "range":
            start = self.read_until + self.step
        else:
            start = self.read_until + 0.001  # raw ranges include their edges
        if end < start:
            return None
        return start, end

    async def scrape_round(self, now: float | None = None) -> list[Outcome]:
        """Read what arrived since the last round; store it like a scrape round."""
        ts = time.time() if now is None else now
        span = self._range(ts)
        if span is None:
            return []
        start, end = span
        t0 = time.perf_counter()
        previous = {t: s.last_ok for t, s in self.states.items() if s.last_ok is not None}
        try:
            history = await self.source.read(start, end, step=self.step, previous=previous)
        except PrometheusError as exc:
            self.last_error = str(exc)
            log.warning("reading Prometheus failed: %s", exc)
            self.outcomes["prometheus_error"] = self.outcomes.get("prometheus_error", 0) + 1
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
                state.last_ok = snap
                state.last_record = rec
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
                    state.last_record = rec
            self.outcomes["ok"] = self.outcomes.get("ok", 0) + len(hist.snapshots)
            if hist.failed:
                failed = self.outcomes.get(ErrorKind.OTHER.value, 0) + len(hist.failed)
                self.outcomes[ErrorKind.OTHER.value] = failed
        return outcomes
