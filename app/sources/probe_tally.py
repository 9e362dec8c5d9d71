"""A probe's answers added up into a cumulative stream, as a server's page adds up its
requests: every answer is observed into histograms and counters that only grow, so the
store takes interval deltas of it and windows sum them like any scraped stream's.

What each signal is: ``app.model.PROBE_HISTOGRAM_SIGNALS`` and ``PROBE_COUNTER_SIGNALS``.
Latency histograms share one bucket layout (:data:`LATENCY_BOUNDS`, seconds), fine
below 100 ms where a frontend's share shows and up to five minutes.

**The scraped target beside it.** A probe of a scraped target also follows that
target's page between its answers (:meth:`ProbeTally.add_page`): the increase of the
page's ``ttft`` histogram and ``generation_tokens`` counter since the previous reading
is added to ``probe_page_ttft`` and ``probe_page_generation_tokens``. A window of the
probe's stream then holds the server's own TTFTs and tokens over the same span — the
estimate of the server's TTFT for a probe that reports none, and the progress that tells
a stalled engine from a slow one — with no second stream to align. A page that
restarted (a count fell) or changed its buckets starts again from its current values, as
``increase()`` reads a reset; a page reading lost (the target not scraped yet) adds
nothing.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from app.model import Histogram, StreamSnapshot
from app.scrape.probe_fetch import ProbeResult
from app.windows.delta import histogram_delta

__all__ = ["LATENCY_BOUNDS", "ProbeTally"]

LATENCY_BOUNDS: tuple[float, ...] = (
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.5, 0.75,
    1.0, 1.5, 2.0, 3.0, 5.0, 7.5, 10.0, 15.0, 20.0, 30.0, 60.0, 120.0, 300.0,
)  # fmt: skip

_OWN_HISTOGRAMS = (
    "probe_connect",
    "probe_ttfb",
    "probe_ttft",
    "probe_itl",
    "probe_total",
    "probe_server_ttft",
    "probe_gap",
)


@dataclass
class _Hist:
    """A cumulative histogram being filled (counts per bucket, not cumulative)."""

    bounds: tuple[float, ...]
    buckets: list[float] = field(default_factory=list)
    sum: float = 0.0
    count: float = 0.0

    def __post_init__(self) -> None:
        if not self.buckets:
            self.buckets = [0.0] * (len(self.bounds) + 1)

    def observe(self, v: float) -> None:
        i = next((k for k, b in enumerate(self.bounds) if v <= b), len(self.bounds))
        self.buckets[i] += 1
        self.sum += v
        self.count += 1

    def cumulative(self) -> Histogram:
        counts, run = [], 0.0
        for c in self.buckets:
            run += c
            counts.append(run)
        return Histogram(self.bounds, tuple(counts), self.sum, self.count)

    @classmethod
    def of(cls, h: Histogram) -> _Hist:
        buckets = [c - p for c, p in zip(h.counts, (0.0, *h.counts[:-1]), strict=True)]
        return cls(h.bounds, buckets, h.sum, h.count)


class ProbeTally:
    """One probe's cumulative stream (module docstring)."""

    def __init__(self, model_name: str) -> None:
        self.model_name = model_name
        self.hists = {name: _Hist(LATENCY_BOUNDS) for name in _OWN_HISTOGRAMS}
        self.page_ttft: _Hist | None = None
        self.counters: dict[str, float] = {
            name: 0.0
            for name in (
                "probe_attempts",
                "probe_failures",
                "probe_timeouts",
                "probe_output_tokens",
                "probe_decode_tokens",
                "probe_decode_seconds",
            )
        }
        self._page_before: tuple[Histogram | None, float | None] | None = None

    @classmethod
    def restore(cls, stream: StreamSnapshot) -> ProbeTally:
        """Continue from a stored snapshot of the stream (after a restart)."""
        tally = cls(stream.model_name)
        for name, h in stream.histograms.items():
            if name in tally.hists and h.bounds == LATENCY_BOUNDS:
                tally.hists[name] = _Hist.of(h)
            elif name == "probe_page_ttft":
                tally.page_ttft = _Hist.of(h)
        for name, value in stream.counters.items():
            if name.startswith("probe_"):
                tally.counters[name] = value
        return tally

    def _inc(self, name: str, by: float = 1.0) -> None:
        self.counters[name] = self.counters.get(name, 0.0) + by

    def add(self, r: ProbeResult, *, page_up: bool | None = None) -> None:
        """Observe one answer; ``page_up``: whether the probe's scraped target answered
        its scrapes meanwhile (None: the probe has no scraped target)."""
        self._inc("probe_attempts")
        if not r.ok:
            self._inc("probe_failures")
            if r.timed_out:
                self._inc("probe_timeouts")
        if page_up is not None:
            self._inc("probe_page_up", 1.0 if page_up else 0.0)
        for name, value in (
            ("probe_connect", r.connect),
            ("probe_ttfb", r.ttfb),
            ("probe_ttft", r.ttft),
        ):
            if value is not None:
                self.hists[name].observe(value)
        if r.ok:
            self.hists["probe_total"].observe(r.total)
        for gap in r.gaps:
            self.hists["probe_itl"].observe(gap)
        self._inc("probe_output_tokens", float(r.tokens))
        if r.decode_s is not None and r.tokens > 1:
            self._inc("probe_decode_tokens", float(r.tokens - 1))
            self._inc("probe_decode_seconds", r.decode_s)
        self._server(r)

    def _server(self, r: ProbeResult) -> None:
        s = r.server
        if s is None:
            return
        if s.ttft is not None and r.ttft is not None:
            self.hists["probe_server_ttft"].observe(s.ttft)
            self.hists["probe_gap"].observe(max(0.0, r.ttft - s.ttft))
        if s.prefill_s is not None and s.prefill_tokens is not None:
            self._inc("probe_server_prefill_tokens", float(s.prefill_tokens))
            self._inc("probe_server_prefill_seconds", s.prefill_s)
        if s.decode_s is not None and s.decode_tokens is not None and s.decode_tokens > 0:
            self._inc("probe_server_decode_tokens", float(s.decode_tokens))
            self._inc("probe_server_decode_seconds", s.decode_s)

    def add_page(self, page: StreamSnapshot | None) -> None:
        """Follow the scraped target's page (module docstring): add what its TTFT
        histogram and generated tokens grew by since the previous reading."""
        if page is None:
            return
        ttft = page.histograms.get("ttft")
        tokens = page.counters.get("generation_tokens")
        before = self._page_before
        self._page_before = (ttft, tokens)
        if before is None:
            # The first reading is the baseline; the page's counters exist from now on.
            self.counters.setdefault("probe_page_generation_tokens", 0.0)
            if ttft is not None and self.page_ttft is None:
                self.page_ttft = _Hist(ttft.bounds)
            return
        old_ttft, old_tokens = before
        if ttft is not None and old_ttft is not None:  # a new series is a baseline
            hd, _reset = histogram_delta(old_ttft, ttft)
            if self.page_ttft is None or self.page_ttft.bounds != hd.bounds:
                self.page_ttft = _Hist(hd.bounds)
            for i, inc in hd.buckets.items():
                self.page_ttft.buckets[i] += inc
            self.page_ttft.sum += hd.sum
            self.page_ttft.count += hd.count
        if tokens is not None and old_tokens is not None:
            grew = tokens - old_tokens if tokens >= old_tokens else tokens  # fell: a restart
            self._inc("probe_page_generation_tokens", grew)

    def stream(self) -> StreamSnapshot:
        """The cumulative stream now."""
        hists = {name: h.cumulative() for name, h in self.hists.items()}
        if self.page_ttft is not None:
            hists["probe_page_ttft"] = self.page_ttft.cumulative()
        return StreamSnapshot(
            model_name=self.model_name, histograms=hists, counters=dict(self.counters)
        )
