"""One target's scrape → scrape record, snapshot and interval deltas: a pure transition.

:func:`process` takes what is known of a target (``TargetState``) and one fetch result,
and returns what is known after it with the scrape's ``Outcome``; the state it was given
is left as it was. Every source that reads pages goes through it — the live scrape, a
recording replayed (:class:`PageFeed`), ``phasewatch diagnose`` — so a replay judges
exactly what the service would have stored.

A page that cannot be used (the fetch failed or the body came short, ``truncated``; not
Prometheus text, too many series, a series over the label limits) is a failed scrape:
the last good snapshot stays the baseline, so the next good page's delta covers the gap.
A page used with something left out (``PARTIAL_KINDS``: new streams past the caps of
``app.scrape.admission``, signals with invalid values or conflicting duplicate series,
``app.scrape.normalize``; a bad last line, ``app.scrape.cutline``) is an ok scrape: its
record names the first problem (``error_kind``, ``error``) and the state's ``problems``
all of them. A counter or histogram left out of a scrape keeps its previous value as the
baseline, so the next delta covers the gap as after a failed scrape; one that has no
previous value has no baseline, and its next value starts one (it is not counted from
zero) — after a page whose last line was cut, so does any series that page did not show.
"""

from __future__ import annotations

from dataclasses import replace
from typing import NamedTuple

from app.config import TargetConfig
from app.model import ErrorKind, IntervalDelta, Snapshot, StreamSnapshot
from app.scrape.admission import StreamAdmission
from app.scrape.client import FetchResult
from app.scrape.cutline import after_cut, last_line, withhold_cut
from app.scrape.label_limits import LabelLimits
from app.scrape.reader import PageReader
from app.scrape.result import ParseResult
from app.sources.base import Outcome, TargetState
from app.store.sqlite import ScrapeRecord
from app.windows.delta import layout_changed, snapshot_deltas

__all__ = ["PageFeed", "failed_outcome", "process"]


def failed_outcome(
    name: str, result: FetchResult, now: float, kind: ErrorKind, msg: str, parse_errors: int = 0
) -> Outcome:
    """The outcome of a scrape that produced nothing usable."""
    rec = ScrapeRecord(
        name, now, False, kind.value, msg, result.duration, result.nbytes, parse_errors
    )
    return Outcome(rec, None, [], result.started)


def process(
    state: TargetState,
    result: FetchResult,
    now: float,
    *,
    max_series: int | None = None,
    limits: LabelLimits | None = None,
    reader: PageReader | None = None,
    admission: StreamAdmission | None = None,
) -> tuple[TargetState, Outcome]:
    """Turn a fetch result into the target's next state and the scrape's outcome.

    ``limits``: the label limits every ``vllm:`` series must keep (none: no limits); a
    page over them is refused whole (``label_limit``), before anything of it is
    normalised, admitted or stored (the parser caches no series over them).
    ``reader``: the caches pages are read through, owned by the caller (none: fresh
    ones, learnt nothing from earlier pages). ``admission``: the stream caps new streams
    must fit under (none: every stream).
    """
    name = state.config.name
    if reader is None:
        reader = PageReader()
    parsed = _read(reader, result, max_series, limits)
    if isinstance(parsed, _Refused):
        outcome = failed_outcome(name, result, now, *parsed)
        return replace(state, last_record=outcome.record, problems=()), outcome
    prev = state.last_ok
    snap = reader.normalize(parsed, target=name, ts=now)
    if parsed.cut_last_line:
        # Its complete lines are used; what the cut could make wrong is withheld.
        snap = withhold_cut(snap, last_line(result.text or ""), prev)
    if admission is not None:
        snap = admission.admit(snap)
    deltas, changed = _deltas(prev, snap, now)
    snap = _carried(snap, prev)
    ok, kind, error = _judged(snap, changed)
    rec = ScrapeRecord(name, now, ok, kind, error, result.duration, result.nbytes, parsed.errors)
    new_state = replace(
        state,
        last_ok=snap,
        last_record=rec,
        metrics_disabled=snap.metrics_disabled,
        problems=tuple(p.kind.value for p in snap.problems),
    )
    return new_state, Outcome(rec, snap, deltas, result.started)


class _Refused(NamedTuple):
    """Why a page cannot be used: its error kind, the message, the parse errors."""

    kind: ErrorKind
    msg: str
    parse_errors: int = 0


def _read(
    reader: PageReader, result: FetchResult, max_series: int | None, limits: LabelLimits | None
) -> ParseResult | _Refused:
    """The page parsed, or why it cannot be used (module docstring): no body, not
    Prometheus text, too many series, a series over the label limits."""
    if result.error_kind is not None or result.text is None:
        return _Refused(result.error_kind or ErrorKind.OTHER, result.error or "no body")
    if not reader.looks_like_prometheus(result.text):
        return _Refused(ErrorKind.NOT_PROMETHEUS, "the page is not Prometheus text format")
    parsed = reader.parse(result.text, limits=limits)
    if max_series is not None and len(parsed.samples) > max_series:
        return _Refused(
            ErrorKind.TOO_MANY_SERIES,
            f"{len(parsed.samples)} vllm: series exceed the cap of {max_series}",
            parsed.errors,
        )
    if parsed.over_limit is not None:
        return _Refused(ErrorKind.LABEL_LIMIT, parsed.over_limit, parsed.errors)
    return parsed


def _deltas(
    prev: Snapshot | None, snap: Snapshot, now: float
) -> tuple[list[IntervalDelta], list[str]]:
    """The interval deltas from the previous good snapshot (each without what had no
    baseline), and the histograms whose bucket layout changed."""
    deltas: list[IntervalDelta] = []
    changed: list[str] = []
    if prev is not None and now > prev.ts:
        for model, cur_stream in snap.streams.items():
            prev_stream = prev.streams.get(model)
            if prev_stream is not None:
                changed.extend(layout_changed(prev_stream, cur_stream))
        cut_before = after_cut(prev)
        deltas = [
            based
            for d in snapshot_deltas(prev, snap)
            if (based := _based(d, prev.streams.get(d.model_name), cut_before)) is not None
        ]
    return deltas, changed


def _judged(snap: Snapshot, changed: list[str]) -> tuple[bool, str | None, str | None]:
    """The scrape's record: ok, and its error kind and text (module docstring)."""
    if snap.metrics_disabled:
        error = (
            "no vllm: or sglang: metrics on the page (vLLM run with --disable-log-stats, "
            "or SGLang without --enable-metrics?)"
        )
        return False, ErrorKind.METRICS_DISABLED.value, error
    if changed:
        error = "bucket layout changed for " + ", ".join(sorted(set(changed)))
        return False, ErrorKind.BUCKET_LAYOUT_CHANGED.value, error
    first = snap.problems[0] if snap.problems else None
    if first is None:
        return True, None, None
    return True, first.kind.value, "; ".join(_problem_texts(snap))


def _problem_texts(snap: Snapshot) -> list[str]:
    """The first problem's detail, then ``kind: detail`` of the others (a record's
    ``error`` is shown after its kind)."""
    first, *others = snap.problems
    return [first.detail, *(f"{p.kind.value}: {p.detail}" for p in others)]


def _carried(snap: Snapshot, prev: Snapshot | None) -> Snapshot:
    """``snap`` with the previous value of each counter and histogram it withheld: the
    baseline of the next delta, which then covers this scrape too."""
    if prev is None or not any(s.withheld for s in snap.streams.values()):
        return snap
    streams = dict(snap.streams)
    for model, stream in snap.streams.items():
        before = prev.streams.get(model)
        if not stream.withheld or before is None:
            continue
        hists = {k: before.histograms[k] for k in stream.withheld if k in before.histograms}
        counts = {k: before.counters[k] for k in stream.withheld if k in before.counters}
        if hists or counts:
            streams[model] = replace(
                stream,
                histograms={**stream.histograms, **hists},
                counters={**stream.counters, **counts},
                missing=tuple(m for m in stream.missing if m not in hists and m not in counts),
            )
    return replace(snap, streams=streams)


def _based(
    delta: IntervalDelta, before: StreamSnapshot | None, cut_before: bool = False
) -> IntervalDelta | None:
    """``delta`` without the counters and histograms that had no baseline: withheld from
    the previous scrape with no value to carry, or — after a page whose last line was cut
    (``cut_before``) — absent from it (their value now is not an increase: their lines may
    have come after the cut). None: a stream that page did not show at all."""
    if cut_before:
        if before is None:
            return None
        shown = before.histograms.keys() | before.counters.keys()
        unbased = (delta.histograms.keys() | delta.counters.keys()) - shown
    elif before is None or not before.withheld:
        return delta
    else:
        unbased = set(before.withheld) - before.histograms.keys() - before.counters.keys()
    if not unbased & (delta.histograms.keys() | delta.counters.keys()):
        return delta
    return replace(
        delta,
        histograms={k: v for k, v in delta.histograms.items() if k not in unbased},
        counters={k: v for k, v in delta.counters.items() if k not in unbased},
    )


class PageFeed:
    """One target's pages, fed in time order through :func:`process`.

    The one loop behind every page-by-page reader: a recording folder
    (:mod:`app.sources.recording`), a URL watched for a while
    (:func:`app.sources.watch.observe`), a test feeding fixture pages. It owns the
    target's state and the caches its pages are read through. ``name`` and ``url`` are
    labels (never fetched, not validated): the name the records and deltas carry.
    """

    def __init__(self, name: str, url: str = "http://recording.invalid/metrics") -> None:
        self.state = TargetState(TargetConfig.model_construct(name=name, url=url, labels={}))
        self.reader = PageReader()

    def __call__(self, ts: float, result: FetchResult) -> Outcome:
        """Process the page fetched at ``ts``; return its outcome."""
        self.state, outcome = process(self.state, result, ts, reader=self.reader)
        return outcome
