"""The canonical signals read from a Prometheus-compatible server instead of scraped.

**What is read.** The raw cumulative vLLM series — every ``_bucket``/``_sum``/``_count``
of the histograms, the gauges and the counters that :mod:`app.scrape.normalize` reads
(the ``HISTOGRAM_SOURCES``/``GAUGE_SOURCES``/``COUNTER_SOURCES`` tables of
:mod:`app.scrape.signals`, plus ``request_success_total`` and ``cache_config_info``),
each name in both spellings, ``vllm:`` and ``vllm_`` (a page served as OpenMetrics by
prometheus-client ≥ 0.23 is stored as ``vllm_*``; where one target has both, ``vllm:``
wins). Series are read one by one, not summed in PromQL: ``sum()`` over counters before
resets are handled would turn one engine's restart into a huge negative or positive
jump, and ``increase()`` extrapolates to the range edges (by a different factor per
bucket whenever a bucket starts at 0). Each set of samples that share a timestamp is one
"page".

**One query per metric family, for every target.** A round asks for each histogram
family on its own and for each engine's gauges and counters together
(:func:`app.sources.prompages.family_regexes`: vLLM's 16 queries, SGLang's 8, and
``up``), every target in each, ``QUERY_CONCURRENCY`` in flight; each answer becomes
samples as it arrives (:class:`~app.sources.prompages.PageSet`). The number of queries
does not grow with the targets, and the largest answer held is one family of the fleet,
not all of it.

**Two ways to read** (``source.mode``):

* ``range`` (default): ``query_range`` at ``step`` — at each step the latest sample at or
  before it (Prometheus' lookback). Bounded: at most ``MAX_STEPS`` points per series per
  request, the range is split in as many requests as needed.
* ``raw``: the stored samples themselves, through an instant query of a range selector
  ``{…}[Nms]`` (split in chunks of ``RAW_CHUNK_S``), so every page is exactly one scrape
  Prometheus made, at its timestamp. The parity test uses this.

**Then the same path as scraping.** Each page of one target (``target_label``,
``instance`` by default) goes through :func:`app.scrape.normalize.normalize` (engines
and pids folded, newest name first, ``missing`` signals) into a ``Snapshot``, and
consecutive snapshots through :func:`app.windows.delta.snapshot_deltas` (counter resets,
layout changes) into ``IntervalDelta`` records — the records a direct scrape produces,
so windows, diagnosis, alerts and the UI work unchanged.

**Failed scrapes.** Prometheus records a failed scrape as ``up == 0`` and marks the
target's series stale. ``up`` is read with the selector's matchers (those on labels
``up`` carries: not ``model_name``/``engine``); its zero samples are the failed scrapes.
Without ``up`` (some remote-write set-ups), a step with no data between a target's first
and last page counts as failed in ``range`` mode.
"""

from __future__ import annotations

import asyncio
import itertools
import math
from collections import deque
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from app.config import SourceConfig
from app.model import IntervalDelta, Sample, Snapshot
from app.scrape.normalize import NormalizeCache, normalize
from app.scrape.result import ParseResult
from app.sources.promapi import Matcher, PromAPI, Series, parse_matchers, selector
from app.sources.prompages import (
    Pages,
    PageSet,
    canonical_name,
    family_regexes,
    gc_paused,
    name_regex,
    target_name,
)
from app.windows.delta import snapshot_deltas

__all__ = [
    "MAX_STEPS",
    "QUERY_CONCURRENCY",
    "RAW_CHUNK_S",
    "History",
    "PrometheusSource",
    "TargetHistory",
    "canonical_name",
    "history_from_pages",
    "history_from_series",
    "name_regex",
    "target_name",
]

MAX_STEPS = 1000  # points per series per query_range request (Prometheus allows 11,000)
RAW_CHUNK_S = 3600.0  # seconds of raw samples per request
QUERY_CONCURRENCY = 4  # family queries in flight at once
T = TypeVar("T")
# Labels a vLLM series carries that ``up`` does not.
_VLLM_ONLY_LABELS = frozenset({"model_name", "engine", "le", "finished_reason", "pid"})


@dataclass
class TargetHistory:
    """What Prometheus holds for one target over a range, as phasewatch records."""

    target: str
    snapshots: list[Snapshot] = field(default_factory=list)
    deltas: list[IntervalDelta] = field(default_factory=list)
    failed: list[float] = field(default_factory=list)

    @property
    def ok(self) -> list[float]:
        return [s.ts for s in self.snapshots]

    def models(self) -> list[str]:
        names = {m for s in self.snapshots for m in s.streams}
        return sorted(names)


History = dict[str, TargetHistory]


def history_from_series(
    series: Iterable[Series],
    *,
    target_label: str = "instance",
    up: Iterable[Series] = (),
    grid: Sequence[float] | None = None,
    previous: dict[str, Snapshot] | None = None,
) -> History:
    """Series (raw or stepped) → per target: snapshots, deltas and failed scrape times.

    ``up`` series give the failed scrapes (value 0). ``grid`` (range mode) lets a step
    with no page between a target's first and last one count as failed when there is no
    ``up`` for the target. ``previous`` holds each target's last snapshot from an
    earlier read, so the first new page gets its delta too.
    """
    pages = PageSet(target_label)
    pages.add(list(series))
    return history_from_pages(
        pages.drain(),
        target_label=target_label,
        up=up,
        grid=grid,
        previous=previous,
        series_counts=pages.series,
    )


def history_from_pages(
    pages: Pages | Iterable[tuple[str, dict[float, list[Sample]]]],
    *,
    target_label: str = "instance",
    up: Iterable[Series] = (),
    grid: Sequence[float] | None = None,
    previous: dict[str, Snapshot] | None = None,
    series_counts: Mapping[str, int] | None = None,
) -> History:
    """Pages per target (a mapping, or ``PageSet.drain()``: one target's pages at a time)
    → per target: snapshots, deltas and failed scrape times (as
    :func:`history_from_series`). ``series_counts``: the series of each target; its pages
    that hold all of them hold them in one order, and share what the normaliser derives
    from that (as a scraped page's template does)."""
    cache = NormalizeCache()  # this call's pages share their labels tuples
    out: History = {}
    for target, by_ts in pages.items() if isinstance(pages, Mapping) else pages:
        hist = out[target] = TargetHistory(target)
        prev = (previous or {}).get(target)
        whole = (series_counts or {}).get(target)
        memo: dict[str, object] = {}  # shared by the pages that hold every series
        for ts in sorted(by_ts):
            samples = by_ts[ts]
            parsed = ParseResult(
                samples=samples,
                types={},
                errors=0,
                cut_last_line=False,
                memo=memo if len(samples) == whole else None,
            )
            snap = normalize(parsed, target=target, ts=ts, cache=cache)
            if prev is not None and ts > prev.ts:
                hist.deltas.extend(snapshot_deltas(prev, snap))
            hist.snapshots.append(snap)
            prev = snap
    up_seen: set[str] = set()
    for s in up:
        target = target_name(s.labels.get(target_label, ""))
        up_seen.add(target)
        failed = [t for t, v in s.points if v == 0]
        if failed:
            hist = out.setdefault(target, TargetHistory(target))
            hist.failed.extend(failed)
    if grid is not None:
        for target, hist in out.items():
            if target in up_seen or not hist.snapshots:
                continue
            have = {s.ts for s in hist.snapshots}
            first, last = hist.snapshots[0].ts, hist.snapshots[-1].ts
            hist.failed.extend(t for t in grid if first < t < last and t not in have)
    for hist in out.values():
        hist.failed = sorted(set(hist.failed))
    return out


class PrometheusSource:
    """Reads the vLLM signals of every target matching ``config.selector``."""

    def __init__(self, config: SourceConfig, api: PromAPI | None = None) -> None:
        if not config.url:
            raise ValueError("source.url is required")
        self.config = config
        auth = config.basic_auth
        self.api = api or PromAPI(
            config.url,
            bearer_token=config.bearer_token,
            basic_auth=(auth.username, auth.password) if auth else None,
            tls_verify=config.tls_verify,
            headers=dict(config.headers),
            timeout=config.timeout,
        )
        self.matchers: list[Matcher] = parse_matchers(config.selector)
        self.vllm_selector = selector(name_regex(), self.matchers)
        self.family_selectors = [selector(rx, self.matchers) for rx in family_regexes()]
        up_matchers = [m for m in self.matchers if m.label not in _VLLM_ONLY_LABELS]
        self.up_selector = "up" + selector(None, up_matchers) if up_matchers else "up"

    async def aclose(self) -> None:
        await self.api.aclose()

    async def read(
        self,
        start: float,
        end: float,
        *,
        step: float | None = None,
        mode: str | None = None,
        previous: dict[str, Snapshot] | None = None,
    ) -> History:
        """Everything the source holds in ``[start, end]`` (raw: as Prometheus' range
        selector includes its edges), as phasewatch records per target."""
        mode = mode or self.config.mode
        step = step or self.config.step or 5.0

        pages = PageSet(self.config.target_label)
        if mode == "raw":

            async def raw(expr: str) -> list[Series]:
                return await self.raw(expr, start, end)

            await _in_order(self.family_selectors, raw, _paused(pages.add), QUERY_CONCURRENCY)
            up = await self.raw(self.up_selector, start, end)
        else:

            async def stepped(expr: str) -> list[Any]:
                return await self.stepped_result(expr, start, end, step)

            await _in_order(
                self.family_selectors, stepped, _paused(pages.add_result), QUERY_CONCURRENCY
            )
            up = await self.stepped(self.up_selector, start, end, step)
        grid = None if mode == "raw" else _grid(start, end, step)

        def history() -> History:
            with gc_paused():  # a round's pages: many objects, no cycle (``prompages``)
                return history_from_pages(
                    pages.drain(),
                    target_label=self.config.target_label,
                    up=up,
                    grid=grid,
                    previous=previous,
                    series_counts=pages.series,
                )

        return await asyncio.to_thread(history)  # the event loop serves the API meanwhile

    async def stepped(self, expr: str, start: float, end: float, step: float) -> list[Series]:
        """``query_range`` in requests of at most ``MAX_STEPS`` points, series merged
        (one request's answer holds each series once: it is taken as it is)."""
        chunks = _chunks(start, end, step)
        parts: list[Series] = []
        for lo, hi in chunks:
            parts += await self.api.query_range(expr, lo, hi, step)
        return parts if len(chunks) == 1 else _merge(parts)

    async def stepped_result(self, expr: str, start: float, end: float, step: float) -> list[Any]:
        """:meth:`stepped`'s answers as the API's JSON gives them, one after the other (a
        series in several requests is several items: ``PageSet`` joins them)."""
        parts: list[Any] = []
        for lo, hi in _chunks(start, end, step):
            parts += await self.api.query_range_result(expr, lo, hi, step)
        return parts

    async def raw(self, expr: str, start: float, end: float) -> list[Series]:
        """The stored samples in ``[start, end]``, in chunks of ``RAW_CHUNK_S``."""
        parts: list[Series] = []
        lo = start
        requests = 0
        while True:
            hi = min(end, lo + RAW_CHUNK_S)
            ms = max(1, round((hi - lo) * 1000))
            parts += await self.api.query_matrix(f"{expr}[{ms}ms]", hi)
            requests += 1
            if hi >= end:
                break
            lo = hi
        return parts if requests == 1 else _merge(parts)


async def _in_order(
    exprs: Sequence[str],
    fetch: Callable[[str], Awaitable[list[T]]],
    consume: Callable[[list[T]], None],
    limit: int,
) -> None:
    """Fetch every expression, ``limit`` in flight, and hand each answer to ``consume``
    (in a thread, one answer at a time) in the order given (the next request sent before
    the answer is read); the first failure cancels the rest and is raised."""
    pending: deque[asyncio.Task[list[T]]] = deque()
    queue = iter(exprs)
    try:
        for expr in itertools.islice(queue, limit):
            pending.append(asyncio.ensure_future(fetch(expr)))
        while pending:
            answer = await pending.popleft()
            nxt = next(queue, None)
            if nxt is not None:
                pending.append(asyncio.ensure_future(fetch(nxt)))
            await asyncio.to_thread(consume, answer)  # the event loop serves the API meanwhile
    finally:
        for task in pending:
            task.cancel()
        if pending:
            await asyncio.gather(*pending, return_exceptions=True)


def _paused(consume: Callable[[list[T]], None]) -> Callable[[list[T]], None]:
    """``consume`` with the cyclic garbage collector held off while it runs (only then:
    an HTTP response, a cycle, is collected as usual between the answers)."""

    def run(answer: list[T]) -> None:
        with gc_paused():
            consume(answer)

    return run


def _chunks(start: float, end: float, step: float) -> list[tuple[float, float]]:
    """``[start, end]`` as the spans of ``query_range`` requests of ``MAX_STEPS`` points."""
    out = []
    t = start
    while t <= end:
        out.append((t, min(end, t + (MAX_STEPS - 1) * step)))
        t = t + MAX_STEPS * step
    return out


def _grid(start: float, end: float, step: float) -> list[float]:
    n = int(math.floor((end - start) / step + 1e-9))
    return [round(start + k * step, 3) for k in range(n + 1)]


def _merge(parts: Iterable[Series]) -> list[Series]:
    """Join the chunks of each series (same labels); a sample in two chunks counts once."""
    by_labels: dict[tuple[tuple[str, str], ...], dict[float, float]] = {}
    for s in parts:
        points = by_labels.setdefault(tuple(sorted(s.labels.items())), {})
        for t, v in s.points:
            points[t] = v
    return [Series(dict(k), sorted(points.items())) for k, points in by_labels.items()]
