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

import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from app.config import SourceConfig
from app.model import IntervalDelta, Sample, Snapshot
from app.scrape.normalize import NormalizeCache, normalize
from app.scrape.result import ParseResult
from app.scrape.signals import (
    CACHE_CONFIG_FAMILY,
    COUNTER_SOURCES,
    FINISHED_FAMILY,
    GAUGE_SOURCES,
    HISTOGRAM_SOURCES,
)
from app.sources.promapi import Matcher, PromAPI, Series, parse_matchers, selector
from app.windows.delta import snapshot_deltas

__all__ = [
    "MAX_STEPS",
    "RAW_CHUNK_S",
    "History",
    "PrometheusSource",
    "TargetHistory",
    "canonical_name",
    "history_from_series",
    "name_regex",
]

MAX_STEPS = 1000  # points per series per query_range request (Prometheus allows 11,000)
RAW_CHUNK_S = 3600.0  # seconds of raw samples per request
# Labels a vLLM series carries that ``up`` does not.
_VLLM_ONLY_LABELS = frozenset({"model_name", "engine", "le", "finished_reason", "pid"})
_TARGET_NAME = re.compile(r"[^A-Za-z0-9_.:@-]")


def _families() -> list[str]:
    names: list[str] = []
    for families in HISTOGRAM_SOURCES.values():
        names += [f"{f}_{part}" for f in families for part in ("bucket", "sum", "count")]
    for table in (GAUGE_SOURCES, COUNTER_SOURCES):
        for families in table.values():
            # a family read per label value is keyed ``family{label="value"}``: its name
            # is the part before the brace
            names += [f.partition("{")[0] for f in families]
    return [*names, FINISHED_FAMILY, CACHE_CONFIG_FAMILY]


def name_regex() -> str:
    """An RE2 regex (anchored by Prometheus) for every sample name we read, both spellings."""
    bases = sorted({n.removeprefix("vllm:") for n in _families()})
    return "vllm[:_](" + "|".join(re.escape(b) for b in bases) + ")"


def canonical_name(name: str) -> str:
    """``vllm_x`` → ``vllm:x`` (the exposed name); other names unchanged."""
    return "vllm:" + name[5:] if name.startswith("vllm_") else name


def target_name(value: str) -> str:
    """A target name the rest of phasewatch accepts (letters, digits, ``_.:@-``)."""
    return _TARGET_NAME.sub("_", value)[-128:] or "prometheus"


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
    pages = _pages(series, target_label)
    cache = NormalizeCache()  # this call's pages share their labels tuples
    out: History = {}
    for target, by_ts in pages.items():
        hist = out[target] = TargetHistory(target)
        prev = (previous or {}).get(target)
        for ts in sorted(by_ts):
            parsed = ParseResult(samples=by_ts[ts], types={}, errors=0, cut_last_line=False)
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


def _pages(series: Iterable[Series], target_label: str) -> dict[str, dict[float, list[Sample]]]:
    """Group samples by target and timestamp; ``vllm:`` wins over ``vllm_`` per series."""
    chosen: dict[tuple[str, str, tuple[tuple[str, str], ...]], tuple[bool, list[Series]]] = {}
    for s in series:
        raw = s.labels.get("__name__", "")
        if not raw.startswith(("vllm:", "vllm_")):
            continue
        target = target_name(s.labels.get(target_label, ""))
        labels = tuple(
            sorted((k, v) for k, v in s.labels.items() if k not in ("__name__", target_label))
        )
        key = (target, canonical_name(raw), labels)
        colon = raw.startswith("vllm:")
        have = chosen.get(key)
        if have is None or (colon and not have[0]):
            chosen[key] = (colon, [s])
        elif colon == have[0]:
            have[1].append(s)  # the same series in several parts
    pages: dict[str, dict[float, list[Sample]]] = {}
    for (target, name, labels), (_, parts) in chosen.items():
        by_ts = pages.setdefault(target, {})
        points = {ts: value for part in parts for ts, value in part.points}
        for ts, value in points.items():
            by_ts.setdefault(ts, []).append(Sample(name, labels, value))
    return pages


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
        if mode == "raw":
            series = await self.raw(self.vllm_selector, start, end)
            up = await self.raw(self.up_selector, start, end)
            return history_from_series(
                series, target_label=self.config.target_label, up=up, previous=previous
            )
        step = step or self.config.step or 5.0
        series = await self.stepped(self.vllm_selector, start, end, step)
        up = await self.stepped(self.up_selector, start, end, step)
        grid = _grid(start, end, step)
        return history_from_series(
            series, target_label=self.config.target_label, up=up, grid=grid, previous=previous
        )

    async def stepped(self, expr: str, start: float, end: float, step: float) -> list[Series]:
        """``query_range`` in requests of at most ``MAX_STEPS`` points, series merged."""
        parts: list[Series] = []
        t = start
        while t <= end:
            chunk_end = min(end, t + (MAX_STEPS - 1) * step)
            parts += await self.api.query_range(expr, t, chunk_end, step)
            t = t + MAX_STEPS * step
        return _merge(parts)

    async def raw(self, expr: str, start: float, end: float) -> list[Series]:
        """The stored samples in ``[start, end]``, in chunks of ``RAW_CHUNK_S``."""
        parts: list[Series] = []
        lo = start
        while True:
            hi = min(end, lo + RAW_CHUNK_S)
            ms = max(1, round((hi - lo) * 1000))
            parts += await self.api.query_matrix(f"{expr}[{ms}ms]", hi)
            if hi >= end:
                break
            lo = hi
        return _merge(parts)


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
