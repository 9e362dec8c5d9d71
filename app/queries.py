"""The read side shared by the API, the UI and the CLI: stored intervals → windows → JSON."""

from __future__ import annotations

import json
import math
import threading
from collections.abc import Iterable
from typing import Any

from app.model import HISTOGRAM_SIGNALS, Window
from app.store.sqlite import Store
from app.windows.aggregate import windows as make_windows

# API field prefix for each histogram signal (``queue_time`` is reported as ``queue_p99``).
FIELD_PREFIX: dict[str, str] = {
    "ttft": "ttft",
    "itl": "itl",
    "tpot": "tpot",
    "e2e": "e2e",
    "queue_time": "queue",
    "prefill_time": "prefill",
    "decode_time": "decode",
}
MAX_WINDOWS = 5000


class QueryError(ValueError):
    """A query the caller can fix (bad range, too many windows)."""


def _clean(x: float | None) -> float | None:
    if x is None or math.isnan(x) or math.isinf(x):
        return None
    return x


def window_to_dict(w: Window) -> dict[str, Any]:
    """Flatten a window into the API's JSON object."""
    out: dict[str, Any] = {
        "target": w.target,
        "model_name": w.model_name,
        "start": float(w.start),
        "end": float(w.end),
    }
    ge_top: list[str] = []
    for signal, prefix in FIELD_PREFIX.items():
        qs = w.quantiles.get(signal, {})
        for p in ("p50", "p90", "p99"):
            q = qs.get(p)
            out[f"{prefix}_{p}"] = _clean(q.value) if q is not None else None
            if q is not None and q.ge_top_bucket:
                ge_top.append(f"{prefix}_{p}")
        out[f"{prefix}_mean"] = _clean(w.means.get(signal))
        out[f"{prefix}_count"] = w.observations.get(signal)
    for gauge, prefix in (("running", "running"), ("waiting", "waiting"), ("kv_usage", "kv")):
        g = w.gauges.get(gauge)
        out[f"{prefix}_avg"] = _clean(g.avg) if g is not None else None
        out[f"{prefix}_max"] = _clean(g.max) if g is not None else None
    for counter, name in (
        ("preemptions", "preemptions_per_s"),
        ("prompt_tokens", "prompt_tokens_per_s"),
        ("generation_tokens", "generation_tokens_per_s"),
    ):
        out[name] = _clean(w.rates.get(counter))
    out["mean_prompt_len"] = _clean(w.means.get("prompt_len"))
    out["mean_gen_len"] = _clean(w.means.get("gen_len"))
    queries = w.increases.get("prefix_queries")
    hits = w.increases.get("prefix_hits")
    out["prefix_hit_ratio"] = hits / queries if queries and hits is not None else None
    out["requests_finished"] = sum(
        v for k, v in w.increases.items() if k.startswith("finished:")
    ) or (0.0 if any(k.startswith("finished:") for k in w.increases) else None)
    out["ge_top_bucket"] = ge_top
    out["covered_s"] = w.covered
    out["intervals"] = w.intervals
    out["reset"] = w.reset
    out["missing"] = list(w.missing)
    return out


def _check(start: float, end: float, length: float, step: float) -> None:
    if not (math.isfinite(start) and math.isfinite(end)) or end <= start:
        raise QueryError("end must be after start")
    if length <= 0 or step <= 0:
        raise QueryError("window and step must be positive")
    if (end - start) / step > MAX_WINDOWS:
        raise QueryError(f"more than {MAX_WINDOWS} windows: use a larger step")


def _first_end(start: float, end: float, step: float) -> float:
    return min((math.floor(start / step) + 1) * step, end)


def _windows_from(
    store: Store,
    target: str,
    model_name: str,
    *,
    first_end: float,
    end: float,
    length: float,
    step: float,
) -> list[Window]:
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
    _check(start, end, length, step)
    first_end = _first_end(start, end, step)
    return _windows_from(
        store, target, model_name, first_end=first_end, end=end, length=length, step=step
    )


def encode_window(w: Window) -> bytes:
    """A window as the API's JSON object, encoded as the API's responses are."""
    return json.dumps(
        window_to_dict(w), ensure_ascii=False, allow_nan=False, separators=(",", ":")
    ).encode()


class WindowCache:
    """Encoded API windows that can no longer change, per stream and resolution.

    A window ending at or before ``now - settle`` (``settle``: a scrape interval plus its
    timeout, so every delta ending inside it is stored) never changes again, so a
    dashboard that asks for the same day every refresh only computes its newest
    windows. At most ``cap`` windows are kept; over that the cache starts afresh (with the newest).
    """

    def __init__(self, settle: float, *, cap: int = 50_000) -> None:
        self.settle = settle
        self.cap = cap
        self._held: dict[tuple[str, str, float, float], dict[float, bytes]] = {}
        self._size = 0
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return self._size

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
    ) -> list[tuple[float, bytes]]:
        """``(end, encoded window)`` of :func:`stream_windows`' windows, oldest first."""
        _check(start, end, length, step)
        first_end = _first_end(start, end, step)
        n = int(math.floor((end - first_end) / step + 1e-9)) + 1
        ends = [first_end + k * step for k in range(n)]
        key = (target, model_name, length, step)
        with self._lock:
            held = dict(self._held.get(key, {}))
        fresh: dict[float, bytes] = {}
        todo = [e for e in ends if e not in held]
        i = 0
        for lo, hi in grid_runs(todo, step):
            j = i
            while j < len(todo) and todo[j] <= hi:
                j += 1
            run, i = todo[i:j], j
            ws = _windows_from(
                store, target, model_name, first_end=lo, end=hi, length=length, step=step
            )
            for e, w in zip(run, ws, strict=False):
                fresh[e] = encode_window(w)
        keep = {e: b for e, b in fresh.items() if e <= now - self.settle}
        if keep:
            with self._lock:
                if self._size + len(keep) > self.cap:
                    self._held.clear()
                    self._size = 0
                    if len(keep) > self.cap:  # the newest ones: a live view asks for them again
                        keep = {e: keep[e] for e in sorted(keep)[-self.cap :]}
                slot = self._held.setdefault(key, {})
                self._size += len(keep.keys() - slot.keys())
                slot.update(keep)
        return [(e, held[e] if e in held else fresh[e]) for e in ends if e in held or e in fresh]


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
    "QueryError",
    "WindowCache",
    "encode_window",
    "grid_runs",
    "stream_windows",
    "window_to_dict",
]
