"""What to change when the KV transfer is the bottleneck (``transfer_bound``).

Entries of the hint catalog (``hints.CATALOG`` joins them), each built from the
window's transfer readings (``app.windows.transferfacts``) and the server's settings,
none shown without a reading for it. The levers of vLLM's NIXL connector (0.32's
``vllm/distributed/kv_transfer/kv_connector/v1/nixl``; the settings go in
``--kv-transfer-config``'s ``kv_connector_extra_config``):

* ``transfer-backend`` — the NIXL backend (``backends``, ``["UCX"]`` by default) and
  UCX's transports: a transfer moves a prompt's KV (2 × layers × KV heads × head dim ×
  bytes per token, docs/concepts.md) at the link's speed only over RDMA; bytes over transfer
  time far below an RDMA link's (``RDMA_FLOOR_BYTES_S``) point at a TCP fallback or a
  bounce through host memory.
* ``transfer-network`` — where the pools sit: the same rack or NVLink domain, a NIC not
  shared with other traffic; a tail of slow transfers (p99 over p50) or many transfers
  in progress at once means they queue on the link.
* ``transfer-block-size`` — ``--block-size`` on both pools: NIXL moves a transfer as
  one descriptor per block and layer (K and V), so small blocks make many small
  descriptors, each with its own overhead.
* ``transfer-buffer`` — ``kv_buffer_device``: ``cpu`` stages every transfer through
  host memory (a copy each way); keep it on the device where the NIC reaches GPU memory.
  Connectors that stage through a fixed buffer need it sized for the KV in flight.
* ``kv-lease`` — ``kv_lease_duration`` (30 s): how long the prefill side holds KV for the
  decode side to read; a request that outlives it loses its KV.
* ``decode-fetch-capacity`` — KV expires when the decode side fetches late: its link or
  its pool is behind the prefill pool (the fleet page gives the ratio to move to).
* ``transfer-failures`` — failed handshakes and notifications: the side channel
  (``VLLM_NIXL_SIDE_CHANNEL_HOST``/``PORT``) reachable from the decode side, the logs;
  ``kv_load_failure_policy: recompute`` trades an error for a prefill on the decode side.
"""

from __future__ import annotations

from app.diagnose.hintkit import EXPIRED, FAILURES, SLOW
from app.diagnose.hintspec import Context, HintSpec, Made
from app.diagnose.records import fmt_value
from app.windows.transferfacts import TransferFacts

__all__ = ["EXPIRED", "FAILURES", "RDMA_FLOOR_BYTES_S", "SLOW", "TRANSFER_HINTS"]

# Bytes per second of transfer below which the link is no RDMA link at work: a 25 Gb/s
# Ethernet link's worth (3.1 GB/s) less protocol overhead. The NICs of P/D deployments
# carry 100–400 Gb/s (12–50 GB/s) over RDMA.
RDMA_FLOOR_BYTES_S = 2.5e9
# Bytes per descriptor below which a transfer is many small writes: 64 KiB is where RDMA
# writes reach most of a link's bandwidth.
SMALL_DESCRIPTOR_BYTES = 64 * 1024
# A transfer p99 this many times its p50: transfers wait for the link behind others.
CONTENTION_TAIL = 3.0


def _t(x: Context) -> TransferFacts | None:
    return x.facts.transfer


def _size(b: float) -> str:
    """``1.3 GB`` / ``42 MB`` / ``32 KiB``-style byte counts (decimal, as links are sold)."""
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if b >= scale:
            return f"{b / scale:.3g} {unit}"
    return f"{b:.0f} B"


def _rate(t: TransferFacts) -> str:
    return "n/a" if t.bytes_per_s is None else f"{_size(t.bytes_per_s)}/s"


def _backend(x: Context) -> Made | None:
    t = _t(x)
    if t is None or t.xfer_mean is None or t.bytes_mean is None:
        return None
    slow = t.bytes_per_s is not None and t.bytes_per_s < RDMA_FLOOR_BYTES_S
    evidence = (
        f"a transfer of {_size(t.bytes_mean)} takes {fmt_value(t.xfer_mean, 's')} on "
        f"average: {_rate(t)}"
    )
    if slow:
        evidence += f", below an RDMA link's {_size(RDMA_FLOOR_BYTES_S)}/s"
    return Made(
        "check NIXL's backend and UCX's transports on both pools: kv_connector_extra_config "
        '{"backends": ["UCX"]} with UCX_TLS allowing rc (RDMA) and cuda_ipc/cuda_copy, '
        "not tcp; ucx_info -d lists the devices UCX sees; GPUDirect RDMA "
        "(nvidia_peermem) lets the NIC read GPU memory",
        evidence,
        promoted=slow,
    )


def _network(x: Context) -> Made | None:
    t = _t(x)
    if t is None or t.xfer_mean is None:
        return None
    parts = []
    tail = None
    if t.xfer_p50 and t.xfer_p99 is not None:
        tail = t.xfer_p99 / t.xfer_p50
        parts.append(f"transfer p99 {fmt_value(t.xfer_p99, 's', t.xfer_p99_ge)} = {tail:.1f}× p50")
    if t.fetch_in_progress is not None:
        parts.append(f"{fmt_value(t.fetch_in_progress)} requests' KV in transfer on average")
    if t.share is not None:
        parts.append(f"{fmt_value(t.share, 'ratio')} of the wait for a first token")
    if not parts:
        return None
    return Made(
        "place the prefill and decode pools close (one rack, one NVLink or InfiniBand "
        "domain), give the transfers a NIC of their own, and check the link's utilisation "
        "and errors (ibstat, ethtool -S) while the transfers are slow",
        "; ".join(parts),
        promoted=tail is not None and tail >= CONTENTION_TAIL,
    )


def _block_size(x: Context) -> Made | None:
    t = _t(x)
    if t is None or not t.descriptors_mean or t.bytes_mean is None:
        return None
    per = t.bytes_mean / t.descriptors_mean
    size = x.server.block_size
    evidence = (
        f"{fmt_value(t.descriptors_mean)} descriptors per transfer of {_size(per)} each "
        f"(block_size {size.shown()}{', assumed' if size.assumed else ''})"
    )
    small = per < SMALL_DESCRIPTOR_BYTES
    if not small:
        return None  # descriptors large enough: the block size is not the lever
    action = "raise --block-size on both pools (they must match)"
    if size.value is not None:
        new = int(size.value) * 2
        action = f"--block-size {new} on both pools (from {size.shown()}; they must match)"
    return Made(
        action + ": NIXL writes one descriptor per block and layer, so bigger blocks move "
        "the same KV in fewer, larger writes",
        evidence,
        promoted=True,
    )


def _buffer(x: Context) -> Made | None:
    t = _t(x)
    if t is None or t.bytes_mean is None or t.fetch_in_progress is None:
        return None
    flight = t.fetch_in_progress * t.bytes_mean
    return Made(
        'keep kv_buffer_device "cuda" (the default on a GPU) where the NIC reaches GPU '
        'memory; "cpu" stages every transfer through host memory. A connector that stages '
        f"through a fixed buffer needs room for the KV in flight (≈ {_size(flight)})",
        f"{fmt_value(t.fetch_in_progress)} requests' KV in transfer × {_size(t.bytes_mean)} "
        f"each ≈ {_size(flight)} in flight",
    )


def _lease(x: Context) -> Made | None:
    t = _t(x)
    if t is None or not t.expired:
        return None
    late = ""
    if t.after_expiry:
        late = f"; {t.after_expiry:.0f} completion notice(s) came after the lease ended"
    return Made(
        'raise kv_connector_extra_config {"kv_lease_duration": 60} on the prefill pool '
        "(default 30 s) while the decode side catches up — the held KV occupies the prefill "
        "pool's cache that much longer",
        f"{t.expired:.0f} request(s)' KV expired on the prefill side{late}",
    )


def _fetch_capacity(x: Context) -> Made | None:
    t = _t(x)
    if t is None or not t.expired:
        return None
    return Made(
        "add decode instances (or move one from the prefill pool: the fleet page's pool "
        "ratio), or slow admissions to the prefill pool: the decode side reads KV later "
        "than the prefill side can hold it",
        f"{t.expired:.0f} request(s)' KV expired before the decode side read it",
    )


def _failures(x: Context) -> Made | None:
    t = _t(x)
    if t is None or not t.failures:
        return None
    notes = ""
    if t.failed_notifications:
        notes = f", {t.failed_notifications:.0f} of them failed notifications"
    return Made(
        "read both pools' logs for the failed transfers (handshake, notification, "
        "transfer state); check the side channel (VLLM_NIXL_SIDE_CHANNEL_HOST and _PORT) "
        "is reachable from the decode side; kv_load_failure_policy recompute prefills a "
        "failed request again on the decode side instead of failing it",
        f"{t.failures:.0f} failed transfer(s){notes} of "
        f"{t.failures + t.transfers:.0f} ({fmt_value(t.failure_share, 'ratio')})",
        promoted=True,
    )


TRANSFER_HINTS: tuple[HintSpec, ...] = (
    HintSpec(
        id="transfer-backend",
        title="Check the KV transfer backend",
        why="a prompt's KV is megabytes to gigabytes (2 × layers × KV heads × head dim × "
        "bytes per token): only RDMA moves it at the link's speed, and each transfer is on "
        "the way to the client's first token",
        applies={SLOW: 1, FAILURES: 3},
        build=_backend,
    ),
    HintSpec(
        id="transfer-network",
        title="Check the network between the pools",
        why="transfers share the link: when more are in flight than it carries at full "
        "speed, each waits behind the others",
        applies={SLOW: 2, FAILURES: 4, EXPIRED: 4},
        build=_network,
    ),
    HintSpec(
        id="transfer-block-size",
        title="Move the KV in bigger blocks",
        why="each descriptor is a separate write with its own overhead: the same bytes in "
        "fewer, larger descriptors reach more of the link's bandwidth",
        applies={SLOW: 3},
        build=_block_size,
    ),
    HintSpec(
        id="transfer-buffer",
        title="Keep the transfer buffer on the GPU",
        why="staging through host memory adds a copy on each side of every transfer",
        applies={SLOW: 4},
        build=_buffer,
    ),
    HintSpec(
        id="kv-lease",
        title="Lengthen the KV lease",
        why="the prefill side frees a request's KV when its lease ends; the decode side then "
        "has nothing to read and the request fails or is prefilled again",
        applies={EXPIRED: 1},
        build=_lease,
    ),
    HintSpec(
        id="decode-fetch-capacity",
        title="Give the decode side room to fetch",
        why="KV expires when the decode side starts reading later than the lease: its pool "
        "or its link is behind the prefill pool",
        applies={EXPIRED: 2},
        build=_fetch_capacity,
    ),
    HintSpec(
        id="transfer-failures",
        title="Find why KV transfers fail",
        why="a failed transfer fails its request under vLLM's default kv_load_failure_policy "
        "(fail), or costs a second prefill with recompute",
        applies={FAILURES: 1, EXPIRED: 3},
        build=_failures,
    ),
)
