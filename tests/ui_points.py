"""Hand-built chart points and timelines for the UI's pure tests."""

from __future__ import annotations

from collections.abc import Sequence

from app.read.points import Point, Timeline

T0 = 1764403200.0


def pt(
    end: float,
    cls: str = "healthy",
    *,
    ttft: float | None = 0.5,
    ttft_ge: bool = False,
    itl: float | None = 0.05,
    itl_ge: bool = False,
    waiting: float | None = 0.0,
    kv: float | None = 0.4,
    preemptions: float | None = 0.0,
    sub_cause: str | None = None,
) -> Point:
    """A window ending at ``end``; p50s are a fifth of the p99s."""
    return Point(
        end=end,
        cls=cls,
        sub_cause=sub_cause,
        ttft_p50=None if ttft is None else ttft / 5,
        ttft_p50_ge=False,
        ttft_p99=ttft,
        ttft_p99_ge=ttft_ge,
        itl_p50=None if itl is None else itl / 5,
        itl_p50_ge=False,
        itl_p99=itl,
        itl_p99_ge=itl_ge,
        running_avg=8.0,
        waiting_avg=waiting,
        waiting_max=None if waiting is None else waiting * 2,
        kv_max=kv,
        preemptions=preemptions,
        requests=100.0,
    )


def timeline(
    points: Sequence[Point],
    *,
    step: float = 15.0,
    length: float = 60.0,
    target: str = "t",
    model: str = "m",
    slo_ttft: float = 2.0,
    slo_itl: float = 0.1,
) -> Timeline:
    start = points[0].end - step if points else T0
    end = points[-1].end if points else T0 + step
    return Timeline(
        target=target,
        model_name=model,
        start=start,
        end=end,
        length=length,
        step=step,
        points=tuple(points),
        slo_ttft_p99=slo_ttft,
        slo_itl_p99=slo_itl,
    )


def series(classes: Sequence[str], *, step: float = 15.0, **kw: object) -> list[Point]:
    """One point per class, ``step`` apart from ``T0 + step``."""
    return [pt(T0 + (i + 1) * step, c, **kw) for i, c in enumerate(classes)]  # type: ignore[arg-type]
