"""``GET /api/v1/probes``: every configured probe, its settings and its latest answer.

A probe's answers are also its stream (target = the probe's name): its windows and
diagnoses are read like any stream's (``/api/v1/windows``, ``/api/v1/diagnoses``).
Credentials are never answered: the headers are named, not shown, and a bearer token is
only said to be set.
"""

from __future__ import annotations

from fastapi import APIRouter, Response
from pydantic import BaseModel

from app.api.deps import ServiceDep
from app.api.params import PageDep
from app.redact import redact_url
from app.scrape.probe_fetch import ProbeResult

router = APIRouter(tags=["probes"])


class ProbeAnswerPublic(BaseModel):
    """The latest answer, seconds (None: not measured, the answer did not get that far)."""

    started: float
    ok: bool
    error_kind: str | None
    error: str | None
    status: int | None
    total_s: float
    connect_s: float | None
    ttfb_s: float | None
    ttft_s: float | None
    tokens: int
    prompt_tokens: int | None
    decode_tokens_per_s: float | None
    server_ttft_s: float | None
    client_gap_s: float | None
    server_prefill_tokens_per_s: float | None
    server_decode_tokens_per_s: float | None


class ProbePublic(BaseModel):
    name: str
    kind: str
    url: str
    model: str
    target: str | None
    interval_s: float
    timeout_s: float
    max_tokens: int
    prompt_words: int
    labels: dict[str, str]
    headers: list[str]
    bearer_token_set: bool
    up: bool
    last_error_kind: str | None
    last_probe: float | None
    latest: ProbeAnswerPublic | None


def _rate(tokens: int | None, seconds: float | None) -> float | None:
    return tokens / seconds if tokens and seconds else None


def _answer(r: ProbeResult) -> ProbeAnswerPublic:
    s = r.server
    server_ttft = None if s is None else s.ttft
    return ProbeAnswerPublic(
        started=r.started,
        ok=r.ok,
        error_kind=r.error_kind,
        error=r.error,
        status=r.status,
        total_s=r.total,
        connect_s=r.connect,
        ttfb_s=r.ttfb,
        ttft_s=r.ttft,
        tokens=r.tokens,
        prompt_tokens=r.prompt_tokens,
        decode_tokens_per_s=r.decode_tokens_per_s,
        server_ttft_s=server_ttft,
        client_gap_s=None if server_ttft is None or r.ttft is None else r.ttft - server_ttft,
        server_prefill_tokens_per_s=None if s is None else _rate(s.prefill_tokens, s.prefill_s),
        server_decode_tokens_per_s=None if s is None else _rate(s.decode_tokens, s.decode_s),
    )


@router.get("/probes", response_model=list[ProbePublic])
def list_probes(service: ServiceDep, page: PageDep, response: Response) -> list[ProbePublic]:
    """List the probes with their latest answer, one page in configuration order
    (``limit``, ``offset``; ``X-Total-Count``: all); none configured: an empty list."""
    probes = [] if service.probes is None else service.probes.latest()
    out = []
    for cfg, state, last in page.take(probes, response):
        rec = state.last_record
        out.append(
            ProbePublic(
                name=cfg.name,
                kind=cfg.kind,
                url=redact_url(cfg.endpoint),
                model=cfg.model,
                target=cfg.target,
                interval_s=cfg.interval,
                timeout_s=cfg.timeout,
                max_tokens=cfg.max_tokens,
                prompt_words=cfg.words,
                labels=dict(state.config.labels),
                headers=sorted(cfg.headers),
                bearer_token_set=bool(cfg.bearer_token),
                up=bool(rec and rec.ok),
                last_error_kind=None if rec is None else rec.error_kind,
                last_probe=None if rec is None else rec.ts,
                latest=None if last is None else _answer(last),
            )
        )
    return out
