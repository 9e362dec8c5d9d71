"""The store's payload encoding: rows written before the optional signals still decode."""

from __future__ import annotations

from app.model import HistogramDelta, IntervalDelta
from app.store.codec import decode_delta, encode_delta

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
