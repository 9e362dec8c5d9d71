"""Every threshold the diagnosis uses, in one place, with the reason for its default.

SLOs are per stream: ``slo_for(target, model_name)`` picks the most specific override
(target and model, then target, then model — a target override beats a model override)
and falls back to the defaults, which are MLPerf's Llama-3.1-8B server scenario (TTFT
p99 2 s, TPOT p99 100 ms). It is the one SLO lookup; the settings' ``slo`` section is
turned into these overrides by ``app.evaluate.settings``, never here.

A server's engine settings (``max_num_seqs``, ``gpu_memory_utilization``…) are per target
the same way: ``server_for(target)`` (``app.diagnose.server``), built from the targets'
``server:`` blocks by ``app.evaluate.settings`` and from ``--server`` by the CLI.
"""

from __future__ import annotations

from dataclasses import dataclass

from app.diagnose.roofline import Hardware
from app.diagnose.server import ServerSettings


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
    # Waiting requests are mostly deferred (vLLM 0.20+ ``waiting_by_reason``: a LoRA
    # budget, a KV transfer, a blocked request), not short of capacity, from this share of
    # the waiting average: the larger part of the queue would not move with more capacity.
    deferred_share_min: float = 0.5

    # --- the KV transfer of disaggregated prefill/decode (``transfer.py``) --------------------
    # The transfer is the larger part of the wait for a first token from this share: the
    # first token is late because its KV is on the way, as queueing is judged.
    transfer_share_min: float = 0.5
    # More than this share of the transfers fail: each failed request errors (vLLM's
    # default kv_load_failure_policy "fail") or is prefilled again on the decode side.
    # 1 % is where peers start warning about an error share.
    transfer_failure_share_min: float = 0.01

    # --- speculative decoding ----------------------------------------------------------------
    # Fewer accepted draft tokens per draft than this (vLLM's mean acceptance length 1 + it
    # below 2): a verify step yields under two tokens per sequence, so speculation no longer
    # multiplies the tokens each weight read serves — the drafter is wrong on its first
    # token about half the time or more.
    spec_accepted_per_draft_low: float = 1.0

    # --- decode sub-cause ------------------------------------------------------------------
    # ITL p99 / p50 at or above this means the SLO is broken by a tail of slow steps, not
    # by every step: decode-only steps vary little with batch and context (< 2×); a step
    # that carries a prefill chunk costs several decode steps.
    itl_tail_ratio: float = 2.5
    # A step with this many times more tokens than running sequences carries a prefill
    # chunk (a decode-only step computes one token per running sequence).
    step_chunk_ratio: float = 4.0

    # --- against the stream's healthy baseline (sub-causes about what changed) ----------------
    # A window's number moved when it is at least this factor from the baseline's: a 60 s
    # window's rates scatter by about 10 % between healthy windows.
    baseline_noise_ratio: float = 1.1

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
    # The smallest budget a hint proposes when the one in force is already ITL-friendly
    # (it is halved): below it a prompt takes many steps and TTFT pays; separate prefill
    # and decode pools come next.
    batched_tokens_min: float = 512.0
    # Measured decode speed at or above this share of the roofline ceiling: the hardware,
    # not the serving stack, sets the pace.
    near_ceiling_efficiency: float = 0.7

    # --- numbers in the hints (``hints.py``) -------------------------------------------------
    # The highest --gpu-memory-utilization a hint proposes ("if nothing else shares the
    # GPU"): vLLM's default 0.9 leaves 10 % for other processes and fragmentation; 0.95
    # is as far as operators commonly go. Proposals move in steps of 0.05.
    gpu_memory_utilization_max: float = 0.95
    # A raised --max-num-seqs at most doubles the limit in one change (physics: change one
    # knob at a time; throughput grows nearly linearly with the batch until KV runs out).
    max_num_seqs_step: float = 2.0
    # The largest --max-num-batched-tokens a hint proposes for TTFT: vLLM's own default on
    # H100-class GPUs (8192); past it a step's prefill stalls decoding streams for long.
    batched_tokens_max: float = 8192.0

    # --- the servers' settings (``server.py``; a target's ``server:`` block) ---------------
    # ``server`` applies to every target (``--server KEY=VALUE``) and wins, field by
    # field, over the target's own settings in ``servers`` (target name → settings).
    server: ServerSettings = ServerSettings()
    servers: tuple[tuple[str, ServerSettings], ...] = ()

    # --- the frontend (a probe's stream: what a client sees beside what the server says) ---
    # A client's first token later than the server's own TTFT by more than this, seconds…
    # (a round trip across a region is tens of ms; 100 ms is past any healthy network)
    frontend_gap_min: float = 0.1
    # …and by more than this share of the client's TTFT: the larger part of the wait is
    # outside the engine (network, proxy, the API server's tokenising).
    frontend_gap_share: float = 0.5

    # --- roofline (optional) -----------------------------------------------------------------
    hardware: Hardware | None = None
    # Per target (a probe's ``device`` and model size); ``hardware`` for the others.
    hardware_by_target: tuple[tuple[str, Hardware], ...] = ()

    def hardware_for(self, target: str) -> Hardware | None:
        """The device and weights of one target's server: its own, else ``hardware``."""
        own = next((h for name, h in self.hardware_by_target if name == target), None)
        return own or self.hardware

    def server_for(self, target: str) -> ServerSettings:
        """The settings of one target's server: its own, with ``server``'s over them."""
        own = next((s for name, s in self.servers if name == target), ServerSettings())
        return own.merged(self.server)

    def slo_for(self, target: str, model_name: str) -> Slo:
        """The SLOs that apply to one stream (most specific matching override wins)."""
        ttft, itl = self.slo_ttft_p99, self.slo_itl_p99
        matching = [o for o in self.slo_overrides if o.matches(target, model_name)]
        for override in sorted(matching, key=lambda o: o.specificity):
            ttft = override.ttft_p99 if override.ttft_p99 is not None else ttft
            itl = override.itl_p99 if override.itl_p99 is not None else itl
        return Slo(ttft_p99=ttft, itl_p99=itl)


DEFAULT_CONFIG = DiagnosisConfig()
