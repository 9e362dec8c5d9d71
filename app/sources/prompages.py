"""Pages from a Prometheus API's answers, gathered one metric family at a time.

:class:`~app.sources.prometheus.PrometheusSource` asks for each histogram family on its
own — its ``_bucket``, ``_sum`` and ``_count`` series, both spellings, every target at
once — and for the gauges, counters and info series together (:func:`family_regexes`),
a few queries in flight, and adds each answer to a :class:`PageSet` as it arrives. An
answer is then one family of the fleet (a twentieth of its series), not the whole
fleet: the largest one a round holds in memory is bounded by the largest family, and
Prometheus can work on several at once. The samples of one target that share a
timestamp form one "page", as one scrape would.

Where a target has a series in both spellings, ``vllm:`` wins over ``vllm_`` (both
spellings of a name come in the same answer, so each answer is decided on its own).
SGLang's families (``sglang:``/``sglang_``, ``docs/sglang.md``) are read the same way:
one query per histogram family, one for its gauges and counters.

A round builds a sample object for every point of every series — a million or more at
a few thousand streams, all alive until the round is stored — and the cyclic garbage
collector, triggered by allocations, would scan them again and again (it took 60 % of
the time of building the pages): :func:`gc_paused` holds it off while a round is read;
none of these objects is part of a cycle, reference counting frees them.
"""

from __future__ import annotations

import gc
import math
import re
from array import array
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

from app.model import Sample
from app.scrape.signals import (
    CACHE_CONFIG_FAMILY,
    COUNTER_SOURCES,
    FINISHED_FAMILY,
    GAUGE_SOURCES,
    HISTOGRAM_SOURCES,
    SGLANG_FINISHED_FAMILY,
)
from app.sources.promapi import Series

__all__ = [
    "PageSet",
    "Pages",
    "canonical_name",
    "family_regexes",
    "gc_paused",
    "name_regex",
    "target_name",
]

_COLON = ("vllm:", "sglang:")
_READ = (*_COLON, "vllm_", "sglang_")
# target → timestamp → the samples of that page
Pages = dict[str, dict[float, list[Sample]]]
Labels = tuple[tuple[str, str], ...]
_TARGET_NAME = re.compile(r"[^A-Za-z0-9_.:@-]")


def _scalar_names() -> list[str]:
    """Every gauge, counter and info name read (a family read per label value is keyed
    ``family{label="value"}``: its name is the part before the brace)."""
    names: list[str] = []
    for table in (GAUGE_SOURCES, COUNTER_SOURCES):
        for families in table.values():
            names += [f.partition("{")[0] for f in families]
    return [*names, FINISHED_FAMILY, CACHE_CONFIG_FAMILY, SGLANG_FINISHED_FAMILY]


# The engines whose names are read, as their names start (``vllm:x``, ``sglang:x``).
_ENGINES = ("vllm", "sglang")


def _by_engine(names: Iterable[str]) -> list[tuple[str, list[str]]]:
    """``names`` split by their engine's prefix (vLLM's first), the prefix cut off."""
    split: dict[str, list[str]] = {}
    for name in names:
        engine, _, rest = name.partition(":")
        split.setdefault(engine, []).append(rest)
    return sorted(split.items(), key=lambda item: _ENGINES.index(item[0]))


def _alternatives(names: Iterable[str]) -> str:
    return "|".join(re.escape(n) for n in sorted(set(names)))


def family_regexes() -> list[str]:
    """RE2 regexes (anchored by Prometheus) of the names to read, both spellings: one
    per histogram family (its buckets, sum and count), then, per engine, one of every
    gauge, counter and info series together (a few series per stream each)."""
    histograms = sorted({f for families in HISTOGRAM_SOURCES.values() for f in families})
    out = [
        f"{engine}[:_]{re.escape(rest)}_(bucket|sum|count)"
        for engine, rests in _by_engine(histograms)
        for rest in rests
    ]
    out += [f"{e}[:_]({_alternatives(rests)})" for e, rests in _by_engine(_scalar_names())]
    return out


def name_regex() -> str:
    """One RE2 regex for every sample name read, both spellings."""
    names = [
        f"{f}_{part}"
        for families in HISTOGRAM_SOURCES.values()
        for f in families
        for part in ("bucket", "sum", "count")
    ]
    engines = _by_engine([*names, *_scalar_names()])
    return "|".join(f"{engine}[:_]({_alternatives(rests)})" for engine, rests in engines)


@contextmanager
def gc_paused() -> Iterator[None]:
    """Hold off the cyclic garbage collector inside the block (if it ran at all), and let
    it run again after (module docstring)."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def canonical_name(name: str) -> str:
    """``vllm_x`` → ``vllm:x``, ``sglang_x`` → ``sglang:x`` (the exposed names); other
    names unchanged."""
    if name.startswith("vllm_"):
        return "vllm:" + name[5:]
    if name.startswith("sglang_"):
        return "sglang:" + name[7:]
    return name


def target_name(value: str) -> str:
    """A target name the rest of phasewatch accepts (letters, digits, ``_.:@-``)."""
    return _TARGET_NAME.sub("_", value)[-128:] or "prometheus"


class PageSet:
    """Series grouped by target, added one answer at a time; a target's pages (samples
    grouped by timestamp) are built when asked for (:meth:`drain`), one target at a
    time. Held meanwhile: each series' name, labels (their pairs shared between series)
    and its points as one array of floats — a fifth of what sample objects would take."""

    def __init__(self, target_label: str = "instance") -> None:
        self.target_label = target_label
        # target → (name, labels, [t0, v0, t1, v1, …]) of each series, in the order added
        self.held: dict[str, list[tuple[str, Labels, array[float]]]] = {}
        self._targets: dict[str, str] = {}  # label value → target name
        self._pairs: dict[tuple[str, str], tuple[str, str]] = {}  # shared label pairs

    @property
    def series(self) -> dict[str, int]:
        """Per target, the series added: a page holding that many holds every one, in the
        order added (the answers come family by family, in the same order)."""
        return {t: len(held) for t, held in self.held.items()}

    def drain(self) -> Iterator[tuple[str, dict[float, list[Sample]]]]:
        """Each target's pages, its series let go once they are built."""
        while self.held:
            target = next(iter(self.held))
            yield target, _pages_of(self.held.pop(target))

    def add(self, series: Sequence[Series]) -> None:
        """Add one answer's series (every spelling of a name it holds)."""
        self._add([(x.labels, x.points) for x in series])

    def add_result(self, result: Sequence[Any]) -> None:
        """Add one answer as the API's JSON gives it (``[{"metric": {…}, "values":
        [[t, "v"], …]}, …]``, or ``"value"`` for a vector): no series objects between."""
        self._add(
            [
                (item["metric"], item["values"] if "values" in item else [item["value"]])
                for item in result
            ]
        )

    def _add(self, series: Sequence[tuple[Mapping[str, str], Sequence[Any]]]) -> None:
        label = self.target_label
        targets = self._targets
        pairs = self._pairs
        chosen: dict[tuple[str, str, Labels], tuple[bool, list[Sequence[Any]]]] = {}
        for metric, points in series:
            raw = metric.get("__name__", "")
            if not raw.startswith(_READ):
                continue
            rest = dict(metric)
            del rest["__name__"]
            target = targets.get(rest.pop(label, ""))
            if target is None:
                value = metric.get(label, "")
                target = targets[value] = target_name(value)
            # In the server's order (Prometheus sorts a series' labels by name): the
            # normaliser reads labels by name, and one answer's series agree on the order.
            labels = tuple([pairs.setdefault(kv, kv) for kv in rest.items()])
            key = (target, canonical_name(raw), labels)
            colon = raw.startswith(_COLON)
            have = chosen.get(key)
            if have is None or (colon and not have[0]):
                chosen[key] = (colon, [points])
            elif colon == have[0]:
                have[1].append(points)  # the same series in several parts
        held = self.held
        for (target, name, labels), (_, parts) in chosen.items():
            mine = held.get(target)
            if mine is None:
                mine = held[target] = []
            points = parts[0] if len(parts) == 1 else _joined(parts)
            mine.append((name, labels, _numbers(points)))


def _pages_of(series: list[tuple[str, Labels, array[float]]]) -> dict[float, list[Sample]]:
    """One target's series as pages: its samples by timestamp, in the order added."""
    by_ts: dict[float, list[Sample]] = {}
    new = tuple.__new__  # a Sample without NamedTuple's own __new__: the page's bulk
    for name, labels, numbers in series:
        for i in range(0, len(numbers), 2):
            ts = numbers[i]
            page = by_ts.get(ts)
            if page is None:
                page = by_ts[ts] = []
            page.append(new(Sample, (name, labels, numbers[i + 1], None)))
    return by_ts


def _numbers(points: Sequence[Any]) -> array[float]:
    """``[[t, v], …]`` (numbers or the API's strings) as ``[t0, v0, t1, v1, …]``; a value
    that is no number: NaN."""
    try:
        return array("d", [float(x) for point in points for x in point])
    except (TypeError, ValueError):
        return array("d", [x for t, v in points for x in (float(t), _float(v))])


def _joined(parts: list[Sequence[Any]]) -> list[tuple[Any, Any]]:
    """The points of one series given in several parts, each time once."""
    return sorted({float(ts): value for part in parts for ts, value in part}.items())


def _float(text: Any) -> float:
    try:
        return float(text)
    except (TypeError, ValueError):
        return math.nan
