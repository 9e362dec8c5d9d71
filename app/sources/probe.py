"""Active probes as a source: each probe's answers become a stream of its own.

Every round (:meth:`ProbeSource.read_round`, on the service's scrape job) starts the
probes that are due — each every ``interval``, never two of one probe at a time, at
most ``probing.concurrency`` in flight — and stores what came back since the previous
round. A probe runs beside the rounds, not inside them: a slow answer (up to the probe's
``timeout``) never holds a scrape. Its answer is added to the probe's cumulative stream
(:class:`~app.sources.probe_tally.ProbeTally`; target = the probe's name, model = its
``model``), whose snapshot and interval deltas are stored like a scrape's, so windows,
diagnoses, the API and the UI read a probe like any stream. The scrape record says
whether the probe succeeded (``error_kind``: :mod:`app.scrape.probe_fetch`).

A probe of a scraped target (``target``) also reads that target's latest page and scrape
record when an answer comes: the page's TTFT and tokens over the same time go into the
probe's stream, and ``probe_page_up`` counts answers that ended while the target's last
scrape was good and under ``page_fresh_s`` old — a probe that times out while
``/metrics`` answers is the engine's doing, not the network's.

The prompt is ``prompt``, or ``prompt_words`` words drawn at random for every probe (so
no probe's prompt is served from the prefix cache of the one before). Headers and token
are sent and never logged or shown; every probe opens a new connection (no keep-alive),
so the connection time is a new client's; redirects are not followed; the answer is
capped at the scrapes' ``max_body_bytes``.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import random
import sqlite3
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace

import httpx

from app.config import TargetConfig
from app.model import Snapshot, StreamSnapshot
from app.probeconfig import PROBE_LABEL, PROBE_OF_LABEL, ProbeConfig, ProbingConfig
from app.scrape.probe_fetch import ProbeResult, build_request, send_probe
from app.sources.base import Outcome, TargetState
from app.sources.probe_tally import ProbeTally
from app.store.health import error_kind
from app.store.sqlite import ScrapeRecord, Store
from app.windows.delta import snapshot_deltas

__all__ = ["PROMPT_WORDS", "ProbeSource", "probe_target"]

log = logging.getLogger(__name__)

PROMPT_WORDS = (
    "river", "stone", "light", "quiet", "number", "window", "garden", "paper", "cloud",
    "engine", "orange", "winter", "bridge", "letter", "forest", "signal", "market", "silver",
    "planet", "candle", "harbor", "pencil", "meadow", "thunder", "violet", "island", "copper",
    "lantern", "summer", "valley", "rocket", "feather",
)  # fmt: skip
_ASK = "Continue this list of words:"


@dataclass
class _Probe:
    """One probe's running state (owned by the source)."""

    config: ProbeConfig
    tally: ProbeTally
    state: TargetState
    client: httpx.AsyncClient
    next_due: float | None = None
    task: asyncio.Task[ProbeResult] | None = None
    done: list[ProbeResult] = field(default_factory=list)
    last: ProbeResult | None = None  # the latest answer (the API shows it)


def probe_target(p: ProbeConfig) -> TargetConfig:
    """A probe as the targets API and the evaluation see it: its name, the URL it posts
    to, and its labels with ``probe`` (the kind) and ``probe_of`` (its scraped target)."""
    labels = {**p.labels, PROBE_LABEL: p.kind}
    if p.target:
        labels[PROBE_OF_LABEL] = p.target
    return TargetConfig.model_construct(name=p.name, url=p.endpoint, labels=labels, server=None)


class ProbeSource:
    """Runs the configured probes and stores their answers (module docstring)."""

    def __init__(
        self,
        probes: Sequence[ProbeConfig],
        probing: ProbingConfig,
        store: Store,
        *,
        max_bytes: int,
        linked: Callable[[], Mapping[str, TargetState]] | None = None,
        page_fresh_s: float = 15.0,
        observe: Callable[[ProbeConfig, ProbeResult], None] | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
        rng: random.Random | None = None,
    ) -> None:
        """``linked``: the scraped targets' states (a probe's ``target`` is looked up
        there); ``observe``: told of every answer (the self-metrics); ``transport``: for
        tests, in place of the network."""
        self.store = store
        self.max_bytes = max_bytes
        self.linked = linked
        self.page_fresh_s = page_fresh_s
        self.observe = observe
        self.rng = rng or random.Random()
        self.rounds = 0
        self._sem = asyncio.Semaphore(probing.concurrency)
        stored = store.last_snapshots()
        self.probes: dict[str, _Probe] = {}
        for p in probes:
            client = httpx.AsyncClient(
                follow_redirects=False,
                verify=p.tls_verify,
                headers={"User-Agent": "phasewatch-probe"},
                limits=httpx.Limits(max_keepalive_connections=0),
                transport=transport,
            )
            tally, state = ProbeTally(p.model), TargetState(probe_target(p))
            snap = stored.get(p.name)
            if snap is not None and p.model in snap[1]:
                ts, streams = snap
                tally = ProbeTally.restore(streams[p.model])
                state = replace(state, last_ok=Snapshot(p.name, ts, {p.model: streams[p.model]}))
            self.probes[p.name] = _Probe(p, tally, state, client)
        self._states = {name: pr.state for name, pr in self.probes.items()}

    def targets(self) -> Mapping[str, TargetState]:
        return self._states

    def latest(self) -> list[tuple[ProbeConfig, TargetState, ProbeResult | None]]:
        """Every probe, in configuration order: its settings, state and latest answer."""
        return [(pr.config, pr.state, pr.last) for pr in self.probes.values()]

    async def aclose(self) -> None:
        """Stop the probes in flight and close their clients."""
        tasks = [pr.task for pr in self.probes.values() if pr.task is not None]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        for pr in self.probes.values():
            await pr.client.aclose()

    def _prompt(self, p: ProbeConfig) -> str:
        if p.prompt is not None:
            return p.prompt
        words = " ".join(self.rng.choice(PROMPT_WORDS) for _ in range(p.words))
        return f"{_ASK} {words}"

    async def probe(self, name: str) -> ProbeResult:
        """Send probe ``name`` once and return its answer (not stored)."""
        p = self.probes[name].config
        headers = dict(p.headers)
        if p.bearer_token:
            headers["Authorization"] = f"Bearer {p.bearer_token}"
        req = build_request(
            p.kind,
            p.endpoint,
            p.model,
            self._prompt(p),
            max_tokens=p.max_tokens,
            ignore_eos=p.ignore_eos,
            headers=headers,
        )
        async with self._sem:
            return await send_probe(
                self.probes[name].client, req, timeout=p.timeout, max_bytes=self.max_bytes
            )

    def _start_due(self, now: float) -> None:
        for name, pr in self.probes.items():
            if pr.task is not None:
                continue  # one in flight per probe
            if pr.next_due is not None and now < pr.next_due:
                continue
            interval = pr.config.interval
            due = now if pr.next_due is None else pr.next_due
            pr.next_due = due + interval * max(1, int((now - due) // interval) + 1)
            pr.task = asyncio.create_task(self.probe(name), name=f"probe {name}")
            pr.task.add_done_callback(functools.partial(self._finished, pr))

    def _finished(self, pr: _Probe, task: asyncio.Task[ProbeResult]) -> None:
        pr.task = None
        if task.cancelled():
            return
        exc = task.exception()
        if exc is not None:  # a bug, not a bad server: the probe's other rounds go on
            log.error("probe %s failed: %s", pr.config.name, type(exc).__name__)
            return
        result = task.result()
        pr.done.append(result)
        pr.last = result
        if self.observe is not None:
            self.observe(pr.config, result)

    def _page(self, p: ProbeConfig, started: float) -> tuple[StreamSnapshot | None, bool | None]:
        """The scraped target's latest stream (the probe's model, else its only one) and
        whether its scrapes answered while the probe ran (None: no scraped target)."""
        if p.target is None or self.linked is None:
            return None, None
        state = self.linked().get(p.target)
        if state is None:
            return None, False
        rec = state.last_record
        up = rec is not None and rec.ok and rec.ts >= started - self.page_fresh_s
        streams = {} if state.last_ok is None else state.last_ok.streams
        page = streams.get(p.model) or (next(iter(streams.values())) if len(streams) == 1 else None)
        return page, up

    def _outcome(self, pr: _Probe, now: float) -> Outcome:
        """Add the probe's answers since the last round to its stream; its outcome."""
        p = pr.config
        last = pr.done[-1]
        for r in pr.done:
            page, up = self._page(p, r.started)
            pr.tally.add(r, page_up=up)
            pr.tally.add_page(page)
        pr.done = []
        stream = pr.tally.stream()
        snap = Snapshot(p.name, now, {p.model: stream})
        prev = pr.state.last_ok
        if prev is None:  # the first answer: counted from a zero stream at its start
            start = min(last.started, now - 1e-3)
            prev = Snapshot(p.name, start, {p.model: ProbeTally(p.model).stream()})
        deltas = snapshot_deltas(prev, snap) if now > prev.ts else []
        rec = ScrapeRecord(
            p.name, now, last.ok, last.error_kind, last.error, last.total, last.nbytes, 0
        )
        pr.state = replace(pr.state, last_ok=snap, last_record=rec)
        self._states[p.name] = pr.state
        return Outcome(rec, snap, deltas, None)

    async def read_round(self, now: float) -> list[Outcome]:
        """Start the probes due at ``now``; store and return the answers that came."""
        answered = [pr for pr in self.probes.values() if pr.done]
        before = {pr.config.name: pr.state.last_ok for pr in answered}
        outcomes = [self._outcome(pr, now) for pr in answered]
        self._start_due(now)
        if outcomes:
            snapshots = [
                (o.record.target, now, s)
                for o in outcomes
                if o.snapshot is not None
                for s in o.snapshot.streams.values()
            ]
            deltas = [d for o in outcomes for d in o.deltas]
            try:
                await asyncio.to_thread(
                    self.store.write_round, [o.record for o in outcomes], deltas, snapshots
                )
            except sqlite3.Error as exc:
                # Back to the stored baselines: the next written delta covers this round.
                for pr in answered:
                    pr.state = replace(pr.state, last_ok=before[pr.config.name])
                    self._states[pr.config.name] = pr.state
                log.warning("store write of probe answers failed (%s)", error_kind(exc))
        self.rounds += 1
        return outcomes

    async def run_once(self, timeout: float | None = None) -> list[Outcome]:
        """Send every probe now, due or not; wait for the answers and store them (tests,
        one-shot checks)."""
        for pr in self.probes.values():
            pr.next_due = None
        self._start_due(time.time())
        tasks = [pr.task for pr in self.probes.values() if pr.task is not None]
        await asyncio.wait_for(asyncio.gather(*tasks, return_exceptions=True), timeout)
        await asyncio.sleep(0)  # let the done-callbacks run
        return await self.read_round(time.time())
