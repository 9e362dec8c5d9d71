"""Targets that are gone: no longer scraped, their history still in the store.

A target removed from the list (``file_sd``, ``http_sd``, a reload, or a restart with a
shorter list) keeps its streams, diagnoses and alerts' history for the retention; the
targets API lists it after the live ones, marked gone, so its history stays reachable.
When it was last scraped: :func:`last_scrape` (:mod:`app.store.last_scrape`).
"""

from __future__ import annotations

from collections.abc import Callable, Container
from dataclasses import dataclass

from app.store.last_scrape import last_scrape
from app.store.sqlite import Store

__all__ = ["GoneTarget", "gone_targets", "last_scrape"]


@dataclass(frozen=True, slots=True)
class GoneTarget:
    name: str
    models: tuple[str, ...]


def gone_targets(
    store: Store, live: Container[str], gone: Callable[[str], bool] | None
) -> list[GoneTarget]:
    """The stored targets not in ``live`` that ``gone`` says are gone, by name (none when
    the source cannot tell, e.g. a Prometheus source)."""
    if gone is None:
        return []
    models: dict[str, list[str]] = {}
    for target, model in store.streams():
        if target not in live:
            models.setdefault(target, []).append(model)
    return [GoneTarget(name, tuple(ms)) for name, ms in sorted(models.items()) if gone(name)]
