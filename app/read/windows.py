"""Windows read from the store for the API, the UI and the CLI: stored intervals → windows
→ JSON (:func:`app.windows.flat.window_to_dict`), checked before any work, cancellable
between chunks, the settled ones kept encoded (:class:`WindowCache`).

**Resolution.** Windows whose length, step and ends are whole hours are computed from
the store's hour roll-ups, whole minutes from its minute roll-ups (:meth:`Store.rollups`;
the same numbers as from the raw deltas, bit for bit: :mod:`app.windows.from_rollups`), any
other from the raw deltas, as Thanos and Mimir pick a downsampled resolution from the
step. Roll-ups are kept ``storage.rollup_retention_days``, raw deltas
``storage.retention_days``: beyond the latter only whole-minute windows see history.
"""

from __future__ import annotations

import functools
import json
import math
import threading
from collections import OrderedDict
from collections.abc import Iterable, Sequence

from app.model import HISTOGRAM_SIGNALS, Window
from app.store.rollups import RESOLUTIONS
from app.store.sqlite import Store
from app.windows.aggregate import windows as make_windows
from app.windows.flat import window_to_dict
from app.windows.from_rollups import iter_rollup_windows

MAX_WINDOWS = 11_000
"""Windows one request may compute, over all its streams (Prometheus' 11,000 points per
series): a day of 15 s windows (5,760) of one stream fits, a day of 60 s (1,440) of seven."""
MIN_STEP = 0.001
"""The finest step between windows, seconds (a window end must stay distinct from the next
one at today's Unix times)."""
LATEST_TIME = 253_402_300_799.0
"""9999-12-31 23:59:59 UTC, the last second ``datetime`` holds: later times are refused."""


class QueryError(ValueError):
    """A query the caller can fix (bad range, too many windows)."""


class Cancelled(Exception):
    """The caller went away: the work stopped between two of its chunks."""


def stop_if(cancel: threading.Event | None) -> None:
    """Raise :class:`Cancelled` once ``cancel`` is set (checked between chunks of work)."""
    if cancel is not None and cancel.is_set():
        raise Cancelled


def check_windows(
    start: float,
    end: float,
    length: float,
    step: float,
    *,
    streams: int = 1,
    max_length: float = LATEST_TIME,
) -> int:
    """Refuse, before any work, a window query the caller can fix; else its windows per stream.

    Refused: a bound that is not finite, or ``end <= start``; a length or step that is not
    a positive finite number, or a step under :data:`MIN_STEP`; a length over
    ``max_length`` (the history the store keeps: a longer window holds nothing more, and
    ``e - length`` would round ``e`` away — a window of 1e300 s once made ``start +
    length`` 0 and ~1e8 windows); more than :data:`MAX_WINDOWS` windows over all
    ``streams`` (range / step × streams, counted before any is built).
    """
    if not (math.isfinite(start) and math.isfinite(end)) or end <= start:
        raise QueryError("end must be after start")
    if not (math.isfinite(length) and length > 0 and math.isfinite(step) and step > 0):
        raise QueryError("window and step must be positive")
    if step < MIN_STEP:
        raise QueryError(f"step must be at least {MIN_STEP:g} s")
    if length > max_length:
        raise QueryError(
            f"window {length:g} s is longer than the {max_length:g} s of history kept "
            "(storage.retention_days)"
        )
    per_stream = (end - start) / step  # first: it bounds start / step below
    if per_stream * max(streams, 1) > MAX_WINDOWS:
        raise QueryError(_too_many(per_stream * max(streams, 1)))
    n = _count(_first_end(start, end, step), end, step)
    if n * streams > MAX_WINDOWS:
        raise QueryError(_too_many(n * streams))
    return n


def least_window_bytes(target: str, model_name: str) -> int:
    """The fewest bytes one window of this stream takes in an answer (:func:`encode_window`).

    Every window has the same fields: each value takes at least one character, and the
    target and model_name their JSON text (escapes only lengthen it). ``model_name`` is in
    every window, so a long one makes every window long: known before any is built.
    """
    return _least_fields() + _text_bytes(target) + 1 + _text_bytes(model_name) + 1


@functools.cache
def _least_fields() -> int:
    """Bytes of a window's fields with every value one character long."""
    blank = Window("", "", 0.0, 0.0, {}, {}, {}, {}, {}, {}, {}, 0.0, 0)
    return len(_ENCODER.encode(dict.fromkeys(window_to_dict(blank), 0)))


def _text_bytes(text: str) -> int:
    """Bytes of ``text`` as a JSON string without its quotes (UTF-8, escaped)."""
    return len(_ENCODER.encode(text).encode()) - 2


def check_answer_size(
    per_stream: int, streams: Iterable[tuple[str, str]], max_bytes: int | None
) -> None:
    """Refuse, before any work, ``per_stream`` windows of each of ``streams`` (target,
    model_name) whose answer would be over ``max_bytes`` (None: no cap) at the least
    (:func:`least_window_bytes`): the check of the answer written comes too late to spare
    the memory of writing it."""
    if max_bytes is None:
        return
    least = per_stream * sum(least_window_bytes(t, m) for t, m in streams)
    if least > max_bytes:
        raise QueryError(
            f"the answer would be at least {least / 1e6:.1f} MB, over the "
            f"{max_bytes / 1e6:.0f} MB limit: raise step or narrow the range"
        )


def _too_many(asked: float) -> str:
    return (
        f"more than {MAX_WINDOWS:,} windows per request ({asked:,.0f} asked: range / step "
        "× streams): raise step or narrow the range"
    )


def _first_end(start: float, end: float, step: float) -> float:
    return min((math.floor(start / step) + 1) * step, end)


def _count(first_end: float, end: float, step: float) -> int:
    return int(math.floor((end - first_end) / step + 1e-9)) + 1


def resolution(first_end: float, length: float, step: float) -> float | None:
    """The coarsest roll-up on whose edges every window ``(e - length, e]`` with ``e =
    first_end + k * step`` starts and ends (None: none, read the raw deltas)."""
    for res in RESOLUTIONS:
        if math.fmod(length, res) == math.fmod(step, res) == math.fmod(first_end, res) == 0:
            return res
    return None


def _windows_from(
    store: Store,
    target: str,
    model_name: str,
    *,
    first_end: float,
    end: float,
    length: float,
    step: float,
    lean: bool = False,
) -> Iterable[Window]:
    """The windows ending at ``first_end + k * step <= end``, computed as they are read
    (from roll-ups where :func:`resolution` allows, else from the raw deltas). ``lean``:
    from roll-ups, only what the API's object reads
    (``app.windows.assemble.window_of_values``)."""
    res = resolution(first_end, length, step)
    if res is not None:
        return iter_rollup_windows(
            store.rollups(target, model_name, first_end - length, end, res),
            start=first_end - length,
            end=end,
            length=length,
            step=step,
            target=target,
            model_name=model_name,
            lean=lean,
        )
    deltas = store.intervals(target, model_name, first_end - length, end)
    return make_windows(
        deltas,
        start=first_end - length,
        end=end,
        length=length,
        step=step,
        target=target,
        model_name=model_name,
    )


def stream_windows(
    store: Store,
    target: str,
    model_name: str,
    *,
    start: float,
    end: float,
    length: float,
    step: float,
) -> list[Window]:
    """Windows of ``length`` seconds for one stream, ending every ``step`` in ``(start, end]``.

    End times are multiples of ``step`` (so a refreshed page shows the same windows);
    each window covers ``(e - length, e]``.
    """
    check_windows(start, end, length, step)
    first_end = _first_end(start, end, step)
    return list(
        _windows_from(
            store, target, model_name, first_end=first_end, end=end, length=length, step=step
        )
    )


_ENCODER = json.JSONEncoder(ensure_ascii=False, allow_nan=False, separators=(",", ":"))


def encode_window(w: Window) -> bytes:
    """A window as the API's JSON object, encoded as the API's responses are."""
    return _ENCODER.encode(window_to_dict(w)).encode()


Key = tuple[str, str, float, float]
"""A stream's windows of one length and step: (target, model_name, length, step)."""

WINDOW_OVERHEAD = 120
"""Bytes a kept window costs beyond its encoded text: its end, its bytes object, its slot."""
SLOT_OVERHEAD = 400
"""Bytes a stream's slot costs beyond its key's texts: the key, its dict, its place."""


class WindowCache:
    """Encoded API windows that can no longer change, per stream and resolution.

    A window ending at or before ``now - settle`` (``settle``: a scrape interval plus its
    timeout, so every delta ending inside it is stored) never changes again, so a
    dashboard that asks for the same day every refresh only computes its newest
    windows.

    Bounded twice, both counted as windows are added: at most ``cap`` windows, and at
    most ``max_bytes`` (approximate: each window's encoded text plus
    :data:`WINDOW_OVERHEAD`, each slot's target and model_name plus
    :data:`SLOT_OVERHEAD`). Past either, the slots (a stream at one length and step)
    used least recently are dropped whole; a slot that alone is over keeps its newest
    windows (a live view asks for them again). Edge case: a window larger than the
    budget on its own is never kept.
    """

    def __init__(self, settle: float, *, cap: int = 50_000, max_bytes: int = 64_000_000) -> None:
        self.settle = settle
        self.cap = cap
        self.max_bytes = max_bytes
        # Least recently used first; per slot its windows and their bytes.
        self._held: OrderedDict[Key, dict[float, bytes]] = OrderedDict()
        self._slot_bytes: dict[Key, int] = {}
        self._size = 0
        self._bytes = 0
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return self._size

    @property
    def nbytes(self) -> int:
        """The approximate bytes held (what ``max_bytes`` bounds)."""
        return self._bytes

    def windows(
        self,
        store: Store,
        target: str,
        model_name: str,
        *,
        start: float,
        end: float,
        length: float,
        step: float,
        now: float,
        cancel: threading.Event | None = None,
    ) -> list[tuple[float, bytes]]:
        """``(end, encoded window)`` of :func:`stream_windows`' windows, oldest first.

        Raises :class:`Cancelled` between runs of windows once ``cancel`` is set.
        """
        n = check_windows(start, end, length, step)
        first_end = _first_end(start, end, step)
        ends = [first_end + k * step for k in range(n)]
        key = (target, model_name, length, step)
        with self._lock:
            slot = self._held.get(key)
            held = {} if slot is None else dict(slot)
            if slot is not None:
                self._held.move_to_end(key)
        fresh: dict[float, bytes] = {}
        todo = [e for e in ends if e not in held]
        i = 0
        for lo, hi in grid_runs(todo, step):
            stop_if(cancel)
            j = i
            while j < len(todo) and todo[j] <= hi:
                j += 1
            run, i = todo[i:j], j
            ws = _windows_from(
                store,
                target,
                model_name,
                first_end=lo,
                end=hi,
                length=length,
                step=step,
                lean=True,  # encoded at once
            )
            stop_if(cancel)
            for e, w in zip(run, ws, strict=False):
                fresh[e] = encode_window(w)
        keep = {e: b for e, b in fresh.items() if e <= now - self.settle}
        if keep:
            with self._lock:
                self._keep(key, keep)
        return [(e, held[e] if e in held else fresh[e]) for e in ends if e in held or e in fresh]

    def _keep(self, key: Key, keep: dict[float, bytes]) -> None:
        """Add settled windows to ``key``'s slot, then drop what is over the bounds."""
        slot = self._held.get(key)
        if slot is None:
            slot = self._held[key] = {}
            self._slot_bytes[key] = len(key[0]) + len(key[1]) + SLOT_OVERHEAD
            self._bytes += self._slot_bytes[key]
        self._held.move_to_end(key)
        added = 0
        for e, body in keep.items():
            if e not in slot:
                added += len(body) + WINDOW_OVERHEAD
                self._size += 1
            slot[e] = body
        self._slot_bytes[key] += added
        self._bytes += added
        while len(self._held) > 1 and (self._size > self.cap or self._bytes > self.max_bytes):
            self._drop(next(iter(self._held)))
        while slot and (self._size > self.cap or self._bytes > self.max_bytes):
            oldest = min(slot)
            cost = len(slot.pop(oldest)) + WINDOW_OVERHEAD
            self._slot_bytes[key] -= cost
            self._bytes -= cost
            self._size -= 1
        if not slot:
            self._drop(key)

    def _drop(self, key: Key) -> None:
        """Forget a slot and all it holds."""
        slot = self._held.pop(key)
        self._size -= len(slot)
        self._bytes -= self._slot_bytes.pop(key)


def windows_body(
    cache: WindowCache,
    store: Store,
    target: str,
    models: Sequence[str],
    *,
    start: float,
    end: float,
    length: float,
    step: float,
    now: float,
    max_length: float = LATEST_TIME,
    max_bytes: int | None = None,
    cancel: threading.Event | None = None,
) -> bytes:
    """``GET /windows``' JSON array: every model's windows, by end then model.

    The whole request is checked (:func:`check_windows` over all ``models``, and
    :func:`check_answer_size` against ``max_bytes``) before any window is built;
    :class:`Cancelled` is raised between streams and runs once ``cancel`` is set.
    """
    n = check_windows(start, end, length, step, streams=len(models), max_length=max_length)
    check_answer_size(n, ((target, m) for m in models), max_bytes)
    out: list[tuple[float, str, bytes]] = []
    for model_name in models:
        stop_if(cancel)
        ws = cache.windows(
            store,
            target,
            model_name,
            start=start,
            end=end,
            length=length,
            step=step,
            now=now,
            cancel=cancel,
        )
        out.extend((e, model_name, body) for e, body in ws)
    out.sort(key=lambda w: (w[0], w[1]))
    return b"[" + b",".join(b for _, _, b in out) + b"]"


def grid_runs(ends: Iterable[float], step: float) -> list[tuple[float, float]]:
    """Group sorted window ends on the ``step`` grid into contiguous ``(first, last)`` runs."""
    runs: list[tuple[float, float]] = []
    for e in ends:
        if runs and abs(e - runs[-1][1] - step) < 1e-6 * step:
            runs[-1] = (runs[-1][0], e)
        else:
            runs.append((e, e))
    return runs


__all__ = [
    "HISTOGRAM_SIGNALS",
    "LATEST_TIME",
    "MAX_WINDOWS",
    "MIN_STEP",
    "Cancelled",
    "QueryError",
    "WindowCache",
    "check_answer_size",
    "check_windows",
    "encode_window",
    "grid_runs",
    "least_window_bytes",
    "stop_if",
    "stream_windows",
    "windows_body",
]
