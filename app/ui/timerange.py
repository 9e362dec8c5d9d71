"""Time ranges of the pages: presets relative to the source's present, or a custom range.

Custom bounds are typed as UTC (``2026-11-29 09:05`` or with seconds, or a Unix time);
:func:`resolve` turns the control's values into ``(start, end)`` Unix seconds or says
what is wrong with them, and :func:`url_times` does the same for a page URL's ``at``,
``from`` and ``to``. A time is 1970 to the end of 9999 (what ``datetime`` shows):
``to=1e300`` is "time out of range", not an OverflowError and a blank page.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any
from urllib.parse import parse_qs

from dash import Dash, Input, Output, State, dcc, html, no_update

from app.read.windows import LATEST_TIME

PRESETS: dict[str, float] = {"15m": 900.0, "1h": 3600.0, "6h": 21600.0, "24h": 86400.0}
CUSTOM = "custom"
ALL = "all"
_FORMATS = ("%Y-%m-%d %H:%M:%S", "%Y-%m-%d %H:%M", "%Y-%m-%dT%H:%M:%S", "%Y-%m-%dT%H:%M")


class RangeError(ValueError):
    """A custom range that cannot be used; the message says why."""


def parse_time(text: str | None, name: str | None = None) -> float | None:
    """UTC ``YYYY-MM-DD HH:MM[:SS]`` (or ``T``), or Unix seconds; None when blank.

    RangeError for anything else (``nan``, ``inf``, words) and for a time before 1970 or
    after 9999; its message names ``name=text`` when a ``name`` is given.
    """
    if text is None or not str(text).strip():
        return None
    shown = f"{name}={text}" if name else repr(text)
    s = str(text).strip().removesuffix("Z").removesuffix(" UTC")
    try:
        value = float(s)
    except ValueError:
        pass
    else:
        if not math.isfinite(value):
            raise RangeError(f"not a time: {shown}")
        return _in_range(value, shown)
    for fmt in _FORMATS + tuple(f + ".%f" for f in _FORMATS if f.endswith("%S")):
        try:
            parsed = datetime.strptime(s, fmt).replace(tzinfo=UTC)
        except ValueError:
            continue
        return _in_range(parsed.timestamp(), shown)
    raise RangeError(f"not a time: {shown} (use YYYY-MM-DD HH:MM, UTC)")


def _in_range(value: float, shown: str) -> float:
    if not 0.0 <= value <= LATEST_TIME:
        raise RangeError(f"time out of range: {shown}")
    return value


def url_times(q: Mapping[str, str], *names: str) -> tuple[float | None, ...]:
    """The times in URL parameters ``names`` (None when absent), in that order.

    RangeError names the first that is not a time: ``time out of range: to=1e300``.
    """
    return tuple(parse_time(q.get(n), n) for n in names)


def fmt_time(ts: float) -> str:
    return datetime.fromtimestamp(ts, tz=UTC).strftime("%Y-%m-%d %H:%M:%S")


def resolve(
    choice: str | None,
    start_text: str | None,
    end_text: str | None,
    *,
    now: float,
    span: tuple[float, float] | None = None,
) -> tuple[float, float]:
    """``(start, end)`` for a preset (ending now), ``all`` (the source's span) or custom."""
    if choice in PRESETS:
        return now - PRESETS[choice], now
    if choice == ALL and span is not None:
        return span
    start, end = parse_time(start_text), parse_time(end_text)
    if start is None or end is None:
        raise RangeError("give both ends of the custom range")
    if end <= start:
        raise RangeError("the end of the range must be after its start")
    return start, end


# The data must start this far into a preset's range before the view fits to it.
FIT_MIN_SHARE = 0.1


def fit_to_data(
    start: float, end: float, first: float | None, *, step: float
) -> tuple[float, float] | None:
    """The part of a preset range ``(start, end]`` worth showing when the data begins at
    ``first``, well inside it (a fresh demo on the 1 h view is otherwise a sliver at the
    right edge): from a little before ``first`` to ``end``. None when there is no data or
    it fills the range (from its first tenth on)."""
    if first is None or first <= start + FIT_MIN_SHARE * (end - start) or first >= end:
        return None
    pad = max(step, 0.05 * (end - first))
    return max(start, first - pad), end


def query(search: str | None) -> dict[str, str]:
    """The first value of each URL query parameter."""
    return {k: v[0] for k, v in parse_qs((search or "").lstrip("?")).items() if v}


def control(
    range_id: str,
    from_id: str,
    to_id: str,
    custom_id: str,
    *,
    value: str,
    start: float | None,
    end: float | None,
    bounded: bool,
) -> html.Div:
    """Preset buttons plus the custom range inputs (shown when ``custom`` is chosen)."""
    options: list[dict[str, Any]] = [{"label": k, "value": k} for k in PRESETS]
    if bounded:
        options.append({"label": "all", "value": ALL})
    options.append({"label": "custom", "value": CUSTOM})
    return html.Div(
        [
            dcc.RadioItems(
                id=range_id,
                options=options,
                value=value,
                inline=True,
                className="range-presets",
            ),
            html.Div(
                [
                    html.Label("from (UTC) "),
                    dcc.Input(
                        id=from_id,
                        type="text",
                        debounce=True,
                        value=None if start is None else fmt_time(start),
                        placeholder="2026-11-29 09:00",
                    ),
                    html.Label(" to "),
                    dcc.Input(
                        id=to_id,
                        type="text",
                        debounce=True,
                        value=None if end is None else fmt_time(end),
                        placeholder="2026-11-29 10:00",
                    ),
                ],
                id=custom_id,
                className="range-custom",
                style={} if value == CUSTOM else {"display": "none"},
            ),
        ],
        className="range-control",
    )


def register_custom(
    app: Dash, now: Callable[[], float], *, choice: str, custom: str, lo: str, hi: str
) -> None:
    """Show the custom from/to fields when the range choice is "custom", filled with the
    last hour unless they already hold a range (ids of the page's own components)."""

    @app.callback(
        Output(custom, "style"),
        Output(lo, "value"),
        Output(hi, "value"),
        Input(choice, "value"),
        State(lo, "value"),
        State(hi, "value"),
        prevent_initial_call=True,
    )
    def show_custom(picked: str, start: str | None, end: str | None) -> tuple[Any, Any, Any]:
        if picked != CUSTOM:
            return {"display": "none"}, no_update, no_update
        if start and end:
            return {}, no_update, no_update
        t = now()
        return {}, fmt_time(t - 3600), fmt_time(t)
