"""Where a twin's span comes from: a recording, a watched URL, the store or Prometheus.

Each reader returns the :class:`~app.twin.fit.Span` of one stream (a target and a model):
its deltas windowed into tiles of ``tile`` seconds (``(e - tile, e]`` from the span's
start) and one window over all of it, with the page's ``cache_config_info`` as of the
span's end where the source has the pages, and the configured server settings.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from app.diagnose.server import ServerSettings
from app.model import IntervalDelta
from app.sources.prometheus import PrometheusSource
from app.sources.recording import ReplayedScrapes
from app.store.sqlite import Store
from app.twin.fit import FitError, Span
from app.windows.aggregate import window, windows

TILE_S = 30.0


def span_of(
    deltas: Sequence[IntervalDelta],
    *,
    start: float,
    end: float,
    target: str,
    model: str,
    info: Mapping[str, str] | None = None,
    server: ServerSettings | None = None,
    tile: float = TILE_S,
) -> Span:
    """The span of one stream's deltas over ``(start, end]`` (module docstring)."""
    if end - start < 2 * tile:
        raise FitError(
            f"the span is {end - start:.0f} s: at least {2 * tile:.0f} s of history is needed "
            "(two windows of the arrival timeline)"
        )
    tiles = windows(
        deltas, start=start, end=end, length=tile, step=tile, target=target, model_name=model
    )
    whole = window(deltas, start=start, end=end, target=target, model_name=model)
    return Span(tiles, whole, dict(info or {}), server or ServerSettings())


def pick_model(models: Sequence[str], asked: str | None, where: str) -> str:
    """The stream to fit: the one asked for, or the only one; ValueError otherwise."""
    if asked is not None:
        if asked not in models:
            raise FitError(
                f"{where} has no stream of model {asked!r} (it has: {', '.join(models) or 'none'})"
            )
        return asked
    if not models:
        raise FitError(f"{where} has no vLLM stream")
    if len(models) > 1:
        raise FitError(f"{where} has several models ({', '.join(models)}): pick one with --model")
    return models[0]


def from_scrapes(
    scrapes: ReplayedScrapes,
    *,
    model: str | None = None,
    server: ServerSettings | None = None,
    tile: float = TILE_S,
) -> Span:
    """A recording folder's or a watched URL's scrapes (``app.sources``)."""
    name = pick_model(sorted(scrapes.deltas), model, f"target {scrapes.target!r}")
    return span_of(
        scrapes.deltas[name],
        start=scrapes.start,
        end=scrapes.end,
        target=scrapes.target,
        model=name,
        info=scrapes.info_at(name, scrapes.end),
        server=server,
        tile=tile,
    )


def from_store(
    store: Store,
    target: str,
    *,
    start: float,
    end: float,
    model: str | None = None,
    server: ServerSettings | None = None,
    tile: float = TILE_S,
) -> Span:
    """A target's stored deltas; the page's settings from its latest stored scrape."""
    name = pick_model(
        [m for _, m in store.streams(target)], model, f"target {target!r} in the store"
    )
    deltas = store.intervals(target, name, start, end)
    latest = store.last_snapshots().get(target)
    info: Mapping[str, str] = {}
    if latest is not None and name in latest[1]:
        info = latest[1][name].info
    return span_of(
        deltas, start=start, end=end, target=target, model=name, info=info, server=server, tile=tile
    )


async def from_prometheus(
    source: PrometheusSource,
    target: str,
    *,
    start: float,
    end: float,
    model: str | None = None,
    server: ServerSettings | None = None,
    tile: float = TILE_S,
) -> Span:
    """A target's history read from Prometheus (``source: prometheus``)."""
    history = await source.read(start, end, step=5.0, mode=source.config.mode)
    hist = history.get(target)
    if hist is None:
        known = ", ".join(history) or "none"
        raise FitError(f"Prometheus has no target {target!r} over the range (has: {known})")
    name = pick_model(hist.models(), model, f"target {target!r} in Prometheus")
    info: Mapping[str, str] = {}
    for snap in hist.snapshots:
        stream = snap.streams.get(name)
        if stream is not None and stream.info:
            info = stream.info
    deltas = [d for d in hist.deltas if d.model_name == name]
    return span_of(
        deltas, start=start, end=end, target=target, model=name, info=info, server=server, tile=tile
    )
