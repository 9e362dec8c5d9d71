"""vLLM metric names → canonical signals (docs/vllm-signals.md).

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
* Gauges: ``running``, ``waiting`` and ``waiting_capacity``/``waiting_deferred`` (the
  ``reason`` values of ``vllm:num_requests_waiting_by_reason``) summed; ``kv_usage`` the
  maximum (also over
  ``pid`` series, which 0.9-0.11 multiprocess pages carry, stale ones included);
  ``prefix_hit_rate`` (V0 only) the mean of the engines that report it, omitted when it
  is -1 (prefix caching disabled). Per-engine values are kept in ``engines`` (a page
  without an ``engine`` label is engine "0").
* Counters summed (over every label too: ``admission_rejections`` over its reasons);
  ``vllm:request_success_total`` becomes ``finished:<reason>``, and each ``source`` of
  ``vllm:prompt_tokens_by_source_total`` a signal of its own
  (``prompt_tokens_local_compute`` …). Label values phasewatch does not know are
  ignored. The signals of ``app.model.OPTIONAL_*_SIGNALS`` (families of some versions
  or features only) are read when present and never listed in ``missing``.
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
  carry old and new side by side; the names of each signal: ``app.scrape.signals``).
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
* SGLang (``sglang:`` families, ``app.scrape.signals``) is read the same way: its
  ``dp_rank`` label stands for ``engine`` where a page has no ``engine``; a page without
  any ``sglang:`` or ``vllm:`` family (SGLang run without ``--enable-metrics``) is
  ``metrics_disabled``. The page's engine (``engine_kind``: "vllm", "sglang") is on the
  snapshot, and an SGLang stream's ``info`` says ``engine_kind: sglang`` (the hints
  name its flags: ``app.diagnose.engine_flags``).

Sorting the samples into streams happens here, folding each stream into its signals in
``app.scrape.fold``. A :class:`NormalizeCache`, kept by whoever normalises a run of
pages (the collector), remembers how each series' labels split and each bucket layout;
without one, a call starts from an empty cache and keeps nothing.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import cast

from app.model import ErrorKind, Problem, Sample, Snapshot, StreamSnapshot
from app.scrape.fold import Gathered, HistogramSeries, Layout, build
from app.scrape.result import ParseResult
from app.scrape.signals import (
    CACHE_CONFIG_FAMILY,
    COUNTER,
    COUNTER_SOURCES,
    DISPATCH,
    FINISHED,
    GAUGE,
    GAUGE_SOURCES,
    HIST,
    INFO,
    LCOUNTER,
    LGAUGE,
    Spec,
    labelled_key,
    page_engine,
)
from app.scrape.signals import ENGINE_PREFIXES as _ENGINES
from app.scrape.validity import counter_ok, repeated

__all__ = ["NormalizeCache", "normalize"]

_INFO_DROP = frozenset({"engine", "pid", "model_name"})
# Labels that do not tell series of one model apart.
_SERIES_DROP = frozenset({"le", "model_name"})
_SPLIT_LIMIT = 100_000
# Signals named in a problem's detail, at most.
_NAMED_MAX = 5

Labels = tuple[tuple[str, str], ...]
# model_name (None when absent), engine, le (None when absent), key of the other labels.
Split = tuple[str | None, str, str | None, str]
# (kind, family, part), split and labels of a series whose copies on the page disagree.
_Conflict = tuple[Spec, Split, Labels]


class NormalizeCache:
    """What normalising earlier pages taught, for one owner: how each series' labels
    split, and the layouts of the bucket bounds seen.

    Splits are kept for pages read line by line (a first scrape, a changed layout), by
    the identity of their labels: the parser hands out the same labels tuple for a
    series every scrape. A page read through a template keeps its splits with the
    template (``ParseResult.memo``), so this memo only bridges the scrapes before that.
    Both maps are emptied when they reach their bound.
    """

    __slots__ = ("keys", "layouts", "memo", "splits")

    def __init__(self) -> None:
        """Start empty."""
        # id(labels) → (labels, split); holding the labels keeps the id from being reused.
        self.memo: dict[int, tuple[Labels, Split]] = {}
        self.keys: dict[str, str] = {}
        self.splits: dict[Split, Split] = {}
        # ``le`` texts of a series → its layout (``app.scrape.fold``).
        self.layouts: dict[tuple[str, ...], Layout | None] = {}

    def split(self, labels: Labels) -> Split:
        """Split labels into model_name, engine, le and a key for the other labels."""
        found = dict(labels)
        # A str key (its hash is computed once, unlike a tuple's); repr keeps it unambiguous.
        key = repr(tuple(pair for pair in labels if pair[0] not in _SERIES_DROP))
        key = self.keys.setdefault(key, key)  # a few distinct keys serve every series
        engine = found.get("engine")
        if engine is None:
            engine = found.get("dp_rank", "0")  # SGLang's data-parallel rank
        split = (found.get("model_name"), engine, found.get("le"), key)
        split = self.splits.setdefault(split, split)  # a target's series share a few dozen
        if len(self.memo) >= _SPLIT_LIMIT:
            self.memo.clear()
            self.keys.clear()
            self.splits.clear()
        self.memo[id(labels)] = (labels, split)
        return split


def normalize(
    result: ParseResult, *, target: str, ts: float, cache: NormalizeCache | None = None
) -> Snapshot:
    """Turn one parsed page into a Snapshot of canonical signals per model_name."""
    if cache is None:
        cache = NormalizeCache()
    streams: dict[str, Gathered] = {}
    infos: list[Labels] = []
    orphans: list[tuple[Spec, Split, float, Labels]] = []
    seen_vllm = False
    dispatch = DISPATCH.get
    samples: Sequence[Sample] = result.samples
    splits, copies = _index(result, cache)
    conflicts: list[_Conflict] = []
    if copies:
        samples, splits, conflicts = _drop_copies(samples, splits, copies)
    for (name, labels, value, _), split in zip(samples, splits, strict=True):
        spec = dispatch(name)
        if spec is None and not name.startswith(_ENGINES):
            continue
        seen_vllm = True
        model = split[0]
        if spec is None or model is None:
            if spec is None:
                if model is not None and model not in streams:
                    streams[model] = Gathered()
            elif spec[0] == INFO:
                infos.append(labels)
            else:
                orphans.append((spec, split, value, labels))
            continue
        stream = streams.get(model)
        if stream is None:
            stream = streams[model] = Gathered()
        kind, family, part = spec
        if kind == HIST and part == "bucket" and split[2] is not None:
            # Most samples are buckets: this is _gather's first branch, inlined.
            series_by_key = stream.histograms.get(family)
            if series_by_key is None:
                series_by_key = stream.histograms[family] = {}
            series = series_by_key.get(split[3])
            if series is None:
                series = series_by_key[split[3]] = HistogramSeries()
            series.les.append(split[2])
            series.values.append(value)
        elif kind == INFO:
            infos.append(labels)
        else:
            _gather(stream, spec, split, value, labels)
    default = next(iter(streams)) if len(streams) == 1 else ""
    if orphans:
        stream = streams.setdefault(default, Gathered())
        for spec, split, value, labels in orphans:
            _gather(stream, spec, split, value, labels)
    for spec, split, labels in conflicts:
        stream = streams.setdefault(default if split[0] is None else split[0], Gathered())
        stream.withheld[_family_key(spec, labels)] = ErrorKind.DUPLICATE_SERIES

    errors = result.errors
    built: dict[str, StreamSnapshot] = {}
    withheld: list[tuple[str, str, ErrorKind]] = []
    engine_kind = page_engine(result.types, result.samples[0][0] if result.samples else None)
    for model, stream in streams.items():
        info = _info_for(model, infos)
        if engine_kind == "sglang":
            info["engine_kind"] = engine_kind
        snapshot, dropped, left_out = build(model, stream, result, info, cache.layouts)
        built[model] = snapshot
        errors += dropped
        withheld.extend((model, signal, kind) for signal, kind in left_out)
    return Snapshot(
        target=target,
        ts=ts,
        streams=built,
        metrics_disabled=_metrics_disabled(result, seen_vllm),
        engine_kind=engine_kind,
        parse_errors=errors,
        problems=_problems(result.samples, copies, withheld),
    )


def _index(result: ParseResult, cache: NormalizeCache) -> tuple[list[Split], list[tuple[int, int]]]:
    """The split labels of each sample and the repeated series (``validity.repeated``):
    kept with the page's template when it has one (both depend on the layout only)."""
    memo = result.memo
    if memo is not None:
        held = memo.get("splits")
        if held is not None:
            return cast(list[Split], held), cast(list[tuple[int, int]], memo["copies"])
    got = cache.memo.get
    split = cache.split
    splits = []
    for _, labels, _, _ in result.samples:
        # The parser hands out the same labels tuple for a series every scrape.
        hit = got(id(labels))
        splits.append(hit[1] if hit is not None and hit[0] is labels else split(labels))
    copies = repeated(result.samples, DISPATCH)
    if memo is not None:
        memo["copies"] = copies
        memo["splits"] = splits
    return splits, copies


def _drop_copies(
    samples: Sequence[Sample], splits: list[Split], copies: list[tuple[int, int]]
) -> tuple[list[Sample], list[Split], list[_Conflict]]:
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
    conflicts = [(DISPATCH[samples[i][0]], splits[i], samples[i][1]) for i in disagree]
    return kept, kept_splits, conflicts


# The keys a labelled family's values are gathered under (app.scrape.signals).
_LABELLED_KEYS = frozenset(
    family
    for sources in (GAUGE_SOURCES, COUNTER_SOURCES)
    for families in sources.values()
    for family in families
    if "{" in family
)


def _family_key(spec: Spec, labels: Labels) -> str:
    """The key a sample's signal is gathered and withheld under: its family,
    ``family{label="value"}`` for a labelled family, or finished:<reason>."""
    kind, family, part = spec
    if kind == FINISHED:
        return "finished:" + dict(labels).get("finished_reason", part)
    if kind in (LGAUGE, LCOUNTER):
        return labelled_key(family, part, dict(labels).get(part, ""))
    return family


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


def _gather(stream: Gathered, spec: Spec, split: Split, value: float, labels: Labels) -> None:
    """Add one sample to what its stream has gathered."""
    kind, family, part = spec
    if kind == HIST:
        series_by_key = stream.histograms.get(family)
        if series_by_key is None:
            series_by_key = stream.histograms[family] = {}
        series = series_by_key.get(split[3])
        if series is None:
            series = series_by_key[split[3]] = HistogramSeries()
        if part == "bucket":
            if split[2] is not None:
                series.les.append(split[2])
                series.values.append(value)
        elif part == "sum":
            series.sum = value
        else:
            series.count = value
    elif kind == GAUGE:  # judged in _gauges, by signal
        stream.gauges.setdefault(family, []).append((split[1], value))
    elif kind in (LGAUGE, LCOUNTER):
        key = _family_key(spec, labels)
        if key not in _LABELLED_KEYS:
            return  # a label value this version of phasewatch does not read
        if kind == LGAUGE:
            stream.gauges.setdefault(key, []).append((split[1], value))
        elif not counter_ok(value):
            stream.withheld.setdefault(key, ErrorKind.INVALID_VALUES)
        else:
            stream.counters[key] = stream.counters.get(key, 0.0) + value
    elif not counter_ok(value):
        stream.withheld.setdefault(_family_key(spec, labels), ErrorKind.INVALID_VALUES)
    elif kind == COUNTER:
        stream.counters[family] = stream.counters.get(family, 0.0) + value
    else:
        reason = dict(labels).get("finished_reason", part)
        stream.finished[reason] = stream.finished.get(reason, 0.0) + value


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
    """Tell a page with no engine family at all (vLLM's ``--disable-log-stats``, SGLang
    without ``--enable-metrics``) from an empty one."""
    if seen_vllm:
        return False
    if any(name.startswith(_ENGINES) for name in result.types) or any(
        name.startswith(_ENGINES) for name in result.helps
    ):
        return False
    return bool(result.types or result.helps or result.samples or result.skipped)
