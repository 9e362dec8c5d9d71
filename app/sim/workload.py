"""Traffic: Poisson arrivals, lognormal prompt and output lengths, optional bursts.

A workload is a mix of request classes (a chat stream, a document stream, ...), each with
its own length distributions. A share of requests starts with the same system prompt
(``shared_prefix_tokens``), which prefix caching can serve from the KV pool.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass

from app.sim.errors import SimConfigError


@dataclass(frozen=True, slots=True)
class LengthDist:
    """Lognormal token count: ``median * exp(sigma * N(0, 1))``, at least 1."""

    median: float
    sigma: float = 0.0

    def sample(self, rng: random.Random) -> int:
        if self.sigma <= 0:
            return max(1, round(self.median))
        return max(1, round(self.median * math.exp(self.sigma * rng.gauss(0.0, 1.0))))


@dataclass(frozen=True, slots=True)
class RequestClass:
    name: str
    weight: float
    prompt: LengthDist
    output: LengthDist
    max_tokens: int = 2048


@dataclass(frozen=True, slots=True)
class Bursts:
    """Every ``period_s`` the rate is multiplied by ``factor`` for ``duration_s``."""

    period_s: float
    duration_s: float
    factor: float
    offset_s: float = 0.0


@dataclass(frozen=True, slots=True)
class Workload:
    rate: float
    classes: tuple[RequestClass, ...]
    rate_multiplier: float = 1.0
    shared_prefix_tokens: int = 0
    prefix_share: float = 0.0
    # Of the requests carrying the system prompt, the share whose copy is byte-identical
    # and so reusable from the prefix cache; the others carry a same-length prompt that
    # differs early (a per-request field ahead of it) and share nothing.
    prefix_reuse: float = 1.0
    bursts: Bursts | None = None

    def validate(self) -> None:
        if self.rate < 0 or self.rate_multiplier < 0 or math.isnan(self.rate):
            raise SimConfigError(f"request rate must not be negative, got {self.rate}")
        if not self.classes:
            raise SimConfigError("workload needs at least one request class")
        for c in self.classes:
            if c.weight < 0 or c.prompt.median <= 0 or c.output.median <= 0 or c.max_tokens < 1:
                raise SimConfigError(
                    f"request class {c.name!r}: weight must not be negative, medians and "
                    "max_tokens must be positive"
                )
            if c.prompt.sigma < 0 or c.output.sigma < 0:
                raise SimConfigError(f"request class {c.name!r}: sigma must not be negative")
        if sum(c.weight for c in self.classes) <= 0:
            raise SimConfigError("request class weights must not all be zero")
        if not 0 <= self.prefix_share <= 1:
            raise SimConfigError(f"prefix_share must be in [0, 1], got {self.prefix_share}")
        if not 0 <= self.prefix_reuse <= 1:
            raise SimConfigError(f"prefix_reuse must be in [0, 1], got {self.prefix_reuse}")
        if self.shared_prefix_tokens < 0:
            raise SimConfigError("shared_prefix_tokens must not be negative")
        b = self.bursts
        if b is not None and (
            b.period_s <= 0 or not 0 <= b.duration_s <= b.period_s or b.factor < 0
        ):
            raise SimConfigError(
                "bursts need period_s > 0, 0 <= duration_s <= period_s, factor >= 0"
            )

    def rate_segment(self, t: float) -> tuple[float, float]:
        """The arrival rate at ``t`` and the time it next changes (a burst edge, or inf)."""
        base = self.rate * self.rate_multiplier
        b = self.bursts
        if b is None or b.duration_s == 0:
            return base, math.inf
        k = math.floor((t - b.offset_s) / b.period_s)
        start = b.offset_s + k * b.period_s
        if t < start + b.duration_s:
            return base * b.factor, start + b.duration_s
        return base, start + b.period_s


@dataclass(slots=True)
class Draw:
    """One sampled request, before it becomes an engine ``Request``."""

    prompt_len: int
    output_len: int
    max_tokens: int
    finish_reason: str
    prefix_tokens: int


def sample_request(
    rng: random.Random, workload: Workload, max_model_len: int, block_size: int
) -> Draw:
    """Draw one request; lengths are clipped so prompt + output fits ``max_model_len``.

    ``prefix_tokens`` is the part of the prompt (whole blocks) shared with other requests.
    """
    classes = workload.classes
    if len(classes) == 1:
        cls = classes[0]
    else:
        cls = rng.choices(classes, weights=[c.weight for c in classes])[0]
    prompt = cls.prompt.sample(rng)
    prefix = 0
    if workload.shared_prefix_tokens and rng.random() < workload.prefix_share:
        prompt += workload.shared_prefix_tokens
        # Drawn only when some copies differ, so other workloads keep their random stream.
        if workload.prefix_reuse >= 1 or rng.random() < workload.prefix_reuse:
            prefix = workload.shared_prefix_tokens // block_size * block_size
    prompt = min(prompt, max_model_len - 1)
    if prefix >= prompt:
        prefix = (prompt - 1) // block_size * block_size
    max_tokens = min(cls.max_tokens, max_model_len - prompt)
    natural = cls.output.sample(rng)
    if natural >= max_tokens:
        return Draw(prompt, max_tokens, max_tokens, "length", prefix)
    return Draw(prompt, natural, max_tokens, "stop", prefix)
