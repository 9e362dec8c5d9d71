"""A disaggregated prefill/decode fleet: two pools of replicas, a router, a KV transfer.

The life of a request, as vLLM's P/D connectors (NIXL, pull mode) and a router such as
vLLM's proxy or llm-d's serve it (docs/concepts.md, "Disaggregation"):

1. It arrives at the fleet (the scenario's workload, Poisson) and the router sends it to
   the prefill instance with the fewest requests, with ``max_tokens`` 1: the prefill
   instance queues and prefills it like any request and finishes it at its first token
   (its TTFT and e2e are that instance's), **holding its KV blocks** for the decode side.
2. ``proxy_s`` later the router hands it to the decode instance with the fewest requests
   that has room (fewer than ``max_num_queued_reqs`` waiting, when the decode pool sets
   it); while none has, it waits in the router's queue.
3. The decode instance reads the KV over its link (``pd_scenario.Transfer``); the request
   waits, *deferred*, in its queue meanwhile (vLLM's ``WAITING_FOR_REMOTE_KVS``: its
   ``kv_fetch_by_stage{stage="in_progress"}``), then is admitted with blocks for the
   whole prompt, computes the last prompt token — its first token — and decodes the
   rest. Its TTFT, from its arrival at the decode instance, holds the transfer. The
   prefill instance frees the held KV when the transfer ends.
4. A request still in the router's queue ``lease_s`` after its prefill finished loses
   its KV: the prefill instance frees it and counts it expired
   (``vllm:nixl_num_kv_expired_reqs``); when the router hands it over, the decode
   instance's read fails. A transfer also fails with ``failure_prob``. A failed request
   finishes with ``error`` on the decode instance (vLLM's default
   ``kv_load_failure_policy``), counted in ``vllm:nixl_num_failed_transfers``.

Pages: every replica prints the NIXL families (``app.sim.connector``); the decode
instances also the consumer's ``vllm:num_requests_kv_fetch_by_stage`` and their received
prompt tokens as ``external_kv_transfer`` (and ``external_prefix_cache_*``). Transfers
are counted where they are started (pull mode): on the decode instance.

**Truth** (``app.sim.pd_truth``). Every replica keeps its own accounts
(``app.sim.truth``): the decode instance counts the time its requests wait for their KV
as ``rs_transfer``, the transfers it finished and failed; the prefill instance its
expired KV. A pool's truth is the sum of its replicas' accounts (``pool_truth``). What a
client sees: its TTFT (fleet arrival → first token on the decode instance) per interval
of its first token (``ClientAccount``).

Simplifications: the decode instance allocates the blocks it receives into when it
admits the request, after the transfer (vLLM does it before: a full decode pool then
shows as ``waiting_to_start``, which this model never does); a request whose transfer
fails is not in the decode instance's queue meanwhile; the prefill instance frees the
held KV when a transfer ends, failed or not; one link per decode instance, transfers in
turn on it.
"""

from __future__ import annotations

import heapq
import itertools
import math
import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from app.sim.engine import INTERVAL_S, Replica
from app.sim.pd_replicas import DecodeReplica, PrefillReplica
from app.sim.pd_scenario import PDScenario
from app.sim.pd_truth import ClientAccount, pool_truth
from app.sim.scenario import Phase
from app.sim.scheduler import Request
from app.sim.truth import Account, Verdict
from app.sim.workload import sample_request

# The fleet's parts, named here too (``app.sim.pd_replicas``, ``app.sim.pd_truth``).
__all__ = [
    "ClientAccount",
    "ClientRequest",
    "DecodeReplica",
    "PDFleet",
    "PrefillReplica",
    "pool_truth",
    "replica_names",
]

OnInterval = Callable[[Account, Verdict, Phase], None]


class ClientRequest:
    """A request's progress as its client sees it: the decode instance's tokens once
    there is one, ``error`` when its transfer failed; times from the fleet's door."""

    def __init__(self, meta: _Meta) -> None:
        self._meta = meta

    def _d(self) -> Request | None:
        return self._meta.decoding

    @property
    def failed(self) -> bool:
        return self._meta.failed

    @property
    def nout(self) -> int:
        d = self._d()
        return 0 if d is None else d.nout

    @property
    def done(self) -> bool:
        d = self._d()
        return self._meta.failed or (d is not None and d.done)

    @property
    def reason(self) -> str:
        d = self._d()
        return "error" if self._meta.failed or d is None else d.reason

    @property
    def arrival(self) -> float:
        return self._meta.arrival

    def _time(self, name: str) -> float:
        d = self._d()
        value = -1.0 if d is None else float(getattr(d, name))
        return value if value >= 0 else self._meta.arrival

    @property
    def first_sched(self) -> float:
        return self._time("first_sched")

    @property
    def first_token(self) -> float:
        return self._time("first_token")

    @property
    def last_token(self) -> float:
        return self._time("last_token")


def replica_names(sc: PDScenario) -> list[tuple[str, str]]:
    """(target name, role) of every replica: ``prefill-0``…, then ``decode-0``…."""
    out = [(f"prefill-{i}", "prefill") for i in range(sc.prefill_replicas)]
    out += [(f"decode-{i}", "decode") for i in range(sc.decode_replicas)]
    return out


@dataclass
class _Meta:
    """One request's trip through the fleet."""

    arrival: float
    output_len: int
    max_tokens: int
    prefill: PrefillReplica
    finished: float = -1.0
    expired: bool = False
    handed: bool = False
    failed: bool = False
    decoding: Request | None = None


class PDFleet:
    """The replicas of a P/D scenario and the router between them (module docstring).

    Replica ``i`` of the pool is seeded ``seed + 7919 * k`` with ``k`` its place in
    :func:`replica_names`; ``on_interval(name)`` gives each replica's truth callback.
    Advance with :meth:`advance_to`; not thread-safe (the server holds a lock).
    """

    def __init__(
        self,
        sc: PDScenario,
        seed: int = 0,
        version: str = "0.33",
        on_interval: Callable[[str], OnInterval | None] | None = None,
        on_client: Callable[[ClientAccount], None] | None = None,
    ) -> None:
        self.sc = sc
        self.names = replica_names(sc)
        self.prefill: list[PrefillReplica] = []
        self.decode: list[DecodeReplica] = []
        self.replicas: list[Replica] = []
        for k, (name, role) in enumerate(self.names):
            hook = None if on_interval is None else on_interval(name)
            if role == "prefill":
                p = PrefillReplica(sc.prefill, seed + 7919 * k, version, hook)
                p.on_finish = self._prefilled
                self.prefill.append(p)
                self.replicas.append(p)
            else:
                d = DecodeReplica(sc.decode, seed + 7919 * k, version, hook)
                d.on_finish = self._decoded
                self.decode.append(d)
                self.replicas.append(d)
        self.rng_arrival = random.Random(seed * 2 + 101)
        self.rng_request = random.Random(seed * 2 + 102)
        self.rng_fail = random.Random(seed * 2 + 103)
        self.now = 0.0
        self.next_arrival = self._draw(0.0)
        self.events: list[tuple[float, int, str, Any]] = []
        self.seq = itertools.count()
        self.meta: dict[Request, _Meta] = {}
        self.router: list[Request] = []  # prefilled requests waiting for a decode instance
        self.on_client = on_client
        self.client: dict[int, ClientAccount] = {}
        self.client_closed = 0

    # -- arrivals -------------------------------------------------------------------------

    def _draw(self, t: float) -> float:
        """The next Poisson arrival of the fleet's traffic after ``t`` (as ``Replica``)."""
        fleet = self.sc.fleet
        while True:
            phase, until = fleet.phase_at(t)
            rate, edge = phase.config.workload.rate_segment(t)
            end = min(until, edge)
            if rate > 0:
                cand = t + self.rng_arrival.expovariate(rate)
                if cand < end:
                    return cand
            if math.isinf(end):
                return math.inf
            t = end

    def _arrive(self, t: float) -> None:
        cfg = self.sc.fleet.phase_at(t)[0].config
        d = sample_request(
            self.rng_request, cfg.workload, cfg.engine.max_model_len, cfg.engine.block_size
        )
        self._route(t, d.prompt_len, d.output_len, d.max_tokens, d.prefix_tokens)

    def _route(self, t: float, prompt: int, output: int, max_tokens: int, prefix: int) -> _Meta:
        """Send a request to the least busy prefill instance (module docstring, 1)."""
        for p in self.prefill:
            p.advance_to(t)
        target = min(self.prefill, key=lambda p: p.num_running + p.num_waiting)
        r = target.submit(prompt, 1, 1, at=t, prefix=prefix)
        meta = self.meta[r] = _Meta(t, output, max_tokens, target)
        return meta

    def submit_client(self, prompt: int, output: int, at: float) -> ClientRequest:
        """A request from outside the workload (an HTTP answer, ``app.sim.pd_server``)
        arriving at sim time ``at``: its progress as the client sees it."""
        self.advance_to(at)
        return ClientRequest(self._route(max(at, self.now), prompt, output, output, 0))

    # -- the prefill side -------------------------------------------------------------------

    def _prefilled(self, r: Request, t: float) -> None:
        """A prefill instance finished ``r`` at ``t``: the router takes it ``proxy_s`` later."""
        meta = self.meta.get(r)
        if meta is None:
            return
        meta.finished = t
        transfer = self.sc.transfer_at(t)
        self._push(max(t + transfer.proxy_s, self.now), "handoff", r)
        self._push(t + transfer.lease_s, "lease", r)

    def _push(self, t: float, kind: str, data: Any) -> None:
        heapq.heappush(self.events, (t, next(self.seq), kind, data))

    # -- the router and the transfer -----------------------------------------------------------

    def _dispatch(self, t: float) -> None:
        """Hand the router's requests, oldest first, to decode instances with room."""
        while self.router:
            for d in self.decode:
                d.advance_to(t)
            ready = [d for d in self.decode if d.has_room()]
            if not ready:
                return
            r = self.router.pop(0)
            self._start(min(ready, key=lambda d: d.load), r, t)

    def _start(self, d: DecodeReplica, r: Request, t: float) -> None:
        """Start reading ``r``'s KV on ``d`` at ``t`` (module docstring, 3–4)."""
        meta = self.meta[r]
        meta.handed = True
        tr = self.sc.transfer_at(t)
        cfg = d.cfg
        external = max(0, r.prompt_len - 1)
        blocks = -(-external // cfg.engine.block_size)
        descriptors = blocks * cfg.model.layers * 2
        nbytes = float(external * cfg.model.kv_bytes_per_token)
        if meta.expired:
            meta.failed = True
            self._push(t + tr.latency_s, "failed", (d, r, t))
            d.failing.append((t, t + tr.latency_s))
            return
        start = max(t, d.link_free)
        wire = nbytes / (tr.bandwidth_gb_s * 1e9)
        d.link_free = start + wire
        end = start + wire + tr.latency_s + descriptors * tr.per_descriptor_s
        if self.rng_fail.random() < tr.failure_prob:
            meta.failed = True
            self._push(end, "failed", (d, r, t))
            d.failing.append((t, end))
            return
        post = descriptors * tr.post_per_descriptor_s
        dr = d.submit(
            r.prompt_len,
            meta.output_len,
            meta.max_tokens,
            at=t,
            ready=end,
            external=external,
        )
        self.meta[dr] = meta
        meta.decoding = dr
        self._push(end, "landed", (d, r, dr, end - t, post, nbytes, descriptors))

    def _landed(self, t: float, data: Any) -> None:
        d, r, _dr, seconds, post, nbytes, descriptors = data
        d.advance_to(t)
        d.connector.transferred(seconds, post, nbytes, descriptors)
        d.truth.cur.acct.transfers += 1
        self._release(r, t)

    def _failed(self, t: float, data: Any) -> None:
        d, r, began = data
        d.advance_to(t)
        d.failing = [f for f in d.failing if f != (began, t)]
        d.connector.failed_transfers += 1
        d.truth.cur.acct.transfer_failed += 1
        d.metrics.success["error"] += 1
        self._release(r, t)
        self._client(t, None)

    def _release(self, r: Request, t: float) -> None:
        meta = self.meta.pop(r, None)
        if meta is not None and not meta.expired:
            meta.prefill.advance_to(t)
            meta.prefill.release_held(r)

    def _lease(self, t: float, r: Request) -> None:
        """``r``'s lease ran out: expired unless the decode side picked it up."""
        meta = self.meta.get(r)
        if meta is None or meta.handed:
            return
        p = meta.prefill
        p.advance_to(t)
        meta.expired = True
        p.connector.kv_expired += 1
        p.truth.cur.acct.kv_expired += 1
        p.release_held(r)

    # -- the decode side --------------------------------------------------------------------

    def _decoded(self, r: Request, t: float) -> None:
        """A decode instance finished ``r``: the client's TTFT ends at its first token."""
        meta = self.meta.pop(r, None)
        if meta is not None:
            self._client(r.first_token, r.first_token - meta.arrival)

    def _client(self, t: float, ttft: float | None) -> None:
        k = int(t // INTERVAL_S)
        acct = self.client.get(k)
        if acct is None:
            acct = self.client[k] = ClientAccount(k * INTERVAL_S, (k + 1) * INTERVAL_S)
        if ttft is None:
            acct.failed += 1
            return
        acct.first_tokens += 1
        acct.ttft_sum_s += ttft
        acct.ttfts.append(ttft)
        if ttft > self.sc.fleet.phase_at(t)[0].config.slo.ttft_s:
            acct.ttft_over += 1

    # -- the loop ---------------------------------------------------------------------------

    def _next(self) -> float:
        return min(self.next_arrival, self.events[0][0] if self.events else math.inf)

    def advance_to(self, target: float) -> None:
        """Run the fleet until sim time ``target``: events in time order, the prefill
        instances moved to each event's time first (their finished requests are events)."""
        while True:
            t = self._next()
            if t > target:
                for p in self.prefill:
                    p.advance_to(target)
                if self._next() <= target:
                    continue
                break
            for p in self.prefill:
                p.advance_to(t)
            if self._next() < t:
                continue  # a request prefilled meanwhile: its handoff comes first
            self.now = max(self.now, t)
            if t == self.next_arrival:
                self.next_arrival = self._draw(t)
                self._arrive(t)
                continue
            _, _, kind, data = heapq.heappop(self.events)
            if kind == "handoff":
                self.router.append(data)
            elif kind == "lease":
                self._lease(t, data)
            elif kind == "landed":
                self._landed(t, data)
            else:
                self._failed(t, data)
            self._dispatch(t)
        for d in self.decode:
            d.advance_to(target)
        self.now = max(self.now, target)
        self._close_client(target)

    def _close_client(self, t: float) -> None:
        """Hand on the client intervals that can no longer change (their requests' first
        tokens are all out: decode finished or the interval is an hour old)."""
        if self.on_client is None:
            return
        pending = min((m.arrival for m in self.meta.values()), default=t)
        horizon = max(min(pending, t), t - 3600.0)
        while (self.client_closed + 1) * INTERVAL_S <= horizon:
            k = self.client_closed
            acct = self.client.pop(k, None) or ClientAccount(k * INTERVAL_S, (k + 1) * INTERVAL_S)
            self.on_client(acct)
            self.client_closed += 1

    def flush_client(self) -> None:
        """Hand on every client interval still held (the end of a recording)."""
        if self.on_client is None:
            return
        last = max(self.client, default=self.client_closed - 1)
        while self.client_closed <= last:
            k = self.client_closed
            acct = self.client.pop(k, None) or ClientAccount(k * INTERVAL_S, (k + 1) * INTERVAL_S)
            self.on_client(acct)
            self.client_closed += 1
