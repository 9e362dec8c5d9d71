"""A window from its sums: the quantiles, means, rates, gauges and derived numbers of
:class:`~app.model.Window`, one definition for the raw deltas' accumulator
(:mod:`app.windows.aggregate`) and for roll-ups (:mod:`app.windows.rollup`).

The rules (which layout a histogram sums, when ``reset`` is set, what is ``missing``)
are :mod:`app.windows.aggregate`'s module docstring; here they are applied to sums the
caller already holds.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from app.model import (
    CORE_SIGNALS,
    QUANTILES,
    Derived,
    GaugeStats,
    HistogramDelta,
    Quantile,
    Window,
)
from app.windows.derived import derive
from app.windows.exact import ExactSum, HistogramSum
from app.windows.flat import FLAT_QUANTILES
from app.windows.quantile import quantiles_of_delta

__all__ = ["window_of_sums", "window_of_values"]


def window_of_sums(
    *,
    target: str,
    model_name: str,
    start: float,
    end: float,
    hist: Mapping[str, Mapping[tuple[float, ...], HistogramSum]],
    latest: Mapping[str, tuple[float, ...]],
    counters: Mapping[str, ExactSum],
    gauges: Mapping[str, GaugeStats],
    missing: Iterable[str],
    covered: ExactSum,
    intervals: int,
    resets: int,
    gauge_span: float,
    lean: bool = False,
) -> Window:
    """The window of what an accumulator holds (the raw deltas' here, or roll-ups':
    :mod:`app.windows.rollup`): per histogram signal its sums by layout and the layout of
    the latest delta carrying it, the counters' sums, the gauges' statistics, the missing
    signals, the covered seconds, how many deltas and how many of them were resets."""
    return window_of_values(
        target=target,
        model_name=model_name,
        start=start,
        end=end,
        histograms={
            name: layouts[latest[name]].result(latest[name]) for name, layouts in hist.items()
        },
        layout_skipped=any(len(layouts) > 1 for layouts in hist.values()),
        increases={name: c.value() for name, c in counters.items()},
        gauges=gauges,
        missing=missing,
        covered=covered.value() if intervals else 0.0,
        intervals=intervals,
        resets=resets,
        gauge_span=gauge_span,
        lean=lean,
    )


def window_of_values(
    *,
    target: str,
    model_name: str,
    start: float,
    end: float,
    histograms: Mapping[str, HistogramDelta],
    layout_skipped: bool,
    increases: Mapping[str, float],
    gauges: Mapping[str, GaugeStats],
    missing: Iterable[str],
    covered: float,
    intervals: int,
    resets: int,
    gauge_span: float,
    lean: bool = False,
    known: Mapping[str, dict[str, Quantile]] | None = None,
) -> Window:
    """The window of its sums already rounded: each histogram signal's summed deltas of
    its latest layout (``layout_skipped``: the window held another layout too), the
    counters' increases, the gauges' statistics, the missing signals, the covered
    seconds (0 without deltas), how many deltas and resets, the gauges' time span.

    ``lean``: a window built only to be flattened into the API's object
    (``app.windows.flat.window_to_dict``, which reads only these): quantiles of the
    :data:`~app.windows.flat.FLAT_QUANTILES` histograms alone and no derived numbers —
    never for the rules, which read the rest. ``known``: percentiles already computed of
    these same histograms (a stored roll-up's), used as they are."""
    hists = {name: histograms[name] for name in sorted(histograms)}
    labels = [label for label, _ in QUANTILES]
    qs = [q for _, q in QUANTILES]
    known = known or {}
    quantiles = {
        name: known[name]
        if name in known
        else dict(zip(labels, quantiles_of_delta(qs, hd), strict=True))
        for name, hd in hists.items()
        if not lean or name in FLAT_QUANTILES
    }
    means = {name: (hd.sum / hd.count if hd.count != 0 else None) for name, hd in hists.items()}
    observations = {name: hd.count for name, hd in hists.items()}
    incs = {name: increases[name] for name in sorted(increases)}
    rates = {name: (v / covered if covered > 0 else None) for name, v in incs.items()}
    gauge_stats = {name: gauges[name] for name in sorted(gauges)}
    seen = set(hists) | set(incs) | set(gauge_stats)
    missed = set(missing) | {s for s in CORE_SIGNALS if s not in seen}
    return Window(
        target=target,
        model_name=model_name,
        start=start,
        end=end,
        quantiles=quantiles,
        means=means,
        observations=observations,
        increases=incs,
        rates=rates,
        gauges=gauge_stats,
        histograms=hists,
        covered=covered,
        intervals=intervals,
        reset=resets > 0 or layout_skipped,
        missing=tuple(sorted(missed)),
        gauge_span=gauge_span,
        derived=Derived()
        if lean
        else derive(
            covered=covered,
            quantiles=quantiles,
            means=means,
            observations=observations,
            increases=incs,
            rates=rates,
            gauges=gauge_stats,
            gauge_span=gauge_span,
        ),
    )
