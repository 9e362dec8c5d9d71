"""What one window says of the KV transfer of disaggregated prefill/decode. Pure.

A P/D deployment ships each request's KV cache from a prefill instance to a decode
instance over a KV connector. vLLM's NIXL connector counts it on the instance that
starts the transfer — the decode instance in the default pull mode (it reads the
blocks from the prefill instance), the prefill instance in push mode — one observation
per successful transfer (``kv_xfer_time``, ``kv_post_time``, ``kv_xfer_bytes``,
``kv_xfer_descriptors``) and counts failures; the prefill instance counts the requests
whose KV it held for longer than its lease without the decode side reading it
(``kv_expired``). A KV consumer also shows its waiting requests by the stage of their
KV load (``kv_fetch_*``). Names and sources: ``docs/pd-fleets.md``.

**The transfer's share of the wait for a first token**, from the best source the window
has:

1. ``request_seconds`` (a consumer's page): requests whose KV is on its way (stage
   ``in_progress``) over the requests before their first token — waiting average plus
   the requests in prefill (first tokens per second × mean prefill time, Little's law)
   — as the queue share is measured. They are counted in ``waiting`` too, so the share
   is at most 1. A load not started yet (``waiting_to_start``) waits for the decode
   instance to allocate the blocks it receives into — its capacity, not the transfer.
2. ``time``: the mean transfer time over the mean TTFT, where the instance that
   transfers is the one whose first tokens are counted (a decode instance in pull mode:
   its TTFT runs from the request's arrival, so it holds the transfer).

**Roles** (:func:`page_role`): a page with the consumer's ``kv_fetch`` gauges is a KV
consumer — ``decode`` (a ``kv_both`` instance shows them too: configure its role);
one with connector families but no such gauge is a producer — ``prefill``; one without
connector families serves both phases itself — ``both``.

Every value is None when the window lacks its signal, never 0 for "unknown".
"""

from __future__ import annotations

from dataclasses import dataclass, fields

from app.model import Window

__all__ = [
    "FETCH_STAGES",
    "ROLES",
    "TRANSFER_COUNTERS",
    "TRANSFER_HISTOGRAMS",
    "TransferFacts",
    "is_connector",
    "page_role",
    "transfer_facts",
]

TRANSFER_HISTOGRAMS = ("kv_xfer_time", "kv_post_time", "kv_xfer_bytes", "kv_xfer_descriptors")
TRANSFER_COUNTERS = (
    "kv_xfer_failures",
    "kv_failed_notifications",
    "kv_expired",
    "kv_notifications_after_expiry",
)
FETCH_STAGES = ("kv_fetch_waiting_to_start", "kv_fetch_in_progress", "kv_fetch_completed_waiting")
ROLES = ("prefill", "decode", "both")


@dataclass(frozen=True, slots=True)
class TransferFacts:
    """Readings of one window's KV transfer (module docstring); None where unknown."""

    connector: bool
    consumer: bool
    transfers: float
    xfer_mean: float | None
    xfer_p50: float | None
    xfer_p99: float | None
    xfer_p99_ge: bool
    post_mean: float | None
    bytes_mean: float | None
    descriptors_mean: float | None
    bytes_per_s: float | None
    failures: float | None
    failed_notifications: float | None
    expired: float | None
    after_expiry: float | None
    failure_share: float | None
    fetch_waiting_to_start: float | None
    fetch_in_progress: float | None
    fetch_completed_waiting: float | None
    share: float | None
    share_source: str | None
    external_tokens: float | None
    computed_tokens: float | None

    def numbers(self) -> dict[str, float | None]:
        """The numeric readings under ``transfer_*`` names (``Diagnosis.facts``)."""
        out: dict[str, float | None] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if isinstance(value, bool) or not isinstance(value, int | float | None):
                continue
            out[f"transfer_{f.name}"] = None if value is None else float(value)
        return out


def _mean(w: Window, sig: str) -> float | None:
    if w.observations.get(sig, 0.0) <= 0:
        return None
    return w.means.get(sig)


def _avg(w: Window, sig: str) -> float | None:
    g = w.gauges.get(sig)
    return None if g is None else g.avg


def _carried(w: Window, sig: str) -> bool:
    return sig in w.histograms or sig in w.observations or sig in w.quantiles


def is_connector(w: Window) -> bool:
    """Whether the window's page carries any KV-connector family (a P/D member)."""
    return (
        any(_carried(w, s) for s in TRANSFER_HISTOGRAMS)
        or any(s in w.increases for s in TRANSFER_COUNTERS)
        or any(s in w.gauges for s in FETCH_STAGES)
    )


def page_role(w: Window) -> str:
    """``prefill``, ``decode`` or ``both`` from the families the page carries."""
    if any(s in w.gauges for s in FETCH_STAGES):
        return "decode"
    return "prefill" if is_connector(w) else "both"


def _share(
    w: Window, fetching: float | None, xfer_mean: float | None
) -> tuple[float | None, str | None]:
    """(the transfer's share of the wait for a first token, its source)."""
    ttft_n = w.observations.get("ttft", 0.0)
    covered = w.covered or (w.end - w.start)
    waiting = _avg(w, "waiting")
    prefill = _mean(w, "prefill_time")
    if fetching is not None and waiting is not None and covered > 0:
        prefilling = (ttft_n / covered) * prefill if prefill is not None else 0.0
        total = waiting + prefilling
        if total > 0:
            return min(1.0, fetching / total), "request_seconds"
        return 0.0, "request_seconds"
    ttft_mean = _mean(w, "ttft")
    if xfer_mean is not None and ttft_mean is not None and ttft_mean > 0:
        return min(1.0, xfer_mean / ttft_mean), "time"
    return None, None


def transfer_facts(w: Window) -> TransferFacts | None:
    """The window's KV-transfer readings; None when its page has no connector family."""
    if not is_connector(w):
        return None
    q = w.quantiles.get("kv_xfer_time", {})
    p50, p99 = q.get("p50"), q.get("p99")
    transfers = w.observations.get("kv_xfer_time", 0.0)
    time_sum = w.histograms["kv_xfer_time"].sum if "kv_xfer_time" in w.histograms else None
    bytes_hd = w.histograms.get("kv_xfer_bytes")
    bytes_per_s = None
    if bytes_hd is not None and time_sum is not None and time_sum > 0 and bytes_hd.count > 0:
        bytes_per_s = bytes_hd.sum / time_sum
    failures = w.increases.get("kv_xfer_failures")
    failure_share = None
    if failures is not None and failures + transfers > 0:
        failure_share = failures / (failures + transfers)
    stages = {s: _avg(w, s) for s in FETCH_STAGES}
    xfer_mean = _mean(w, "kv_xfer_time")
    share, source = _share(w, stages["kv_fetch_in_progress"], xfer_mean)
    return TransferFacts(
        connector=True,
        consumer=any(v is not None for v in stages.values()),
        transfers=transfers,
        xfer_mean=xfer_mean,
        xfer_p50=None if p50 is None else p50.value,
        xfer_p99=None if p99 is None else p99.value,
        xfer_p99_ge=bool(p99 is not None and p99.ge_top_bucket),
        post_mean=_mean(w, "kv_post_time"),
        bytes_mean=_mean(w, "kv_xfer_bytes"),
        descriptors_mean=_mean(w, "kv_xfer_descriptors"),
        bytes_per_s=bytes_per_s,
        failures=failures,
        failed_notifications=w.increases.get("kv_failed_notifications"),
        expired=w.increases.get("kv_expired"),
        after_expiry=w.increases.get("kv_notifications_after_expiry"),
        failure_share=failure_share,
        fetch_waiting_to_start=stages["kv_fetch_waiting_to_start"],
        fetch_in_progress=stages["kv_fetch_in_progress"],
        fetch_completed_waiting=stages["kv_fetch_completed_waiting"],
        share=share,
        share_source=source,
        external_tokens=w.increases.get("prompt_tokens_external_kv_transfer"),
        computed_tokens=w.increases.get("prompt_tokens_local_compute"),
    )
