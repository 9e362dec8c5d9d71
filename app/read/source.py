"""Where the pages' windows come from: one interface over the live store and a recording.

Both are a :class:`StoreSource`: the live service's own store, or a recording folder
written page by page into an in-memory store (:func:`app.sources.recording.record_into`,
through the service's own ``process`` step) — so a recording is judged exactly as the
live service would have judged it. A Prometheus-backed source only has to implement
:class:`WindowSource`.

A grid of windows on whole minutes (the day's and the week's views: 60 s windows every
60 s, 600 s every 600 s) is read from the store's minute roll-ups
(``app.read.windows.resolution``; the same windows as the raw deltas', bit for bit:
``app.windows.from_rollups``) — a day is 1,440 roll-ups instead of 17,280 deltas; any
other grid from the raw deltas.
"""

from __future__ import annotations

import bisect
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from app.diagnose.facts import READ_HISTOGRAMS, READ_IF_PRESENT_HISTOGRAMS
from app.evaluate.stream import with_page
from app.model import IntervalDelta, Window
from app.read.cells import gauge_samples, merge_cells
from app.read.twincache import page_info
from app.read.windows import resolution as rollup_resolution
from app.redact import redact_url
from app.sources.base import TargetState
from app.sources.prometheus import TargetHistory
from app.sources.recording import record_into, target_name
from app.store.sqlite import ScrapeRecord, Store
from app.windows.aggregate import windows as make_windows
from app.windows.from_rollups import iter_rollup_windows
from app.windows.rollup import RollupPart

# The histograms the diagnosis reads (it declares them); the UI draws only TTFT and ITL.
UI_HISTOGRAMS: tuple[str, ...] = READ_HISTOGRAMS + READ_IF_PRESENT_HISTOGRAMS


@dataclass(frozen=True, slots=True)
class TargetInfo:
    """A target as the overview shows it."""

    name: str
    url: str
    up: bool
    # Why it is down, or (while up) what its last scrape left out (PARTIAL_KINDS).
    last_error: str | None
    last_error_kind: str | None
    models: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Observed:
    """A window and what is known about the scrapes inside it (for data quality)."""

    window: Window
    failed_scrapes: int
    attempted_scrapes: int | None


class WindowSource(Protocol):
    """What the UI needs from a data source.

    ``now()`` is the source's present (wall clock when live, the last page of a
    recording); ``live`` says whether data keeps arriving; ``settled`` is how old a
    window end must be before its window can no longer change (cacheable).
    """

    label: str
    live: bool
    settled: float

    def now(self) -> float: ...

    def span(self) -> tuple[float, float] | None: ...

    def targets(self) -> list[TargetInfo]: ...

    def streams(self) -> list[tuple[str, str]]: ...

    def observe(
        self, target: str, model: str, *, first_end: float, end: float, length: float, step: float
    ) -> list[Observed]: ...

    def engines(self, target: str, model: str) -> dict[str, dict[str, float]]: ...


class _ScrapeCounts:
    """(failed, attempted) scrapes in any ``(start, end]``, from sorted scrape records."""

    def __init__(self, records: Sequence[ScrapeRecord]) -> None:
        self.times = [r.ts for r in records]
        self.failed = [0]
        for r in records:
            self.failed.append(self.failed[-1] + (0 if r.ok else 1))

    def __call__(self, start: float, end: float) -> tuple[int, int | None]:
        lo = bisect.bisect_right(self.times, start)
        hi = bisect.bisect_right(self.times, end)
        if hi == lo:
            return 0, None  # no records (e.g. pruned): let the diagnosis assume none failed
        return self.failed[hi] - self.failed[lo], hi - lo


def grid_windows(
    deltas: Sequence[IntervalDelta],
    *,
    target: str,
    model: str,
    first_end: float,
    end: float,
    length: float,
    step: float,
    keep: Iterable[str] | None = UI_HISTOGRAMS,
) -> list[Window]:
    """Windows ``(e - length, e]`` for ``e = first_end, first_end + step, ... <= end``.

    Uses per-step cells when ``length`` and ``first_end`` sit on the step grid (the
    usual case: see :mod:`app.read.cells`); otherwise one cell per delta. Only the
    histograms in ``keep`` are windowed (default: those the diagnosis reads).
    """
    on_grid = (
        abs(length / step - round(length / step)) < 1e-9
        and abs(first_end / step - round(first_end / step)) < 1e-9
    )
    parts = merge_cells(deltas, step if on_grid else None, keep=keep)
    return make_windows(
        parts,
        start=first_end - length,
        end=end,
        length=length,
        step=step,
        target=target,
        model_name=model,
        gauge_samples=gauge_samples(deltas),
    )


class StoreSource:
    """Windows read from a :class:`Store`; targets and clock supplied by the owner."""

    def __init__(
        self,
        store: Callable[[], Store],
        *,
        targets: Callable[[], list[TargetInfo]],
        clock: Callable[[], float] = time.time,
        label: str = "live",
        live: bool = True,
        settled: float = 10.0,
        span: tuple[float, float] | None = None,
    ) -> None:
        self._store = store
        self._targets = targets
        self._clock = clock
        self._span = span
        self.label = label
        self.live = live
        self.settled = settled

    def now(self) -> float:
        return self._clock()

    def span(self) -> tuple[float, float] | None:
        return self._span

    def targets(self) -> list[TargetInfo]:
        return self._targets()

    def streams(self) -> list[tuple[str, str]]:
        return self._store().streams()

    def observe(
        self, target: str, model: str, *, first_end: float, end: float, length: float, step: float
    ) -> list[Observed]:
        store = self._store()
        lo = first_end - length
        res = rollup_resolution(first_end, length, step)
        if res is not None:  # a day's or a week's view: its minutes, rolled up once
            parts = store.rollups(target, model, lo, end, res)
            ws = list(
                iter_rollup_windows(
                    parts,
                    start=lo,
                    end=end,
                    length=length,
                    step=step,
                    target=target,
                    model_name=model,
                )
            )
        else:
            ws = grid_windows(
                store.intervals(target, model, lo, end),
                target=target,
                model=model,
                first_end=first_end,
                end=end,
                length=length,
                step=step,
            )
        counts = _ScrapeCounts(store.scrapes(target, lo, end))
        # The server settings its latest page reports, as the evaluation round's windows
        # carry them (the hints start from them: ``app.evaluate.stream.with_page``).
        info = page_info(store, target, model) if ws else {}
        out = []
        for w in ws:
            failed, attempted = counts(w.start, w.end)
            out.append(Observed(with_page(w, info), failed, attempted))
        return out

    def intervals(self, target: str, model: str, start: float, end: float) -> list[IntervalDelta]:
        """The stored deltas of a stream ending in ``(start, end]`` (a fleet's
        ``DeltaSource``)."""
        return self._store().intervals(target, model, start, end)

    def first_end(self, target: str, model: str) -> float | None:
        """The end of a stream's oldest stored delta (None: it has none)."""
        return self._store().first_end(target, model)

    def rollups(
        self, target: str, model: str, start: float, end: float, res: float
    ) -> Iterator[RollupPart]:
        """A stream's stored roll-ups (a fleet's SLO counts read closed hours from them)."""
        return self._store().rollups(target, model, start, end, res)

    def earliest(self) -> float | None:
        """The start of a fixed range (nothing older exists); None when live."""
        return None if self._span is None else self._span[0]

    def engines(self, target: str, model: str) -> dict[str, dict[str, float]]:
        snap = self._store().last_snapshots().get(target)
        if snap is None:
            return {}
        stream = snap[1].get(model)
        return {} if stream is None else dict(stream.engines)


def target_info(state: TargetState, url: str) -> TargetInfo:
    """A source's target (``app.sources``) as the overview shows it."""
    rec = state.last_record
    snap = state.last_ok
    told = rec is not None and (not rec.ok or bool(state.problems))
    return TargetInfo(
        name=state.config.name,
        url=url,
        up=bool(rec and rec.ok),
        last_error=rec.error if rec is not None and told else None,
        last_error_kind=rec.error_kind if rec is not None and told else None,
        models=tuple(sorted(snap.streams)) if snap else (),
    )


def live_targets(
    states: Callable[[], Mapping[str, TargetState]],
) -> Callable[[], list[TargetInfo]]:
    """The target list of a running source (``service.source.targets``)."""

    def targets() -> list[TargetInfo]:
        return [target_info(s, redact_url(s.config.url)) for s in states().values()]

    return targets


def replay_into(store: Store, folder: str | Path, target: str) -> tuple[TargetInfo, float, float]:
    """Write a recording folder into ``store`` as target ``target``, page by page
    (:func:`app.sources.recording.record_into`: failed pages count as failed scrapes).

    Returns the target's info and the times of the first and last page; ValueError
    when the folder holds no ``<unix-seconds>.prom`` page.
    """
    state, first, last = record_into(store, folder, target)
    return target_info(state, str(Path(folder))), first, last


def load_recording(folder: str | Path, *, target: str | None = None) -> StoreSource:
    """A recording replayed into an in-memory store; a source whose present is its end.

    The target is named after the folder unless ``target`` is given.
    """
    path = Path(folder)
    store = Store(":memory:")
    info, first, end = replay_into(store, path, target or target_name(path, "recording"))
    return StoreSource(
        lambda: store,
        targets=lambda: [info],
        clock=lambda: end,
        label=f"recording {path}",
        live=False,
        settled=0.0,
        span=(first, end),
    )


def load_history(
    history: Mapping[str, TargetHistory], *, start: float, end: float, label: str
) -> StoreSource:
    """A range read from Prometheus (``PrometheusSource.read``) in an in-memory store.

    Each target's snapshots become successful scrapes, its ``up == 0`` samples failed
    ones, and its deltas are stored as the collector stores them: the pages then show
    the range exactly as they show live data, its end being the source's present.
    """
    store = Store(":memory:")
    infos = []
    for name, hist in sorted(history.items()):
        records = [ScrapeRecord(name, s.ts, True, None, None, 0.0, 0, 0) for s in hist.snapshots]
        records += [
            ScrapeRecord(name, ts, False, "other", "up == 0 in Prometheus", 0.0, 0, 0)
            for ts in hist.failed
        ]
        last = hist.snapshots[-1] if hist.snapshots else None
        snaps = [] if last is None else [(name, last.ts, s) for s in last.streams.values()]
        store.write_round(sorted(records, key=lambda r: r.ts), hist.deltas, snaps)
        infos.append(
            TargetInfo(
                name=name,
                url=label,
                up=bool(records) and max(records, key=lambda r: r.ts).ok,
                last_error=None,
                last_error_kind=None,
                models=tuple(hist.models()),
            )
        )
    return StoreSource(
        lambda: store,
        targets=lambda: infos,
        clock=lambda: end,
        label=label,
        live=False,
        settled=0.0,
        span=(start, end),
    )
