"""The NIXL KV connector's metrics, as vLLM 0.32 registers and observes them.

Names, HELP texts, buckets and what is counted where come from vLLM's source
(``vllm/distributed/kv_transfer/kv_connector/v1/nixl/stats.py``, ``NixlPromMetrics``
and ``NixlKVConnectorStats``; ``vllm/v1/metrics/loggers.py`` for the consumer's
``vllm:num_requests_kv_fetch_by_stage``):

* one observation per successful transfer, on the instance that started it (the decode
  instance in pull mode): ``vllm:nixl_xfer_time_seconds`` (the transfer's duration),
  ``vllm:nixl_post_time_seconds`` (posting it), ``vllm:nixl_bytes_transferred`` and
  ``vllm:nixl_num_descriptors``;
* counters: ``vllm:nixl_num_failed_transfers`` (transfers, handshakes and notifications
  that failed), ``vllm:nixl_num_failed_notifications`` (the notifications alone, also
  in the former), ``vllm:nixl_num_kv_expired_reqs`` (on the prefill instance: requests
  whose KV lease expired) and ``vllm:nixl_num_notifications_after_expiry``;
* the families are registered right after the speculative-decoding ones, before the
  scheduler's gauges, on every instance with the connector, producer or consumer.
"""

from __future__ import annotations

from app.sim.family_parts import Child, Family
from app.sim.metrics import Hist

__all__ = [
    "KV_FETCH_HELP",
    "KV_FETCH_STAGES",
    "NIXL_BYTES_BUCKETS",
    "NIXL_DESCRIPTOR_BUCKETS",
    "NIXL_POST_TIME_BUCKETS",
    "NIXL_XFER_TIME_BUCKETS",
    "ConnectorState",
    "connector_families",
]

# NixlPromMetrics: the post time takes the whole list, the transfer time all but the first.
NIXL_POST_TIME_BUCKETS = (
    0.001,
    0.005,
    0.01,
    0.025,
    0.05,
    0.075,
    0.1,
    0.2,
    0.3,
    0.5,
    0.75,
    1.0,
    5.0,
)
NIXL_XFER_TIME_BUCKETS = NIXL_POST_TIME_BUCKETS[1:]
# "uniform 2kb to 16gb range": 2 ** (10 + i) for i in 1, 3, …, 23 (2 KiB … 8 GiB).
NIXL_BYTES_BUCKETS = tuple(2 ** (10 + i) for i in range(1, 25, 2))
NIXL_DESCRIPTOR_BUCKETS = (
    10,
    20,
    30,
    50,
    75,
    100,
    200,
    400,
    1000,
    2000,
    4000,
    10000,
    20000,
    50000,
)
KV_FETCH_STAGES = ("waiting_to_start", "in_progress", "completed_waiting")
KV_FETCH_HELP = (
    "Number of waiting requests by async KV load stage. Stage labels: 'waiting_to_start' "
    "= needs an async KV load that has not started; 'in_progress' = load started and not "
    "yet reported finished; 'completed_waiting' = load finished, request not running yet."
)


class ConnectorState:
    """One instance's NIXL connector metrics: histograms and counters, cumulative."""

    def __init__(self) -> None:
        self.xfer_time = Hist(NIXL_XFER_TIME_BUCKETS)
        self.post_time = Hist(NIXL_POST_TIME_BUCKETS)
        self.bytes = Hist(NIXL_BYTES_BUCKETS)
        self.descriptors = Hist(NIXL_DESCRIPTOR_BUCKETS)
        self.failed_transfers = 0.0
        self.failed_notifications = 0.0
        self.kv_expired = 0.0
        self.notifications_after_expiry = 0.0

    def transferred(self, seconds: float, post: float, nbytes: float, descriptors: int) -> None:
        """One successful transfer (``NixlKVConnectorStats.record_transfer``)."""
        self.xfer_time.observe(seconds)
        self.post_time.observe(post)
        self.bytes.observe(nbytes)
        self.descriptors.observe(descriptors)


def connector_families(c: ConnectorState, base: dict[str, str]) -> list[Family]:
    """The NIXL families in the order ``NixlPromMetrics`` registers them."""

    def hist(name: str, help_: str, h: Hist) -> Family:
        return Family("histogram", name, help_, [Child(dict(base), lambda: h)], True)

    def counter(name: str, help_: str, attr: str) -> Family:
        return Family("counter", name, help_, [Child(dict(base), lambda: getattr(c, attr))], True)

    return [
        hist(
            "vllm:nixl_xfer_time_seconds",
            "Histogram of transfer duration for NIXL KV Cache transfers.",
            c.xfer_time,
        ),
        hist(
            "vllm:nixl_post_time_seconds",
            "Histogram of transfer post time for NIXL KV Cache transfers.",
            c.post_time,
        ),
        hist(
            "vllm:nixl_bytes_transferred",
            "Histogram of bytes transferred per NIXL KV Cache transfers.",
            c.bytes,
        ),
        hist(
            "vllm:nixl_num_descriptors",
            "Histogram of number of descriptors per NIXL  KV Cache transfers.",
            c.descriptors,
        ),
        counter(
            "vllm:nixl_num_failed_transfers",
            "Number of failed NIXL KV Cache transfers, including handshake and notification "
            "failures. NOTE: KV expiry is tracked separately in vllm:nixl_num_kv_expired_reqs.",
            "failed_transfers",
        ),
        counter(
            "vllm:nixl_num_failed_notifications",
            "Number of failed NIXL KV Cache notifications. Retained for compatibility; these "
            "failures are also included in vllm:nixl_num_failed_transfers.",
            "failed_notifications",
        ),
        counter(
            "vllm:nixl_num_kv_expired_reqs",
            "Number of requests that had their KV expire. NOTE: This metric is tracked on "
            "the P instance.",
            "kv_expired",
        ),
        counter(
            "vllm:nixl_num_notifications_after_expiry",
            "Number of completion notifications for requests that were no longer tracked, "
            "usually because their KV lease expired. The KV blocks may have been reused "
            "before the transfer finished. Counted per notification (one per remote rank), "
            "not per request.",
            "notifications_after_expiry",
        ),
    ]
