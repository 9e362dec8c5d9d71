"""One simulated vLLM replica: arrivals, the step loop, and what each step records.

``advance_to(t)`` runs engine steps up to sim time ``t`` (seconds since start). A step
is scheduled at its start and applied at its end; a step that would end after ``t`` is
kept pending, so the state read at ``t`` only holds what had happened by ``t``. An idle
engine jumps straight to the next arrival, so idle time costs nothing.

Observations follow vLLM V1 (``reference/vllm-metrics.md`` §1.4): TTFT at the step that
yields the first token; one inter-token gap per decode output; queue, prefill, decode,
inference and e2e times, TPOT and the per-request token histograms when a request
finishes; iteration tokens once per step.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable

from app.sim.config import SimConfig
from app.sim.metrics import MetricState
from app.sim.scenario import Phase, Scenario
from app.sim.scheduler import Request, Scheduler
from app.sim.truth import Account, Accountant, Verdict
from app.sim.workload import sample_request

INTERVAL_S = 5.0


class Replica:
    """A single vLLM engine (one ``engine="0"``) driven by a scenario."""

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
        self.sched = Scheduler(cfg.engine, cfg.num_gpu_blocks, cfg.workload.shared_prefix_tokens)
        self.metrics = MetricState(version, cfg.engine.max_model_len)
        self.version = version
        self.rng_arrival = random.Random(seed * 2 + 1)
        self.rng_request = random.Random(seed * 2 + 2)
        self.on_interval = on_interval
        self.truth = Accountant(
            INTERVAL_S, cfg.slo.ttft_s, cfg.slo.itl_s, self._closed, cfg.slo.tpot_s
        )
        self.now = 0.0
        self.next_arrival = self._draw(0.0)
        self.pending_end = -1.0
        self.step_start = 0.0
        self.arrived: list[Request] = []
        self._interval_prompt = 0
        self._interval_gen = 0

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
        """Admit into the waiting queue every request that arrived by ``t``."""
        sched = self.sched
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
            if sched.max_queued is not None and len(sched.waiting) >= sched.max_queued:
                self.metrics.rejections["max_num_queued_reqs"] += 1
                self.truth.cur.acct.rejected += 1
                continue
            self.truth.arrival(r)
            sched.waiting.append(r)
            self.arrived.append(r)

    def submit(self, prompt_len: int, output_len: int, max_tokens: int | None = None) -> Request:
        """Queue one request now, outside the workload (for experiments and tests)."""
        cap = max_tokens if max_tokens is not None else output_len
        reason = "length" if output_len >= cap else "stop"
        r = Request(self.now, prompt_len, output_len, cap, reason, 0)
        self.truth.arrival(r)
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
            self._start_step()
        self.truth.advance(target if self.pending_end < 0 else self.step_start)

    def _start_step(self) -> None:
        sched = self.sched
        sched.schedule(self.now)
        m = self.metrics
        if sched.preempted:
            n = len(sched.preempted)
            m.preemptions += n
            self.truth.cur.acct.preemptions += n
        if sched.admitted and sched.caching:
            bs = sched.bs
            for r, hit in sched.admitted:
                tokens = r.prompt_len + r.nout
                m.prefix_queries += tokens
                m.prefix_hits += hit
                m.prefix_block_queries += (tokens + bs - 1) // bs
                m.prefix_block_hits += hit // bs
        nseq = len(sched.dec) + len(sched.pre)
        if nseq == 0:
            # Nothing fits (only possible right after a preemption storm): idle one step.
            self.pending_end = self.now + self.physics.overhead_s + 1e-6
        else:
            dt = self.physics.step_time(sched.tokens, sched.attn, sched.ctx, nseq)
            self.pending_end = self.now + dt
        self.step_start = self.now
        m.started = True

    def _apply(self) -> None:
        """Apply the pending step's outputs at its end time."""
        sched = self.sched
        t0, t1 = self.step_start, self.pending_end
        self.pending_end = -1.0
        truth = self.truth
        waiting = len(sched.waiting)
        kv = sched.wait_kv if sched.wait_kv <= waiting else waiting
        recompute = 0
        for r, _ in sched.pre:
            if r.first_token >= 0:
                recompute += 1
        truth.state(
            t0,
            t1,
            waiting - kv,
            kv + recompute,
            len(sched.pre) - recompute + sched.idle_prefill,
            len(sched.dec) + sched.idle_decode,
            sched.usage,
        )
        self.arrived = []
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
        acct.steps += 1
        m = self.metrics
        itl = m.itl
        finished: list[Request] = []
        # Decodes: one token each. Gaps that started at the previous step end are equal.
        same = 0
        for r in sched.dec:
            r.ncomp += 1
            r.nout += 1
            lt = r.last_token
            if lt == t0:
                same += 1
            else:
                gap = t1 - lt
                itl.observe(gap)
                truth.itl(gap, 1, False)
            r.last_token = t1
            if r.nout >= r.target:
                finished.append(r)
        if same:
            gap = t1 - t0
            itl.observe_n(gap, same)
            truth.itl(gap, same, False)
        generated = len(sched.dec)
        prompt_computed = 0
        for r, n in sched.pre:
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
                m.prompt_cache_hit += r.cached
                m.prompt_local_compute += r.prompt_len - r.cached
            else:
                gap = t1 - r.last_token  # the stream stalled: preempted, then recomputed
                itl.observe(gap)
                truth.itl(gap, 1, True)
            r.last_token = t1
            r.preempted = False
            if r.nout >= r.target:
                finished.append(r)
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

    def _finish(self, r: Request, t: float) -> None:
        r.done = True
        self.sched.release(r)
        m = self.metrics
        decode = t - r.first_token
        m.e2e.observe(t - r.arrival)
        m.queue.observe(r.first_sched - r.arrival)
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

    # -- read-outs for the exposition ---------------------------------------------------

    @property
    def num_running(self) -> int:
        return len(self.sched.running)

    @property
    def num_waiting(self) -> int:
        return len(self.sched.waiting)

    @property
    def kv_usage(self) -> float:
        return self.sched.usage

    @property
    def config(self) -> SimConfig:
        return self.cfg
