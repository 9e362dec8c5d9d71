"""vLLM V1 scheduling: continuous batching, chunked prefill, paged KV blocks, preemption.

Each step, under a budget of ``max_num_batched_tokens``:

1. running requests, in admission order (so the decodes of older requests come before the
   prompt chunks of newly admitted ones): a decode takes one token, a prompt in progress
   takes ``min(remaining, budget)`` tokens. A request that needs a KV block when none is
   free preempts the most recently admitted running request (recompute: its blocks are
   freed and it re-enters the waiting queue at the front); if it is itself the last one,
   it is preempted.
2. if nothing was preempted this step, waiting requests in FCFS order while the budget
   lasts and fewer than ``max_num_seqs`` run. The head of the queue blocks everyone
   behind it when its first chunk's blocks do not fit (waiting for KV), or when the batch
   or the budget is full (waiting for a slot). A request not ``ready`` yet (its KV still
   on its way: ``kv_transfer_s``, or a disaggregated decode instance's transfer) is
   skipped, deferred, and keeps its place. A request whose KV was transferred
   (``external`` tokens) is admitted with blocks for its whole prompt and computes the
   rest (the last prompt token, which yields its first token).

With speculative decoding a decode takes 1 + k tokens of the budget and KV slots for
them (the drafts are verified in the same pass); the engine keeps the accepted ones.

Prefix caching: one shared system prompt (whole blocks) is kept once in the pool while
any request references it, and stays cached (counted as free) when none does, until an
allocation needs its blocks.
"""

from __future__ import annotations

from collections import deque

from app.sim.config import EngineConfig


class Request:
    """One request's progress. Token counts follow vLLM: ``ncomp`` tokens have K/V."""

    __slots__ = (
        "arrival",
        "prompt_len",
        "target",
        "max_tokens",
        "reason",
        "prefix",
        "ncomp",
        "nout",
        "blocks",
        "cap",
        "shared",
        "queued",
        "first_sched",
        "first_token",
        "last_token",
        "preemptions",
        "cached",
        "preempted",
        "done",
        "ready",
        "external",
    )

    def __init__(
        self,
        arrival: float,
        prompt_len: int,
        target: int,
        max_tokens: int,
        reason: str,
        prefix: int,
    ) -> None:
        self.arrival = arrival
        self.prompt_len = prompt_len
        self.target = target
        self.max_tokens = max_tokens
        self.reason = reason
        self.prefix = prefix
        self.ncomp = 0
        self.nout = 0
        self.blocks = 0
        self.cap = 0
        self.shared = False
        # When the engine core took it into its waiting queue (vLLM V1's QUEUED event):
        # an arrival during a step waits for the step's end (``app.sim.engine``).
        self.queued = arrival
        self.first_sched = -1.0
        self.first_token = -1.0
        self.last_token = -1.0
        self.preemptions = 0
        self.cached = -1
        self.preempted = False
        self.done = False
        # When the scheduler may admit it (later than ``arrival`` with a KV transfer).
        self.ready = arrival
        # Prompt tokens whose KV came from another instance (a disaggregated decode
        # instance's, ``app.sim.pd``): admitted as computed, counted apart from prefix hits.
        self.external = 0


class Scheduler:
    """Holds the queues and the block pool; ``schedule()`` fills the step's fields."""

    def __init__(
        self,
        engine: EngineConfig,
        num_blocks: int,
        shared_prefix_tokens: int,
        spec_tokens: int = 0,
    ) -> None:
        # Tokens a decode puts through the model: its own plus the drafts to verify.
        self.decode_tokens = 1 + spec_tokens
        self.running: list[Request] = []
        self.waiting: deque[Request] = deque()
        self.total = num_blocks
        self.used = 0
        self.bs = engine.block_size
        self.prefix_blocks = shared_prefix_tokens // engine.block_size
        self.prefix_refs = 0
        self.prefix_resident = False
        self.n_preempted_waiting = 0
        self.configure(engine)
        # Filled by schedule():
        self.dec: list[Request] = []
        self.pre: list[tuple[Request, int]] = []
        self.tokens = 0
        self.attn = 0.0
        self.ctx = 0
        self.preempted: list[Request] = []
        self.admitted: list[tuple[Request, int]] = []
        self.wait_kv = 0
        self.idle_prefill = 0
        self.idle_decode = 0

    def configure(self, engine: EngineConfig) -> None:
        """Apply flags that may change at a phase boundary."""
        self.max_num_seqs = engine.max_num_seqs
        self.budget = engine.max_num_batched_tokens
        self.caching = engine.enable_prefix_caching
        self.max_queued = engine.max_num_queued_reqs

    @property
    def usage(self) -> float:
        return self.used / self.total

    # -- block pool ---------------------------------------------------------------------

    def _take(self, n: int) -> bool:
        free = self.total - self.used
        if n > free:
            return False
        if self.prefix_resident and self.prefix_refs == 0 and n > free - self.prefix_blocks:
            self.prefix_resident = False  # the cached system prompt is evicted (LRU)
        self.used += n
        return True

    def release(self, r: Request) -> None:
        self.used -= r.blocks
        if r.shared:
            self.prefix_refs -= 1
            if self.prefix_refs == 0:
                self.used -= self.prefix_blocks
        r.blocks = 0
        r.cap = 0
        r.shared = False

    def _preempt(self, r: Request) -> None:
        self.release(r)
        r.ncomp = 0
        r.preemptions += 1
        r.preempted = True
        self.waiting.appendleft(r)
        self.n_preempted_waiting += 1
        self.preempted.append(r)

    def _grow(self, r: Request, n: int) -> bool:
        """Allocate slots for ``n`` more tokens, preempting from the tail; False if ``r`` lost."""
        bs = self.bs
        blocks = (r.ncomp + n - r.cap + bs - 1) // bs
        running = self.running
        while not self._take(blocks):
            victim = running.pop()
            self._preempt(victim)
            if victim is r:
                return False
        r.blocks += blocks
        r.cap += blocks * bs
        return True

    def _admit(self, r: Request, budget: int) -> int:
        """Try to admit the queue head with its first chunk; return its tokens or 0."""
        bs = self.bs
        pb = self.prefix_blocks
        use_shared = self.caching and pb > 0 and r.prefix >= pb * bs
        hit = pb * bs if use_shared and self.prefix_resident else 0
        if r.external and r.cached < 0:
            # The transferred KV: blocks for the whole prompt, the last token computed
            # (a preempted request lost it and recomputes everything).
            use_shared, hit = False, r.external
        need = r.prompt_len + r.nout - hit
        n = need if need < budget else budget
        base = pb * bs if use_shared else 0
        private = max(0, (hit + n - base + bs - 1) // bs)
        free = self.total - self.used
        if use_shared:
            shared_take = pb if self.prefix_refs == 0 else 0
            if shared_take + private > free:
                return 0
            self.used += shared_take + private
            self.prefix_resident = True
            self.prefix_refs += 1
            r.shared = True
        elif not self._take(private):
            return 0
        r.blocks = private
        r.cap = base + private * bs
        r.ncomp = hit
        if r.cached < 0:
            r.cached = hit
        self.admitted.append((r, hit))
        return n

    # -- one step -----------------------------------------------------------------------

    def schedule(self, now: float) -> None:
        self.preempted = []
        self.admitted = []
        batch = _Batch(self.budget)
        self._continue_running(batch)
        if not self.preempted:
            self._admit_waiting(now, batch)
        else:
            self.wait_kv = len(self.waiting)
        k1 = self.decode_tokens
        nd = len(batch.dec)
        self.dec = batch.dec
        self.pre = batch.pre
        self.tokens = batch.tokens + nd * k1
        # each decode token attends to its context and itself (and drafts to the ones before)
        self.attn = batch.attn + k1 * batch.cdec + nd * k1 * (k1 + 1) // 2
        self.ctx = batch.ctx + batch.cdec

    def _continue_running(self, batch: _Batch) -> None:
        """The running requests in order, each a decode or a prompt chunk, until the
        budget is spent or one cannot grow its KV (then it, or a later one, was
        preempted); the ones left over are counted idle by what they would do.

        The hottest loop of the simulator and the twin (one pass per running request per
        step): a decode is added inline, its sums kept in locals and written back."""
        running = self.running
        k1 = self.decode_tokens
        dec = batch.dec
        budget = batch.budget
        cdec = 0
        i = 0
        lost = False
        while i < len(running):
            if budget <= 0:
                break
            r = running[i]
            ncomp = r.ncomp
            need = r.prompt_len + r.nout - ncomp
            # A decode has its first token out and is not recomputing: a prompt (or a
            # recompute) with one token left is still a prompt chunk, and yields a token.
            if need == 1 and r.first_token >= 0 and not r.preempted:
                if ncomp + k1 > r.cap and not self._grow(r, k1):
                    lost = True
                    break
                dec.append(r)
                cdec += ncomp
                budget -= k1
            else:
                n = need if need < budget else budget
                if ncomp + n > r.cap and not self._grow(r, n):
                    lost = True
                    break
                batch.budget = budget
                batch.chunk(r, n)
                budget = batch.budget
            i += 1
        batch.budget = budget
        batch.cdec += cdec
        self.idle_prefill = self.idle_decode = 0
        if not lost:
            for r in running[i:]:
                if r.prompt_len + r.nout - r.ncomp > 1 or r.first_token < 0 or r.preempted:
                    self.idle_prefill += 1
                else:
                    self.idle_decode += 1

    def _admit_waiting(self, now: float, batch: _Batch) -> None:
        """Admit waiting requests in order while the budget and ``max_num_seqs`` allow,
        passing over the deferred ones (their KV is not here yet), until one does not
        get its KV blocks; then the queue waits for KV."""
        waiting = self.waiting
        running = self.running
        max_seqs = self.max_num_seqs
        if not waiting or batch.budget <= 0 or len(running) >= max_seqs:
            self.wait_kv = self.n_preempted_waiting  # nothing to admit this step
            return
        kv_blocked = False
        skipped: list[Request] = []
        while waiting and batch.budget > 0 and len(running) < max_seqs:
            r = waiting[0]
            if r.ready > now:  # deferred: its KV is not here yet
                skipped.append(waiting.popleft())
                continue
            n = self._admit(r, batch.budget)
            if n == 0:
                kv_blocked = True
                break
            waiting.popleft()
            if r.preempted:
                self.n_preempted_waiting -= 1
            if r.first_sched < 0:
                r.first_sched = now
            running.append(r)
            batch.chunk(r, n)
        waiting.extendleft(reversed(skipped))
        self.wait_kv = len(waiting) if kv_blocked else self.n_preempted_waiting


class _Batch:
    """The step being built: its decodes and prompt chunks, the token budget left, and
    the sums its time is computed from (prompt tokens, their context and attention, the
    decodes' context)."""

    __slots__ = ("attn", "budget", "cdec", "ctx", "dec", "pre", "tokens")

    def __init__(self, budget: int) -> None:
        self.dec: list[Request] = []
        self.pre: list[tuple[Request, int]] = []
        self.budget = budget
        self.tokens = 0
        self.ctx = 0
        self.cdec = 0
        self.attn = 0.0

    def decode(self, r: Request, k1: int) -> None:
        """``r`` decodes ``k1`` tokens (1 + its draft tokens)."""
        self.dec.append(r)
        self.cdec += r.ncomp
        self.budget -= k1

    def chunk(self, r: Request, n: int) -> None:
        """``r`` computes ``n`` prompt tokens after the ``r.ncomp`` it has."""
        c = r.ncomp
        self.pre.append((r, n))
        self.tokens += n
        self.ctx += c
        self.attn += n * c + n * (n + 1) / 2
        self.budget -= n
