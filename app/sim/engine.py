"""One simulated vLLM replica: arrivals, the step loop, and what each step records.

``advance_to(t)`` runs engine steps up to sim time ``t`` (seconds since start). A step
is scheduled at its start and applied at its end; a step that would end after ``t`` is
kept pending, so the state read at ``t`` only holds what had happened by ``t``. An idle
engine jumps straight to the next arrival, so idle time costs nothing.

Observations follow vLLM V1 (``docs/vllm-signals.md``, "When vLLM observes"): TTFT at the step that
yields the first token; one inter-token gap per decode output (with speculative
decoding one output carries the accepted drafts too); queue, prefill, decode, inference
and e2e times, TPOT and the per-request token histograms when a request finishes;
iteration tokens once per step; spec-decode drafts, draft and accepted tokens per step.

Faults (``faults:`` of a scenario): ``slowdown`` stretches every step; ``hang`` stops the
engine core after the step in flight. While it hangs nothing is scheduled, generated or
finished, and arrivals wait in front of the engine (its input is not read while it is
stuck), so the scheduler's gauges keep the values of the last step — as a hung vLLM
engine core's do, since they are set from its outputs. With ``hang_admits`` the arrivals
still enter the waiting queue while nothing runs (a scheduler that keeps admitting while
its executor hangs, a front end that counts them): the waiting gauge climbs through the
hang, and still nothing progresses.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable
from typing import Any

from app.sim.accountant import Accountant
from app.sim.config import SimConfig
from app.sim.metrics import MetricState
from app.sim.scenario import Phase, Scenario
from app.sim.scheduler import Request, Scheduler
from app.sim.truth import Account, Verdict
from app.sim.workload import sample_request

INTERVAL_S = 5.0


class Replica:
    """A single vLLM engine (one ``engine="0"``) driven by a scenario.

    Disaggregated prefill/decode (``app.sim.pd``) builds on it: ``hold_kv`` keeps a
    finished request's KV blocks until ``release_held`` (a prefill instance holds them
    for the decode side to read), ``on_finish`` hears every finished request, and
    ``connector``/``kv_fetch`` are the KV connector's metric state and stage readers
    its page prints (None: no connector, as a plain vLLM).
    """

    hold_kv = False
    connector: Any = None
    kv_fetch: Any = None

    def __init__(
        self,
        scenario: Scenario,
        seed: int = 0,
        version: str = "0.33",
        on_interval: Callable[[Account, Verdict, Phase], None] | None = None,
    ) -> None:
        self.scenario = scenario
        phase, until = scenario.phase_at(0.0)
        self.phase = phase
        self.phase_until = until
        cfg = phase.config
        self.cfg = cfg
        self.physics = cfg.build_physics()
        spec_k = cfg.speculative.num_speculative_tokens
        self.sched = Scheduler(
            cfg.engine, cfg.num_gpu_blocks, cfg.workload.shared_prefix_tokens, spec_k
        )
        self.metrics = MetricState(version, cfg.engine.max_model_len, spec_k)
        self.version = version
        self.rng_arrival = random.Random(seed * 2 + 1)
        self.rng_request = random.Random(seed * 2 + 2)
        self.rng_spec = random.Random(seed * 2 + 3)
        self.on_interval = on_interval
        self.truth = Accountant(
            INTERVAL_S,
            cfg.slo.ttft_s,
            cfg.slo.itl_s,
            self._closed,
            cfg.slo.tpot_s,
            cause_at=lambda t: scenario.phase_at(t)[0].cause,
        )
        # Arrivals held in front of a hung engine core (faults.hang), oldest first.
        self.inbox: list[Request] = []
        self.spec_k = spec_k
        self.draft_s = self.physics.draft_time(self.spec_k, cfg.speculative.draft_cost)
        self.now = 0.0
        self.next_arrival = self._draw(0.0)
        self.pending_end = -1.0
        self.step_start = 0.0
        self.arrived: list[Request] = []
        self._interval_prompt = 0
        self._interval_gen = 0
        self.on_finish: Callable[[Request, float], None] | None = None
        self.held: set[Request] = set()
        # The finished requests' waits for the step in flight when they arrived (arrival
        # to QUEUED): their sum and count.
        self.step_wait_s = 0.0
        self.step_waits = 0

    # -- arrivals -----------------------------------------------------------------------

    def _draw(self, t: float) -> float:
        """Time of the next Poisson arrival after ``t`` (rates change at phases, bursts)."""
        while True:
            phase, until = self.scenario.phase_at(t)
            rate, edge = phase.config.workload.rate_segment(t)
            end = min(until, edge)
            if rate > 0:
                cand = t + self.rng_arrival.expovariate(rate)
                if cand < end:
                    return cand
            if math.isinf(end):
                return math.inf
            t = end

    def _ingest(self, t: float) -> None:
        """Admit into the waiting queue every request that arrived by ``t`` (into the
        inbox while the engine hangs; the inbox first once it runs again)."""
        if self.next_arrival > t and not self.inbox:
            return  # nothing arrived (twice a step: kept cheap)
        sched = self.sched
        faults = self.cfg.faults
        hung = faults.hang and not faults.hang_admits  # arrivals held in the inbox
        if self.inbox and not hung:
            for r in self.inbox:
                if sched.max_queued is not None and len(sched.waiting) >= sched.max_queued:
                    self.metrics.rejections["max_num_queued_reqs"] += 1
                    self.truth.cur.acct.rejected += 1
                    continue
                r.queued = t
                sched.waiting.append(r)
                self.arrived.append(r)
            self.inbox = []
        while self.next_arrival <= t:
            a = self.next_arrival
            self.next_arrival = self._draw(a)
            cfg = self.scenario.phase_at(a)[0].config
            d = sample_request(
                self.rng_request, cfg.workload, cfg.engine.max_model_len, cfg.engine.block_size
            )
            r = Request(
                a, d.prompt_len, d.output_len, d.max_tokens, d.finish_reason, d.prefix_tokens
            )
            r.ready = a + cfg.engine.kv_transfer_s
            if hung:
                self.truth.arrival(r)
                self.inbox.append(r)
                continue
            if sched.max_queued is not None and len(sched.waiting) >= sched.max_queued:
                self.metrics.rejections["max_num_queued_reqs"] += 1
                self.truth.cur.acct.rejected += 1
                continue
            self.truth.arrival(r)
            r.queued = t
            sched.waiting.append(r)
            self.arrived.append(r)

    def submit(
        self,
        prompt_len: int,
        output_len: int,
        max_tokens: int | None = None,
        at: float | None = None,
        *,
        prefix: int = 0,
        ready: float | None = None,
        external: int = 0,
    ) -> Request:
        """Queue one request outside the workload (experiments, tests, the HTTP answers
        of ``app.sim.serving``, a P/D fleet's router), arriving at sim time ``at``
        (default: now; while a step is in flight "now" is its start, so a live caller
        passes the clock's time). ``prefix``: tokens of the shared system prompt it
        starts with; ``ready``: not admitted before then (its KV on its way);
        ``external``: prompt tokens whose KV it brings (``Request.external``)."""
        cap = max_tokens if max_tokens is not None else output_len
        reason = "length" if output_len >= cap else "stop"
        r = Request(
            self.now if at is None else max(self.now, at),
            prompt_len,
            output_len,
            cap,
            reason,
            prefix,
        )
        if ready is not None:
            r.ready = max(r.arrival, ready)
        r.external = external
        self.truth.arrival(r)
        if self.cfg.faults.hang and not self.cfg.faults.hang_admits:
            self.inbox.append(r)  # a hung core does not read its input (module docstring)
        else:
            self.sched.waiting.append(r)
        return r

    # -- phases -------------------------------------------------------------------------

    def _switch_phase(self) -> None:
        phase, until = self.scenario.phase_at(self.now)
        self.phase, self.phase_until = phase, until
        cfg = phase.config
        if cfg is not self.cfg:
            self.cfg = cfg
            self.physics = cfg.build_physics()
            self.sched.configure(cfg.engine)
            self.truth.set_slo(cfg.slo.ttft_s, cfg.slo.itl_s, cfg.slo.tpot_s)
            self.draft_s = self.physics.draft_time(self.spec_k, cfg.speculative.draft_cost)

    def _closed(self, acct: Account, verdict: Verdict) -> None:
        m = self.metrics
        m.avg_prompt_throughput = acct.prompt_tokens / acct.duration_s
        m.avg_generation_throughput = acct.generation_tokens / acct.duration_s
        if self.on_interval is not None:
            self.on_interval(acct, verdict, self.scenario.phase_at(acct.t0)[0])

    # -- the loop -----------------------------------------------------------------------

    def advance_to(self, target: float) -> None:
        """Run the engine until sim time ``target``."""
        sched = self.sched
        while True:
            if self.pending_end >= 0:
                if self.pending_end > target:
                    break
                self._apply()
                continue
            if self.now >= target:
                break
            if self.now >= self.phase_until:
                self._switch_phase()
            if self.cfg.faults.hang:
                self._hang(min(target, self.phase_until))
                continue
            if self.next_arrival <= self.now or self.inbox:
                self._ingest(self.now)
            if not sched.running and not sched.waiting:
                nxt = min(self.next_arrival, self.phase_until)
                if nxt > target:
                    self.truth.advance(target)
                    self.now = target
                    break
                self.truth.advance(nxt)
                self.now = nxt
                continue
            if not sched.running and self._all_deferred():
                # Nothing to step until a transfer lands or a request arrives.
                ready = min(r.ready for r in sched.waiting)
                nxt = min(ready, self.next_arrival, self.phase_until, target)
                waiting = len(sched.waiting)
                moving = self._in_transfer(self.now)
                self.truth.state(
                    self.now, nxt, waiting - moving, 0, 0, 0, sched.usage, transfer=moving
                )
                self.now = nxt
                continue
            self._start_step()
        self.truth.advance(target if self.pending_end < 0 else self.step_start)

    def _in_transfer(self, t: float) -> int:
        """Waiting requests whose KV is still on its way from a prefill instance at ``t``."""
        return sum(1 for r in self.sched.waiting if r.external and r.ready > t)

    def _all_deferred(self) -> bool:
        """Every waiting request is still waiting for its KV (``kv_transfer_s``)."""
        now = self.now
        return all(r.ready > now for r in self.sched.waiting)

    def _hang(self, end: float) -> None:
        """Let sim time pass up to ``end`` with the engine core stuck (module docstring):
        arrivals go to the inbox (to the waiting queue with ``hang_admits``), and the
        truth counts the time as stalled while any request is in the system."""
        sched = self.sched
        usage = sched.usage
        running = len(sched.running)
        prefilling = sum(1 for r in sched.running if r.first_token < 0)
        t = self.now
        while t < end:
            nxt = min(self.next_arrival, end)
            slot = len(sched.waiting) + len(self.inbox)
            busy = slot + running > 0
            self.truth.state(t, nxt, slot, 0, prefilling, running - prefilling, usage, stalled=busy)
            t = nxt
            self._ingest(t)
        self.now = end

    def _start_step(self) -> None:
        sched = self.sched
        sched.schedule(self.now)
        m = self.metrics
        if sched.preempted:
            n = len(sched.preempted)
            m.preemptions += n
            self.truth.cur.acct.preemptions += n
        if sched.admitted:
            bs = sched.bs
            for r, hit in sched.admitted:
                if self.version == "sglang" and r.first_sched == self.now:
                    m.queue.observe(r.first_sched - r.queued)  # SGLang: at admission
                tokens = r.prompt_len + r.nout
                # KV brought by a transfer is the connector's hit, not the local cache's.
                external = hit if r.external and hit == r.external else 0
                if external:
                    m.external_queries += tokens
                    m.external_hits += external
                if not sched.caching:
                    continue
                m.prefix_queries += tokens
                m.prefix_hits += hit - external
                m.prefix_block_queries += (tokens + bs - 1) // bs
                m.prefix_block_hits += (hit - external) // bs
        nseq = len(sched.dec) + len(sched.pre)
        if nseq == 0:
            # Nothing fits (only possible right after a preemption storm): idle one step.
            self.pending_end = self.now + self.physics.overhead_s + 1e-6
        else:
            dt = self.physics.step_time(sched.tokens, sched.attn, sched.ctx, nseq)
            if sched.dec and self.spec_k:
                dt += self.draft_s
            self.pending_end = self.now + dt * self.cfg.faults.slowdown
        self.step_start = self.now
        m.started = True

    def _apply(self) -> None:
        """Apply the pending step's outputs at its end time."""
        sched = self.sched
        t0, t1 = self.step_start, self.pending_end
        self.pending_end = -1.0
        self._book_state(t0, t1)
        acct = self.truth.cur.acct
        acct.steps += 1
        finished: list[Request] = []
        mixed = bool(sched.pre)  # this step also computed prompt tokens
        if self.spec_k and sched.dec:
            acct.spec_steps += 1
        generated = self._decode_outputs(t0, t1, mixed, finished)
        if mixed:
            prompt_computed, first = self._prefill_outputs(t1, mixed, finished)
        else:
            prompt_computed = first = 0
        generated += first
        m = self.metrics
        m.generation_tokens += generated
        m.iteration_tokens.observe(prompt_computed + generated)
        acct.prompt_tokens += prompt_computed
        acct.generation_tokens += generated
        if finished:
            for r in finished:
                self._finish(r, t1)
            acct.finished += len(finished)
            sched.running = [r for r in sched.running if not r.done]
        self.now = t1

    def _book_state(self, t0: float, t1: float) -> None:
        """The step's request-seconds by state in the truth, then the requests that
        arrived during it, their wait to its end booked as the queue's (KV or a slot)."""
        sched = self.sched
        truth = self.truth
        waiting = len(sched.waiting)
        kv = sched.wait_kv if sched.wait_kv <= waiting else waiting
        recompute = 0
        for r, _ in sched.pre:
            if r.first_token >= 0:
                recompute += 1
        moving = self._in_transfer(t0) if waiting > kv else 0
        truth.state(
            t0,
            t1,
            waiting - kv - moving,
            kv + recompute,
            len(sched.pre) - recompute + sched.idle_prefill,
            len(sched.dec) + sched.idle_decode,
            sched.usage,
            transfer=moving,
        )
        self.arrived = []
        if self.next_arrival <= t1 or self.inbox:
            self._ingest(t1)
        acct = truth.cur.acct
        if self.arrived:
            late = 0.0
            for r in self.arrived:
                late += t1 - r.arrival
            if kv and kv == waiting:
                acct.rs_kv += late
            else:
                acct.rs_slot += late

    def _decode_outputs(self, t0: float, t1: float, mixed: bool, finished: list[Request]) -> int:
        """The decodes' tokens: one each (plus accepted drafts); returns how many. Gaps
        that started at the previous step end are equal (observed at once). SGLang
        observes a step of n tokens as n gaps of a n-th of it (its ITL is per token)."""
        sched = self.sched
        truth = self.truth
        itl = self.metrics.itl
        per_token = self.version == "sglang"
        same = 0
        generated = len(sched.dec)
        if not self.spec_k:
            # One token each (the common case, kept to the loop's bare bones).
            for r in sched.dec:
                r.ncomp += 1
                nout = r.nout + 1
                r.nout = nout
                lt = r.last_token
                if lt == t0:
                    same += 1
                else:
                    gap = t1 - lt
                    itl.observe(gap)
                    truth.itl(gap, 1, False, mixed)
                r.last_token = t1
                if nout >= r.target:
                    finished.append(r)
            if same:
                gap = t1 - t0
                itl.observe_n(gap, same)
                truth.itl(gap, same, False, mixed)
            return generated
        for r in sched.dec:
            if self.spec_k:
                n = 1 + self._accepted(r.target - r.nout - 1)
                generated += n - 1
            else:
                n = 1
            r.ncomp += n
            r.nout += n
            lt = r.last_token
            if per_token and n > 1:
                gap = t1 - lt
                itl.observe_n(gap / n, n)
                truth.itl(gap, 1, False, mixed)
            elif lt == t0:
                same += 1
            else:
                gap = t1 - lt
                itl.observe(gap)
                truth.itl(gap, 1, False, mixed)
            r.last_token = t1
            if r.nout >= r.target:
                finished.append(r)
        if same:
            gap = t1 - t0
            itl.observe_n(gap, same)
            truth.itl(gap, same, False, mixed)
        return generated

    def _prefill_outputs(self, t1: float, mixed: bool, finished: list[Request]) -> tuple[int, int]:
        """The prefill chunks: prompt tokens computed, and a token for each prompt
        completed (its first, or the next after a recompute); returns both counts."""
        m = self.metrics
        truth = self.truth
        prompt_computed = generated = 0
        for r, n in self.sched.pre:
            r.ncomp += n
            prompt_computed += n
            if r.ncomp < r.prompt_len + r.nout:
                continue
            r.nout += 1
            generated += 1
            if r.first_token < 0:
                r.first_token = t1
                ttft = t1 - r.arrival
                m.ttft.observe(ttft)
                truth.first_token(ttft)
                m.prompt_tokens += r.prompt_len
                external = r.cached if r.external and r.cached == r.external else 0
                m.prompt_cache_hit += r.cached - external
                m.prompt_external += external
                m.prompt_local_compute += r.prompt_len - r.cached
            else:
                gap = t1 - r.last_token  # the stream stalled: preempted, then recomputed
                m.itl.observe(gap)
                truth.itl(gap, 1, True, mixed)
            r.last_token = t1
            r.preempted = False
            if r.nout >= r.target:
                finished.append(r)
        return prompt_computed, generated

    def _accepted(self, room: int) -> int:
        """Draft one decode's speculative tokens; return how many the target accepted
        (in order, each with the phase's ``accept_prob``), at most ``room``."""
        k = self.spec_k
        p = self.cfg.speculative.accept_prob
        rand = self.rng_spec.random
        a = 0
        while a < k and rand() < p:
            a += 1
        a = min(a, room)
        m = self.metrics
        m.spec_drafts += 1
        m.spec_draft_tokens += k
        m.spec_accepted_tokens += a
        per_pos = m.spec_accepted_per_pos
        for i in range(a):
            per_pos[i] += 1
        return a

    def release_held(self, r: Request) -> None:
        """Free the KV blocks a finished request held (``hold_kv``); once only."""
        if r in self.held:
            self.held.discard(r)
            self.sched.release(r)

    def _finish(self, r: Request, t: float) -> None:
        r.done = True
        if self.hold_kv:
            self.held.add(r)  # kept for the decode side to read (``app.sim.pd``)
        else:
            self.sched.release(r)
        m = self.metrics
        decode = t - r.first_token
        m.e2e.observe(t - r.arrival)
        # V1 counts the queue from the engine core's QUEUED event, when it reads the
        # request between two steps: the wait for the step in flight at its arrival is in
        # neither the queue nor the prefill (docs/vllm-signals.md, "When vLLM observes").
        # V0 from the arrival. SGLang observes it at admission (``_start_step``).
        if self.version != "sglang":
            m.queue.observe(r.first_sched - (r.arrival if self.version == "0.6" else r.queued))
        self.step_wait_s += r.queued - r.arrival
        self.step_waits += 1
        m.prefill.observe(r.first_token - r.first_sched)
        m.decode.observe(decode)
        m.inference.observe(t - r.first_sched)
        tpot = decode / (r.nout - 1) if r.nout > 1 else 0.0
        m.tpot.observe(tpot)
        self.truth.finished(r.first_token - r.arrival, tpot)
        m.req_prompt_tokens.observe(r.prompt_len)
        m.req_gen_tokens.observe(r.nout)
        m.req_max_gen_tokens.observe(r.max_tokens)
        m.req_params_max_tokens.observe(r.max_tokens)
        m.req_params_n.observe(1)
        m.req_num_preemptions.observe(r.preemptions)
        m.req_prefill_kv_computed.observe(r.prompt_len - r.cached)
        m.success[r.reason] += 1
        if self.on_finish is not None:
            self.on_finish(r, t)

    # -- read-outs for the exposition ---------------------------------------------------

    @property
    def num_running(self) -> int:
        return len(self.sched.running)

    @property
    def num_waiting(self) -> int:
        return len(self.sched.waiting)

    @property
    def num_deferred(self) -> int:
        """Waiting requests whose KV has not arrived yet (``kv_transfer_s``)."""
        now = self.now
        return sum(1 for r in self.sched.waiting if r.ready > now)

    @property
    def kv_usage(self) -> float:
        return self.sched.usage

    @property
    def config(self) -> SimConfig:
        return self.cfg
