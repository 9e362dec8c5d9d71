"""Headroom of a stream, or of a fleet's replicas, for the API and the UI (on demand,
cached).

A stream's headroom (:mod:`app.twin.headroom`) is computed on the twin fitted to its last
``LOOKBACK_S`` seconds, at the stream's SLOs (``DiagnosisConfig.slo_for``) and its
server settings (``server_for``). A twin run costs seconds of CPU, so a result is kept
per stream, settings and ``BUCKET_S`` of time: asked again within the same 5 minutes, it
is served from the cache; nothing is computed unless asked. A fleet's headroom is its
tightest replica's: traffic spread evenly grows on every replica alike.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from app.diagnose.config import DiagnosisConfig
from app.model import IntervalDelta
from app.read.whatif import span_of
from app.twin.fit import FitError, fit
from app.twin.headroom import Headroom, headroom
from app.twin.whatif import calibrate

LOOKBACK_S = 900.0
BUCKET_S = 300.0
SEEDS = 2
MAX_ENTRIES = 4096

Intervals = Callable[[str, str, float, float], list[IntervalDelta]]


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
        }


@dataclass
class HeadroomCache:
    """Results per (stream, settings, 5-minute bucket); thread-safe."""

    entries: dict[tuple[Any, ...], StreamHeadroom] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)
    computed: int = 0

    def get(self, key: tuple[Any, ...], make: Callable[[], StreamHeadroom]) -> StreamHeadroom:
        with self.lock:
            hit = self.entries.get(key)
        if hit is not None:
            return hit
        value = make()
        with self.lock:
            if len(self.entries) >= MAX_ENTRIES:
                self.entries.pop(next(iter(self.entries)))
            self.entries[key] = value
            self.computed += 1
        return value


def stream_headroom(
    intervals: Intervals,
    target: str,
    model: str,
    *,
    now: float,
    config: DiagnosisConfig,
    cache: HeadroomCache | None = None,
    info: dict[str, str] | None = None,
) -> StreamHeadroom:
    """The headroom of one stream over its last ``LOOKBACK_S`` (module docstring)."""
    end = now // BUCKET_S * BUCKET_S
    start = end - LOOKBACK_S
    server = config.server_for(target)
    slo = config.slo_for(target, model)

    def make() -> StreamHeadroom:
        try:
            span = span_of(
                intervals(target, model, start, end),
                start=start,
                end=end,
                target=target,
                model=model,
                info=info,
                server=server,
            )
            twin = fit(span)
            cal = calibrate(twin, span.whole, seeds=SEEDS)
        except (FitError, ValueError) as exc:
            return StreamHeadroom(target, model, start, end, None, str(exc))
        errs = [e for e in cal.errors.values() if e is not None]
        replay = sorted(errs)[len(errs) // 2] if errs else None
        room = headroom(cal, slo.ttft_p99, slo.itl_p99)
        return StreamHeadroom(target, model, start, end, room, None, replay, twin.warnings)

    key = (target, model, end, repr(server), slo.ttft_p99, slo.itl_p99)
    return cache.get(key, make) if cache is not None else make()


def fleet_headroom(results: Sequence[StreamHeadroom]) -> StreamHeadroom | None:
    """The tightest replica's headroom (None when no replica has one)."""
    known = [r for r in results if r.headroom is not None]
    if not known:
        return None
    return min(known, key=lambda r: r.headroom.rate_scale if r.headroom else 0.0)
