"""The store's payload encodings: rows written before the optional signals still decode;
binary rows, blocks and roll-ups give back every bit."""

from __future__ import annotations

import math
import random
from dataclasses import replace

import pytest

import app.windows.assemble as assemble
from app.model import HistogramDelta, IntervalDelta
from app.store.codec import decode_delta, encode_delta
from app.store.deltacodec import (
    BlockEntry,
    Shape,
    decode_block,
    decode_row,
    encode_block,
    encode_row,
    shape_of,
)
from app.store.rollupcodec import StoredRollup, decode_rollup, encode_rollup
from app.windows.rollup import Rollup

# encode_delta of DELTA by the codec before the optional signals ("z1" payloads).
Z1_BLOB = bytes.fromhex(
    "7a3178bbbfa97eafab468908a052a02673531d20cb18080d63636be1018512328646060618fe34a945"
    "f78439922f0c90bd61a067626c6e0a545f05b41625166221de812485d85a00645d31f5"
)
DELTA = IntervalDelta(
    target="t",
    model_name="m",
    start=5.0,
    end=10.0,
    histograms={"ttft": HistogramDelta((0.1, 0.5, 1.0), {0: 3.0, 3: 1.0}, 2.75, 4.0)},
    counters={"preemptions": 0.0, "prompt_tokens": 1200.0, "finished:stop": 4.0},
    gauges={"running": 7.0, "waiting": 0.0, "kv_usage": 0.4375},
    missing=("tpot",),
)


def decode(blob: bytes) -> IntervalDelta:
    return decode_delta(
        blob,
        target="t",
        model_name="m",
        start=5.0,
        end=10.0,
        reset=False,
        bounds_of=lambda _: (0.1, 0.5, 1.0),
    )


def test_a_payload_of_the_first_encoding_still_decodes() -> None:
    assert decode(Z1_BLOB) == DELTA


def test_optional_signals_round_trip_and_zero_counters_stay_zero() -> None:
    delta = IntervalDelta(
        target="t",
        model_name="m",
        start=5.0,
        end=10.0,
        histograms={},
        counters={
            "prompt_tokens_local_compute": 300.0,
            "prompt_tokens_external_kv_transfer": 0.0,
            "spec_accepted_tokens": 12.0,
            "admission_rejections": 0.0,
        },
        gauges={"waiting_capacity": 3.0, "waiting_deferred": 0.0},
    )
    blob = encode_delta(delta, lambda b: 0)
    assert blob[:2] == b"z2"
    assert decode(blob) == delta


# -- the binary rows and blocks, and roll-ups -------------------------------------------
ODD = IntervalDelta(
    target="t",
    model_name="m",
    start=5.0,
    end=10.0,
    histograms={
        # a count that is not the sum of the buckets, floats in buckets
        "ttft": HistogramDelta((0.1, 0.5, 1.0), {0: 3.0, 3: 1.5}, 2.75, 7.0),
        "itl": HistogramDelta((0.01,), {1: 2.0**53}, 1e300, 2.0**53),
        "e2e": HistogramDelta((1.0, 2.0), {}, 0.0, 0.0),
    },
    counters={"prompt_tokens": 1200.0, "preemptions": 0.0, "neg": -3.0, "tiny": 5e-324},
    gauges={
        "running": 7.0,
        "kv_usage": 0.4375,
        "nan": math.nan,
        "inf": math.inf,
        "minus_inf": -math.inf,
        "minus_zero": -0.0,
        "big": 1e20,
        "third": 1 / 3,
    },
    missing=("tpot", "queue_time"),
)


def _bits(d: IntervalDelta) -> str:
    """Every float with its exact bits (NaN equals NaN, -0.0 differs from 0.0)."""
    return repr(
        {
            "h": {
                k: (
                    h.bounds,
                    [(i, v.hex()) for i, v in h.buckets.items()],
                    h.sum.hex(),
                    h.count.hex(),
                )
                for k, h in d.histograms.items()
            },
            "c": {k: v.hex() for k, v in d.counters.items()},
            "g": {k: v.hex() for k, v in d.gauges.items()},
            "rest": (d.start, d.end, d.reset, d.missing),
        }
    )


def test_a_binary_row_keeps_every_float_bit_for_bit() -> None:
    layouts: dict[tuple[float, ...], int] = {}
    shapes: dict[Shape, int] = {}
    shape = shape_of(ODD, lambda b: layouts.setdefault(b, len(layouts)))
    blob = encode_row(ODD, shapes.setdefault(shape, len(shapes)))
    back = decode_row(
        blob,
        target="t",
        model_name="m",
        start=5.0,
        end=10.0,
        reset=False,
        shapes={v: k for k, v in shapes.items()}.__getitem__,
        bounds_of={v: k for k, v in layouts.items()}.__getitem__,
    )
    assert _bits(back) == _bits(ODD)
    assert len(blob) < len(encode_delta(ODD, lambda b: layouts[b]))


def test_random_rows_and_blocks_keep_every_float_bit_for_bit() -> None:
    """Every kind of number the decoder reads in line or not: whole numbers under 64 and
    over, up to 2**53, negative ones, floats with trailing zero bytes, NaN, infinities,
    -0.0, counts that are and are not the sum of their buckets, bucket gaps over 127
    and more than 127 buckets moved."""
    rng = random.Random(7)
    kinds = [
        lambda: float(rng.randrange(64)),
        lambda: float(rng.randrange(64, 2**20)),
        lambda: float(2**53 - rng.randrange(3)),
        lambda: -float(rng.randrange(1, 2**30)),
        lambda: rng.random() * 10 ** rng.randrange(-3, 9),
        lambda: float(rng.randrange(1, 9)) / 4,
        lambda: rng.choice([math.nan, math.inf, -math.inf, -0.0, 0.0]),
    ]

    def number() -> float:
        return rng.choice(kinds)()

    bounds = tuple(float(i) for i in range(300))
    deltas = []
    for k in range(60):
        hists = {}
        for name in ("ttft", "itl", "step_tokens"):
            n = rng.choice([0, 1, 5, 130, 200])
            index = sorted(rng.sample(range(len(bounds) + 1), n))
            buckets = {
                i: abs(number()) if rng.random() < 0.9 else float(rng.randrange(64)) for i in index
            }
            total = math.fsum(buckets.values())
            count = total if rng.random() < 0.5 or math.isnan(total) else number()
            hists[name] = HistogramDelta(bounds, buckets, number(), count)
        deltas.append(
            IntervalDelta(
                target="t",
                model_name="m",
                start=5.0 * k,
                end=5.0 * k + 5,
                histograms=hists,
                counters={"preemptions": number(), "prompt_tokens": number()},
                gauges={"running": number(), "kv_usage": number(), "waiting": number()},
            )
        )
    layouts: dict[tuple[float, ...], int] = {}
    shape = shape_of(deltas[0], lambda b: layouts.setdefault(b, len(layouts)))
    bounds_of = {v: k for k, v in layouts.items()}.__getitem__
    for d in deltas:
        back = decode_row(
            encode_row(d, 0),
            target="t",
            model_name="m",
            start=d.start,
            end=d.end,
            reset=False,
            shapes=[shape].__getitem__,
            bounds_of=bounds_of,
        )
        assert _bits(back) == _bits(d)
    blob = encode_block([BlockEntry(d.end, d.start, d.reset, encode_row(d, 0)) for d in deltas])
    back_all = decode_block(
        blob, target="t", model_name="m", shapes=[shape].__getitem__, bounds_of=bounds_of
    )
    assert [_bits(d) for d in back_all] == [_bits(d) for d in deltas]


def test_a_block_keeps_its_deltas_times_and_resets() -> None:
    layouts: dict[tuple[float, ...], int] = {}
    shape = shape_of(ODD, lambda b: layouts.setdefault(b, len(layouts)))
    deltas = [
        replace(ODD, start=5.0, end=10.0),
        replace(ODD, start=10.0, end=15.25, reset=True),
        replace(ODD, start=20.0, end=25.0, gauges={**ODD.gauges, "running": 8.0}),
    ]
    blob = encode_block([BlockEntry(d.end, d.start, d.reset, encode_row(d, 0)) for d in deltas])
    back = decode_block(
        blob,
        target="t",
        model_name="m",
        shapes=[shape].__getitem__,
        bounds_of={v: k for k, v in layouts.items()}.__getitem__,
    )
    assert [_bits(d) for d in back] == [_bits(d) for d in deltas]


def test_a_rollup_keeps_its_sums_exact() -> None:
    # 0.1 + 0.2 + 0.3 is not one float: the roll-up keeps the partials, not their rounding
    parts = [
        replace(ODD, start=e - 5.0, end=e, gauges={"kv": v}, counters={"x": v})
        for e, v in ((15.0, 0.1), (20.0, 0.2), (25.0, 0.3), (30.0, math.inf))
    ]
    roll = Rollup(0.0, 60.0)
    for d in parts:
        roll.add(d)
    layouts: dict[tuple[float, ...], int] = {}
    blob = encode_rollup(roll, lambda b: layouts.setdefault(b, len(layouts)))
    back = decode_rollup(
        blob, start=0.0, end=60.0, bounds_of={v: k for k, v in layouts.items()}.__getitem__
    )
    assert repr(back.window(target="t", model_name="m", start=0.0, end=60.0)) == repr(
        roll.window(target="t", model_name="m", start=0.0, end=60.0)
    )
    assert back.counters["x"].state() == roll.counters["x"].state()
    assert back.histograms["ttft"].layouts[(0.1, 0.5, 1.0)].exact[3].state() == (0, (6.0,), 0, 0, 0)


def test_a_stored_rollups_window_is_the_rollups_window() -> None:
    """``StoredRollup.window`` reads the row's numbers straight (whole bucket sums as
    they are written); random minutes — buckets in any order, sums that cancel to 0,
    fractional buckets, a layout change — give the window of the roll-up, bit for bit."""
    rng = random.Random(11)
    layouts_of = [(0.1, 0.5, 1.0), (0.01, 0.1, 1.0, 10.0), (1.0,)]
    checked = 0
    for _ in range(300):
        roll = Rollup(0.0, 60.0)
        first = rng.choice(layouts_of)
        for k in range(rng.randint(1, 12)):
            bounds = first if k < 6 or rng.random() < 0.7 else rng.choice(layouts_of)
            buckets: dict[int, float] = {}
            for i in rng.sample(range(len(bounds) + 1), rng.randint(0, len(bounds) + 1)):
                buckets[i] = rng.choice([0.0, 1.0, 3.0, -1.0, 2.0**40, 0.5, 1 / 3])
            hd = HistogramDelta(bounds, buckets, rng.random() * 10, float(rng.randint(0, 9)))
            roll.add(
                IntervalDelta(
                    target="t",
                    model_name="m",
                    start=k * 5.0,
                    end=k * 5.0 + 5.0,
                    histograms={"ttft": hd, "itl": replace(hd, sum=0.1)},
                    counters={"prompt_tokens": float(rng.randint(0, 5)), "x": rng.random()},
                    gauges={"running": rng.choice([1.0, 0.25, math.nan])},
                    missing=("tpot",) if rng.random() < 0.2 else (),
                )
            )
        ids: dict[tuple[float, ...], int] = {}
        blob = encode_rollup(roll, lambda b, ids=ids: ids.setdefault(b, len(ids)))
        bounds_of = {v: k for k, v in ids.items()}.__getitem__
        stored = StoredRollup(blob, start=0.0, end=60.0, bounds_of=bounds_of)
        want = roll.window(target="t", model_name="m", start=0.0, end=60.0)
        assert repr(stored.window(target="t", model_name="m", start=0.0, end=60.0)) == repr(want)
        assert repr(stored.rollup().window(target="t", model_name="m", start=0.0, end=60.0)) == (
            repr(want)
        )
        checked += any(len(h.layouts) > 1 for h in roll.histograms.values())
        # The row carries the percentiles: the window of one roll-up computes none.
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(assemble, "quantiles_of_delta", _no_quantiles)
            got = stored.window(target="t", model_name="m", start=0.0, end=60.0)
        assert repr(got) == repr(want)
    assert checked > 10  # layout changes were among them


def _no_quantiles(*args: object) -> None:
    raise AssertionError("percentiles computed again")
