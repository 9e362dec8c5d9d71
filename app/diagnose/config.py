"""Every threshold the diagnosis uses, in one place, with the reason for its default.

SLOs are per stream: ``slo_for(target, model_name)`` picks the most specific override
(target and model, then target, then model — a target override beats a model override)
and falls back to the defaults, which are MLPerf's Llama-3.1-8B server scenario (TTFT
p99 2 s, TPOT p99 100 ms). It is the one SLO lookup; the settings' ``slo`` section is
turned into these overrides by ``app.evaluate.settings``, never here.
"""

from __future__ import annotations

from dataclasses import dataclass

from app.diagnose.roofline import Hardware


@dataclass(frozen=True, slots=True)
class Slo:
    """Latency objectives of one stream, in seconds."""

    ttft_p99: float = 2.0
    itl_p99: float = 0.1


@dataclass(frozen=True, slots=True)
class SloOverride:
    """SLOs for one target and/or model; ``None`` fields keep the default."""

    target: str | None = None
    model_name: str | None = None
    ttft_p99: float | None = None
    itl_p99: float | None = None

    def matches(self, target: str, model_name: str) -> bool:
        return (self.target is None or self.target == target) and (
            self.model_name is None or self.model_name == model_name
        )

    @property
    def specificity(self) -> int:
        # target+model beats target alone, which beats model alone.
        return (2 if self.target is not None else 0) + (1 if self.model_name is not None else 0)


@dataclass(frozen=True, slots=True)
class DiagnosisConfig:
    """SLOs and thresholds. One default configuration serves every deployment.

    Rules (``classify.py``) and hint ranking (``hints.py``) read only these fields.
    """

    # --- SLOs (seconds) ------------------------------------------------------------------
    slo_ttft_p99: float = 2.0
    slo_itl_p99: float = 0.1
    slo_overrides: tuple[SloOverride, ...] = ()

    # --- KV-cache pressure ---------------------------------------------------------------
    # The pool is "full" from 0.90 (vLLM dashboards orange at 0.9, llm-d 0.90): past it,
    # a new sequence or the next block of a running one may not fit.
    kv_usage_high: float = 0.90

    # --- queueing --------------------------------------------------------------------------
    # "Requests wait": on average at least one request is waiting for admission. A single
    # waiting sample is normal (a request that arrived between two engine steps).
    waiting_min: float = 1.0
    # Queue time is the larger part of TTFT: admission, not prefill, makes the first
    # token late.
    queue_share_min: float = 0.5

    # --- decode sub-cause ------------------------------------------------------------------
    # ITL p99 / p50 at or above this means the SLO is broken by a tail of slow steps, not
    # by every step: decode-only steps vary little with batch and context (< 2×); a step
    # that carries a prefill chunk costs several decode steps.
    itl_tail_ratio: float = 2.5
    # A step with this many times more tokens than running sequences carries a prefill
    # chunk (a decode-only step computes one token per running sequence).
    step_chunk_ratio: float = 4.0

    # --- data quality ------------------------------------------------------------------------
    # Fewer observations than this make a p99 little more than the maximum: the class is
    # kept but the confidence scales with sqrt(n / min_observations).
    min_observations: int = 20
    # More failed scrapes than this share, or less of the window covered by deltas than
    # ``min_coverage``, and the window cannot be judged at all.
    max_failed_scrape_share: float = 0.25
    min_coverage: float = 0.5

    # --- hint ranking (evidence that moves one hint above another) -------------------------
    # Prefix-cache hit ratio below this: most prompt tokens are prefilled again.
    prefix_hit_low: float = 0.3
    # Mean prompt at or above this many tokens is "long": prefill cost grows at least
    # linearly with it (physics: a 2,000-token prompt vs 200 makes TTFT jump).
    long_prompt_tokens: float = 1000.0
    # Mean context (prompt + output) at or above this means a big KV read every step.
    long_context_tokens: float = 4000.0
    # Below this KV usage there is room to admit more sequences (--max-num-seqs up).
    kv_headroom: float = 0.7
    # Chunked-prefill budget that favours ITL (physics: lower ≈ 2048 → better ITL).
    itl_friendly_batched_tokens: float = 2048.0
    # Measured decode speed at or above this share of the roofline ceiling: the hardware,
    # not the serving stack, sets the pace.
    near_ceiling_efficiency: float = 0.7

    # --- roofline (optional) -----------------------------------------------------------------
    hardware: Hardware | None = None

    def slo_for(self, target: str, model_name: str) -> Slo:
        """The SLOs that apply to one stream (most specific matching override wins)."""
        ttft, itl = self.slo_ttft_p99, self.slo_itl_p99
        matching = [o for o in self.slo_overrides if o.matches(target, model_name)]
        for override in sorted(matching, key=lambda o: o.specificity):
            ttft = override.ttft_p99 if override.ttft_p99 is not None else ttft
            itl = override.itl_p99 if override.itl_p99 is not None else itl
        return Slo(ttft_p99=ttft, itl_p99=itl)


DEFAULT_CONFIG = DiagnosisConfig()
