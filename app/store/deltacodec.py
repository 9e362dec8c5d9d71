"""Binary encoding of interval deltas: one a row while new, a minute of them in a block.

Where the bytes of a delta went in the JSON encoding (:mod:`app.store.codec`, 355 bytes
on average on the simulator's ``incident`` hour, zlib included): the signal names and
the layout ids of every histogram, counter and gauge, again in every row; numbers as
decimal text; each histogram's count although it is the sum of its bucket increases.
Here a delta is

* a **shape** id: which histograms (with their layout ids), counters, gauges and
  missing signals it carries, in order. Shapes are interned in the store like bucket
  layouts (``shapes`` table); a stream keeps one shape until a restart or a new series.
* then numbers only, in the shape's order: per histogram its count (one byte when it is
  the sum of its buckets, as it always is for a consistent histogram), its sum, how
  many buckets moved, and per moved bucket the gap to the previous index and the
  increase; each counter's increase; each gauge's value.

A **number** is a varint ``x``: even, the whole number ``x / 2`` (0 … 2**53); odd, a
float64 with ``(x - 1) / 2`` trailing zero bytes left out (the big-endian bytes that
remain follow; a sum's increase read from a large cumulative sum ends in zero bits, and
NaN, infinities and -0.0 keep their exact bits this way); ``17``, a negative whole
number (its magnitude follows as a varint); ``19``, "the sum of the buckets" (a count).
Nothing is rounded: every float comes back with the bits it had.

A **block** holds the deltas of one stream whose end lies in one minute, each with its
end, start (a flag when it is the previous delta's end) and reset flag, compressed
together with zlib: the structure of twelve deltas repeats, so it costs a fraction of
twelve rows (the rows' keys and SQLite's per-row overhead go too).
"""

from __future__ import annotations

import json
import math
import struct
import zlib
from collections.abc import Callable, Sequence
from typing import NamedTuple

from app.model import HistogramDelta, IntervalDelta

__all__ = [
    "BLOCK_MAGIC",
    "ROW_MAGIC",
    "BlockEntry",
    "Shape",
    "decode_block",
    "decode_row",
    "encode_block",
    "encode_row",
    "shape_of",
    "shape_from_text",
    "shape_text",
]

ROW_MAGIC = b"\x01"
BLOCK_MAGIC = b"\x02"
_NEG_INT = 17
_IMPLIED = 19
_MAX_WHOLE = 2**53
_F64 = struct.Struct(">d")
_PAD = [b"\0" * (8 - size) for size in range(9)]  # the trailing zero bytes left out
_RESET, _CONTIGUOUS = 1, 2


class Shape(NamedTuple):
    """What a delta carries, in order: ``(histogram, layout id)`` pairs, counter names,
    gauge names and missing signals."""

    histograms: tuple[tuple[str, int], ...]
    counters: tuple[str, ...]
    gauges: tuple[str, ...]
    missing: tuple[str, ...]


def shape_of(delta: IntervalDelta, layout_id: Callable[[tuple[float, ...]], int]) -> Shape:
    """The shape of ``delta``; ``layout_id`` interns bucket bounds."""
    return Shape(
        tuple((name, layout_id(hd.bounds)) for name, hd in delta.histograms.items()),
        tuple(delta.counters),
        tuple(delta.gauges),
        tuple(delta.missing),
    )


def shape_text(shape: Shape) -> str:
    """A shape as the text kept in the ``shapes`` table (JSON of its four lists)."""
    return json.dumps([[list(h) for h in shape.histograms], *shape[1:]], separators=(",", ":"))


def shape_from_text(text: str) -> Shape:
    hists, counters, gauges, missing = json.loads(text)
    return Shape(
        tuple((str(n), int(lid)) for n, lid in hists),
        tuple(counters),
        tuple(gauges),
        tuple(missing),
    )


# -- numbers ----------------------------------------------------------------------------
def _varint(out: bytearray, n: int) -> None:
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)


def _number(out: bytearray, x: float) -> None:
    if x.is_integer() and 0 <= x < _MAX_WHOLE and math.copysign(1.0, x) > 0:
        _varint(out, int(x) << 1)
        return
    if x.is_integer() and -_MAX_WHOLE < x < 0:
        out.append(_NEG_INT)
        _varint(out, -int(x))
        return
    raw = _F64.pack(x)
    kept = raw.rstrip(b"\0") or raw[:1]
    _varint(out, ((8 - len(kept)) << 1) | 1)
    out += kept


class _Reader:
    """Numbers read back from a buffer, left to right."""

    __slots__ = ("data", "pos")

    def __init__(self, data: bytes, pos: int = 0) -> None:
        self.data = data
        self.pos = pos

    def varint(self) -> int:
        n, self.pos = _varint_at(self.data, self.pos)
        return n

    def f64(self) -> float:
        pos = self.pos
        self.pos = pos + 8
        value: float = _F64.unpack_from(self.data, pos)[0]
        return value


# -- one delta --------------------------------------------------------------------------
def _body(out: bytearray, delta: IntervalDelta) -> None:
    for hd in delta.histograms.values():
        count = math.fsum(hd.buckets.values())
        if count == hd.count and math.copysign(1.0, hd.count) > 0:
            out.append(_IMPLIED)
        else:
            _number(out, float(hd.count))
        _number(out, float(hd.sum))
        _varint(out, len(hd.buckets))
        prev = -1
        for index in sorted(hd.buckets):
            _varint(out, index - prev - 1)
            _number(out, float(hd.buckets[index]))
            prev = index
    for value in delta.counters.values():
        _number(out, float(value))
    for value in delta.gauges.values():
        _number(out, float(value))


def _varint_at(data: bytes, pos: int) -> tuple[int, int]:
    """The varint at ``pos`` and the position after it."""
    n, shift = 0, 0
    while True:
        b = data[pos]
        pos += 1
        n |= (b & 0x7F) << shift
        if b < 0x80:
            return n, pos
        shift += 7


def _number_at(data: bytes, pos: int) -> tuple[float | None, int]:
    """The number at ``pos`` (None: "the sum of the buckets") and the position after it."""
    x, pos = _varint_at(data, pos)
    if not x & 1:
        return float(x >> 1), pos
    if x < _NEG_INT:
        size = 8 - (x >> 1)
        value: float = _F64.unpack(data[pos : pos + size].ljust(8, b"\0"))[0]
        return value, pos + size
    if x == _NEG_INT:
        n, pos = _varint_at(data, pos)
        return -float(n), pos
    if x == _IMPLIED:
        return None, pos
    raise ValueError(f"unknown number code {x}")


def _value_at(data: bytes, pos: int) -> tuple[float, int]:
    x = data[pos]
    if x & 1 and x < _NEG_INT:  # a float64 (its one-byte code): the usual non-whole value
        size = 8 - (x >> 1)
        start = pos + 1
        f: float = _F64.unpack(data[start : start + size] + _PAD[size])[0]
        return f, start + size
    value, pos = _number_at(data, pos)
    if value is None:
        raise ValueError("a count code where a value belongs")
    return value, pos


def _read_body(
    r: _Reader,
    shape: Shape,
    bounds_of: Callable[[int], tuple[float, ...]],
) -> tuple[dict[str, HistogramDelta], dict[str, float], dict[str, float]]:
    # The hot loop of every read: one function over a local position, and the usual
    # number (a whole number under 64: one even byte) read in line — the same values as
    # :class:`_Reader`'s, a few times faster.
    data, pos = r.data, r.pos
    hists: dict[str, HistogramDelta] = {}
    for name, lid in shape.histograms:
        if data[pos] == _IMPLIED:
            count: float | None = None
            pos += 1
        else:
            count, pos = _number_at(data, pos)
        b = data[pos]
        if b < 0x80 and not b & 1:
            total, pos = float(b >> 1), pos + 1
        else:
            total, pos = _value_at(data, pos)
        moved = data[pos]
        if moved < 0x80:
            pos += 1
        else:
            moved, pos = _varint_at(data, pos)
        buckets: dict[int, float] = {}
        index = -1
        for _ in range(moved):
            gap = data[pos]
            if gap < 0x80:
                pos += 1
            else:
                gap, pos = _varint_at(data, pos)
            index += gap + 1
            b = data[pos]
            if b < 0x80 and not b & 1:
                buckets[index] = float(b >> 1)
                pos += 1
            else:
                buckets[index], pos = _value_at(data, pos)
        if count is None:
            count = math.fsum(buckets.values())
        hists[name] = HistogramDelta(bounds_of(lid), buckets, total, count)
    flat: list[dict[str, float]] = []  # the counters, then the gauges
    for names in (shape.counters, shape.gauges):
        values: dict[str, float] = {}
        for name in names:
            b = data[pos]
            if b < 0x80 and not b & 1:
                values[name] = float(b >> 1)
                pos += 1
            else:
                values[name], pos = _value_at(data, pos)
        flat.append(values)
    r.pos = pos
    return hists, flat[0], flat[1]


def encode_row(delta: IntervalDelta, shape_id: int) -> bytes:
    """One delta as a row's payload, ``shape_id`` being the id of its :func:`shape_of`."""
    out = bytearray(ROW_MAGIC)
    _varint(out, shape_id)
    _body(out, delta)
    return bytes(out)


def decode_row(
    blob: bytes,
    *,
    target: str,
    model_name: str,
    start: float,
    end: float,
    reset: bool,
    shapes: Callable[[int], Shape],
    bounds_of: Callable[[int], tuple[float, ...]],
) -> IntervalDelta:
    """Rebuild a delta from :func:`encode_row`'s bytes."""
    r = _Reader(blob, len(ROW_MAGIC))
    shape = shapes(r.varint())
    hists, counters, gauges = _read_body(r, shape, bounds_of)
    return IntervalDelta(
        target=target,
        model_name=model_name,
        start=start,
        end=end,
        histograms=hists,
        counters=counters,
        gauges=gauges,
        reset=reset,
        missing=shape.missing,
    )


# -- a block ----------------------------------------------------------------------------
class BlockEntry(NamedTuple):
    """One delta of a block: its times, reset flag and :func:`encode_row` payload."""

    end: float
    start: float
    reset: bool
    row: bytes


def encode_block(entries: Sequence[BlockEntry]) -> bytes:
    """Deltas (oldest first, as :func:`encode_row` payloads) as one compressed block."""
    out = bytearray()
    _varint(out, len(entries))
    prev_end = math.nan
    for e in entries:
        if not e.row.startswith(ROW_MAGIC):
            raise ValueError("a block holds binary rows only")
        contiguous = e.start == prev_end
        out.append((_RESET if e.reset else 0) | (_CONTIGUOUS if contiguous else 0))
        out += _F64.pack(e.end)
        if not contiguous:
            out += _F64.pack(e.start)
        out += e.row[len(ROW_MAGIC) :]
        prev_end = e.end
    return BLOCK_MAGIC + zlib.compress(bytes(out), 9)


def decode_block(
    blob: bytes,
    *,
    target: str,
    model_name: str,
    shapes: Callable[[int], Shape],
    bounds_of: Callable[[int], tuple[float, ...]],
) -> list[IntervalDelta]:
    """The deltas of an :func:`encode_block` block, oldest first."""
    if not blob.startswith(BLOCK_MAGIC):
        raise ValueError("not a block")
    r = _Reader(zlib.decompress(blob[len(BLOCK_MAGIC) :]))
    out: list[IntervalDelta] = []
    prev_end = math.nan
    for _ in range(r.varint()):
        flags = r.data[r.pos]
        r.pos += 1
        end = r.f64()
        start = prev_end if flags & _CONTIGUOUS else r.f64()
        shape = shapes(r.varint())
        hists, counters, gauges = _read_body(r, shape, bounds_of)
        out.append(
            IntervalDelta(
                target=target,
                model_name=model_name,
                start=start,
                end=end,
                histograms=hists,
                counters=counters,
                gauges=gauges,
                reset=bool(flags & _RESET),
                missing=shape.missing,
            )
        )
        prev_end = end
    return out
