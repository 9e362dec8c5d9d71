"""vLLM metric names → canonical signals (DESIGN.md, "Canonical signals").

One ``Snapshot`` per scrape, one ``StreamSnapshot`` per ``model_name``. Engines (``engine``
label) and API-server processes (``pid`` label) are folded in:

* Histograms: buckets summed per ``le``, and ``_sum``/``_count`` summed, over every series
  of the model (engines, and any other label such as ``pid``). Bounds are read from the
  page (``le`` parsed as floats, ascending); the ``+Inf`` bucket comes last in ``counts``
  and is taken from ``_count`` when the page lacks it. A series needs ``_sum`` and one of
  ``+Inf``/``_count`` to be used.
  When the series of one model disagree on the bucket layout, the layout carried by
  most series (the first seen among equals) is kept and the other series are dropped
  and counted in ``parse_errors``: summing buckets of different bounds would invent
  counts, and one layout is what a quantile needs. Incomplete series (a page cut inside
  a histogram) are dropped and counted the same way.
* Gauges: ``running`` and ``waiting`` summed; ``kv_usage`` the maximum (also over
  ``pid`` series, which 0.9-0.11 multiprocess pages carry, stale ones included);
  ``prefix_hit_rate`` (V0 only) the mean of the engines that report it, omitted when it
  is -1 (prefix caching disabled). Per-engine values are kept in ``engines`` (a page
  without an ``engine`` label is engine "0").
* Counters summed; ``vllm:request_success_total`` becomes ``finished:<reason>``.
* Values a signal cannot take (``app.scrape.validity``: NaN, ``±Inf``, negative counts,
  buckets that fall, KV usage outside 0..1) leave the whole signal out of the stream for
  this scrape, every engine's series of it: a sum over the other engines would read as a
  restart or an engine leaving. The signal is listed in ``withheld`` and ``missing``, and
  the snapshot carries an ``invalid_values`` problem. The newest family of a renamed
  metric is not replaced by an older one then (the two may differ).
* A series on the page twice (same name and labels) is used once, from its first copy,
  when the copies agree; when they differ its signal is left out as above. Either way
  the snapshot carries a ``duplicate_series`` problem. Only families read here are
  checked (the check is one set over the page, and once per page layout).
* Where vLLM renamed a metric, the newest name the stream carries wins (0.10-0.13 pages
  carry old and new side by side).
* ``vllm:cache_config_info`` has no ``model_name``: its labels (the lowest engine's)
  become ``info`` of every stream.
* A series without ``model_name`` belongs to the page's only model, or to "" when there
  are several or none.
* ``missing`` lists the canonical signals a stream lacks, core signals first. The V0
  gauge ``prefix_hit_rate`` is not reported missing when the prefix counters that
  replaced it are there.
* ``metrics_disabled``: the page shows other families but no ``vllm:`` family at all (not
  even HELP/TYPE lines), which is what ``--disable-log-stats`` gives. A V0 page before its
  first stats log has ``vllm:`` HELP/TYPE lines without samples: no streams, not disabled.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from operator import add
from typing import cast

from app.model import (
    CORE_SIGNALS,
    COUNTER_SIGNALS,
    GAUGE_SIGNALS,
    HISTOGRAM_SIGNALS,
    ErrorKind,
    Histogram,
    Problem,
    Sample,
    Snapshot,
    StreamSnapshot,
)
from app.scrape.parse import ParseResult
from app.scrape.validity import counter_ok, cumulative_ok, gauge_ok, repeated

__all__ = [
    "ALL_SIGNALS",
    "COUNTER_SOURCES",
    "GAUGE_SOURCES",
    "HISTOGRAM_SOURCES",
    "normalize",
]

VLLM = "vllm:"

# Canonical signal → vLLM families, newest name first.
HISTOGRAM_SOURCES: dict[str, tuple[str, ...]] = {
    "ttft": ("vllm:time_to_first_token_seconds",),
    "itl": ("vllm:inter_token_latency_seconds", "vllm:time_per_output_token_seconds"),
    "tpot": ("vllm:request_time_per_output_token_seconds",),
    "e2e": ("vllm:e2e_request_latency_seconds",),
    "queue_time": ("vllm:request_queue_time_seconds",),
    "prefill_time": ("vllm:request_prefill_time_seconds",),
    "decode_time": ("vllm:request_decode_time_seconds",),
    "prompt_len": ("vllm:request_prompt_tokens",),
    "gen_len": ("vllm:request_generation_tokens",),
    # A histogram although its name ends in _total.
    "step_tokens": ("vllm:iteration_tokens_total",),
}
GAUGE_SOURCES: dict[str, tuple[str, ...]] = {
    "running": ("vllm:num_requests_running",),
    "waiting": ("vllm:num_requests_waiting",),
    "kv_usage": ("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc"),
    "prefix_hit_rate": ("vllm:gpu_prefix_cache_hit_rate",),
}
COUNTER_SOURCES: dict[str, tuple[str, ...]] = {
    "preemptions": ("vllm:num_preemptions_total",),
    "prompt_tokens": ("vllm:prompt_tokens_total",),
    "generation_tokens": ("vllm:generation_tokens_total",),
    "prefix_queries": ("vllm:prefix_cache_queries_total", "vllm:gpu_prefix_cache_queries_total"),
    "prefix_hits": ("vllm:prefix_cache_hits_total", "vllm:gpu_prefix_cache_hits_total"),
}
FINISHED_FAMILY = "vllm:request_success_total"
CACHE_CONFIG_FAMILY = "vllm:cache_config_info"
# Core signals first, then the others in the order of app.model.
ALL_SIGNALS: tuple[str, ...] = CORE_SIGNALS + tuple(
    s for s in HISTOGRAM_SIGNALS + GAUGE_SIGNALS + COUNTER_SIGNALS if s not in CORE_SIGNALS
)

_HIST, _GAUGE, _COUNTER, _FINISHED, _INFO = range(5)
_MAX_GAUGES = frozenset({"kv_usage"})
_INFO_DROP = frozenset({"engine", "pid", "model_name"})
# Labels that do not tell series of one model apart.
_SERIES_DROP = frozenset({"le", "model_name"})
_MEMO_LIMIT = 50_000


def _dispatch_table() -> dict[str, tuple[int, str, str]]:
    """Map every sample name we read to (kind, family, part)."""
    table: dict[str, tuple[int, str, str]] = {}
    for families in HISTOGRAM_SOURCES.values():
        for family in families:
            for part in ("bucket", "sum", "count"):
                table[f"{family}_{part}"] = (_HIST, family, part)
    for families in GAUGE_SOURCES.values():
        for family in families:
            table[family] = (_GAUGE, family, "")
    for families in COUNTER_SOURCES.values():
        for family in families:
            table[family] = (_COUNTER, family, "")
    table[FINISHED_FAMILY] = (_FINISHED, FINISHED_FAMILY, "")
    table[CACHE_CONFIG_FAMILY] = (_INFO, CACHE_CONFIG_FAMILY, "")
    return table


_DISPATCH = _dispatch_table()

Labels = tuple[tuple[str, str], ...]
# model_name (None when absent), engine, le (None when absent), key of the other labels.
_Split = tuple[str | None, str, str | None, str]
# Splits of pages read line by line (a first scrape, a changed layout), by the identity
# of their labels; a page read through a template keeps its splits with the template
# (``ParseResult.memo``), so this memo only bridges the scrapes before that.
_SPLIT_MEMO: dict[int, tuple[Labels, _Split]] = {}
_KEYS: dict[str, str] = {}
_SPLITS: dict[_Split, _Split] = {}
_SPLIT_LIMIT = 100_000
# Signals named in a problem's detail, at most.
_NAMED_MAX = 5
# (kind, family, part), split and labels of a series whose copies on the page disagree.
_Conflict = tuple[tuple[int, str, str], _Split, Labels]


@dataclass(slots=True)
class _Series:
    """One histogram series as read: ``le`` texts and bucket values in page order."""

    les: list[str] = field(default_factory=list)
    values: list[float] = field(default_factory=list)
    sum: float | None = None
    count: float | None = None


# A bucket layout as read: finite bounds ascending, the index in page order of each, and
# the index of the +Inf bucket (None when absent). Layouts repeat every scrape.
_Layout = tuple[tuple[float, ...], tuple[int, ...], int | None]
_LAYOUT_MEMO: dict[tuple[str, ...], _Layout | None] = {}


@dataclass(slots=True)
class _Stream:
    """Everything gathered for one model_name before folding."""

    histograms: dict[str, dict[str, _Series]] = field(default_factory=dict)
    # family → [(engine, value)]
    gauges: dict[str, list[tuple[str, float]]] = field(default_factory=dict)
    counters: dict[str, float] = field(default_factory=dict)
    finished: dict[str, float] = field(default_factory=dict)
    # family (or finished:<reason>) → why its signal is left out this scrape
    withheld: dict[str, ErrorKind] = field(default_factory=dict)


def normalize(result: ParseResult, *, target: str, ts: float) -> Snapshot:
    """Turn one parsed page into a Snapshot of canonical signals per model_name."""
    streams: dict[str, _Stream] = {}
    infos: list[Labels] = []
    orphans: list[tuple[tuple[int, str, str], _Split, float, Labels]] = []
    seen_vllm = False
    dispatch = _DISPATCH.get
    samples: Sequence[Sample] = result.samples
    splits, copies = _index(result)
    conflicts: list[_Conflict] = []
    if copies:
        samples, splits, conflicts = _drop_copies(samples, splits, copies)
    for (name, labels, value, _), split in zip(samples, splits, strict=True):
        spec = dispatch(name)
        if spec is None and not name.startswith(VLLM):
            continue
        seen_vllm = True
        model = split[0]
        if spec is None or model is None:
            if spec is None:
                if model is not None and model not in streams:
                    streams[model] = _Stream()
            elif spec[0] == _INFO:
                infos.append(labels)
            else:
                orphans.append((spec, split, value, labels))
            continue
        stream = streams.get(model)
        if stream is None:
            stream = streams[model] = _Stream()
        kind, family, part = spec
        if kind == _HIST and part == "bucket" and split[2] is not None:
            # Most samples are buckets: this is _gather's first branch, inlined.
            series_by_key = stream.histograms.get(family)
            if series_by_key is None:
                series_by_key = stream.histograms[family] = {}
            series = series_by_key.get(split[3])
            if series is None:
                series = series_by_key[split[3]] = _Series()
            series.les.append(split[2])
            series.values.append(value)
        elif kind == _INFO:
            infos.append(labels)
        else:
            _gather(stream, spec, split, value, labels)
    default = next(iter(streams)) if len(streams) == 1 else ""
    if orphans:
        stream = streams.setdefault(default, _Stream())
        for spec, split, value, labels in orphans:
            _gather(stream, spec, split, value, labels)
    for spec, split, labels in conflicts:
        stream = streams.setdefault(default if split[0] is None else split[0], _Stream())
        stream.withheld[_family_key(spec, labels)] = ErrorKind.DUPLICATE_SERIES

    errors = result.errors
    built: dict[str, StreamSnapshot] = {}
    withheld: list[tuple[str, str, ErrorKind]] = []
    for model, stream in streams.items():
        snapshot, dropped, left_out = _build(model, stream, result, _info_for(model, infos))
        built[model] = snapshot
        errors += dropped
        withheld.extend((model, signal, kind) for signal, kind in left_out)
    return Snapshot(
        target=target,
        ts=ts,
        streams=built,
        metrics_disabled=_metrics_disabled(result, seen_vllm),
        parse_errors=errors,
        problems=_problems(result.samples, copies, withheld),
    )


def _index(result: ParseResult) -> tuple[list[_Split], list[tuple[int, int]]]:
    """The split labels of each sample and the repeated series (``validity.repeated``):
    kept with the page's template when it has one (both depend on the layout only)."""
    memo = result.memo
    if memo is not None:
        held = memo.get("splits")
        if held is not None:
            return cast(list[_Split], held), cast(list[tuple[int, int]], memo["copies"])
    got = _SPLIT_MEMO.get
    splits = []
    for _, labels, _, _ in result.samples:
        # The parser hands out the same labels tuple for a series every scrape.
        hit = got(id(labels))
        splits.append(hit[1] if hit is not None and hit[0] is labels else _split(labels))
    copies = repeated(result.samples, _DISPATCH)
    if memo is not None:
        memo["copies"] = copies
        memo["splits"] = splits
    return splits, copies


def _drop_copies(
    samples: Sequence[Sample], splits: list[_Split], copies: list[tuple[int, int]]
) -> tuple[list[Sample], list[_Split], list[_Conflict]]:
    """Leave out every later copy of a series, and both copies when their values differ
    (an info series is only read for its labels: its first copy stays); return the
    samples and splits kept and the series whose copies differ."""
    drop = {index for index, _ in copies}
    disagree = sorted(
        {
            first
            for index, first in copies
            if samples[index][2] != samples[first][2] and samples[first][0] != CACHE_CONFIG_FAMILY
        }
    )
    drop.update(disagree)
    keep = [index not in drop for index in range(len(samples))]
    kept = [s for s, k in zip(samples, keep, strict=True) if k]
    kept_splits = [s for s, k in zip(splits, keep, strict=True) if k]
    conflicts = [(_DISPATCH[samples[i][0]], splits[i], samples[i][1]) for i in disagree]
    return kept, kept_splits, conflicts


def _family_key(spec: tuple[int, str, str], labels: Labels) -> str:
    """The key a sample's signal is withheld under: its family, or finished:<reason>."""
    if spec[0] == _FINISHED:
        return "finished:" + dict(labels).get("finished_reason", "")
    return spec[1]


def _problems(
    samples: Sequence[Sample],
    copies: list[tuple[int, int]],
    withheld: list[tuple[str, str, ErrorKind]],
) -> tuple[Problem, ...]:
    """The problems of a page: repeated series first, then signals left out for values."""
    out: list[Problem] = []
    if copies:
        name, labels, _, _ = samples[copies[0][0]]
        text = name + "{" + ",".join(f'{k}="{v}"' for k, v in labels) + "}"
        lost = [(m, s) for m, s, kind in withheld if kind == ErrorKind.DUPLICATE_SERIES]
        detail = f"{len(copies)} series repeated on the page (first: {text})"
        detail += "; " + (_named(lost, "copies disagree, left out") if lost else "first copy used")
        out.append(Problem(ErrorKind.DUPLICATE_SERIES, detail))
    bad = [(m, s) for m, s, kind in withheld if kind == ErrorKind.INVALID_VALUES]
    if bad:
        detail = _named(bad, "left out for values not finite or out of range")
        out.append(Problem(ErrorKind.INVALID_VALUES, detail))
    return tuple(out)


def _named(signals: list[tuple[str, str]], what: str) -> str:
    """``what: ttft of 'm', …`` naming at most a few (model, signal) pairs."""
    named = ", ".join(f"{signal} of {model!r}" for model, signal in signals[:_NAMED_MAX])
    more = f" and {len(signals) - _NAMED_MAX} more" if len(signals) > _NAMED_MAX else ""
    return f"{what}: {named}{more}"


def _split(labels: Labels) -> _Split:
    """Split labels into model_name, engine, le and a key for the other labels."""
    found = dict(labels)
    # A str key (its hash is computed once, unlike a tuple's); repr keeps it unambiguous.
    key = repr(tuple(pair for pair in labels if pair[0] not in _SERIES_DROP))
    key = _KEYS.setdefault(key, key)  # a few distinct keys serve every series
    split = (found.get("model_name"), found.get("engine", "0"), found.get("le"), key)
    split = _SPLITS.setdefault(split, split)  # a target's series share a few dozen
    if len(_SPLIT_MEMO) >= _SPLIT_LIMIT:
        _SPLIT_MEMO.clear()
        _KEYS.clear()
        _SPLITS.clear()
    # Keyed by identity; holding the labels keeps the id from being reused.
    _SPLIT_MEMO[id(labels)] = (labels, split)
    return split


def _gather(
    stream: _Stream, spec: tuple[int, str, str], split: _Split, value: float, labels: Labels
) -> None:
    """Add one sample to what its stream has gathered."""
    kind, family, part = spec
    if kind == _HIST:
        series_by_key = stream.histograms.get(family)
        if series_by_key is None:
            series_by_key = stream.histograms[family] = {}
        series = series_by_key.get(split[3])
        if series is None:
            series = series_by_key[split[3]] = _Series()
        if part == "bucket":
            if split[2] is not None:
                series.les.append(split[2])
                series.values.append(value)
        elif part == "sum":
            series.sum = value
        else:
            series.count = value
    elif kind == _GAUGE:  # judged in _gauges, by signal
        stream.gauges.setdefault(family, []).append((split[1], value))
    elif not counter_ok(value):
        stream.withheld.setdefault(_family_key(spec, labels), ErrorKind.INVALID_VALUES)
    elif kind == _COUNTER:
        stream.counters[family] = stream.counters.get(family, 0.0) + value
    else:
        reason = dict(labels).get("finished_reason", "")
        stream.finished[reason] = stream.finished.get(reason, 0.0) + value


def _build(
    model: str, stream: _Stream, result: ParseResult, info: dict[str, str]
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
                histogram, bad, invalid = _fold(series)
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


def _fold(series: dict[str, _Series]) -> tuple[Histogram | None, int, bool]:
    """Sum the series of one histogram family; return it, the series dropped, and
    whether a series to sum held values a histogram cannot (then no histogram)."""
    # (layout, bucket values, +Inf bucket, sum, count) of each usable series
    usable: list[tuple[_Layout, list[float], float, float, float]] = []
    bad = 0
    for one in series.values():
        layout = _layout(tuple(one.les))
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


def _layout(les: tuple[str, ...]) -> _Layout | None:
    """Read a series' ``le`` texts into a layout; None if one is not a number or repeats."""
    if les in _LAYOUT_MEMO:
        return _LAYOUT_MEMO[les]
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
    if len(_LAYOUT_MEMO) >= _MEMO_LIMIT:
        _LAYOUT_MEMO.clear()
    _LAYOUT_MEMO[les] = layout
    return layout


def _gauges(
    stream: _Stream, left_out: list[tuple[str, ErrorKind]]
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
        per_engine: dict[str, list[float]] = {}
        for engine, value in values:
            per_engine.setdefault(engine, []).append(value)
        for engine, engine_values in per_engine.items():
            engines.setdefault(engine, {})[signal] = _combine(signal, engine_values)
        if signal == "prefix_hit_rate":
            rates = [engines[e][signal] for e in per_engine]
            gauges[signal] = sum(rates) / len(rates)
        else:
            gauges[signal] = _combine(signal, [v for _, v in values])
    return gauges, engines


def _combine(signal: str, values: list[float]) -> float:
    """Fold values of one gauge: max for KV usage, mean for the hit rate, else the sum."""
    if signal in _MAX_GAUGES:
        return max(values)
    if signal == "prefix_hit_rate":
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


def _info_for(model: str, infos: list[Labels]) -> dict[str, str]:
    """Return the cache_config_info labels for ``model`` (the lowest engine's)."""
    chosen: Labels | None = None
    chosen_rank: tuple[int, str] | None = None
    for labels in infos:
        found = dict(labels)
        if found.get("model_name", model) != model:
            continue
        engine = found.get("engine", "0")
        rank = (len(engine), engine)  # "2" before "10"
        if chosen_rank is None or rank < chosen_rank:
            chosen, chosen_rank = labels, rank
    if chosen is None:
        return {}
    return {k: v for k, v in chosen if k not in _INFO_DROP}


def _metrics_disabled(result: ParseResult, seen_vllm: bool) -> bool:
    """Tell a page with no vLLM family at all (``--disable-log-stats``) from an empty one."""
    if seen_vllm:
        return False
    if any(name.startswith(VLLM) for name in result.types) or any(
        name.startswith(VLLM) for name in result.helps
    ):
        return False
    return bool(result.types or result.helps or result.samples or result.skipped)
