"""The API's probe object of a window (``app.api.schemas.ProbeWindowPublic``) is written
out for ``/docs``; the readings are ``app.windows.probefacts.ProbeFacts``'. The answer is
``ProbeFacts.as_dict`` (its histograms left out), so the model declares exactly those
fields, in that order, with the same types: a reading added to one and not the other
fails here."""

from __future__ import annotations

import dataclasses

from app.api.schemas import ProbeWindowPublic
from app.windows.probefacts import ProbeFacts


def test_the_probe_model_declares_every_probe_reading_in_order_with_its_type() -> None:
    readings = [
        (f.name, str(f.type))
        for f in dataclasses.fields(ProbeFacts)
        if "HistogramDelta" not in str(f.type)  # left out of the answer (``as_dict``)
    ]
    declared = [(name, str(kind)) for name, kind in ProbeWindowPublic.__annotations__.items()]
    assert declared == readings


def test_the_readings_left_out_of_the_answer_are_the_histograms() -> None:
    left_out = [
        f.name
        for f in dataclasses.fields(ProbeFacts)
        if f.name not in ProbeWindowPublic.model_fields
    ]
    assert left_out == ["ttft_hist", "itl_hist"]
