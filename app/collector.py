"""One scrape round: fetch every target, normalise, compute deltas, store — at the edge.

A slow or dead target never delays the others: every fetch has its own timeout and runs
concurrently under a cap. The last good snapshot of each target is kept in memory and in
the store, so deltas resume correctly after a restart and a failed scrape loses nothing
(the next good scrape's delta covers the gap). A round the store cannot take (read-only,
full) loses nothing either: the baselines go back to the last stored snapshots, so the
next written delta covers the gap, and the round's scrape records wait for that write
(at most ``MAX_UNWRITTEN``).

A page used with something left out (``PARTIAL_KINDS``: new streams past the caps of
``app.scrape.admission``, signals with invalid values or conflicting duplicate series,
``app.scrape.normalize``) is an ok scrape: the target is up, its record names the first
problem (``error_kind``, ``error``) and ``TargetState.problems`` all of them. A counter or
histogram left out of a scrape keeps its previous value as the baseline, so the next
delta covers the gap as after a failed scrape; one that has no previous value has no
baseline, and its next value starts one (it is not counted from zero).
"""

from __future__ import annotations

import asyncio
import logging
import sqlite3
import time
from dataclasses import dataclass, field, replace

import httpx

from app.config import Settings, TargetConfig
from app.model import PARTIAL_KINDS, ErrorKind, IntervalDelta, Snapshot, StreamSnapshot
from app.scrape.admission import StreamAdmission
from app.scrape.client import ClientPool, FetchResult, fetch, read_file
from app.scrape.reader import PageReader
from app.store.health import error_kind
from app.store.sqlite import ScrapeRecord, Store
from app.windows.delta import layout_changed, snapshot_deltas

log = logging.getLogger(__name__)

# Scrape records kept for the next write while the store refuses writes (~7 h of 200
# targets at 5 s); older ones are dropped first.
MAX_UNWRITTEN = 1_000_000
# Page layouts kept beyond one per target (a target whose layout changes, engines).
TEMPLATE_SLACK = 64


@dataclass
class TargetState:
    """What the service knows about one target between rounds."""

    config: TargetConfig
    last_ok: Snapshot | None = None
    last_record: ScrapeRecord | None = None
    last_snapshot_ts: float | None = None
    metrics_disabled: bool = False
    streams: dict[str, StreamSnapshot] = field(default_factory=dict)
    # Kinds of what the last scrape left out (``PARTIAL_KINDS``), first one first.
    problems: tuple[str, ...] = ()
    # The caches of a target processed on its own (a replay, ``phasewatch diagnose``),
    # made on first use; a Collector reads every target through its own instead.
    reader: PageReader | None = field(default=None, repr=False, compare=False)

    def own_reader(self) -> PageReader:
        """This target's own page reader, made on first use."""
        if self.reader is None:
            self.reader = PageReader()
        return self.reader


@dataclass(frozen=True)
class Outcome:
    """What one target's scrape produced in a round."""

    record: ScrapeRecord
    snapshot: Snapshot | None
    deltas: list[IntervalDelta]
    # When the fetch started (Unix seconds); None when it is not known.
    started: float | None = None


def process(
    state: TargetState,
    result: FetchResult,
    now: float,
    *,
    max_series: int | None = None,
    reader: PageReader | None = None,
    admission: StreamAdmission | None = None,
) -> Outcome:
    """Turn a fetch result into a scrape record, a snapshot and interval deltas.

    ``reader``: the caches pages are read through (none: the target's own,
    ``state.own_reader()``). ``admission``: the stream caps new streams must fit under
    (none: every stream).
    """
    name = state.config.name
    if reader is None:
        reader = state.own_reader()

    def failed(kind: ErrorKind, msg: str, parse_errors: int = 0) -> Outcome:
        state.problems = ()
        rec = ScrapeRecord(
            name, now, False, kind.value, msg, result.duration, result.nbytes, parse_errors
        )
        return Outcome(rec, None, [], result.started)

    if result.error_kind is not None or result.text is None:
        return failed(result.error_kind or ErrorKind.OTHER, result.error or "no body")
    if not reader.looks_like_prometheus(result.text):
        return failed(ErrorKind.NOT_PROMETHEUS, "the page is not Prometheus text format")
    parsed = reader.parse(result.text)
    if max_series is not None and len(parsed.samples) > max_series:
        return failed(
            ErrorKind.TOO_MANY_SERIES,
            f"{len(parsed.samples)} vllm: series exceed the cap of {max_series}",
            parsed.errors,
        )
    if parsed.cut_last_line:
        # A live page that ends mid-line was cut in transit: series it lost would come
        # back next time as phantom increases. Keep the last good snapshot instead.
        return failed(ErrorKind.TRUNCATED, "the page ends in the middle of a line", parsed.errors)
    snap = reader.normalize(parsed, target=name, ts=now)
    if admission is not None:
        snap = admission.admit(snap)
    deltas: list[IntervalDelta] = []
    changed: list[str] = []
    prev = state.last_ok
    if prev is not None and now > prev.ts:
        for model, cur_stream in snap.streams.items():
            prev_stream = prev.streams.get(model)
            if prev_stream is not None:
                changed.extend(layout_changed(prev_stream, cur_stream))
        deltas = [_based(d, prev.streams.get(d.model_name)) for d in snapshot_deltas(prev, snap)]
    snap = _carried(snap, prev)
    state.last_ok = snap
    state.metrics_disabled = snap.metrics_disabled
    state.problems = tuple(p.kind.value for p in snap.problems)
    if snap.metrics_disabled:
        rec = ScrapeRecord(
            name,
            now,
            False,
            ErrorKind.METRICS_DISABLED.value,
            "no vllm: metrics on the page (is the server run with --disable-log-stats?)",
            result.duration,
            result.nbytes,
            parsed.errors,
        )
    elif changed:
        rec = ScrapeRecord(
            name,
            now,
            False,
            ErrorKind.BUCKET_LAYOUT_CHANGED.value,
            "bucket layout changed for " + ", ".join(sorted(set(changed))),
            result.duration,
            result.nbytes,
            parsed.errors,
        )
    else:
        first = snap.problems[0] if snap.problems else None
        rec = ScrapeRecord(
            name,
            now,
            True,
            None if first is None else first.kind.value,
            None if first is None else "; ".join(_problem_texts(snap)),
            result.duration,
            result.nbytes,
            parsed.errors,
        )
    return Outcome(rec, snap, deltas, result.started)


def _problem_texts(snap: Snapshot) -> list[str]:
    """The first problem's detail, then ``kind: detail`` of the others (a record's
    ``error`` is shown after its kind)."""
    first, *others = snap.problems
    return [first.detail, *(f"{p.kind.value}: {p.detail}" for p in others)]


def _carried(snap: Snapshot, prev: Snapshot | None) -> Snapshot:
    """``snap`` with the previous value of each counter and histogram it withheld: the
    baseline of the next delta, which then covers this scrape too."""
    if prev is None or not any(s.withheld for s in snap.streams.values()):
        return snap
    streams = dict(snap.streams)
    for model, stream in snap.streams.items():
        before = prev.streams.get(model)
        if not stream.withheld or before is None:
            continue
        hists = {k: before.histograms[k] for k in stream.withheld if k in before.histograms}
        counts = {k: before.counters[k] for k in stream.withheld if k in before.counters}
        if hists or counts:
            streams[model] = replace(
                stream,
                histograms={**stream.histograms, **hists},
                counters={**stream.counters, **counts},
                missing=tuple(m for m in stream.missing if m not in hists and m not in counts),
            )
    return replace(snap, streams=streams)


def _based(delta: IntervalDelta, before: StreamSnapshot | None) -> IntervalDelta:
    """``delta`` without the counters and histograms that had no baseline: withheld from
    the previous scrape with no value to carry (their value now is not an increase)."""
    if before is None or not before.withheld:
        return delta
    unbased = set(before.withheld) - before.histograms.keys() - before.counters.keys()
    if not unbased & (delta.histograms.keys() | delta.counters.keys()):
        return delta
    return replace(
        delta,
        histograms={k: v for k, v in delta.histograms.items() if k not in unbased},
        counters={k: v for k, v in delta.counters.items() if k not in unbased},
    )


class Collector:
    """Scrapes the configured targets and writes what it learns to the store."""

    def __init__(
        self, settings: Settings, store: Store, client: httpx.AsyncClient | ClientPool
    ) -> None:
        self.settings = settings
        self.store = store
        self.client = client  # closed by its owner
        self.clients = client if isinstance(client, ClientPool) else ClientPool.of(client)
        self.states = {t.name: TargetState(t) for t in settings.targets}
        # The caches every target's pages are read through. A template per target's page
        # layout (each page names its own target's model): a default cache holds 256,
        # too few for a fleet.
        self.reader = PageReader(
            max_templates=len(self.states) + TEMPLATE_SLACK, eager_templates=True
        )
        self.admission = StreamAdmission(
            settings.scrape.max_streams_per_target, settings.scrape.max_streams
        )
        self._sem = asyncio.Semaphore(settings.scrape.concurrency)
        self.rounds = 0
        self.outcomes: dict[str, int] = {}
        self._unwritten: list[ScrapeRecord] = []
        self._restore()

    def _restore(self) -> None:
        for target, (ts, streams) in self.store.last_snapshots().items():
            state = self.states.get(target)
            if state is not None:
                state.last_ok = Snapshot(target=target, ts=ts, streams=streams)
                self.admission.know(target, streams)
        for target, model in self.store.streams():
            if target in self.states:
                self.admission.know(target, (model,))
        for target, rec in self.store.last_scrapes().items():
            state = self.states.get(target)
            if state is not None:
                state.last_record = rec
                if rec.ok and rec.error_kind in PARTIAL_KINDS:
                    state.problems = (rec.error_kind,)  # the others are not stored

    async def _fetch(self, target: TargetConfig) -> FetchResult:
        cfg = self.settings.scrape
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
        try:
            outcome = process(
                state,
                result,
                ts,
                max_series=self.settings.scrape.max_series,
                reader=self.reader,
                admission=self.admission,
            )
        except Exception as exc:  # a parser bug must not stop the other targets
            log.exception("processing %s failed", state.config.name)
            rec = ScrapeRecord(
                state.config.name,
                ts,
                False,
                ErrorKind.OTHER.value,
                f"internal error: {type(exc).__name__}",
                result.duration,
                result.nbytes,
                0,
            )
            outcome = Outcome(rec, None, [], result.started)
        state.last_record = outcome.record
        kind = outcome.record.error_kind or "ok"
        self.outcomes[kind] = self.outcomes.get(kind, 0) + 1
        return outcome

    async def scrape_round(self, now: float | None = None) -> list[Outcome]:
        """Scrape all targets once; store and return what each produced.

        Every target's scrape of a round carries the round's time (when it began), so
        the streams of a fleet share their interval boundaries. A page is processed as
        soon as it has arrived, while the slower targets are still being fetched.
        """
        ts = time.time() if now is None else now
        stored = {name: s.last_ok for name, s in self.states.items()}

        async def one(state: TargetState) -> Outcome:
            return self._process(state, await self._fetch(state.config), ts)

        outcomes = await asyncio.gather(*(one(s) for s in self.states.values()))
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
                self.states[name].last_ok = snap
            self._unwritten = records[-MAX_UNWRITTEN:]
            log.warning(
                "store write failed (%s: %s); %d scrape record(s) kept for the next write",
                error_kind(exc),
                exc,
                len(self._unwritten),
            )
        else:
            self._unwritten = []
        self.rounds += 1
        return outcomes
