"""Response models several routes share: a window, evidence and hints, SLO counts.

Every route declares the model of its answer, so ``/docs`` documents it and the API
fuzzing checks real answers against it. The answers are built by the domain's
``to_dict`` methods; a model lists their fields in the same order, so an answer
validated through it is written as before. Every model is an :class:`Answer`: a field
an answer carries that its model does not declare still goes out, never dropped
(``tests/test_api_schemas.py`` fails on it).
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, WithJsonSchema

__all__ = [
    "Answer",
    "EvidencePublic",
    "HintPublic",
    "Number",
    "SloCountsPublic",
    "TallyPublic",
    "WindowPublic",
]

Number = Annotated[int | float, WithJsonSchema({"type": "number"})]
"""A JSON number written as it came (an integer stays one), documented as ``number``."""


class Answer(BaseModel):
    """Base of the response models: undeclared fields pass through, never dropped."""

    model_config = ConfigDict(extra="allow")


class ProbeWindowPublic(Answer):
    """What a probe's window says (``app.windows.probefacts.ProbeFacts``): answers and
    failures; the client's TTFT, token gaps, connection and first byte, seconds; the
    server's own TTFT (per request, or its page's p50 over the window when estimated)
    and the client gap; decode and prefill tokens/s, the client's and the server's."""

    attempts: float
    failures: float
    timeouts: float
    page_up: float | None
    ttft_n: float
    ttft_mean: float | None
    ttft_p50: float | None
    ttft_p99: float | None
    ttft_p99_ge: bool
    itl_n: float
    itl_mean: float | None
    itl_p50: float | None
    itl_p99: float | None
    itl_p99_ge: bool
    connect_mean: float | None
    ttfb_mean: float | None
    total_mean: float | None
    server_ttft_n: float
    server_ttft_mean: float | None
    page_ttft_n: float | None
    page_ttft_p50: float | None
    page_generation_tokens: float | None
    client_gap: float | None
    client_gap_share: float | None
    client_gap_estimated: bool
    client_ttft: float | None
    decode_tps: float | None
    server_decode_tps: float | None
    server_prefill_tps: float | None
    server_prefill_mean: float | None


class WindowPublic(Answer):
    """One window ``(start, end]`` of one stream (``app.windows.flat.window_to_dict``).

    Per histogram signal (``ttft``, ``itl``, ``tpot``, ``e2e``, ``queue``, ``prefill``,
    ``decode``): p50/p90/p99 and mean in seconds and the count of observations; gauges
    as average and maximum; counters as rates per second. A value is null when the
    window has no observation of its signal or the page does not carry it (never 0).
    """

    target: str
    model_name: str
    start: float
    end: float
    ttft_p50: float | None
    ttft_p90: float | None
    ttft_p99: float | None
    ttft_mean: float | None
    ttft_count: float | None
    itl_p50: float | None
    itl_p90: float | None
    itl_p99: float | None
    itl_mean: float | None
    itl_count: float | None
    tpot_p50: float | None
    tpot_p90: float | None
    tpot_p99: float | None
    tpot_mean: float | None
    tpot_count: float | None
    e2e_p50: float | None
    e2e_p90: float | None
    e2e_p99: float | None
    e2e_mean: float | None
    e2e_count: float | None
    queue_p50: float | None
    queue_p90: float | None
    queue_p99: float | None
    queue_mean: float | None
    queue_count: float | None
    prefill_p50: float | None
    prefill_p90: float | None
    prefill_p99: float | None
    prefill_mean: float | None
    prefill_count: float | None
    decode_p50: float | None
    decode_p90: float | None
    decode_p99: float | None
    decode_mean: float | None
    decode_count: float | None
    running_avg: float | None
    running_max: float | None
    waiting_avg: float | None
    waiting_max: float | None
    kv_avg: float | None = Field(description="KV-cache usage, 0–1")
    kv_max: float | None
    preemptions_per_s: float | None
    prompt_tokens_per_s: float | None
    generation_tokens_per_s: float | None
    mean_prompt_len: float | None = Field(description="tokens")
    mean_gen_len: float | None = Field(description="tokens")
    prefix_hit_ratio: float | None
    requests_finished: float | None
    ge_top_bucket: list[str] = Field(
        description="the percentiles that fell in the +Inf bucket: lower bounds (≥)"
    )
    covered_s: float = Field(description="seconds of the window covered by scrapes")
    intervals: int = Field(description="scrape intervals summed")
    reset: bool = Field(description="a counter reset (a restart) inside the window")
    missing: list[str] = Field(description="signals the page does not carry")
    probe: ProbeWindowPublic | None = Field(
        None, description="a probe's stream only: what a client saw (docs/probes.md)"
    )


class EvidencePublic(Answer):
    """One comparison a rule made: ``signal`` ``value`` ``op`` ``threshold`` → ``holds``
    (null when it could not be made); ``ge`` marks ``value`` as a lower bound."""

    rule: str
    signal: str
    value: Number | None
    ge: bool
    op: str
    threshold: Number | None
    holds: bool | None
    unit: str
    note: str


class HintPublic(Answer):
    """One thing to change: the flag or action (with its value where one follows), and
    why it helps here; ``evidence`` the window's reading that justifies it."""

    id: str
    title: str
    action: str
    why: str
    # Rows stored before hints carried their evidence lack it.
    evidence: str = Field(default="", description="the reading behind it, with its numbers")
    setting: dict[str, float] | None = Field(
        default=None, description="the knob the action sets, in the what-if twin's words"
    )
    effect: dict[str, Any] | None = Field(
        default=None,
        description="the what-if twin's predicted effect on TTFT and ITL p99 (verdict, text)",
    )


class TallyPublic(Answer):
    """Good and total events of one objective; ``good_min``/``good_max`` bracket
    ``good`` by the histogram's resolution."""

    good: float
    total: float
    good_min: float
    good_max: float
    ratio: float | None = Field(description="good / total; null with no events")
    interpolated: bool = Field(description="the bound fell inside a bucket")
    beyond_top: bool = Field(description="the bound is above the highest finite bucket")


class SloCountsPublic(Answer):
    """An SLO's counts over a window: per objective, and the finished requests."""

    objectives: dict[str, TallyPublic]
    finished: float | None
    error_share: float | None
    abort_share: float | None
    covered_s: float = Field(description="replica-seconds of data counted")
