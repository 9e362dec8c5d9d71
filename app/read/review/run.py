"""Read a past range from Prometheus, window it, diagnose every window, build the review.

The windows are the service's: ``(e - window, e]`` for ``e`` every ``step`` seconds
(multiples of ``step``, like the API) from the first after ``start`` up to ``end``; the
history is read from an hour and one window (plus one query step) before ``start``: the
first window is complete, and a problem window near ``start`` has the healthy hour
before its run to compare with (``app.evaluate.baseline``; that hour is judged but not
reported). Failed scrapes (Prometheus' ``up == 0``) inside a window are passed
to the diagnosis, which reports ``insufficient_data`` when too many are missing.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from datetime import UTC, datetime

from app.alerts.rules import Rule
from app.diagnose import DEFAULT_CONFIG, Diagnosis, DiagnosisConfig, diagnose
from app.diagnose.changes import LOOKBACK_S
from app.evaluate.baseline import deltas_timeline
from app.evaluate.replay import replay_alerts
from app.model import ErrorKind, IntervalDelta
from app.read.effects import priced
from app.read.review.report import AlertEvent, Review, build_review
from app.redact import redact_url
from app.sources.prometheus import History, PrometheusSource, TargetHistory
from app.sources.recording import ReplayedScrapes
from app.store.sqlite import ScrapeRecord
from app.windows.aggregate import windows

__all__ = [
    "default_resolution",
    "diagnose_history",
    "parse_time",
    "run_review",
    "would_have_fired",
]

_REL = re.compile(r"^now\s*(?:([+-])\s*((?:\d+(?:\.\d+)?[smhdw])+))?$")
_PART = re.compile(r"(\d+(?:\.\d+)?)([smhdw])")
_UNIT = {"s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0, "w": 604800.0}
MAX_POINTS = 5000  # query_range points per series the default resolution aims at


def parse_time(text: str, now: float) -> float:
    """Unix seconds, RFC 3339 / ISO 8601 (naive = UTC), ``now`` or ``now-2h30m``."""
    t = text.strip()
    try:
        return float(t)
    except ValueError:
        pass
    m = _REL.match(t)
    if m:
        if m.group(2) is None:
            return now
        seconds = sum(float(n) * _UNIT[u] for n, u in _PART.findall(m.group(2)))
        return now - seconds if m.group(1) == "-" else now + seconds
    try:
        dt = datetime.fromisoformat(t)
    except ValueError:
        raise ValueError(
            f"cannot read time {text!r}: use Unix seconds, RFC 3339 or now-1h"
        ) from None
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=UTC)
    return dt.timestamp()


def default_resolution(start: float, end: float, step: float) -> float:
    """The query step: 5 s, coarser for long ranges (≤ ``MAX_POINTS`` per series), never
    coarser than the window step."""
    return min(step, max(5.0, math.ceil((end - start) / MAX_POINTS)))


def diagnose_history(
    history: History,
    *,
    start: float,
    end: float,
    length: float,
    step: float,
    config: DiagnosisConfig = DEFAULT_CONFIG,
    lookback: float = 0.0,
) -> list[Diagnosis]:
    """Every window ending in ``(start, end]`` at multiples of ``step``, per stream; a
    problem window with what changed against the stream's healthy baseline, from the
    windows of the same history (``lookback`` seconds before ``start`` are judged for it
    too, and not returned)."""
    first_end = (math.floor((start - lookback) / step) + 1) * step
    out: list[Diagnosis] = []
    for target, hist in sorted(history.items()):
        ok, failed = hist.ok, hist.failed
        for model in hist.models():
            deltas = [d for d in hist.deltas if d.model_name == model]
            timeline = deltas_timeline(deltas, target, model, config)
            infos = [(s.ts, s.streams[model].info) for s in hist.snapshots if model in s.streams]
            for w in windows(
                deltas,
                start=first_end - length,
                end=end,
                length=length,
                step=step,
                target=target,
                model_name=model,
            ):
                n_failed = sum(1 for t in failed if w.start < t <= w.end)
                n_ok = sum(1 for t in ok if w.start < t <= w.end)
                info = _info_at(infos, w.end)
                w = replace(w, info=info) if info else w
                d = diagnose(w, config, failed_scrapes=n_failed, attempted_scrapes=n_ok + n_failed)
                if w.end <= start:
                    timeline.note(w.start, w.end, str(d.cls))
                    continue
                out.append(timeline.judge(w, d))
    out.sort(key=lambda d: (d.end, d.target, d.model_name))
    return out


def _info_at(infos: Sequence[tuple[float, Mapping[str, str]]], t: float) -> Mapping[str, str]:
    """The ``cache_config_info`` labels of the latest page at or before ``t`` (the first
    page's before it)."""
    found: Mapping[str, str] = next((i for _, i in infos if i), {})
    for ts, info in infos:
        if ts > t:
            break
        if info:
            found = info
    return found


def _replayed(hist: TargetHistory) -> ReplayedScrapes:
    """A target's history in the shape the alert replay reads."""
    out = ReplayedScrapes(hist.target)
    failed = ErrorKind.OTHER.value
    records = [ScrapeRecord(hist.target, t, True, None, None, 0.0, 0, 0) for t in hist.ok]
    records += [ScrapeRecord(hist.target, t, False, failed, None, 0.0, 0, 0) for t in hist.failed]
    out.records = sorted(records, key=lambda r: r.ts)
    for d in hist.deltas:
        out.deltas.setdefault(d.model_name, []).append(d)
    return out


def would_have_fired(
    history: History,
    rules: Sequence[Rule],
    *,
    start: float,
    end: float,
    length: float,
    step: float,
    config: DiagnosisConfig,
) -> list[AlertEvent]:
    """Replay the alert rules (``app.evaluate.replay``) over the history: every alert that fired,
    from its firing to its resolution (None: still firing at the end of the history);
    those that fired before ``start`` or after ``end`` are left out."""
    out: list[AlertEvent] = []
    for hist in history.values():
        if not hist.snapshots:
            continue
        fired: dict[str, AlertEvent] = {}
        replayed = replay_alerts(_replayed(hist), rules, length=length, step=step, config=config)
        for t in replayed:
            if t.state == "firing":
                fired[t.fingerprint] = AlertEvent(
                    name=t.alertname,
                    target=t.labels.get("target", hist.target),
                    model_name=t.labels.get("model_name", ""),
                    severity=t.labels.get("severity", ""),
                    starts_at=t.at,
                    ends_at=None,
                    summary=t.annotations.get("summary", ""),
                )
            elif t.state == "resolved" and t.fingerprint in fired:
                event = fired.pop(t.fingerprint)
                out.append(replace(event, ends_at=t.at))
        out.extend(fired.values())
    return [a for a in out if a.starts_at <= end and (a.ends_at is None or a.ends_at >= start)]


async def run_review(
    source: PrometheusSource,
    *,
    start: float,
    end: float,
    length: float = 60.0,
    step: float = 15.0,
    resolution: float | None = None,
    mode: str | None = None,
    config: DiagnosisConfig = DEFAULT_CONFIG,
    spike_factor: float = 3.0,
    rules: Sequence[Rule] | None = None,
    effects: bool = True,
) -> Review:
    """Read ``[start - length, end]`` from ``source`` and build the report; with
    ``rules``, also the alerts that would have fired. ``config`` carries the thresholds
    and every stream's SLOs (the service's: ``app.evaluate.settings.diagnosis_config``)."""
    if not end > start:
        raise ValueError("--end must be after --start")
    mode = mode or source.config.mode
    res = resolution or default_resolution(start, end, step)
    read_start = start - LOOKBACK_S - length - res
    if mode == "range":
        read_start = math.floor(read_start / res) * res
    history = await source.read(read_start, end, step=res, mode=mode)
    diagnoses = diagnose_history(
        history, start=start, end=end, length=length, step=step, config=config, lookback=LOOKBACK_S
    )
    alerts = None
    if rules is not None:
        alerts = would_have_fired(
            history, rules, start=start, end=end, length=length, step=step, config=config
        )
    notes = []
    if mode == "range":
        notes.append(
            f"Read with query_range at a {res:g} s resolution (each point is the latest "
            "sample at that time); --raw reads the stored samples themselves."
        )
    return build_review(
        diagnoses,
        source=redact_url(source.config.url or ""),
        selector=source.config.selector,
        start=start,
        end=end,
        window=length,
        step=step,
        alerts=alerts,
        spike_factor=spike_factor,
        notes=notes,
        price=_pricer(history, config) if effects else None,
    )


def _pricer(history: History, config: DiagnosisConfig) -> Callable[[Diagnosis], Diagnosis]:
    """A finding's hints priced on the what-if twin of the 15 minutes before its window
    (``app.read.effects``), from the history read for the review, at the page's
    ``cache_config_info`` as of the window's end."""

    def intervals(target: str, model: str, start: float, end: float) -> list[IntervalDelta]:
        hist = history.get(target)
        if hist is None:
            return []
        return [d for d in hist.deltas if d.model_name == model and start < d.end <= end]

    def price(d: Diagnosis) -> Diagnosis:
        hist = history.get(d.target)
        snaps = [] if hist is None else hist.snapshots
        infos = [(s.ts, s.streams[d.model_name].info) for s in snaps if d.model_name in s.streams]
        return priced(d, intervals, config=config, info=_info_at(infos, d.end))

    return price
