"""A stream's growing queue, read at the window shown, and the hints' effects on it.

The incident model (``app.twin.incident``) is arithmetic on the last few minutes of a
stream's 30-second tiles: cheap enough to read on every round and every page, so the
answer starts from the state now, not from the twin's last 5-minute bucket. Only a
change of an engine setting needs the twin (its capacity ratio, ``app.twin.drain``),
and that is cached per stream, settings and bucket as the twin is.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping

from app.diagnose.config import DiagnosisConfig
from app.diagnose.effects import Backlog, Effect
from app.model import Window
from app.read.twincache import Intervals, TwinCache, bucket_end, fitted
from app.twin.drain import TRAFFIC, capacity_ratio
from app.twin.incident import QUEUED, Incident, incident_of
from app.twin.whatif import ChangeError, knobs_for
from app.windows.aggregate import windows

LOOKBACK_S = 300.0
TILE_S = 30.0

Setting = tuple[str, float]


def growing(intervals: Intervals, window: Window, config: DiagnosisConfig) -> Incident | None:
    """The stream's incident at ``window``'s end when its queue grows (None: steady, or no
    queue in the window at all — then nothing is read)."""
    if (window.derived.waiting_avg or 0.0) < QUEUED:
        return None
    return growing_at(intervals, window.target, window.model_name, window.end, config)


def growing_at(
    intervals: Intervals, target: str, model: str, end: float, config: DiagnosisConfig
) -> Incident | None:
    """The stream's incident at ``end`` when its queue grows (None: steady)."""
    start = end - LOOKBACK_S
    tiles = windows(
        intervals(target, model, start, end),
        start=start,
        end=end,
        length=TILE_S,
        step=TILE_S,
        target=target,
        model_name=model,
    )
    inc = incident_of(tiles, config.slo_for(target, model).ttft_p99)
    return inc if inc.growing else None


def capacity_key(
    config: DiagnosisConfig, target: str, model: str, now: float, s: Setting
) -> tuple[Hashable, ...]:
    return ("capacity", target, model, bucket_end(now), repr(config.server_for(target)), s)


def backlog_effect(inc: Incident, setting: Setting, capacity: float | str) -> Effect:
    """One setting's effect on the growing queue; ``capacity``: the replica's completion
    rate with it ÷ without (1 for the traffic's keys), or why it is not known."""
    key, value = setting
    change = f"{key}={value:g}"
    if isinstance(capacity, str):
        return Effect(change, None, None, error=capacity)
    replicas = int(value) if key == "replicas" else 1
    rate = float(value) if key == "rate_scale" else 1.0
    d = inc.drain(replicas, rate, capacity)
    text = d.text(inc.backlog, inc.slo_ttft)
    b = Backlog(
        inc.backlog,
        d.replicas,
        d.drain_s,
        d.under_slo_after_s,
        d.still_grows_by,
        inc.slo_ttft,
        text,
    )
    return Effect(change, None, None, backlog=b)


def known_capacity(
    cache: TwinCache | None,
    config: DiagnosisConfig,
    window: Window,
    setting: Setting,
) -> float | str | None:
    """The setting's capacity ratio if known without a twin run (None: not yet)."""
    if setting[0] in TRAFFIC:
        return 1.0
    if cache is None:
        return None
    hit = cache.peek(capacity_key(config, window.target, window.model_name, window.end, setting))
    return hit if isinstance(hit, float | str) else None


def priced_capacity(
    intervals: Intervals,
    target: str,
    model: str,
    setting: Setting,
    *,
    now: float,
    config: DiagnosisConfig,
    cache: TwinCache | None,
    info: Mapping[str, str] | None,
) -> float | str:
    """The setting's capacity ratio on the stream's twin (computed where not cached); a
    string says why there is none."""
    if setting[0] in TRAFFIC:
        return 1.0

    def make() -> float | str:
        f = fitted(
            intervals, target, model, now=now, config=config, cache=cache, info=dict(info or {})
        )
        cal = f.calibration
        if cal is None:
            return f.error or "no twin"
        try:
            knobs, _ = knobs_for(cal.twin, {setting[0]: setting[1]})
        except (ChangeError, ValueError) as exc:
            return str(exc)
        ratio = capacity_ratio(cal, knobs)
        return "the twin completes nothing" if ratio is None else ratio

    if cache is None:
        return make()
    out: float | str = cache.get(capacity_key(config, target, model, now, setting), make)
    return out
