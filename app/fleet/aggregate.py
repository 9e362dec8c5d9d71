"""Fleet windows: the replicas of one model summed into one window. Pure.

A **fleet** is every stream with the same ``model_name`` (and the same values of the
configured ``fleet.group_by`` target labels, e.g. ``cluster``). Its window ``(start,
end]`` is made from each replica's own window over the same ``(start, end]`` — aligned
by window, not by scrape time: replicas are scraped at different instants, and each
replica's interval deltas already belong to the window containing their end.

* **Histograms** are summed bucket by bucket (``sum_histogram_deltas``), so the fleet's
  percentiles are ``histogram_quantile(q, sum by (le) (increase(h_bucket[w])))`` — the
  percentile of all requests, never an average of per-replica percentiles. Replicas whose
  bucket layout differs from the one holding most observations are left out of that
  signal (and named in ``notes``): summing different layouts is meaningless.
* **Counters** (increases) add up; **rates** are the sum of the replicas' rates.
* **running / waiting** (and the ``waiting_*`` reasons, the ``kv_fetch_*`` stages) add
  up: ``avg``, ``first`` and ``last`` exactly, ``max`` as the sum of the replicas' maxima —
  an upper bound, since replicas peak at different moments.
* **KV usage** is per replica by nature: the fleet's ``avg`` is the mean of the replicas'
  averages, its ``max`` the highest replica's maximum (``kv_mean``/``kv_max``).
* ``covered`` is the replicas' mean coverage, ``intervals`` their total, ``reset`` any
  replica's, ``missing`` the signals no replica carried; ``gauge_span`` the replicas'
  mean, and ``derived`` is computed from the fleet's own sums (``windows.derive``).

The fleet window's ``target`` is the fleet's name (``llama`` or
``llama{cluster=eu-1}``), so ``diagnose()`` can judge it like any stream.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from app.model import QUANTILES, GaugeStats, HistogramDelta, Window
from app.probeconfig import PROBE_LABEL
from app.windows.aggregate import derive
from app.windows.exact import sum_histogram_deltas
from app.windows.probefacts import is_probe_window
from app.windows.quantile import quantiles_of_delta

__all__ = ["FleetKey", "FleetWindow", "fleet_key", "fleet_window", "group_streams"]

SUMMED_GAUGES = (
    "running",
    "waiting",
    "waiting_capacity",
    "waiting_deferred",
    "kv_fetch_waiting_to_start",
    "kv_fetch_in_progress",
    "kv_fetch_completed_waiting",
)


@dataclass(frozen=True, slots=True, order=True)
class FleetKey:
    """A fleet: a model name plus the values of the ``group_by`` labels."""

    model_name: str
    labels: tuple[tuple[str, str], ...] = ()

    @property
    def name(self) -> str:
        if not self.labels:
            return self.model_name
        inner = ",".join(f"{k}={v}" for k, v in self.labels)
        return f"{self.model_name}{{{inner}}}"

    def to_dict(self) -> dict[str, object]:
        return {"name": self.name, "model_name": self.model_name, "labels": dict(self.labels)}


def fleet_key(model_name: str, labels: Mapping[str, str], group_by: Sequence[str]) -> FleetKey:
    """The fleet of a stream; a target without a ``group_by`` label groups under ``""``."""
    return FleetKey(model_name, tuple((k, labels.get(k, "")) for k in group_by))


def group_streams(
    streams: Iterable[tuple[str, str]],
    labels_of: Mapping[str, Mapping[str, str]],
    group_by: Sequence[str] = (),
) -> dict[FleetKey, list[str]]:
    """(target, model_name) pairs → the targets of each fleet, sorted. A probe's target
    (labelled ``probe``: ``app.sources.probe``) asks a model's servers; it is none of
    them, and no fleet's replica."""
    out: dict[FleetKey, list[str]] = {}
    for target, model in streams:
        labels = labels_of.get(target, {})
        if PROBE_LABEL in labels:
            continue
        key = fleet_key(model, labels, group_by)
        out.setdefault(key, []).append(target)
    return {k: sorted(set(v)) for k, v in sorted(out.items())}


@dataclass(frozen=True, slots=True)
class FleetWindow:
    """A fleet's summed window and the replica windows it was made from.

    ``replicas`` are the member windows that had data (deltas or gauge samples);
    ``absent`` the members that had none in the window (down, or gone).
    """

    key: FleetKey
    window: Window
    replicas: tuple[Window, ...]
    absent: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()

    @property
    def kv_mean(self) -> float | None:
        g = self.window.gauges.get("kv_usage")
        return g.avg if g is not None else None

    @property
    def kv_max(self) -> float | None:
        g = self.window.gauges.get("kv_usage")
        return g.max if g is not None else None


def _has_data(w: Window) -> bool:
    return w.intervals > 0 or bool(w.gauges)


def _sum_histograms(replicas: Sequence[Window], notes: list[str]) -> dict[str, HistogramDelta]:
    out: dict[str, HistogramDelta] = {}
    names = sorted({n for w in replicas for n in w.histograms})
    for name in names:
        layouts: dict[tuple[float, ...], list[tuple[str, HistogramDelta]]] = {}
        for w in replicas:
            hd = w.histograms.get(name)
            if hd is not None:
                layouts.setdefault(hd.bounds, []).append((w.target, hd))
        chosen = max(layouts.values(), key=lambda group: sum(hd.count for _, hd in group))
        summed = sum_histogram_deltas([hd for _, hd in chosen])
        if summed is not None:
            out[name] = summed
        if len(layouts) > 1:
            left = sorted(t for group in layouts.values() if group is not chosen for t, _ in group)
            notes.append(f"{name}: {', '.join(left)} use other buckets and are left out")
    return out


def _gauges(replicas: Sequence[Window]) -> dict[str, GaugeStats]:
    out: dict[str, GaugeStats] = {}
    names = sorted({n for w in replicas for n in w.gauges})
    for name in names:
        stats = [w.gauges[name] for w in replicas if name in w.gauges]
        avgs = [s.avg for s in stats if s.avg is not None]
        maxes = [s.max for s in stats if s.max is not None]
        lasts = [s.last for s in stats if s.last is not None]
        firsts = [s.first for s in stats if s.first is not None]
        if name in SUMMED_GAUGES:
            out[name] = GaugeStats(
                math.fsum(avgs) if avgs else None,
                math.fsum(maxes) if maxes else None,
                math.fsum(lasts) if lasts else None,
                math.fsum(firsts) if firsts else None,
            )
        else:
            out[name] = GaugeStats(
                statistics.fmean(avgs) if avgs else None,
                max(maxes) if maxes else None,
                max(lasts) if lasts else None,
                max(firsts) if firsts else None,
            )
    return out


def fleet_window(
    key: FleetKey,
    members: Sequence[Window],
    *,
    start: float,
    end: float,
) -> FleetWindow:
    """Sum the member windows (each over the same ``(start, end]``) into the fleet's.

    A probe's window (``app.windows.probefacts``: a probe of the model, not a replica of
    it) is left out: its answers are no server's requests."""
    notes: list[str] = []
    members = [w for w in members if not is_probe_window(w)]
    replicas = [w for w in members if _has_data(w)]
    absent = tuple(sorted(w.target for w in members if not _has_data(w)))
    histograms = _sum_histograms(replicas, notes)
    labels = [label for label, _ in QUANTILES]
    qs = [q for _, q in QUANTILES]
    quantiles = {
        name: dict(zip(labels, quantiles_of_delta(qs, hd), strict=True))
        for name, hd in histograms.items()
    }
    increases: dict[str, float] = {}
    rates: dict[str, float | None] = {}
    for name in sorted({n for w in replicas for n in w.increases}):
        increases[name] = math.fsum(w.increases[name] for w in replicas if name in w.increases)
        known = [r for w in replicas if (r := w.rates.get(name)) is not None]
        rates[name] = math.fsum(known) if known else None
    covered = statistics.fmean([w.covered for w in replicas]) if replicas else 0.0
    missing: set[str] = set.intersection(*(set(w.missing) for w in replicas)) if replicas else set()
    if not replicas:
        missing = {"ttft", "itl", "running", "waiting", "kv_usage"}
    means = {n: (hd.sum / hd.count if hd.count else None) for n, hd in histograms.items()}
    observations = {n: hd.count for n, hd in histograms.items()}
    gauges = _gauges(replicas)
    spans = [w.gauge_span for w in replicas if w.gauge_span > 0]
    gauge_span = statistics.fmean(spans) if spans else 0.0
    window = Window(
        target=key.name,
        model_name=key.model_name,
        start=start,
        end=end,
        quantiles=quantiles,
        means=means,
        observations=observations,
        increases=increases,
        rates=rates,
        gauges=gauges,
        histograms=histograms,
        covered=covered,
        intervals=sum(w.intervals for w in replicas),
        reset=any(w.reset for w in replicas),
        missing=tuple(sorted(missing)),
        gauge_span=gauge_span,
        derived=derive(
            covered=covered,
            quantiles=quantiles,
            means=means,
            observations=observations,
            increases=increases,
            rates=rates,
            gauges=gauges,
            gauge_span=gauge_span,
        ),
    )
    return FleetWindow(key, window, tuple(replicas), absent, tuple(notes))
