"""Headroom of a stream, or of a fleet's replicas, for the API and the UI (prepared in
the background for the problem streams, cached).

A stream's headroom (:mod:`app.twin.headroom`) is computed on the twin fitted to its last
``LOOKBACK_S`` seconds (``app.read.twincache``: the twin shared with the hints' effects),
at the stream's SLOs (``DiagnosisConfig.slo_for``), its server settings (``server_for``)
and the page's ``cache_config_info`` (its KV pool: the latest stored snapshot's,
``app.read.twincache.page_info``). A twin run costs seconds of CPU, so a result is kept
per stream, settings, page info and ``BUCKET_S`` of time: asked again within the same 5
minutes, it is served from the cache. The hints' pricing job (``app.read.effects``)
prepares it for every stream with a problem class, so a page finds it ready; another
stream's is computed when asked. A stream whose queue grows now needs no twin: its
headroom is the capacity the traffic needs (``app.twin.headroom.growing_headroom``,
read at ``now`` from the last minutes, ``app.read.backlog``). A fleet's headroom is its
tightest replica's: traffic spread evenly grows on every replica alike.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from app.diagnose.config import DiagnosisConfig
from app.read.backlog import LOOKBACK_S, growing_at
from app.read.twincache import BUCKET_S, Intervals, TwinCache, bucket_end, fitted, info_key
from app.twin.headroom import Headroom, growing_headroom, headroom


@dataclass(frozen=True, slots=True)
class StreamHeadroom:
    target: str
    model_name: str
    start: float
    end: float
    headroom: Headroom | None
    error: str | None = None
    replay_error: float | None = None
    warnings: tuple[str, ...] = ()
    # A thin history (``app.read.twincache.Fitted.history``): none fitted, and why.
    history: dict[str, float | None] | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "target": self.target,
            "model_name": self.model_name,
            "start": self.start,
            "end": self.end,
            "headroom": None if self.headroom is None else self.headroom.to_dict(),
            "error": self.error,
            "replay_error": None if self.replay_error is None else round(self.replay_error, 4),
            "warnings": list(self.warnings),
            "history": self.history,
        }


def stream_headroom(
    intervals: Intervals,
    target: str,
    model: str,
    *,
    now: float,
    config: DiagnosisConfig,
    cache: TwinCache | None = None,
    info: Mapping[str, str] | None = None,
) -> StreamHeadroom:
    """The headroom of one stream over its last ``LOOKBACK_S`` (module docstring);
    ``info``: the page's ``cache_config_info`` (None: the cache's ``pages`` finds it)."""
    slo = config.slo_for(target, model)
    page = cache.info(target, model, info) if cache is not None else dict(info or {})
    inc = growing_at(intervals, target, model, now, config)
    if inc is not None:  # the queue grows now: the capacity it needs, no twin run
        room = growing_headroom(inc, slo.ttft_p99, slo.itl_p99)
        return StreamHeadroom(target, model, now - LOOKBACK_S, now, room)

    def make() -> StreamHeadroom:
        f = fitted(intervals, target, model, now=now, config=config, cache=cache, info=page)
        cal = f.calibration
        if cal is None:
            return StreamHeadroom(target, model, f.start, f.end, None, f.error, history=f.history)
        errs = [e for e in cal.errors.values() if e is not None]
        replay = sorted(errs)[len(errs) // 2] if errs else None
        room = headroom(cal, slo.ttft_p99, slo.itl_p99)
        return StreamHeadroom(target, model, f.start, f.end, room, None, replay, cal.twin.warnings)

    key = _key(config, target, model, bucket_end(now), page)
    if cache is None:
        return make()
    out: StreamHeadroom = cache.get(key, make)
    return out


def _key(
    config: DiagnosisConfig, target: str, model: str, end: float, page: Mapping[str, str]
) -> tuple[object, ...]:
    slo = config.slo_for(target, model)
    return ("headroom", target, model, end, repr(config.server_for(target)), info_key(page),
            slo.ttft_p99, slo.itl_p99)  # fmt: skip


def cached_headroom(
    intervals: Intervals,
    target: str,
    model: str,
    *,
    now: float,
    config: DiagnosisConfig,
    cache: TwinCache,
    info: Mapping[str, str] | None = None,
) -> StreamHeadroom | None:
    """The stream's headroom without a twin run: where its queue grows, the capacity it
    needs (read now); else this ``BUCKET_S``'s answer, else the previous one's (its
    ``end`` says which); None: neither is priced yet."""
    inc = growing_at(intervals, target, model, now, config)
    if inc is not None:
        slo = config.slo_for(target, model)
        room = growing_headroom(inc, slo.ttft_p99, slo.itl_p99)
        return StreamHeadroom(target, model, now - LOOKBACK_S, now, room)
    page = cache.info(target, model, info)
    end = bucket_end(now)
    for at in (end, end - BUCKET_S):
        hit = cache.peek(_key(config, target, model, at, page))
        if isinstance(hit, StreamHeadroom):
            return hit
    return None


def fleet_headroom(results: Sequence[StreamHeadroom]) -> StreamHeadroom | None:
    """The tightest replica's headroom (None when no replica has one)."""
    known = [r for r in results if r.headroom is not None]
    if not known:
        return None
    return min(known, key=lambda r: r.headroom.rate_scale if r.headroom else 0.0)
