"""The hints' predicted effects as the pages show them: priced by the what-if twin
(``app.read.effects``) and attached as the service's evaluation round attaches them
(``app.evaluate.effects.attach``: flagged hints last), on the target page's card and the
incident's diagnosis at the peak (the target page's effects panel: ``app.read.pricing``)."""

from __future__ import annotations

from app.diagnose.records import Diagnosis
from app.evaluate.effects import attach, settings_of
from app.model import Window
from app.read.effects import cached_effects, priced
from app.read.target import UiData
from app.read.twincache import TwinCache


def with_cached(
    data: UiData, twin: TwinCache, d: Diagnosis, window: Window | None = None
) -> Diagnosis:
    """``d`` with the effects its hints already have (no twin run): from ``window``'s
    p99s where given, or in the incident's terms where its queue grows."""
    settings = settings_of(d)
    if not settings:
        return d
    intervals = getattr(data.source, "intervals", None)
    if intervals is None or window is None:
        found = cached_effects(twin, data.config, d.target, d.model_name, d.end, settings)
        return attach(d, found)
    return priced(
        d,
        intervals,
        config=data.config,
        cache=twin,
        info=dict(window.info or {}),
        compute=False,
        window=window,
    )


def priced_at(
    data: UiData, twin: TwinCache, target: str, model: str, end: float, *, compute: bool
) -> Diagnosis | None:
    """The diagnosis of the window ending at ``end`` (with its changes), its hints
    carrying the effects the twin has priced; with ``compute`` those not priced yet are
    computed (seconds of CPU, then cached). None: no window there."""
    found = data.diagnosis_at(target, model, end)
    if found is None:
        return None
    window, d = found
    intervals = getattr(data.source, "intervals", None)
    if intervals is None:
        return d
    return priced(
        d,
        intervals,
        config=data.config,
        cache=twin,
        info=dict(window.info or {}),
        compute=compute,
        window=window,
    )
