"""One model's gathered samples → its ``StreamSnapshot``: engines and pids folded.

``app.scrape.normalize`` sorts a page's samples into a :class:`Gathered` per
``model_name``; :func:`build` folds each (the rules are listed in that module):

* Histograms: the series of a family summed bucket by bucket when they share the
  layout most of them carry; the others, and incomplete series, dropped and counted.
  Bounds come from the page's ``le`` texts (a memo of their layouts, owned by the
  caller's ``NormalizeCache``, reads each layout once).
* Gauges: ``running``, ``waiting`` and the ``waiting_*`` reasons summed; ``kv_usage`` the
  maximum; ``prefix_hit_rate``
  the mean of the engines that report it (-1: caching disabled, left out), and so
  SGLang's ``spec_accept_length`` (0: not speculating, left out). Per-engine values are
  kept in ``engines``.
* Counters: the newest family the stream carries; ``finished:<reason>`` per reason; a
  labelled family's values under their own signals (``app.scrape.signals``).
* A signal with a value it cannot take, or withheld while gathering, is left out and
  named with why.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field
from operator import add

from app.model import ErrorKind, Histogram, StreamSnapshot
from app.scrape.result import ParseResult
from app.scrape.signals import (
    ALL_SIGNALS,
    COUNTER_SOURCES,
    GAUGE_SOURCES,
    HISTOGRAM_SOURCES,
)
from app.scrape.validity import cumulative_ok, gauge_ok

__all__ = ["Gathered", "HistogramSeries", "Layout", "build"]

_MAX_GAUGES = frozenset({"kv_usage"})
# Per-engine rates, not counts: their mean.
_MEAN_GAUGES = frozenset({"prefix_hit_rate", "spec_accept_length"})
_LAYOUT_LIMIT = 50_000
# A bucket layout as read: finite bounds ascending, the index in page order of each, and
# the index of the +Inf bucket (None when absent). Layouts repeat every scrape.
Layout = tuple[tuple[float, ...], tuple[int, ...], int | None]
Layouts = dict[tuple[str, ...], Layout | None]


@dataclass(slots=True)
class HistogramSeries:
    """One histogram series as read: ``le`` texts and bucket values in page order."""

    les: list[str] = field(default_factory=list)
    values: list[float] = field(default_factory=list)
    sum: float | None = None
    count: float | None = None


@dataclass(slots=True)
class Gathered:
    """Everything gathered for one model_name before folding."""

    histograms: dict[str, dict[str, HistogramSeries]] = field(default_factory=dict)
    # family → [(engine, value)]
    gauges: dict[str, list[tuple[str, float]]] = field(default_factory=dict)
    counters: dict[str, float] = field(default_factory=dict)
    finished: dict[str, float] = field(default_factory=dict)
    # family (or finished:<reason>) → why its signal is left out this scrape
    withheld: dict[str, ErrorKind] = field(default_factory=dict)


def build(
    model: str, stream: Gathered, result: ParseResult, info: dict[str, str], layouts: Layouts
) -> tuple[StreamSnapshot, int, list[tuple[str, ErrorKind]]]:
    """Fold a gathered stream; return it, how many histogram series were dropped, and
    the signals left out with why."""
    histograms: dict[str, Histogram] = {}
    left_out: list[tuple[str, ErrorKind]] = []
    withheld = stream.withheld
    dropped = 0
    for signal, families in HISTOGRAM_SOURCES.items():
        for family in families:
            if family in withheld:
                left_out.append((signal, withheld[family]))
                break
            series = stream.histograms.get(family)
            if series:
                histogram, bad, invalid = _fold(series, layouts)
                dropped += bad
                if invalid:
                    left_out.append((signal, ErrorKind.INVALID_VALUES))
                    break
                if histogram is not None:
                    histograms[signal] = histogram
                    break
    gauges, engines = _gauges(stream, left_out)
    counters: dict[str, float] = {}
    prefix_family: str | None = None
    for signal, sources in COUNTER_SOURCES.items():
        source = next((f for f in sources if f in stream.counters or f in withheld), None)
        if source in withheld:
            left_out.append((signal, withheld[source]))
        elif source is not None:
            counters[signal] = stream.counters[source]
            if signal == "prefix_queries":
                prefix_family = source
    for reason, value in stream.finished.items():
        if f"finished:{reason}" not in withheld:
            counters[f"finished:{reason}"] = value
    left_out.extend((key, kind) for key, kind in withheld.items() if key.startswith("finished:"))
    present = set(histograms) | set(gauges) | set(counters)
    if "prefix_queries" in present and "prefix_hits" in present:
        present.add("prefix_hit_rate")  # the counters replaced the V0 gauge
    snapshot = StreamSnapshot(
        model_name=model,
        histograms=histograms,
        counters=counters,
        gauges=gauges,
        engines=engines,
        info=dict(info),
        missing=tuple(s for s in ALL_SIGNALS if s not in present),
        prefix_unit=_prefix_unit(prefix_family, result),
        withheld=tuple(signal for signal, _ in left_out),
    )
    return snapshot, dropped, left_out


def _fold(
    series: dict[str, HistogramSeries], layouts: Layouts
) -> tuple[Histogram | None, int, bool]:
    """Sum the series of one histogram family; return it, the series dropped, and
    whether a series to sum held values a histogram cannot (then no histogram)."""
    # (layout, bucket values, +Inf bucket, sum, count) of each usable series
    usable: list[tuple[Layout, list[float], float, float, float]] = []
    bad = 0
    for one in series.values():
        layout = _layout(tuple(one.les), layouts)
        top = one.count if layout is None or layout[2] is None else one.values[layout[2]]
        if layout is None or top is None or one.sum is None:
            bad += 1  # malformed, or cut inside the histogram
            continue
        one_count = top if one.count is None else one.count
        usable.append((layout, one.values, top, one.sum, one_count))
    if not usable:
        return None, bad, False
    bounds = usable[0][0][0]
    if len(usable) > 1 and any(u[0][0] != bounds for u in usable):
        votes = Counter(layout[0] for layout, *_ in usable)
        bounds = votes.most_common(1)[0][0]
    counts = [0.0] * (len(bounds) + 1)
    total = count = 0.0
    invalid = False
    for layout, values, top, one_sum, one_count in usable:
        if layout[0] != bounds:
            bad += 1
            continue
        read = [values[index] for index in layout[1]]
        read.append(top)
        invalid = invalid or not cumulative_ok(read, one_sum, one_count)
        counts = list(map(add, counts, read))
        total += one_sum
        count += one_count
    if invalid:
        return None, bad, True
    return Histogram(bounds=bounds, counts=tuple(counts), sum=total, count=count), bad, False


def _layout(les: tuple[str, ...], memo: Layouts) -> Layout | None:
    """Read a series' ``le`` texts into a layout; None if one is not a number or repeats
    (kept in ``memo``)."""
    if les in memo:
        return memo[les]
    try:
        bounds = [float(le) for le in les]
    except ValueError:
        bounds = []
    if len(bounds) != len(les) or len(set(bounds)) != len(bounds) or any(map(math.isnan, bounds)):
        layout = None
    else:
        finite = sorted((b, i) for i, b in enumerate(bounds) if b != math.inf)
        top = bounds.index(math.inf) if math.inf in bounds else None
        layout = (tuple(b for b, _ in finite), tuple(i for _, i in finite), top)
    if len(memo) >= _LAYOUT_LIMIT:
        memo.clear()
    memo[les] = layout
    return layout


def _gauges(
    stream: Gathered, left_out: list[tuple[str, ErrorKind]]
) -> tuple[dict[str, float], dict[str, dict[str, float]]]:
    """Fold gauges over engines (and pids); keep the per-engine values too. A signal
    with a value it cannot take is appended to ``left_out`` instead (its engines stay
    listed, so that the engine does not seem to have left)."""
    gauges: dict[str, float] = {}
    engines: dict[str, dict[str, float]] = {}
    withheld = stream.withheld
    for signal, families in GAUGE_SOURCES.items():
        family = next((f for f in families if stream.gauges.get(f) or f in withheld), None)
        if family is None:
            continue
        values = stream.gauges.get(family, [])
        kind = withheld.get(family)
        if kind is None and not all(gauge_ok(signal, v) for _, v in values):
            kind = ErrorKind.INVALID_VALUES
        if kind is not None:
            left_out.append((signal, kind))
            for engine, _ in values:
                engines.setdefault(engine, {})
            continue
        if signal == "prefix_hit_rate":
            values = [(engine, v) for engine, v in values if v >= 0]  # -1: caching is off
            if not values:
                continue
        if signal == "spec_accept_length":
            values = [(engine, v) for engine, v in values if v >= 1]  # 0: not speculating
            if not values:
                continue
        per_engine: dict[str, list[float]] = {}
        for engine, value in values:
            per_engine.setdefault(engine, []).append(value)
        for engine, engine_values in per_engine.items():
            engines.setdefault(engine, {})[signal] = _combine(signal, engine_values)
        if signal in _MEAN_GAUGES:
            rates = [engines[e][signal] for e in per_engine]
            gauges[signal] = sum(rates) / len(rates)
        else:
            gauges[signal] = _combine(signal, [v for _, v in values])
    return gauges, engines


def _combine(signal: str, values: list[float]) -> float:
    """Fold values of one gauge: max for KV usage, mean for the rates, else the sum."""
    if signal in _MAX_GAUGES:
        return max(values)
    if signal in _MEAN_GAUGES:
        return sum(values) / len(values)
    return sum(values)


def _prefix_unit(family: str | None, result: ParseResult) -> str:
    """Tell whether prefix-cache counters count blocks (vLLM 0.8.x) or tokens."""
    if family is None:
        # No counter samples: judge by what the page declares, for the record.
        family = next((f for f in COUNTER_SOURCES["prefix_queries"] if f in result.types), None)
    if family is None or not family.startswith("vllm:gpu_prefix_cache_"):
        return "tokens"
    text = result.helps.get(family) or result.helps.get(family.removesuffix("_total")) or ""
    text = text.lower()
    if "block" in text:
        return "blocks"
    if "token" in text:
        return "tokens"
    # No telling HELP (absent, or "Multiprocess metric" from an old prometheus_client):
    # 0.8.x, the only release counting blocks, had no vllm:kv_cache_usage_perc yet.
    has_new_kv = "vllm:kv_cache_usage_perc" in result.types or any(
        s.name == "vllm:kv_cache_usage_perc" for s in result.samples
    )
    return "tokens" if has_new_kv else "blocks"
