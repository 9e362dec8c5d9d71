"""The numbers the rules and hints read, derived once from a ``Window``.

Everything here is a plain reading of the window, with two derived quantities:

* **queue share** — of the request-seconds spent before a first token in the window,
  the share spent waiting for admission: waiting avg / (waiting avg + requests in
  prefill), the requests in prefill by Little's law (first tokens per second × mean
  prefill time). It describes the window itself, even while a queue builds or drains
  (then the TTFTs observed now reflect the queue of a while ago). Without
  ``prefill_time`` (V0 pages): mean wait (waiting avg / first-token rate) over mean TTFT.
  The ``queue_time`` histogram (vLLM ≥ 0.7) is observed only when a request *finishes*
  (docs/vllm-signals.md, "When vLLM observes"), so it describes requests admitted up to
  a whole generation earlier; it is the last fallback, and ``queue_time_share`` shows it
  beside the estimate. SGLang observes its ``queue_time_seconds`` when a request is
  admitted, and has no prefill-time histogram: on its streams the queue time comes first.
* **computed prompt tokens** — prompt tokens × (1 − prefix-cache hit ratio): the prefill
  work actually done.

``derived`` is the window's own ``Derived`` record (arrival and completion rates, hit
rate, uncached prompt tokens, speculative-decoding acceptance, waiting by reason…), the
same names a baseline carries, so a rule can set the window beside its stream's healthy
baseline. ``steps_counted`` says the page counts engine steps (the ``step_tokens``
histogram, ``vllm:iteration_tokens_total``, is on it): then no step in a window is
evidence, not absence. ``gauges_frozen``: every sample of the running, waiting and KV
gauges in the window had the same value (average = maximum); shown beside a stall, never
read by its rule (a scheduler that keeps admitting while its executor hangs moves them).

A value is ``None`` when the signal is missing or had no observations; ``missing`` says
which signals the window did not carry at all.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

from app.model import (
    Derived,
    GaugeStats,
    HistogramDelta,
    Quantile,
    Window,
)
from app.windows.probefacts import ProbeFacts, probe_facts
from app.windows.transferfacts import TransferFacts, transfer_facts


@dataclass(frozen=True, slots=True)
class Facts:
    """Readings of one window. Seconds for times, tokens for lengths, 0–1 for ratios."""

    window_seconds: float
    covered: float
    coverage: float
    samples: int
    ttft_n: float
    ttft_p50: float | None
    ttft_p99: float | None
    ttft_p99_ge: bool
    ttft_hist: HistogramDelta | None
    ttft_mean: float | None
    itl_n: float
    itl_p50: float | None
    itl_p50_ge: bool
    itl_p99: float | None
    itl_p99_ge: bool
    itl_hist: HistogramDelta | None
    itl_mean: float | None
    tpot_n: float
    tpot_p99: float | None
    tpot_p99_ge: bool
    tpot_hist: HistogramDelta | None
    queue_mean: float | None
    queue_n: float
    queue_share: float | None
    queue_share_source: str | None
    queue_time_share: float | None
    prefill_mean: float | None
    finished: float | None
    running_avg: float | None
    running_max: float | None
    waiting_avg: float | None
    waiting_max: float | None
    waiting_last: float | None
    # The first sample of each in the window (None: not sampled; a hand-built window
    # without it reads its average): requests present from the window's start.
    running_first: float | None
    waiting_first: float | None
    kv_avg: float | None
    kv_max: float | None
    preemptions: float | None
    prompt_tokens: float | None
    computed_prompt_tokens: float | None
    generation_tokens: float | None
    prefix_hit_ratio: float | None
    prefix_caching_off: bool | None
    prompt_len_mean: float | None
    gen_len_mean: float | None
    prompt_len_p99: float | None
    gen_len_p99: float | None
    step_n: float
    step_p50: float | None
    step_p99: float | None
    steps_counted: bool
    gauges_frozen: bool | None
    spec_draft_tokens: float | None
    missing: tuple[str, ...]
    derived: Derived
    # A probe's window (``app.windows.probefacts``): what a client saw beside what the server said.
    probe: ProbeFacts | None = None
    # A P/D member's window (``app.windows.transferfacts``): its KV transfer.
    transfer: TransferFacts | None = None
    # SGLang's ITL histogram is per token: each output event's interval divided among
    # the tokens it brought (vLLM's is one gap per event).
    itl_per_token: bool = False

    def numbers(self) -> dict[str, float | None]:
        """The numeric readings, for ``Diagnosis.facts`` (flags and lists left out)."""
        out: dict[str, float | None] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if isinstance(value, bool) or not isinstance(value, int | float | None):
                continue
            out[f.name] = None if value is None else float(value)
        if self.probe is not None:
            out.update(self.probe.numbers())
        if self.transfer is not None:
            out.update(self.transfer.numbers())
        return out


# Signals the rules and hints read. Optional ones refine the verdict; the core ones
# (``CORE_SIGNALS``) decide whether a window can be judged at all.
READ_HISTOGRAMS = (
    "ttft",
    "itl",
    "queue_time",
    "prefill_time",
    "prompt_len",
    "gen_len",
    "step_tokens",
)
# Read only where the page has one (never reported missing): the speculative-decoding
# rule's TPOT. A view that windows only some histograms must keep these too.
READ_IF_PRESENT_HISTOGRAMS = ("tpot",)
READ_GAUGES = ("running", "waiting", "kv_usage")
READ_COUNTERS = ("preemptions", "prompt_tokens", "generation_tokens")


def _missing(window: Window) -> tuple[str, ...]:
    """Read signals the window lacks: listed by the window, or absent from every field."""
    out = {s for s in window.missing if s in READ_HISTOGRAMS + READ_GAUGES + READ_COUNTERS}
    for sig in READ_HISTOGRAMS:
        if (
            sig not in window.observations
            and sig not in window.histograms
            and sig not in window.quantiles
        ):
            out.add(sig)
    for sig in READ_GAUGES:
        stats = window.gauges.get(sig)
        if stats is None or stats.avg is None:
            out.add(sig)
    out.update(sig for sig in READ_COUNTERS if sig not in window.increases)
    v0_gauge = window.gauges.get("prefix_hit_rate")
    if "prefix_queries" not in window.increases and (v0_gauge is None or v0_gauge.avg is None):
        out.add("prefix_queries")
    return tuple(sorted(out))


def _counted(window: Window, sig: str) -> bool:
    """Whether the window carries a histogram signal at all (observations or not)."""
    if sig in window.missing:
        return False
    return sig in window.observations or sig in window.histograms or sig in window.quantiles


def _frozen(window: Window, sigs: tuple[str, ...]) -> bool | None:
    """Whether every sample of these gauges equals its maximum (None: none sampled)."""
    seen = [
        g for s in sigs if (g := window.gauges.get(s)) and g.avg is not None and g.max is not None
    ]
    if not seen:
        return None
    return all(
        abs((g.avg or 0.0) - (g.max or 0.0)) <= 1e-9 * max(1.0, abs(g.max or 0.0)) for g in seen
    )


def _q(window: Window, sig: str, p: str) -> Quantile:
    return window.quantiles.get(sig, {}).get(p) or Quantile(None)


def _gauge(window: Window, sig: str) -> GaugeStats:
    return window.gauges.get(sig) or GaugeStats(None, None, None)


def _mean(window: Window, sig: str) -> float | None:
    if window.observations.get(sig, 0.0) <= 0:
        return None
    return window.means.get(sig)


def _finished(window: Window) -> float | None:
    reasons = [v for k, v in window.increases.items() if k.startswith("finished:")]
    return sum(reasons) if reasons else None


def _prefix(window: Window) -> tuple[float | None, bool | None]:
    """(hit ratio, caching off?) from the V1 counters, else the V0 gauge (-1 = off)."""
    queries = window.increases.get("prefix_queries")
    hits = window.increases.get("prefix_hits")
    prompt = window.increases.get("prompt_tokens")
    if queries is not None and queries > 0:
        return min(1.0, (hits or 0.0) / queries), False
    if queries is not None and prompt is not None and prompt > 0:
        # Prompts were prefilled but the cache was never asked: caching is off.
        return None, True
    gauge = _gauge(window, "prefix_hit_rate")
    if gauge.avg is not None:
        if gauge.avg < 0:
            return None, True
        return min(1.0, gauge.avg if gauge.avg <= 1 else gauge.avg / 100), False
    return None, None


def _queue_share(
    window: Window, ttft_mean: float | None, ttft_n: float, waiting_avg: float | None
) -> tuple[float | None, float | None, str | None]:
    """(queue share of time-to-first-token, mean wait, source) — module docstring."""
    if ttft_mean is None or ttft_mean <= 0:
        return None, None, None
    covered = window.covered or (window.end - window.start)
    if window.info.get("engine_kind") == "sglang" and _mean(window, "prefill_time") is None:
        # SGLang observes the queue time at admission, not at the finish: timely.
        queue_mean = _mean(window, "queue_time")
        if queue_mean is not None:
            return min(1.0, queue_mean / ttft_mean), queue_mean, "queue_time"
    if waiting_avg is not None and covered > 0 and ttft_n > 0:
        rate = ttft_n / covered
        wait = waiting_avg / rate
        prefill = _mean(window, "prefill_time")
        if prefill is not None:
            prefilling = rate * prefill  # Little's law for the prefill stage
            total = waiting_avg + prefilling
            return (waiting_avg / total if total > 0 else 0.0), wait, "request_seconds"
        return min(1.0, wait / ttft_mean), wait, "little"
    queue_mean = _mean(window, "queue_time")
    if queue_mean is not None:
        return min(1.0, queue_mean / ttft_mean), queue_mean, "queue_time"
    return None, None, None


def derive(window: Window) -> Facts:
    """Read a window into ``Facts``."""
    length = max(window.end - window.start, 0.0)
    ttft_p99, itl_p99, itl_p50 = (
        _q(window, "ttft", "p99"),
        _q(window, "itl", "p99"),
        _q(window, "itl", "p50"),
    )
    ttft_n = window.observations.get("ttft", 0.0)
    ttft_mean = _mean(window, "ttft")
    waiting = _gauge(window, "waiting")
    running = _gauge(window, "running")
    kv = _gauge(window, "kv_usage")
    share, queue_mean, source = _queue_share(window, ttft_mean, ttft_n, waiting.avg)
    prompt = window.increases.get("prompt_tokens")
    hit_ratio, caching_off = _prefix(window)
    # Scale by the hit ratio rather than subtract hits: the ratio is unit-free (hits and
    # queries count blocks on vLLM 0.8.x, tokens later).
    computed = None if prompt is None else prompt * (1.0 - (hit_ratio or 0.0))
    return Facts(
        window_seconds=length,
        covered=window.covered,
        samples=window.intervals,
        coverage=min(1.0, window.covered / length) if length > 0 else 0.0,
        ttft_n=ttft_n,
        ttft_p50=_q(window, "ttft", "p50").value,
        ttft_p99=ttft_p99.value,
        ttft_p99_ge=ttft_p99.ge_top_bucket,
        ttft_hist=window.histograms.get("ttft"),
        ttft_mean=ttft_mean,
        itl_n=window.observations.get("itl", 0.0),
        itl_p50=itl_p50.value,
        itl_p50_ge=itl_p50.ge_top_bucket,
        itl_p99=itl_p99.value,
        itl_p99_ge=itl_p99.ge_top_bucket,
        itl_hist=window.histograms.get("itl"),
        itl_mean=_mean(window, "itl"),
        tpot_n=window.observations.get("tpot", 0.0),
        tpot_p99=_q(window, "tpot", "p99").value,
        tpot_p99_ge=_q(window, "tpot", "p99").ge_top_bucket,
        tpot_hist=window.histograms.get("tpot"),
        queue_mean=queue_mean,
        queue_n=window.observations.get("queue_time", 0.0),
        queue_share=share,
        queue_share_source=source,
        queue_time_share=(
            None
            if ttft_mean is None or _mean(window, "queue_time") is None
            else min(1.0, (_mean(window, "queue_time") or 0.0) / ttft_mean)
        ),
        prefill_mean=_mean(window, "prefill_time"),
        finished=_finished(window),
        running_avg=running.avg,
        running_max=running.max,
        waiting_avg=waiting.avg,
        waiting_max=waiting.max,
        waiting_last=waiting.last,
        running_first=running.avg if running.first is None else running.first,
        waiting_first=waiting.avg if waiting.first is None else waiting.first,
        kv_avg=kv.avg,
        kv_max=kv.max,
        preemptions=window.increases.get("preemptions"),
        prompt_tokens=prompt,
        computed_prompt_tokens=computed,
        generation_tokens=window.increases.get("generation_tokens"),
        prefix_hit_ratio=hit_ratio,
        prefix_caching_off=caching_off,
        prompt_len_mean=_mean(window, "prompt_len"),
        gen_len_mean=_mean(window, "gen_len"),
        prompt_len_p99=_q(window, "prompt_len", "p99").value,
        gen_len_p99=_q(window, "gen_len", "p99").value,
        step_n=window.observations.get("step_tokens", 0.0),
        step_p50=_q(window, "step_tokens", "p50").value,
        step_p99=_q(window, "step_tokens", "p99").value,
        steps_counted=_counted(window, "step_tokens"),
        gauges_frozen=_frozen(window, ("running", "waiting", "kv_usage")),
        spec_draft_tokens=window.increases.get("spec_draft_tokens"),
        missing=_missing(window),
        derived=window.derived,
        probe=probe_facts(window),
        transfer=transfer_facts(window),
        itl_per_token=window.info.get("engine_kind") == "sglang",
    )
