"""A roll-up (:class:`app.windows.rollup.Rollup`) as the bytes of one ``rollups`` row.

JSON compressed with zlib and a preset dictionary of the keys and signal names that
recur (as :mod:`app.store.codec` does), because a query over a day or a month decodes
hundreds to thousands of these and CPython's JSON parser is the fastest decoder at
hand. Every sum is written exactly: a sum that one float holds (a whole number, or one
float partial) as that number, any other as ``[int, [partials], +inf, -inf, nan]``
(:meth:`app.windows.exact.ExactSum.state`). Bucket layouts are the store's layout ids.

Object: ``n`` deltas, ``r`` resets, ``v`` covered seconds, ``t`` the first and last
delta end, ``h`` histograms (``name: [latest layout, [[layout, deltas, count, sum,
[index, n, …] whole bucket sums (ascending index, none 0), {index: sum} other bucket
sums (left out when none)], …]]``), ``c`` counters (``name: sum``) and ``k`` how many
deltas carried a counter where not all did, ``m`` missing (``name: deltas``), ``g``
gauges (``name: [sum, samples, max, first, last]``), and ``q`` the p50, p90 and p99 of the
latest layout of each histogram the API's object shows (``name: [p50, p90, p99]``, a
fourth number the bit mask of those at or past the top finite bound; null: no
observation): a roll-up never changes, so the window of one roll-up — a day of minute
windows, a month of hours — reads its percentiles instead of computing them (rows
written before ``q`` existed compute them).
"""

from __future__ import annotations

import json
import math
import zlib
from collections.abc import Callable, Collection
from typing import Any

from app.model import QUANTILES, GaugeStats, HistogramDelta, Quantile, Window
from app.windows.assemble import window_of_values
from app.windows.exact import ExactSum, HistogramSum, histogram_result
from app.windows.flat import FLAT_QUANTILES
from app.windows.quantile import quantiles_of_delta
from app.windows.rollup import GaugeRoll, HistRoll, Rollup

__all__ = ["StoredRollup", "decode_rollup", "encode_rollup"]

_MAGIC = b"r1"
_ZDICT = (
    b'{"n":12,"r":0,"v":60,"t":[,"h":{"ttft":[,"itl":[,"tpot":[,"e2e":[,'
    b'"queue_time":[,"prefill_time":[,"decode_time":[,"prompt_len":[,"gen_len":[,'
    b'"step_tokens":[,"c":{"preemptions":0,"prompt_tokens":,"generation_tokens":,'
    b'"prefix_queries":,"prefix_hits":,"finished:stop":,"finished:length":0,'
    b'"finished:abort":0,"finished:error":0,"finished:repetition":0,'
    b'"prompt_tokens_local_compute":,"prompt_tokens_local_cache_hit":,'
    b'"prompt_tokens_external_kv_transfer":0,"external_prefix_queries":0,'
    b'"external_prefix_hits":0,"admission_rejections":0,"spec_drafts":,'
    b'"spec_draft_tokens":,"spec_accepted_tokens":,"k":{},"m":{},"g":{"running":[,'
    b'"waiting":[0,12,0,0,0],"kv_usage":[[0,[,0,0,0],12,"waiting_capacity":[0,12,0,0,0],'
    b'"waiting_deferred":[0,12,0,0,0],"prefix_hit_rate":[,[0,[,0,0,0],12,[[1,12,'
)


def _exact(e: ExactSum) -> Any:
    whole, partials, pinf, ninf, nan = e.state()
    if not (pinf or ninf or nan):
        if not partials and abs(whole) < 2**53:
            return whole
        if not whole and len(partials) == 1:
            return partials[0]  # a float: JSON keeps the decimal point, so it reads back so
    return [whole, list(partials), pinf, ninf, nan]


def _exact_of(v: Any) -> ExactSum:
    if isinstance(v, int):
        return ExactSum.from_state((v, (), 0, 0, 0))
    if isinstance(v, float):
        return ExactSum.from_state((0, (v,), 0, 0, 0))
    whole, partials, pinf, ninf, nan = v
    return ExactSum.from_state((whole, partials, pinf, ninf, nan))


def _f(x: float) -> Any:
    """A float as the shortest JSON that reads back to the same bits."""
    if math.isnan(x) or math.isinf(x):
        return repr(x)
    if x.is_integer() and abs(x) < 2**53 and math.copysign(1.0, x) > 0:
        return int(x)
    return x


def encode_rollup(r: Rollup, layout_id: Callable[[tuple[float, ...]], int]) -> bytes:
    """``r`` as a row's payload; ``layout_id`` interns bucket bounds."""
    hists: dict[str, Any] = {}
    for name, roll in r.histograms.items():
        layouts = []
        for bounds, acc in roll.layouts.items():
            whole: list[int] = []
            for index in sorted(acc.ints):
                if acc.ints[index]:
                    whole.extend((index, acc.ints[index]))
            entry = [layout_id(bounds), acc.members, _exact(acc.count), _exact(acc.sum), whole]
            if acc.exact:
                entry.append({str(i): _exact(e) for i, e in sorted(acc.exact.items())})
            layouts.append(entry)
        hists[name] = [layout_id(roll.latest), layouts]
    obj = {
        "n": r.intervals,
        "r": r.resets,
        "v": _exact(r.covered),
        "t": [_f(r.first_end), _f(r.last_end)],
        "h": hists,
        "c": {k: _exact(v) for k, v in r.counters.items()},
        "k": {k: n for k, n in r.counter_members.items() if n != r.intervals},
        "m": r.missing,
        "g": {
            k: [_exact(g.total), g.count, _f(g.max), _f(g.first), _f(g.last)]
            for k, g in r.gauges.items()
        },
        "q": {
            name: _percentiles(roll.layouts[roll.latest].result(roll.latest))
            for name, roll in r.histograms.items()
            if name in FLAT_QUANTILES
        },
    }
    comp = zlib.compressobj(level=9, zdict=_ZDICT)
    text = json.dumps(obj, separators=(",", ":"), allow_nan=False).encode()
    return _MAGIC + comp.compress(text) + comp.flush()


_QS = tuple(q for _, q in QUANTILES)
_LABELS = tuple(label for label, _ in QUANTILES)


def _percentiles(hd: HistogramDelta) -> list[Any]:
    """``q``'s entry of one histogram: its percentiles as the window computes them."""
    qs = quantiles_of_delta(_QS, hd)
    entry: list[Any] = [None if q.value is None else _f(q.value) for q in qs]
    ge = sum(1 << i for i, q in enumerate(qs) if q.ge_top_bucket)
    return [*entry, ge] if ge else entry


def _stored_percentiles(stored: dict[str, list[Any]]) -> dict[str, dict[str, Quantile]]:
    out: dict[str, dict[str, Quantile]] = {}
    for name, entry in stored.items():
        ge = entry[3] if len(entry) > 3 else 0
        out[name] = {
            label: Quantile(None if v is None else float(v), bool(ge >> i & 1))
            for i, (label, v) in enumerate(zip(_LABELS, entry, strict=False))
        }
    return out


def _parse(blob: bytes) -> Any:
    if not blob.startswith(_MAGIC):
        raise ValueError("unknown roll-up encoding")
    decomp = zlib.decompressobj(zdict=_ZDICT)
    return json.loads(decomp.decompress(blob[len(_MAGIC) :]) + decomp.flush())


def decode_rollup(
    blob: bytes, *, start: float, end: float, bounds_of: Callable[[int], tuple[float, ...]]
) -> Rollup:
    """Rebuild the :class:`Rollup` of ``(start, end]`` from :func:`encode_rollup`'s bytes."""
    return _rollup(_parse(blob), start, end, bounds_of)


def _rollup(
    obj: Any,
    start: float,
    end: float,
    bounds_of: Callable[[int], tuple[float, ...]],
    only: tuple[Collection[str], str] | None = None,
) -> Rollup:
    histograms: dict[str, HistRoll] = {}
    counters = obj["c"]
    gauges = obj["g"]
    if only is not None:  # the histograms named and the counters with the prefix, no gauge
        names, prefix = only
        counters = {k: v for k, v in counters.items() if k.startswith(prefix)}
        gauges = {}
    for name, (latest, layouts) in obj["h"].items():
        if only is not None and name not in only[0]:
            continue
        accs: dict[tuple[float, ...], HistogramSum] = {}
        for lid, members, count, total, whole, *other in layouts:
            acc = HistogramSum()
            acc.members = members
            acc.ints = dict(zip(whole[::2], whole[1::2], strict=True))
            acc.exact = {int(i): _exact_of(v) for i, v in other[0].items()} if other else {}
            acc.count = _exact_of(count)
            acc.sum = _exact_of(total)
            accs[bounds_of(lid)] = acc
        histograms[name] = HistRoll(accs, bounds_of(latest))
    first, last = obj["t"]
    return Rollup(
        start=start,
        end=end,
        intervals=obj["n"],
        resets=obj["r"],
        covered=_exact_of(obj["v"]),
        first_end=float(first),
        last_end=float(last),
        histograms=histograms,
        counters={k: _exact_of(v) for k, v in counters.items()},
        counter_members={k: obj["k"].get(k, obj["n"]) for k in counters},
        missing=obj["m"],
        gauges={
            k: GaugeRoll(_exact_of(t), n, float(mx), float(fi), float(la))
            for k, (t, n, mx, fi, la) in gauges.items()
        },
    )


def _value(v: Any) -> float:
    """The rounded value of an exact sum as :func:`_exact` wrote it (``ExactSum.value``)."""
    if type(v) is list:
        return _exact_of(v).value()
    return float(v)  # an int (exact below 2**53) or a float


class StoredRollup:
    """A roll-up row as :func:`app.windows.from_rollups.iter_rollup_windows` reads it
    (:class:`~app.windows.rollup.RollupPart`), parsed when first asked.

    :meth:`window` builds the window of this roll-up alone from the row's numbers,
    without the exact sums of :class:`Rollup` (only the latest layout of each histogram
    is read, and a sum rounds as :meth:`ExactSum.value` rounds it): the same window as
    ``decode_rollup(...).window(...)``, faster — a day of minutes is 1,440 of these.
    """

    __slots__ = ("start", "end", "_blob", "_bounds_of", "_obj")

    def __init__(
        self,
        blob: bytes,
        *,
        start: float,
        end: float,
        bounds_of: Callable[[int], tuple[float, ...]],
    ) -> None:
        self.start = start
        self.end = end
        self._blob = blob
        self._bounds_of = bounds_of
        self._obj: Any = None

    def _parsed(self) -> Any:
        if self._obj is None:
            self._obj = _parse(self._blob)
        return self._obj

    @property
    def intervals(self) -> int:
        return int(self._parsed()["n"])

    def rollup(self) -> Rollup:
        return _rollup(self._parsed(), self.start, self.end, self._bounds_of)

    def rollup_of(self, histograms: Collection[str], counter_prefix: str) -> Rollup:
        """The roll-up with only the ``histograms`` named and the counters whose names
        start with ``counter_prefix`` (no gauge): what an SLO count reads, a few times
        faster to build than the whole."""
        return _rollup(
            self._parsed(), self.start, self.end, self._bounds_of, (histograms, counter_prefix)
        )

    def window(
        self, *, target: str, model_name: str, start: float, end: float, lean: bool = False
    ) -> Window:
        obj = self._parsed()
        bounds_of = self._bounds_of
        histograms: dict[str, HistogramDelta] = {}
        skipped = False
        for name, (latest, layouts) in obj["h"].items():
            skipped = skipped or len(layouts) > 1
            for lid, _, count, total, whole, *other in layouts:
                if lid != latest:
                    continue
                if other:
                    histograms[name] = histogram_result(
                        bounds_of(lid),
                        dict(zip(whole[::2], whole[1::2], strict=True)),
                        {int(i): _exact_of(v) for i, v in other[0].items()},
                        _value(total),
                        _value(count),
                    )
                else:  # whole sums only, written ascending and none 0: the buckets as they are
                    pairs = iter(whole)
                    histograms[name] = HistogramDelta(
                        bounds_of(lid),
                        {i: float(n) for i, n in zip(pairs, pairs, strict=True)},
                        _value(total),
                        _value(count),
                    )
        n = obj["n"]
        first, last = obj["t"]
        return window_of_values(
            target=target,
            model_name=model_name,
            start=start,
            end=end,
            histograms=histograms,
            layout_skipped=skipped,
            increases={k: _value(v) for k, v in obj["c"].items()},
            gauges={
                k: GaugeStats(avg=_value(t) / c, max=float(mx), last=float(la), first=float(fi))
                for k, (t, c, mx, fi, la) in obj["g"].items()
            },
            missing=obj["m"].keys(),
            covered=_value(obj["v"]) if n else 0.0,
            intervals=n,
            resets=obj["r"],
            gauge_span=float(last) - float(first) if n > 1 else 0.0,
            lean=lean,
            known=_stored_percentiles(obj["q"]) if "q" in obj else None,
        )
