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

**Cold start.** A target's first page in this process costs several times a later one
(its page layout is learnt, its client and connection made, its streams admitted): 1,000
of them in one round took 10 s of CPU on a 5 s interval. When more than ``WARM_INLINE``
targets have not been fetched yet, they are not fetched by the round: each is fetched on
its own at an offset inside the interval (a hash of its name, as Prometheus offsets its
targets), as many per interval as ``WARM_SHARE`` of the interval's CPU allows at the
measured cost of a first contact, and joins the rounds once fetched. Its first page is
stored with the next round, at its own time (its first delta, from a stored snapshot
after a restart, ends then), and reported without a start so it does not count as the
round's lag.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import math
import sqlite3
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

import httpx

from app.config import ScrapeConfig, TargetConfig
from app.model import PARTIAL_KINDS, ErrorKind, Snapshot, StreamSnapshot
from app.scrape.admission import StreamAdmission
from app.scrape.client import ClientPool, FetchResult, TargetClient, fetch, read_file
from app.scrape.label_limits import LabelLimits
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
# Cold start (module docstring): up to this many targets not fetched yet are fetched by
# the round itself; more are spread over the intervals, their first contacts taking at
# most this share of an interval's CPU, at the measured cost of one (first guess below).
WARM_INLINE = 64
WARM_SHARE = 0.4
WARM_COST_S = 0.015
# First contacts start inside this share of the interval (the round needs the rest).
WARM_SPREAD = 0.8


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
        self.limits = LabelLimits.of(scrape)  # read once, not per page
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
        self._released: list[TargetClient] = []
        # Cold start: targets fetched by this process, first contacts under way and done
        # (stored with the next round), and the CPU seconds a first contact costs.
        self._contacted: set[str] = set()
        self._warming: dict[str, asyncio.Task[None]] = {}
        self._warmed: list[Outcome] = []
        self._retry: list[Outcome] = []
        self.warm_cost_s = WARM_COST_S
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
        self.limits = LabelLimits.of(scrape)  # read once, not per page
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
            self._contacted.discard(name)  # a name that comes back is a first contact again
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
                limits=self.limits,
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

    def _warm_up(self, cold: list[TargetState]) -> None:
        """Start the first contacts this interval's budget allows (module docstring)."""
        interval = self.scrape.interval
        n = max(1, math.floor(WARM_SHARE * interval / max(self.warm_cost_s, 1e-4)))
        for state in cold[:n]:
            name = state.config.name
            digest = hashlib.blake2b(name.encode(), digest_size=8).digest()
            offset = int.from_bytes(digest, "big") / 2**64 * WARM_SPREAD * interval
            self._warming[name] = asyncio.create_task(self._first_contact(name, offset))

    async def _first_contact(self, name: str, offset: float) -> None:
        try:
            await asyncio.sleep(offset)
            state = self.states.get(name)
            if state is None:
                return  # gone meanwhile
            ts = time.time()
            result = await self._fetch(state.config)
            state = self.states.get(name)
            if state is None:
                return
            cpu = time.thread_time()
            outcome = self._process(state, result, ts)
            cost = time.thread_time() - cpu
            self.warm_cost_s = 0.8 * self.warm_cost_s + 0.2 * cost
            self._warmed.append(replace(outcome, started=None))
            self._contacted.add(name)
        finally:
            self._warming.pop(name, None)

    async def read_round(self, now: float) -> list[Outcome]:
        """Scrape all targets once; store and return what each produced.

        Every target's scrape of a round carries the round's time (when it began), so
        the streams of a fleet share their interval boundaries. A page is processed as
        soon as it has arrived, while the slower targets are still being fetched. Targets
        never fetched yet are fetched by the round while they are few, else spread over
        the intervals (module docstring, "Cold start"); the first pages fetched since the
        last round are stored and returned with it.
        """
        await self.discovery.refresh(now)
        self._sync(self.discovery.current())
        await self._close_released()
        stored = {name: s.last_ok for name, s in self.states.items()}
        cold = [
            s
            for name, s in self.states.items()
            if name not in self._contacted and name not in self._warming
        ]
        due = list(self.states.values())
        if len(cold) + len(self._warming) > WARM_INLINE:
            self._warm_up(cold)
            due = [s for name, s in self.states.items() if name in self._contacted]
        else:
            self._contacted.update(s.config.name for s in cold)

        async def one(state: TargetState) -> Outcome:
            return self._process(state, await self._fetch(state.config), now)

        fetched = await asyncio.gather(*(one(s) for s in due))
        warmed, self._warmed = self._warmed, []
        outcomes = [*fetched, *(o for o in warmed if o.record.target in self.states)]
        # First pages a failed write could not store: their deltas and snapshots go with
        # this write (their records wait in ``_unwritten``; they were reported already).
        retried, self._retry = self._retry, []
        written = [*outcomes, *(o for o in retried if o.record.target in self.states)]
        snapshots = [
            (o.snapshot.target, o.snapshot.ts, s)
            for o in written
            if o.snapshot is not None
            for s in o.snapshot.streams.values()
        ]
        records = [*self._unwritten, *(o.record for o in outcomes)]
        try:
            await asyncio.to_thread(
                self.store.write_round,
                records,
                [d for o in written for d in o.deltas],
                snapshots,
            )
        except sqlite3.Error as exc:
            # Back to the last snapshots the store holds — for a target whose first page
            # is not stored yet, that page's (its delta is written with the next write).
            first = {o.record.target: o.snapshot for o in [*retried, *warmed] if o.snapshot}
            for name, snap in stored.items():
                if name in self.states:
                    self.states[name] = replace(self.states[name], last_ok=first.get(name, snap))
            self._retry = [*retried, *warmed]
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
