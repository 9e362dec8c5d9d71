"""The static ``targets`` and every ``file_sd`` and ``http_sd`` config, as one list.

:class:`MergedTargets` is the :class:`~app.sources.base.Discovery` the scrape source asks
every round. The list is the static targets, then each discovery config's in
configuration order; a name already taken is skipped (the first keeps it) and counted in
``duplicates``. The same tuple object is handed out until some part changes, so a round
with no change costs the source nothing.

``ready`` is False until every discovery config has read its list once: until then the
source does not judge a target missing from the list as removed (a restart whose
``http_sd`` endpoint is down must not resolve every alert as "target removed").
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from typing import Any, Protocol

from app.config import Settings, TargetConfig
from app.sources.discovery.file_sd import FileDiscovery
from app.sources.discovery.health import SdHealth
from app.sources.discovery.http_sd import HttpDiscovery

__all__ = ["MergedTargets", "discovery_for", "unused"]

log = logging.getLogger(__name__)


class _Config(Protocol):
    health: SdHealth

    @property
    def loaded(self) -> bool: ...

    def current(self) -> tuple[TargetConfig, ...]: ...

    async def refresh(self, now: float) -> None: ...

    async def aclose(self) -> None: ...


class MergedTargets:
    """Static targets beside discovered ones (module docstring)."""

    def __init__(self, static: Sequence[TargetConfig], configs: Sequence[_Config]) -> None:
        self.static = tuple(static)
        self.configs = list(configs)
        self._parts: tuple[tuple[TargetConfig, ...], ...] = ()
        self._merged: tuple[TargetConfig, ...] = self.static
        self.duplicates = 0
        self._merge()

    @property
    def ready(self) -> bool:
        return all(c.loaded for c in self.configs)

    def current(self) -> Sequence[TargetConfig]:
        return self._merged

    async def refresh(self, now: float) -> None:
        """Look again with every config (a failed look keeps its last list)."""
        results = await asyncio.gather(
            *(c.refresh(now) for c in self.configs), return_exceptions=True
        )
        for config, result in zip(self.configs, results, strict=True):
            if isinstance(result, Exception):  # a bug, not a bad list: keep the others
                log.error("%s %s: %r", config.health.kind, config.health.source, result)
        self._merge()

    def _merge(self) -> None:
        parts = tuple(c.current() for c in self.configs)
        if len(parts) == len(self._parts) and all(
            a is b for a, b in zip(parts, self._parts, strict=True)
        ):
            return
        self._parts = parts
        seen = {t.name for t in self.static}
        merged = list(self.static)
        duplicates = 0
        for part in parts:
            for target in part:
                if target.name in seen:
                    duplicates += 1
                    continue
                seen.add(target.name)
                merged.append(target)
        if duplicates and duplicates != self.duplicates:
            log.warning("discovery: %d target name(s) found twice; the first is kept", duplicates)
        self.duplicates = duplicates
        self._merged = tuple(merged)

    def health(self) -> list[dict[str, Any]]:
        return [c.health.public() for c in self.configs]

    async def aclose(self) -> None:
        for c in self.configs:
            await c.aclose()


def discovery_for(
    settings: Settings, previous: object = None
) -> Sequence[TargetConfig] | MergedTargets:
    """The static targets alone, or merged with the settings' discovery configs.

    ``previous`` (a reload's running discovery): a config that did not change is kept
    as it runs — its last list, its watcher, its poll schedule — so a reload neither
    re-polls an endpoint nor empties a list while it is down. :func:`unused` says which
    of the previous configs to close.
    """
    if not settings.file_sd and not settings.http_sd:
        return settings.targets
    running = list(previous.configs) if isinstance(previous, MergedTargets) else []

    def reuse(config: object) -> _Config | None:
        for i, old in enumerate(running):
            if getattr(old, "config", None) == config:
                return running.pop(i)
        return None

    configs: list[_Config] = [reuse(c) or FileDiscovery(c) for c in settings.file_sd]
    configs += [reuse(c) or HttpDiscovery(c) for c in settings.http_sd]
    return MergedTargets(settings.targets, configs)


def unused(previous: object, current: object) -> list[_Config]:
    """The configs of ``previous`` that ``current`` does not run (to be closed)."""
    kept = getattr(current, "configs", [])
    return [c for c in getattr(previous, "configs", []) if not any(c is k for k in kept)]
