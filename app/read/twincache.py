"""The what-if twin of a stream's recent history, fitted and calibrated once and shared by
the headroom answers and the hints' predicted effects (``app.read.headroom``,
``app.read.effects``).

A twin is fitted on the stream's last ``LOOKBACK_S`` seconds ending at a ``BUCKET_S``
boundary, at the stream's server settings (``DiagnosisConfig.server_for``) and the page's
``cache_config_info`` (the latest stored snapshot's ``StreamSnapshot.info``:
:func:`page_info`; a caller that has it passes it, else the cache's ``pages`` finds it),
and replayed ``SEEDS`` times (``app.twin.whatif.calibrate``). A calibration costs seconds
of CPU, so it and everything computed from it is kept in a :class:`TwinCache` per stream,
settings, page info and 5-minute bucket: two callers share a twin only where they would
have fitted the same one.

A span with less than ``MIN_HISTORY_S`` seconds of windows that were scraped and had
traffic is not fitted (``app.twin.history``): the answer says how much history there is
and when there will be enough, rather than a twin that moves with every window.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Collection, Hashable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from app.diagnose.config import DiagnosisConfig
from app.model import IntervalDelta, StreamSnapshot
from app.read.whatif import span_of
from app.twin.fit import FitError, fit
from app.twin.history import ThinHistory, require
from app.twin.whatif import Calibration, calibrate

LOOKBACK_S = 900.0
BUCKET_S = 300.0
SEEDS = 2
# The history a twin needs within LOOKBACK_S: ten 30 s windows scraped with traffic (the
# CLI's default watch, docs/whatif.md).
MIN_HISTORY_S = 300.0
MAX_ENTRIES = 4096

Intervals = Callable[[str, str, float, float], list[IntervalDelta]]
# A stream's page info (``cache_config_info``): (target, model) → its labels.
Pages = Callable[[str, str], Mapping[str, str]]


class Snapshots(Protocol):
    """What :func:`page_info` reads: a store's latest snapshot per target."""

    def last_snapshots(
        self, targets: Collection[str] | None = None
    ) -> dict[str, tuple[float, dict[str, StreamSnapshot]]]: ...


def page_info(store: Snapshots, target: str, model: str) -> dict[str, str]:
    """The stream's ``cache_config_info`` as of its latest stored snapshot ({}: none)."""
    latest = store.last_snapshots([target]).get(target)
    if latest is None or model not in latest[1]:
        return {}
    return dict(latest[1][model].info)


def info_key(info: Mapping[str, str]) -> tuple[tuple[str, str], ...]:
    """The page info as part of a cache key."""
    return tuple(sorted(info.items()))


@dataclass
class TwinCache:
    """Results per key (stream, settings, 5-minute bucket, what was asked); thread-safe.
    ``computed`` counts the results made (not served from the cache)."""

    entries: dict[Hashable, Any] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)
    computed: int = 0
    # Another cache to use instead (the UI's, the service's: found once the service runs).
    shared: Callable[[], TwinCache | None] | None = None
    # Where a caller that has no page info finds it (the service's store: page_info).
    pages: Pages | None = None

    def _own(self) -> TwinCache:
        other = self.shared() if self.shared is not None else None
        return other if other is not None and other is not self else self

    def info(self, target: str, model: str, given: Mapping[str, str] | None) -> dict[str, str]:
        """The page info a twin of the stream is fitted at: ``given``, else (None or
        empty: the caller's window had none) what ``pages`` (this cache's or the shared
        one's) finds, else none."""
        if given:
            return dict(given)
        own = self._own()
        pages = own.pages if own.pages is not None else self.pages
        return dict(pages(target, model)) if pages is not None else {}

    def peek(self, key: Hashable) -> Any:
        own = self._own()
        if own is not self:
            return own.peek(key)
        with self.lock:
            return self.entries.get(key)

    def get(self, key: Hashable, make: Callable[[], Any]) -> Any:
        own = self._own()
        if own is not self:
            return own.get(key, make)
        hit = self.peek(key)
        if hit is not None:
            return hit
        value = make()
        with self.lock:
            if len(self.entries) >= MAX_ENTRIES:
                self.entries.pop(next(iter(self.entries)))
            self.entries[key] = value
            self.computed += 1
        return value


@dataclass(frozen=True, slots=True)
class Fitted:
    """A stream's twin over ``(start, end]``: its calibration, or why there is none."""

    target: str
    model_name: str
    start: float
    end: float
    calibration: Calibration | None
    error: str | None = None
    # A thin history (``app.twin.history.ThinHistory.to_dict``): what there is, what is
    # needed and from when it answers.
    history: dict[str, float | None] | None = None


def bucket_end(now: float) -> float:
    return now // BUCKET_S * BUCKET_S


def fitted(
    intervals: Intervals,
    target: str,
    model: str,
    *,
    now: float,
    config: DiagnosisConfig,
    cache: TwinCache | None = None,
    info: Mapping[str, str] | None = None,
) -> Fitted:
    """The stream's calibrated twin over its last ``LOOKBACK_S`` (module docstring);
    ``info``: the page's ``cache_config_info`` (None: the cache's ``pages`` finds it)."""
    end = bucket_end(now)
    start = end - LOOKBACK_S
    server = config.server_for(target)
    page = cache.info(target, model, info) if cache is not None else dict(info or {})

    def make() -> Fitted:
        try:
            span = span_of(
                intervals(target, model, start, end),
                start=start,
                end=end,
                target=target,
                model=model,
                info=page,
                server=server,
            )
            require(span.tiles, start, end, MIN_HISTORY_S, BUCKET_S)
            cal = calibrate(fit(span), span.whole, seeds=SEEDS)
        except ThinHistory as exc:
            return Fitted(target, model, start, end, None, str(exc), exc.to_dict())
        except (FitError, ValueError) as exc:
            return Fitted(target, model, start, end, None, str(exc))
        return Fitted(target, model, start, end, cal)

    key = ("twin", target, model, end, repr(server), info_key(page))
    return cache.get(key, make) if cache is not None else make()
