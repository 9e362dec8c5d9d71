"""``http_sd``: targets from a URL answering a JSON list of target groups, polled.

As Prometheus' ``http_sd``: a GET every ``refresh_interval`` (header
``X-Prometheus-Refresh-Interval-Seconds``); a 2xx answer whose body is a JSON list of
target groups replaces the list; anything else — an error status, a timeout, a body
that is not target groups — keeps the last good list and shows in the health view.

The answer is untrusted input, read as a scrape is (``app.scrape.client.fetch``): the
whole request has a deadline (``timeout``), the body is capped in bytes while it
streams, after gzip decoding (``max_body_bytes``), redirects are not followed, and an
answer with more than ``max_targets`` addresses is refused whole; a group carries at
most ``groups.MAX_LABELS`` labels of at most ``groups.MAX_LABEL_VALUE`` characters.

The first poll is awaited by the first round, so the service starts with the list; the
later ones run beside the rounds (a slow endpoint never delays a scrape round) and
their list is taken at the next round.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

import httpx

from app.config import HttpSdConfig, TargetConfig
from app.redact import redact_url
from app.scrape.client import fetch
from app.sources.discovery.groups import GroupsError, decode, targets_of
from app.sources.discovery.health import SdHealth

__all__ = ["HttpDiscovery"]

log = logging.getLogger(__name__)


class HttpDiscovery:
    """One ``http_sd`` config: the last good list its URL answered."""

    def __init__(self, config: HttpSdConfig) -> None:
        self.config = config
        self.health = SdHealth("http_sd", redact_url(config.url))
        self._targets: tuple[TargetConfig, ...] = ()
        self._last_poll: float | None = None
        self._poll: asyncio.Task[None] | None = None
        self._client: httpx.AsyncClient | None = None

    @property
    def loaded(self) -> bool:
        return self.health.loaded

    def current(self) -> tuple[TargetConfig, ...]:
        return self._targets

    async def refresh(self, now: float) -> None:
        """Poll when due: the first time awaited, later beside the rounds."""
        if self._poll is not None and not self._poll.done():
            return
        if self._last_poll is None:
            self._last_poll = now
            await self.poll(now)
        elif now - self._last_poll >= self.config.refresh_interval:
            self._last_poll = now
            self._poll = asyncio.create_task(self.poll(now), name="phasewatch-http-sd")

    def _http(self) -> httpx.AsyncClient:
        if self._client is None:
            cfg = self.config
            headers = {
                "User-Agent": "phasewatch",
                "X-Prometheus-Refresh-Interval-Seconds": f"{cfg.refresh_interval:g}",
            }
            if cfg.bearer_token:
                headers["Authorization"] = f"Bearer {cfg.bearer_token}"
            self._client = httpx.AsyncClient(headers=headers, follow_redirects=False)
        return self._client

    async def poll(self, now: float) -> None:
        """Ask the URL once; keep the last good list when the answer cannot be used."""
        cfg = self.config
        got = await fetch(self._http(), cfg.url, timeout=cfg.timeout, max_bytes=cfg.max_body_bytes)
        try:
            if got.text is None:
                raise GroupsError(got.error or str(got.error_kind))
            found = targets_of(
                decode(got.text, self.health.source, yaml_ok=False),
                scheme=cfg.scheme,
                metrics_path=cfg.metrics_path,
                name_label=cfg.name_label,
                max_targets=cfg.max_targets,
            )
        except GroupsError as exc:
            self.health.failed(now, str(exc))
            log.warning("http_sd %s: %s (the last good list is kept)", self.health.source, exc)
            return
        if found.targets != self._targets:
            self._targets = found.targets
        self.health.succeeded(now, found)

    async def aclose(self) -> None:
        """Stop a poll in flight and close the client."""
        if self._poll is not None:
            self._poll.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._poll
        if self._client is not None:
            await self._client.aclose()
            self._client = None
