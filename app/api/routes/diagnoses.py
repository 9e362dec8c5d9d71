"""``GET /api/v1/diagnoses``: the diagnoses the evaluation job stored for a target.

A row is stored when a stream's class or sub-cause changes, and otherwise once a minute
(``app.store.diagnoses``); each is ``Diagnosis.to_dict()`` (class, sub_cause,
confidence, summary, evidence, hints…) for the window ``(start, end]``.
"""

from __future__ import annotations

import time
from typing import Annotated, Any

from fastapi import APIRouter, HTTPException, Query
from pydantic import Field

from app.api.deps import DiagnosesDep
from app.api.params import DEFAULT_LIMIT, Limit, UnixTime
from app.api.schemas import Answer, EvidencePublic, HintPublic, Number

router = APIRouter(tags=["diagnoses"])

_CLASS = "the class (``app.diagnose.classes``): healthy, insufficient_data, a bottleneck…"


class FindingPublic(Answer):
    """Another class that holds in the same window."""

    cls: str = Field(alias="class", description=_CLASS)
    sub_cause: str | None
    summary: str


class RooflinePublic(Answer):
    """Decode ceiling (bandwidth / weight bytes) next to the measured decode speed."""

    device: str
    bandwidth_gbs: Number
    weight_bytes: Number
    ceiling_tok_s: float | None
    measured_tok_s: float | None
    efficiency: float | None


class SloObjectivesPublic(Answer):
    """The p99 objectives, seconds, the stream was judged against."""

    ttft_p99: float
    itl_p99: float


class ChangePublic(Answer):
    """One signal against the stream's healthy baseline; ``share`` the part of the
    symptom's growth it explains (0–1)."""

    signal: str
    baseline: Number | None
    value: Number | None
    ratio: float | None = Field(description="value / baseline; null when the baseline is 0")
    share: Number | None
    effect: str | None = Field(description="the quantity it drives, when not itself")
    effect_ratio: Number | None


class BaselineInfoPublic(Answer):
    """What a window was compared with: the healthy data of the hour before its run of
    problem windows began (``run_start``)."""

    run_start: Number
    healthy_s: Number
    needed_s: Number
    start: Number | None
    end: Number | None
    enough: bool


class ServerSettingPublic(Answer):
    """One engine setting and where it comes from."""

    value: Any
    source: str | None = Field(
        description='"page" (cache_config_info), "configured" or "default" (assumed)'
    )


class ServerPublic(Answer):
    """The server's settings the hints started from (``app.diagnose.server``): each known
    one with its source, the model and device as configured, and disagreements."""

    # Every setting (``ServerView.to_dict``'s order); value and source null: not known.
    max_num_seqs: ServerSettingPublic
    max_num_batched_tokens: ServerSettingPublic
    max_model_len: ServerSettingPublic
    gpu_memory_utilization: ServerSettingPublic
    block_size: ServerSettingPublic
    num_gpu_blocks: ServerSettingPublic
    enable_prefix_caching: ServerSettingPublic
    kv_cache_dtype: ServerSettingPublic
    quantization: ServerSettingPublic
    tensor_parallel_size: ServerSettingPublic
    model: str | None
    device: str | None
    # Whose server ("vllm", "sglang": the stream's page); the hints name its flags.
    engine: str = "vllm"
    notes: list[str]


class DiagnosisPublic(Answer):
    """The verdict on one window of one stream (``Diagnosis.to_dict``): the class and
    its sub-cause, every comparison every rule made, hints most useful first."""

    target: str
    model_name: str
    start: float
    end: float
    cls: str = Field(alias="class", description=_CLASS)
    sub_cause: str | None
    confidence: float
    summary: str
    ttft_p99: float | None
    ttft_p99_ge: bool = Field(description="ttft_p99 is a lower bound (the +Inf bucket)")
    itl_p99: float | None
    itl_p99_ge: bool
    # Rows stored before SLO verdicts, and before changes were ranked (below), lack those
    # fields: the route leaves out what a row does not carry.
    ttft_slo: str | None = Field(
        default=None, description='the TTFT SLO judged: "over", "unproven", "within"; null: unknown'
    )
    itl_slo: str | None = Field(
        default=None, description="the ITL SLO judged (per token under speculative decoding)"
    )
    slo: SloObjectivesPublic
    evidence: list[EvidencePublic]
    secondary: list[FindingPublic]
    hints: list[HintPublic]
    missing: list[str] = Field(description="signals that kept a rule from evaluating")
    notes: list[str]
    roofline: RooflinePublic | None
    facts: dict[str, float | None] = Field(description="the numbers the rules read")
    changes: list[ChangePublic] = Field(
        default=[], description="what moved against the healthy baseline, headline first"
    )
    baseline: BaselineInfoPublic | None = Field(
        default=None, description="what the window was compared with; null: not compared"
    )
    server: ServerPublic | None = Field(
        default=None, description="the server's settings the hints started from"
    )


@router.get(
    "/diagnoses",
    response_model=list[DiagnosisPublic],
    response_model_exclude_unset=True,  # a stored row is written as it was stored
)
def list_diagnoses(
    diagnoses: DiagnosesDep,
    target: Annotated[str, Query(description="target name")],
    model: Annotated[str | None, Query(description="model_name; all models if omitted")] = None,
    start: Annotated[UnixTime | None, Query(description="Unix seconds; default end - 1 h")] = None,
    end: Annotated[UnixTime | None, Query(description="Unix seconds; default now")] = None,
    limit: Limit = DEFAULT_LIMIT,
) -> list[dict[str, Any]]:
    """Stored diagnoses with ``start < end <= end``, oldest first."""
    end_ts = time.time() if end is None else end
    start_ts = end_ts - 3600.0 if start is None else start
    if end_ts <= start_ts:
        raise HTTPException(422, "end must be after start")
    return diagnoses.query(target, model_name=model, start=start_ts, end=end_ts, limit=limit)
