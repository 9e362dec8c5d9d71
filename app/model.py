"""Frozen records shared by every layer: samples, snapshots, deltas and windows.

The core (``windows``, ``diagnose``, alert state) only ever sees these types; the edges
(``scrape``, ``sources``, ``store``) build them. Nothing here does I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import NamedTuple


class Sample(NamedTuple):
    """One exposition sample line: full sample name, labels, value, optional timestamp."""

    name: str
    labels: tuple[tuple[str, str], ...]
    value: float
    timestamp: float | None = None


@dataclass(frozen=True, slots=True)
class Histogram:
    """A cumulative histogram as read from one scrape (engines already folded).

    ``bounds`` are the finite upper bounds, ascending; ``counts`` are cumulative and have
    one more entry than ``bounds`` (the last one is the ``+Inf`` bucket).
    """

    bounds: tuple[float, ...]
    counts: tuple[float, ...]
    sum: float
    count: float


# Canonical signals (docs/vllm-signals.md). The core sees only these names.
HISTOGRAM_SIGNALS: tuple[str, ...] = (
    "ttft",
    "itl",
    "tpot",
    "e2e",
    "queue_time",
    "prefill_time",
    "decode_time",
    "prompt_len",
    "gen_len",
    "step_tokens",
)
GAUGE_SIGNALS: tuple[str, ...] = ("running", "waiting", "kv_usage", "prefix_hit_rate")
COUNTER_SIGNALS: tuple[str, ...] = (
    "preemptions",
    "prompt_tokens",
    "generation_tokens",
    "prefix_queries",
    "prefix_hits",
)
# Signals every diagnosis needs; a stream lacking one of these reports it as missing.
CORE_SIGNALS: tuple[str, ...] = ("ttft", "itl", "running", "waiting", "kv_usage")
# Read when the page carries them, never listed in ``missing``: their families exist
# only in some vLLM versions (``waiting_*`` 0.20+, ``prompt_tokens_*`` by source 0.16+,
# ``external_prefix_*`` 0.12+, ``admission_rejections`` 0.33+) or only with a feature
# configured (``spec_*``: speculative decoding), so their absence says nothing wrong.
# Where each comes from: ``docs/vllm-signals.md``.
OPTIONAL_GAUGE_SIGNALS: tuple[str, ...] = (
    "waiting_capacity",
    "waiting_deferred",
    # A KV consumer only (disaggregated decode side): waiting requests by KV-load stage.
    "kv_fetch_waiting_to_start",
    "kv_fetch_in_progress",
    "kv_fetch_completed_waiting",
    # SGLang with speculative decoding: the accept length (1 + accepted drafts per
    # step) of its last decode log; 0 without speculation (not kept).
    "spec_accept_length",
)
OPTIONAL_COUNTER_SIGNALS: tuple[str, ...] = (
    "prompt_tokens_local_compute",
    "prompt_tokens_local_cache_hit",
    "prompt_tokens_external_kv_transfer",
    "external_prefix_queries",
    "external_prefix_hits",
    "spec_drafts",
    "spec_draft_tokens",
    "spec_accepted_tokens",
    "admission_rejections",
    # The NIXL KV connector (disaggregated prefill/decode): transfers that failed, failed
    # notifications, requests whose KV lease expired on the prefill side, completion
    # notifications that came after it (``docs/pd-fleets.md``).
    "kv_xfer_failures",
    "kv_failed_notifications",
    "kv_expired",
    "kv_notifications_after_expiry",
)
# The NIXL KV connector's histograms, one observation per successful transfer: its
# duration, the time to post it, its bytes and its descriptors (``docs/pd-fleets.md``).
OPTIONAL_HISTOGRAM_SIGNALS: tuple[str, ...] = (
    "kv_xfer_time",
    "kv_post_time",
    "kv_xfer_bytes",
    "kv_xfer_descriptors",
)

# A probe's stream (``app.sources.probe``: target = the probe's name): what a client saw
# of each answer, what the server reported of its own work on it, and — for a probe of a
# scraped target — that target's page over the same time. Their own names, so nothing
# that sums servers' streams (fleets, SLOs) counts a probe as a request. Seconds and
# tokens; ``docs/probes.md`` says what each one is.
PROBE_HISTOGRAM_SIGNALS: tuple[str, ...] = (
    "probe_connect",  # TCP (+TLS) connection
    "probe_ttfb",  # request sent → answer's headers
    "probe_ttft",  # the client's time to first token (from the start, connection and all)
    "probe_itl",  # between output events, as the client received them
    "probe_total",  # the whole answer
    "probe_server_ttft",  # the server's own TTFT for the request, where it reported it
    "probe_gap",  # probe_ttft − probe_server_ttft, per request
    "probe_page_ttft",  # the scraped target's own TTFT histogram over the same time
)
PROBE_COUNTER_SIGNALS: tuple[str, ...] = (
    "probe_attempts",
    "probe_failures",
    "probe_timeouts",  # failures without a complete answer in the probe's timeout
    "probe_page_up",  # attempts that ended while the scraped target's /metrics answered
    "probe_output_tokens",
    "probe_decode_tokens",  # output tokens after the first…
    "probe_decode_seconds",  # …over the client's first-to-last output event
    "probe_server_prefill_tokens",  # the server's own: prompt tokens…
    "probe_server_prefill_seconds",  # …in its prefill (Ollama: prompt evaluation)
    "probe_server_decode_tokens",  # generated tokens…
    "probe_server_decode_seconds",  # …in its decode (Ollama: evaluation)
    "probe_page_generation_tokens",  # the scraped target's generated tokens meanwhile
)


@dataclass(frozen=True, slots=True)
class StreamSnapshot:
    """Cumulative state of one stream (target, model_name) at one scrape.

    ``counters`` also carries ``finished:<reason>`` entries from
    ``vllm:request_success_total``. ``engines`` keeps the per-engine gauges
    (``{"0": {"running": 3.0, ...}}``) for drill-down; everything else is folded.
    ``missing`` lists canonical signals the page did not carry.
    """

    model_name: str
    histograms: dict[str, Histogram] = field(default_factory=dict)
    counters: dict[str, float] = field(default_factory=dict)
    gauges: dict[str, float] = field(default_factory=dict)
    engines: dict[str, dict[str, float]] = field(default_factory=dict)
    info: dict[str, str] = field(default_factory=dict)
    missing: tuple[str, ...] = ()
    # "blocks" for vLLM 0.8.x gpu_prefix_cache_* counters, else "tokens".
    prefix_unit: str = "tokens"
    # Signals the page carried but that were left out of this scrape (invalid values,
    # conflicting duplicate series): also in ``missing``; a cumulative one keeps its
    # previous value as the baseline of the next delta (app.sources.process).
    withheld: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Snapshot:
    """Everything one scrape of one target yielded, already normalised."""

    target: str
    ts: float
    streams: dict[str, StreamSnapshot]
    metrics_disabled: bool = False
    parse_errors: int = 0
    # What the scrape left out while the rest of it was used (see ``PARTIAL_KINDS``).
    problems: tuple[Problem, ...] = ()
    # The engine whose page this is: "vllm" or "sglang" ("": no engine family on it;
    # ``app.scrape.normalize``).
    engine_kind: str = "vllm"


class ErrorKind(StrEnum):
    """Why a scrape failed, or what a used scrape left out (``PARTIAL_KINDS``).

    A clean scrape carries no error kind.
    """

    REFUSED = "refused"
    TIMEOUT = "timeout"
    HTTP_STATUS = "http_status"
    TOO_LARGE = "too_large"
    NOT_PROMETHEUS = "not_prometheus"
    METRICS_DISABLED = "metrics_disabled"
    BUCKET_LAYOUT_CHANGED = "bucket_layout_changed"
    TOO_MANY_SERIES = "too_many_series"
    CONNECT = "connect"
    TRUNCATED = "truncated"
    # The page's last line is bad (cut mid-line): the complete lines are used and what the
    # cut could make wrong is left out (``app.scrape.cutline``); a partial kind.
    CUT_LAST_LINE = "cut_last_line"
    OTHER = "other"
    TOO_MANY_STREAMS = "too_many_streams"
    INVALID_VALUES = "invalid_values"
    DUPLICATE_SERIES = "duplicate_series"
    # A vllm: series over scrape.label_limit, label_name_length_limit or
    # label_value_length_limit (``app.scrape.label_limits``): the page is refused whole.
    LABEL_LIMIT = "label_limit"


# Kinds of a scrape that was used with something left out: the target is up (its scrape
# record is ok and names the first of them), everything else on the page flows.
PARTIAL_KINDS: frozenset[ErrorKind] = frozenset(
    {
        ErrorKind.TOO_MANY_STREAMS,
        ErrorKind.INVALID_VALUES,
        ErrorKind.DUPLICATE_SERIES,
        ErrorKind.CUT_LAST_LINE,
    }
)


@dataclass(frozen=True, slots=True)
class Problem:
    """One thing a used scrape left out: its kind (in ``PARTIAL_KINDS``) and what."""

    kind: ErrorKind
    detail: str


@dataclass(frozen=True, slots=True)
class HistogramDelta:
    """Increase of one histogram over an interval, stored sparse.

    ``buckets`` maps a bucket index (into ``bounds`` + the ``+Inf`` bucket, so
    ``len(bounds)`` is ``+Inf``) to the increase of that bucket alone (not cumulative).
    Buckets that did not change are absent.
    """

    bounds: tuple[float, ...]
    buckets: dict[int, float]
    sum: float
    count: float


@dataclass(frozen=True, slots=True)
class IntervalDelta:
    """What changed in one stream between two consecutive successful scrapes.

    ``start``/``end`` are the scrape times. ``gauges`` are the values at ``end``.
    ``reset`` is true when any counter or histogram decreased (a restart) or changed
    bucket layout; the affected deltas are then the current cumulative values, as
    Prometheus' ``increase()`` does. ``members`` is how many scrape intervals it sums: 1
    for a stored delta, more for a sum of consecutive ones (``app.read.cells``), so a
    window's ``intervals`` still counts scrape intervals.
    """

    target: str
    model_name: str
    start: float
    end: float
    histograms: dict[str, HistogramDelta]
    counters: dict[str, float]
    gauges: dict[str, float]
    reset: bool = False
    missing: tuple[str, ...] = ()
    members: int = 1


@dataclass(frozen=True, slots=True)
class Quantile:
    """A histogram quantile. ``value`` is None with no observations.

    ``ge_top_bucket`` means the rank fell in the ``+Inf`` bucket: the true value is at
    least ``value`` (the highest finite bound) and must be shown as "≥ value".
    """

    value: float | None
    ge_top_bucket: bool = False


@dataclass(frozen=True, slots=True)
class GaugeStats:
    """Average and maximum of a gauge's samples inside a window (None when unsampled);
    ``first`` and ``last`` are its earliest and latest sample in the window."""

    avg: float | None
    max: float | None
    last: float | None = None
    first: float | None = None


QUANTILES: tuple[tuple[str, float], ...] = (("p50", 0.5), ("p90", 0.9), ("p99", 0.99))


@dataclass(frozen=True, slots=True)
class Derived:
    """Numbers derived from one window's signals, under the canonical names the
    diagnosis compares with a baseline and names as "what changed"
    (``app.windows.aggregate.derive`` computes them; ``docs/vllm-signals.md`` lists the
    inputs of each). Every one is None when an input is missing or the ratio is
    undefined (no request finished, no query, no draft) — never 0 for "unknown".

    Rates are per second over the window's covered time; ``*_mean`` are per request
    (finished requests for the token lengths, requests that got their first token for
    ``uncached_prompt_tokens_mean``); ``*_avg``/``*_max`` over the gauge samples.
    """

    completion_rate: float | None = None
    arrival_rate: float | None = None
    rejection_rate: float | None = None
    prompt_tokens_mean: float | None = None
    output_tokens_mean: float | None = None
    prompt_tokens_per_s: float | None = None
    generation_tokens_per_s: float | None = None
    uncached_prompt_tokens_per_s: float | None = None
    uncached_prompt_tokens_mean: float | None = None
    prefix_cache_hit_rate: float | None = None
    external_prefix_cache_hit_rate: float | None = None
    spec_decode_acceptance: float | None = None
    spec_decode_accepted_per_draft: float | None = None
    steps_per_s: float | None = None
    tokens_per_step_mean: float | None = None
    step_tokens_p99: float | None = None
    preemptions_rate: float | None = None
    running_avg: float | None = None
    waiting_avg: float | None = None
    waiting_capacity_avg: float | None = None
    waiting_deferred_avg: float | None = None
    kv_usage_avg: float | None = None
    kv_usage_max: float | None = None


DERIVED_SIGNALS: tuple[str, ...] = tuple(Derived.__dataclass_fields__)
"""The canonical names of the derived numbers, in the order of :class:`Derived`."""


@dataclass(frozen=True, slots=True)
class Window:
    """One stream's numbers over ``(start, end]``, the sum of its interval deltas.

    ``quantiles[signal][p]`` for p in ``p50``/``p90``/``p99``; ``means[signal]`` is
    Δsum/Δcount (None with no observations); ``observations[signal]`` is Δcount;
    ``increases[counter]`` and ``rates[counter]`` (per second over the covered time);
    ``gauges[signal]`` avg/max of the samples; ``histograms`` the summed deltas, kept so
    fleet views and SLO attainment can recompute from buckets. ``covered`` is the seconds
    of the window covered by deltas; ``intervals`` how many deltas were summed.
    ``derived`` holds the numbers computed from all of these
    (``app.windows.aggregate.derive``) under their canonical names. ``info`` is the
    stream's ``vllm:cache_config_info`` labels (``block_size``, ``num_gpu_blocks``,
    ``gpu_memory_utilization``…; ``StreamSnapshot.info``) as of the window's end, where
    the caller has the pages (empty: not known); deltas do not carry it.
    """

    target: str
    model_name: str
    start: float
    end: float
    quantiles: dict[str, dict[str, Quantile]]
    means: dict[str, float | None]
    observations: dict[str, float]
    increases: dict[str, float]
    rates: dict[str, float | None]
    gauges: dict[str, GaugeStats]
    histograms: dict[str, HistogramDelta]
    covered: float
    intervals: int
    reset: bool = False
    missing: tuple[str, ...] = ()
    # Seconds from the window's first gauge sample to its last (0 with fewer than two).
    gauge_span: float = 0.0
    derived: Derived = field(default_factory=Derived)
    info: Mapping[str, str] = field(default_factory=dict)
