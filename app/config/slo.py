"""``slo`` (the latency objectives a window is diagnosed against, with overrides per
target or model) and ``slos`` (service-level objectives on fleets, with error budgets)."""

from __future__ import annotations

from pydantic import Field, field_validator, model_validator

from app.config.checks import NAME_RE, Strict
from app.durations import parse_duration


class SloValues(Strict):
    ttft_p99: float = Field(2.0, gt=0, description="TTFT p99 objective, seconds")
    itl_p99: float = Field(0.1, gt=0, description="inter-token latency p99 objective, seconds")


class SloConfig(SloValues):
    """Default SLOs plus overrides keyed by target name or model name (a target key beats
    a model key; resolved per stream by ``app.evaluate.settings``)."""

    overrides: dict[str, SloValues] = Field(
        default_factory=dict,
        description="per target name or model_name: {ttft_p99, itl_p99} (a target beats a model)",
    )
    min_events_for_budget: int = Field(
        1000,
        ge=0,
        description="an error budget is judged once its period holds this many events of "
        "each objective (fewer: 'n/a'; a handful of requests is no budget)",
    )


class SloObjectConfig(Strict):
    """A service-level objective on a fleet: latency objectives, target ratio, period."""

    name: str = Field(description="the SLO's name; unique")
    selector: dict[str, str] = Field(
        default_factory=dict,
        description="model_name and/or target labels the replicas must have; {} = every model",
    )
    ttft: float | None = Field(None, gt=0, description="a request is good if TTFT <= this, s")
    itl: float | None = Field(
        None, gt=0, description="a token gap is good if <= this, s (a share of gaps)"
    )
    tpot: float | None = Field(
        None, gt=0, description="a request is good if its time per output token <= this, s"
    )
    target: float = Field(0.99, gt=0, lt=1, description="share of good events promised")
    period: float = Field(30 * 86400.0, gt=0, description="budget period, seconds or 30d")
    bad_finish_reasons: list[str] = Field(
        default_factory=lambda: ["error"],
        description="finished_reason values that count against the SLO; [] = none",
    )

    @field_validator("name")
    @classmethod
    def _slo_name_ok(cls, v: str) -> str:
        if not NAME_RE.match(v):
            raise ValueError("must be 1-128 characters of letters, digits and _.:@-")
        return v

    @field_validator("period", mode="before")
    @classmethod
    def _period(cls, v: object) -> object:
        return parse_duration(v) if isinstance(v, str) else v

    @model_validator(mode="after")
    def _has_objective(self) -> SloObjectConfig:
        latency = (self.ttft, self.itl, self.tpot)
        if all(v is None for v in latency) and not self.bad_finish_reasons:
            raise ValueError("an SLO needs ttft, itl, tpot or bad_finish_reasons")
        return self
