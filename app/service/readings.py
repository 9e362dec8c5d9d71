"""A stream's latest window and diagnosis as the self-metrics export it."""

from __future__ import annotations

from app.diagnose import Diagnosis
from app.model import Window
from app.selfmetrics import StreamReading

__all__ = ["stream_reading"]


def stream_reading(w: Window, d: Diagnosis) -> StreamReading:
    kv = w.gauges.get("kv_usage")
    waiting = w.gauges.get("waiting")
    return StreamReading(
        target=w.target,
        model_name=w.model_name,
        ttft_p99=d.ttft_p99,
        itl_p99=d.itl_p99,
        kv_usage_max=kv.max if kv is not None else None,
        waiting_avg=waiting.avg if waiting is not None else None,
        diagnosis_class=d.cls.value,
    )
