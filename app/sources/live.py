"""The service's scrape source: every target fetched each round, processed, stored.

A slow or dead target never delays the others: every fetch has its own timeout and runs
concurrently under a cap. The last good snapshot of each target is kept in memory and in
the store, so deltas resume correctly after a restart and a failed scrape loses nothing
(the next good scrape's delta covers the gap, :mod:`app.sources.process`). A round the
store cannot take (read-only, full) loses nothing either: the baselines go back to the
last stored snapshots, so the next written delta covers the gap, and the round's scrape
records wait for that write (at most ``MAX_UNWRITTEN``).

The target list is asked of a :class:`~app.sources.base.Discovery` at the start of every
round (the configured ``targets``, or those merged with ``file_sd`` and ``http_sd``:
:mod:`app.sources.discovery`): a new target's state is restored from the store and it is
scraped from that round; a gone target's state is dropped with everything held for it
(its client, its streams in the caps and in the store's memory, and the page layouts
beyond the fleet's size), while its history stays in the store. :meth:`is_gone` tells
the evaluation and the alerts which stored targets are no longer scraped.
"""

from __future__ import annotations

import asyncio
import logging
import sqlite3
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

import httpx

from app.config import ScrapeConfig, TargetConfig
from app.model import PARTIAL_KINDS, ErrorKind, Snapshot, StreamSnapshot
from app.scrape.admission import StreamAdmission
from app.scrape.client import ClientPool, FetchResult, fetch, read_file
from app.scrape.reader import PageReader
from app.sources.base import Discovery, Outcome, StaticTargets, TargetState
from app.sources.process import failed_outcome, process
from app.store.health import error_kind
from app.store.sqlite import ScrapeRecord, Store

__all__ = ["MAX_UNWRITTEN", "ScrapeSource"]

log = logging.getLogger(__name__)

# Scrape records kept for the next write while the store refuses writes (~7 h of 200
# targets at 5 s); older ones are dropped first.
MAX_UNWRITTEN = 1_000_000
# Page layouts kept beyond one per target (a target whose layout changes, engines).
TEMPLATE_SLACK = 64


class ScrapeSource:
    """Scrapes the discovered targets and writes what it learns to the store."""

    def __init__(
        self,
        scrape: ScrapeConfig,
        targets: Sequence[TargetConfig] | Discovery,
        store: Store,
        client: httpx.AsyncClient | ClientPool,
    ) -> None:
        """``targets``: the configured list, or a :class:`Discovery` asked every round."""
        self.scrape = scrape
        self.store = store
        self.client = client  # closed by its owner
        self.clients = client if isinstance(client, ClientPool) else ClientPool.of(client)
        self.discovery = StaticTargets(targets) if isinstance(targets, Sequence) else targets
        self.states: dict[str, TargetState] = {}
        known = self.discovery.current()
        # The caches every target's pages are read through. A template per target's page
        # layout (each page names its own target's model): a default cache holds 256,
        # too few for a fleet.
        self.reader = PageReader(max_templates=len(known) + TEMPLATE_SLACK, eager_templates=True)
        self.admission = StreamAdmission(
            self.scrape.max_streams_per_target, self.scrape.max_streams
        )
        self._sem = asyncio.Semaphore(self.scrape.concurrency)
        self.rounds = 0
        self._unwritten: list[ScrapeRecord] = []
        self._configs: Sequence[TargetConfig] = ()
        self._released: list[httpx.AsyncClient] = []
        self._sync(known)

    def targets(self) -> Mapping[str, TargetState]:
        return self.states

    def is_gone(self, name: str) -> bool:
        """Whether a stored target is no longer scraped: not in the list, once every
        discovery has read its list (before that, nothing is judged gone)."""
        return name not in self.states and getattr(self.discovery, "ready", True)

    def reconfigure(
        self, scrape: ScrapeConfig, targets: Sequence[TargetConfig] | Discovery
    ) -> None:
        """Take new scrape settings and a target list from the next round on (a reload;
        the caller closes what it no longer runs of the discovery it replaced)."""
        if scrape.concurrency != self.scrape.concurrency:
            self._sem = asyncio.Semaphore(scrape.concurrency)
        self.admission.max_per_target = scrape.max_streams_per_target
        self.admission.max_total = scrape.max_streams
        self.scrape = scrape
        self.discovery = StaticTargets(targets) if isinstance(targets, Sequence) else targets

    def held(self) -> dict[str, int]:
        """What is held per target and stream now, by kind (the churn bench reads it)."""
        return {
            "target_states": len(self.states),
            "admitted_streams": self.admission.total,
            "scrape_clients": len(self.clients.clients),
            "parse_templates": len(self.reader.parse_cache.templates),
            "recent_streams": self.store.held_streams(),
        }

    async def aclose(self) -> None:
        """Close the discovery and the clients of gone targets (the pool is its owner's)."""
        close = getattr(self.discovery, "aclose", None)
        if close is not None:
            await close()
        await self._close_released()

    async def _close_released(self) -> None:
        released, self._released = self._released, []
        for client in released:
            await client.aclose()

    def _sync(self, configs: Sequence[TargetConfig]) -> None:
        """Keep a state per discovered target, in discovery order; a new one starts from
        what the store holds of it (its last snapshot and scrape, its streams)."""
        if configs is self._configs:
            return  # the same list as last round (static targets): nothing to do
        new = [c.name for c in configs if c.name not in self.states]
        stored = _Stored.read(self.store, new) if new else None  # of the new targets only
        states = {}
        for config in configs:
            state = self.states.get(config.name)
            if state is None:
                assert stored is not None
                state = self._restored(config, stored)
            elif state.config != config:
                state = replace(state, config=config)
            states[config.name] = state
        gone = {name for name in self.states if name not in states}
        added = len(states) - (len(self.states) - len(gone))
        if self._configs and (gone or added):
            log.info("targets: %d added, %d removed, %d now", added, len(gone), len(states))
        for name in gone:
            self.admission.forget(name)
            client = self.clients.release(name)
            if client is not None:
                self._released.append(client)
        if gone:
            self.store.release_targets(gone)
        cache = self.reader.parse_cache  # room for every target's layout (shrunk after)
        cache.resize(max(cache.max_templates, len(states) + TEMPLATE_SLACK))
        self.states = states
        self._configs = configs

    def _restored(self, config: TargetConfig, stored: _Stored) -> TargetState:
        state = TargetState(config)
        name = config.name
        snap = stored.snapshots.get(name)
        if snap is not None:
            ts, streams = snap
            state = replace(state, last_ok=Snapshot(target=name, ts=ts, streams=streams))
            self.admission.know(name, streams)
        self.admission.know(name, stored.streams.get(name, ()))
        rec = stored.records.get(name)
        if rec is not None:
            # Only the first problem is stored.
            problems = (rec.error_kind,) if rec.ok and rec.error_kind in PARTIAL_KINDS else ()
            state = replace(state, last_record=rec, problems=problems)
        return state

    async def _fetch(self, target: TargetConfig) -> FetchResult:
        cfg = self.scrape
        async with self._sem:
            if target.url.startswith("file://"):
                return read_file(target.url[len("file://") :], max_bytes=cfg.max_body_bytes)
            return await fetch(
                self.clients.for_target(target.name),
                target.url,
                timeout=cfg.timeout,
                max_bytes=cfg.max_body_bytes,
            )

    def _process(self, state: TargetState, result: FetchResult, ts: float) -> Outcome:
        name = state.config.name
        try:
            new, outcome = process(
                state,
                result,
                ts,
                max_series=self.scrape.max_series,
                reader=self.reader,
                admission=self.admission,
            )
        except Exception as exc:  # a parser bug must not stop the other targets
            log.exception("processing %s failed", name)
            msg = f"internal error: {type(exc).__name__}"
            outcome = failed_outcome(name, result, ts, ErrorKind.OTHER, msg)
            new = replace(state, last_record=outcome.record)
        if name in self.states:  # not dropped by discovery meanwhile
            self.states[name] = new
        return outcome

    async def read_round(self, now: float) -> list[Outcome]:
        """Scrape all targets once; store and return what each produced.

        Every target's scrape of a round carries the round's time (when it began), so
        the streams of a fleet share their interval boundaries. A page is processed as
        soon as it has arrived, while the slower targets are still being fetched.
        """
        await self.discovery.refresh(now)
        self._sync(self.discovery.current())
        await self._close_released()
        stored = {name: s.last_ok for name, s in self.states.items()}

        async def one(state: TargetState) -> Outcome:
            return self._process(state, await self._fetch(state.config), now)

        outcomes = await asyncio.gather(*(one(s) for s in list(self.states.values())))
        snapshots = [
            (o.snapshot.target, o.snapshot.ts, s)
            for o in outcomes
            if o.snapshot is not None
            for s in o.snapshot.streams.values()
        ]
        records = [*self._unwritten, *(o.record for o in outcomes)]
        try:
            await asyncio.to_thread(
                self.store.write_round,
                records,
                [d for o in outcomes for d in o.deltas],
                snapshots,
            )
        except sqlite3.Error as exc:
            for name, snap in stored.items():
                if name in self.states:
                    self.states[name] = replace(self.states[name], last_ok=snap)
            self._unwritten = records[-MAX_UNWRITTEN:]
            log.warning(
                "store write failed (%s: %s); %d scrape record(s) kept for the next write",
                error_kind(exc),
                exc,
                len(self._unwritten),
            )
        else:
            self._unwritten = []
        # Page layouts for the fleet scraped now: those of gone targets go first (LRU).
        self.reader.parse_cache.resize(max(len(self.states), 1) + TEMPLATE_SLACK)
        self.rounds += 1
        return outcomes


@dataclass(frozen=True)
class _Stored:
    """What the store holds of some targets: a new target's state starts from it."""

    snapshots: dict[str, tuple[float, dict[str, StreamSnapshot]]]
    records: dict[str, ScrapeRecord]
    streams: dict[str, list[str]]

    @classmethod
    def read(cls, store: Store, targets: list[str]) -> _Stored:
        """What the store holds of ``targets`` (indexed reads: a fleet that changes
        every minute must not scan the scrape history each time)."""
        wanted = set(targets)
        streams: dict[str, list[str]] = {}
        for target, model in store.streams():
            if target in wanted:
                streams.setdefault(target, []).append(model)
        return cls(store.last_snapshots(wanted), store.last_scrapes(wanted), streams)
