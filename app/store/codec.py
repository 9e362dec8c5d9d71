"""Compact, lossless encoding of interval deltas and snapshots for the store.

An interval row holds only what changed: histogram buckets that moved (sparse, by index),
their sum and count, counter increases that are non-zero, and the gauges. Bucket layouts
are stored once in their own table and referenced by id. The JSON text is compressed
with zlib and a preset dictionary of the keys that recur, which is what keeps a stream-day
at 5 s within a few MB.
"""

from __future__ import annotations

import json
import math
import zlib
from collections.abc import Callable
from typing import Any

from app.model import Histogram, HistogramDelta, IntervalDelta, StreamSnapshot

# Recurring text primes the compressor: the payloads are too small to learn it alone.
_ZDICT = (
    b'{"h":{"ttft":[,"itl":[,"tpot":[,"e2e":[,"queue_time":[,"prefill_time":[,'
    b'"decode_time":[,"prompt_len":[,"gen_len":[,"step_tokens":[,'
    b'"c":{"preemptions":,"prompt_tokens":,"generation_tokens":,"prefix_queries":,'
    b'"prefix_hits":,"finished:stop":,"finished:length":,"finished:abort":,'
    b'"g":{"running":,"waiting":,"kv_usage":,"prefix_hit_rate":,"m":[],"e":{"0":'
    b"0.0,1.0,2.0,3.0,4.0,5.0,0.5,0.25,0.1,0.01]}"
)
# Payloads written since the optional signals (app.model.OPTIONAL_*_SIGNALS) were read:
# the same dictionary with their names appended, under their own magic; "z1" payloads
# still decode with the first.
_ZDICT2 = _ZDICT + (
    b'"spec_drafts":,"spec_draft_tokens":,"spec_accepted_tokens":,'
    b'"waiting_capacity":,"waiting_deferred":,"prompt_tokens_local_cache_hit":,'
    b'"z":["prompt_tokens_external_kv_transfer","external_prefix_queries",'
    b'"external_prefix_hits","admission_rejections"],"prompt_tokens_local_compute":'
)
_MAGIC = b"z1"
_MAGIC2 = b"z2"


def _num(x: float) -> float | int | str:
    """Encode a float as the shortest JSON that decodes to the same value."""
    if math.isnan(x):
        return "nan"
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    if x == int(x) and abs(x) < 2**53:
        return int(x)
    return x


def _float(v: float | int | str) -> float:
    return float(v)


def _pack(obj: Any) -> bytes:
    text = json.dumps(obj, separators=(",", ":"), allow_nan=False).encode()
    comp = zlib.compressobj(level=6, zdict=_ZDICT2)
    return _MAGIC2 + comp.compress(text) + comp.flush()


def _unpack(blob: bytes) -> Any:
    if blob.startswith(_MAGIC2):
        zdict = _ZDICT2
    elif blob.startswith(_MAGIC):
        zdict = _ZDICT
    else:
        raise ValueError("unknown payload encoding")
    decomp = zlib.decompressobj(zdict=zdict)
    return json.loads(decomp.decompress(blob[len(_MAGIC) :]) + decomp.flush())


def encode_delta(delta: IntervalDelta, layout_id: Callable[[tuple[float, ...]], int]) -> bytes:
    """Encode the changing part of an interval; ``layout_id`` interns bucket bounds."""
    hists: dict[str, list[Any]] = {}
    for name, hd in delta.histograms.items():
        flat: list[float | int | str] = []
        for idx in sorted(hd.buckets):
            inc = hd.buckets[idx]
            if inc:
                flat.extend((idx, _num(inc)))
        hists[name] = [layout_id(hd.bounds), _num(hd.count), _num(hd.sum), flat]
    obj: dict[str, Any] = {
        "h": hists,
        "c": {k: _num(v) for k, v in delta.counters.items() if v},
        "g": {k: _num(v) for k, v in delta.gauges.items()},
    }
    zero = [k for k, v in delta.counters.items() if not v]
    if zero:
        obj["z"] = zero
    if delta.missing:
        obj["m"] = list(delta.missing)
    return _pack(obj)


def decode_delta(
    blob: bytes,
    *,
    target: str,
    model_name: str,
    start: float,
    end: float,
    reset: bool,
    bounds_of: Callable[[int], tuple[float, ...]],
) -> IntervalDelta:
    """Rebuild an :class:`IntervalDelta` from :func:`encode_delta`'s bytes."""
    obj = _unpack(blob)
    hists: dict[str, HistogramDelta] = {}
    for name, (lid, count, total, flat) in obj["h"].items():
        buckets = {int(flat[i]): _float(flat[i + 1]) for i in range(0, len(flat), 2)}
        hists[name] = HistogramDelta(bounds_of(int(lid)), buckets, _float(total), _float(count))
    counters = {k: _float(v) for k, v in obj["c"].items()}
    for k in obj.get("z", []):
        counters[k] = 0.0
    return IntervalDelta(
        target=target,
        model_name=model_name,
        start=start,
        end=end,
        histograms=hists,
        counters=counters,
        gauges={k: _float(v) for k, v in obj["g"].items()},
        reset=reset,
        missing=tuple(obj.get("m", [])),
    )


def encode_stream(stream: StreamSnapshot) -> bytes:
    """Encode a cumulative stream snapshot (kept so deltas survive a restart)."""
    obj = {
        "n": stream.model_name,
        "h": {
            k: [list(h.bounds), [_num(c) for c in h.counts], _num(h.sum), _num(h.count)]
            for k, h in stream.histograms.items()
        },
        "c": {k: _num(v) for k, v in stream.counters.items()},
        "g": {k: _num(v) for k, v in stream.gauges.items()},
        "e": {e: {k: _num(v) for k, v in g.items()} for e, g in stream.engines.items()},
        "i": stream.info,
        "m": list(stream.missing),
        "u": stream.prefix_unit,
    }
    return _pack(obj)


def decode_stream(blob: bytes) -> StreamSnapshot:
    """Rebuild a :class:`StreamSnapshot` from :func:`encode_stream`'s bytes."""
    obj = _unpack(blob)
    return StreamSnapshot(
        model_name=obj["n"],
        histograms={
            k: Histogram(
                tuple(float(b) for b in bounds),
                tuple(_float(c) for c in counts),
                _float(total),
                _float(count),
            )
            for k, (bounds, counts, total, count) in obj["h"].items()
        },
        counters={k: _float(v) for k, v in obj["c"].items()},
        gauges={k: _float(v) for k, v in obj["g"].items()},
        engines={e: {k: _float(v) for k, v in g.items()} for e, g in obj["e"].items()},
        info=dict(obj["i"]),
        missing=tuple(obj["m"]),
        prefix_unit=obj["u"],
    )
