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
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

from app.model import Sample
from app.scrape.signals import (
    CACHE_CONFIG_FAMILY,
    COUNTER_SOURCES,
    FINISHED_FAMILY,
    GAUGE_SOURCES,
    HISTOGRAM_SOURCES,
)
from app.sources.promapi import Series

__all__ = [
    "PageSet",
    "Pages",
    "canonical_name",
    "family_regexes",
    "name_regex",
    "target_name",
]

# target → timestamp → the samples of that page
Pages = dict[str, dict[float, list[Sample]]]
_TARGET_NAME = re.compile(r"[^A-Za-z0-9_.:@-]")


def _scalar_names() -> list[str]:
    """Every gauge, counter and info name read (a family read per label value is keyed
    ``family{label="value"}``: its name is the part before the brace)."""
    names: list[str] = []
    for table in (GAUGE_SOURCES, COUNTER_SOURCES):
        for families in table.values():
            names += [f.partition("{")[0] for f in families]
    return [*names, FINISHED_FAMILY, CACHE_CONFIG_FAMILY]


def _alternatives(names: Iterable[str]) -> str:
    return "|".join(re.escape(n) for n in sorted({n.removeprefix("vllm:") for n in names}))


def family_regexes() -> list[str]:
    """RE2 regexes (anchored by Prometheus) of the names to read, both spellings: one
    per histogram family (its buckets, sum and count), then one of every gauge, counter
    and info series together (a few series per stream each)."""
    histograms = sorted({f for families in HISTOGRAM_SOURCES.values() for f in families})
    out = [f"vllm[:_]{re.escape(f.removeprefix('vllm:'))}_(bucket|sum|count)" for f in histograms]
    out.append(f"vllm[:_]({_alternatives(_scalar_names())})")
    return out


def name_regex() -> str:
    """One RE2 regex for every sample name read, both spellings."""
    names = [
        f"{f}_{part}"
        for families in HISTOGRAM_SOURCES.values()
        for f in families
        for part in ("bucket", "sum", "count")
    ]
    return f"vllm[:_]({_alternatives([*names, *_scalar_names()])})"


def canonical_name(name: str) -> str:
    """``vllm_x`` → ``vllm:x`` (the exposed name); other names unchanged."""
    return "vllm:" + name[5:] if name.startswith("vllm_") else name


def target_name(value: str) -> str:
    """A target name the rest of phasewatch accepts (letters, digits, ``_.:@-``)."""
    return _TARGET_NAME.sub("_", value)[-128:] or "prometheus"


class PageSet:
    """Samples grouped by target and timestamp, added one answer at a time."""

    def __init__(self, target_label: str = "instance") -> None:
        self.target_label = target_label
        self.pages: Pages = {}
        self._targets: dict[str, str] = {}  # label value → target name

    def add(self, series: Sequence[Series]) -> None:
        """Add one answer's series (every spelling of a name it holds)."""
        label = self.target_label
        targets = self._targets
        chosen: dict[tuple[str, str, tuple[tuple[str, str], ...]], tuple[bool, list[Series]]] = {}
        for s in series:
            raw = s.labels.get("__name__", "")
            if not raw.startswith(("vllm:", "vllm_")):
                continue
            value = s.labels.get(label, "")
            target = targets.get(value)
            if target is None:
                target = targets[value] = target_name(value)
            labels = tuple(
                sorted((k, v) for k, v in s.labels.items() if k != "__name__" and k != label)
            )
            key = (target, canonical_name(raw), labels)
            colon = raw.startswith("vllm:")
            have = chosen.get(key)
            if have is None or (colon and not have[0]):
                chosen[key] = (colon, [s])
            elif colon == have[0]:
                have[1].append(s)  # the same series in several parts
        pages = self.pages
        for (target, name, labels), (_, parts) in chosen.items():
            by_ts = pages.get(target)
            if by_ts is None:
                by_ts = pages[target] = {}
            points = parts[0].points if len(parts) == 1 else _joined(parts)
            for ts, v in points:
                page = by_ts.get(ts)
                if page is None:
                    page = by_ts[ts] = []
                page.append(Sample(name, labels, v))


def _joined(parts: list[Series]) -> list[tuple[float, float]]:
    """The points of one series given in several parts, each time once."""
    return sorted({ts: value for part in parts for ts, value in part.points}.items())
