"""What drives each class's symptom: one model per compared class, each a tally of the
signals' contributions (``pair``).

* ``prefill_bound`` — TTFT is prefill work: **prefill work ∝ arrivals × prompt × (1 − hit
  rate)**, so ``prompt_tokens_mean`` contributes its ratio, ``prefix_cache_hit_rate`` the
  ratio of the miss fraction (0.85 → 0.05 multiplies uncached prompt tokens by 6.3) and
  ``arrival_rate`` its ratio (more prompts compete for the per-step budget). Only when
  none of them moved: the engine itself slowed (``steps_per_s`` down) or its per-step
  budget shrank (``step_tokens_p99`` down).
* ``queue_bound`` — **queueing ∝ arrivals × work per request against the capacity**:
  ``arrival_rate`` contributes its rise; the work per request, in tokens the engine
  processes (uncached prompt + output: at the admission limit both share each step's
  budget and compute), its growth, split by LMDI over ``output_tokens_mean``,
  ``prompt_tokens_mean`` and the hit rate; and a fall of ``completion_rate`` beyond what
  the work grew is capacity lost (the server completes fewer requests of the same
  work) — so arrivals up at steady completions name ``arrival_rate``, completions down
  at steady arrivals ``completion_rate``. With the ``deferred`` sub-cause the queue is
  the deferred requests themselves (waiting for a KV transfer, an adapter, a grammar),
  so ``waiting_deferred_avg`` contributes its rise too.
* ``kv_pressure`` — **KV in use ∝ requests in flight × KV per request**: in flight grows
  with ``arrival_rate`` and ``output_tokens_mean`` (time in the system), the rest of the
  batch growth goes to ``running_avg``; KV per request ≈ prompt × (1 − hit rate) +
  output / 2 (a cached prefix is shared), split by LMDI.
* ``decode_bound`` — **a decode step ∝ batch × context** (every step reads the K/V of
  every running sequence), **per output token ÷ (1 + accepted drafts)**: the batch grows
  with ``arrival_rate`` and ``output_tokens_mean`` (Little's law; the rest to
  ``running_avg``), the context (prompt + output / 2) with ``prompt_tokens_mean`` and
  ``output_tokens_mean``; a fall of ``spec_decode_acceptance`` multiplies the steps per
  output token directly and the batch through them. With the ``prefill_interference``
  sub-cause also the prefill chunks that stall the steps: arrivals × uncached prompt
  tokens, and a larger ``step_tokens_p99`` than the batch accounts for (a raised budget).
  Only when none of them moved: slower steps (``steps_per_s``).
* ``stalled`` — the engine stopped stepping: ``steps_per_s`` (never the arrivals, which
  a hung engine's frozen gauges read as none). A page without the step histogram (vLLM
  < 0.7, SGLang) cannot tell it: nothing is credited, and the diagnosis says so
  (``attach.UNTOLD``). So does any window with
  requests in the engine and no step at all where the baseline stepped: no completion,
  no token and a frozen batch are what a stall looks like, not separate changes.

Any other problem class (:data:`BY_MOVE`) ranks every signal by the size of its move.
"""

from __future__ import annotations

from collections.abc import Callable

from app.diagnose.changes.pair import (
    MIN_MISS,
    NOISE,
    SIGNALS,
    Pair,
    Tally,
    batch_rest,
    lmdi_split,
    neg,
    value_of,
)
from app.diagnose.classes import PROBLEM_CLASSES, DiagnosisClass, SubCause

__all__ = ["BY_MOVE", "COMPARED", "MODELS", "model_for"]

C = DiagnosisClass
# Below this share of its baseline's engine steps, with requests in it, the engine stopped.
_STOPPED = 0.01


def _prefill(p: Pair, sub: str | None) -> Tally:
    t = Tally()
    t.add("arrival_rate", p.lr("arrival_rate"))
    t.add("prompt_tokens_mean", p.lr("prompt_tokens_mean"))
    t.add("prefix_cache_hit_rate", p.miss())
    uncached = p.uncached()
    t.effect("prompt_tokens_mean", "uncached_prompt_tokens_mean", uncached)
    t.effect("prefix_cache_hit_rate", "uncached_prompt_tokens_mean", uncached)
    if t.explained() < NOISE:  # no workload change: the engine or its budget
        t.add("steps_per_s", neg(p.lr("steps_per_s")))
        t.add("step_tokens_p99", neg(p.lr("step_tokens_p99")))
    return t


def _queue(p: Pair, sub: str | None) -> Tally:
    t = Tally()
    t.add("arrival_rate", p.lr("arrival_rate"))
    # The work each request brings, in tokens the engine processes: its uncached prompt
    # and its output (at the admission limit a step's budget and compute are shared by
    # both), split by LMDI over output, prompt and hit rate.
    work = Tally()
    out, prompt = p.both("output_tokens_mean"), p.both("prompt_tokens_mean")
    if out is not None and prompt is not None:
        hit = p.both("prefix_cache_hit_rate")
        miss = (1.0, 1.0) if hit is None else tuple(max(MIN_MISS, 1 - h) for h in hit)
        lmdi_split(
            work,
            [
                (out[0], out[1], [("output_tokens_mean", p.lr("output_tokens_mean"))]),
                (
                    prompt[0] * miss[0],
                    prompt[1] * miss[1],
                    [
                        ("prompt_tokens_mean", p.lr("prompt_tokens_mean")),
                        ("prefix_cache_hit_rate", p.miss()),
                    ],
                ),
            ],
        )
    else:
        work.add("output_tokens_mean", p.lr("output_tokens_mean"))
    for k, v in work.contrib.items():
        t.add(k, v)
    t.effect("prompt_tokens_mean", "uncached_prompt_tokens_mean", p.uncached())
    t.effect("prefix_cache_hit_rate", "uncached_prompt_tokens_mean", p.uncached())
    # Completions fell by more than the work grew: the server completes fewer requests of
    # the same work (capacity lost). Rose: the server kept up; nothing to credit.
    drop = neg(p.lr("completion_rate"))
    if drop is not None:
        grown = sum(work.contrib.values())
        t.add("completion_rate", max(0.0, drop - max(0.0, grown)))
    if sub == SubCause.DEFERRED.value:
        # The queue is deferred requests: what defers them is the change.
        t.add("waiting_deferred_avg", p.lr("waiting_deferred_avg"))
    return t


def _kv(p: Pair, sub: str | None) -> Tally:
    t = Tally()
    arrivals, output, spec = p.lr("arrival_rate"), p.lr("output_tokens_mean"), p.spec()
    # Requests in flight: arrivals × time in the system (answer length, steps per token).
    t.add("arrival_rate", arrivals)
    t.add("output_tokens_mean", output)
    t.add("spec_decode_acceptance", spec)
    t.add("running_avg", batch_rest(p, [arrivals, output, spec or 0.0]))
    # KV per request: the uncached prompt (a cached prefix is shared) plus half the answer.
    prompt, out = p.both("prompt_tokens_mean"), p.both("output_tokens_mean")
    if prompt is not None and out is not None:
        hit = p.both("prefix_cache_hit_rate")
        miss = (1.0, 1.0) if hit is None else tuple(max(MIN_MISS, 1 - h) for h in hit)
        lmdi_split(
            t,
            [
                (
                    prompt[0] * miss[0],
                    prompt[1] * miss[1],
                    [
                        ("prompt_tokens_mean", p.lr("prompt_tokens_mean")),
                        ("prefix_cache_hit_rate", p.miss()),
                    ],
                ),
                (out[0] / 2, out[1] / 2, [("output_tokens_mean", output)]),
            ],
        )
        t.effect("prefix_cache_hit_rate", "uncached_prompt_tokens_mean", p.uncached())
    return t


def _decode(p: Pair, sub: str | None) -> Tally:
    t = Tally()
    arrivals, output, spec = p.lr("arrival_rate"), p.lr("output_tokens_mean"), p.spec()
    # Steps per output token (directly) and the batch through them.
    t.add("spec_decode_acceptance", None if spec is None else 2 * spec)
    if spec is not None:
        t.effect("spec_decode_acceptance", "steps_per_output_token", spec)
    # The batch: arrivals × answer length × time per token (Little's law).
    t.add("arrival_rate", arrivals)
    t.add("output_tokens_mean", output)
    t.add("running_avg", batch_rest(p, [arrivals, output, spec or 0.0]))
    # The context each step reads per sequence: prompt + half the answer.
    prompt, out = p.both("prompt_tokens_mean"), p.both("output_tokens_mean")
    if prompt is not None and out is not None:
        lmdi_split(
            t,
            [
                (prompt[0], prompt[1], [("prompt_tokens_mean", p.lr("prompt_tokens_mean"))]),
                (out[0] / 2, out[1] / 2, [("output_tokens_mean", output)]),
            ],
        )
    if sub == SubCause.PREFILL_INTERFERENCE.value:
        # Prefill chunks in the steps: arrivals × uncached prompt tokens, and their size.
        t.add("arrival_rate", arrivals)
        t.add("prompt_tokens_mean", p.lr("prompt_tokens_mean"))
        t.add("prefix_cache_hit_rate", p.miss())
        t.effect("prefix_cache_hit_rate", "uncached_prompt_tokens_mean", p.uncached())
        step, batch = p.lr("step_tokens_p99"), p.lr("running_avg")
        if step is not None and batch is not None:
            t.add("step_tokens_p99", step - max(0.0, batch))
    if t.explained() < NOISE:  # no workload change: every step got slower
        t.add("steps_per_s", neg(p.lr("steps_per_s")))
    return t


def _stalled(p: Pair, sub: str | None) -> Tally:
    """The steps stopping; on a page that counts no steps (vLLM < 0.7, SGLang) nothing
    is credited: fewer completions follow from any stall and say nothing of it
    (``attach`` says the change cannot be told)."""
    t = Tally()
    t.add("steps_per_s", neg(p.lr("steps_per_s")))
    return t


def _stopped(p: Pair) -> bool:
    """The engine stopped stepping (under 1 % of its baseline's steps, requests in it):
    whatever the class, the stall is the change and the rest (no completions, a frozen
    batch) follows. No load change takes a busy engine from its steps to none."""
    steps = p.both("steps_per_s")
    running = value_of(p.current, "running_avg")
    return (
        steps is not None
        and steps[1] > 0
        and steps[0] < _STOPPED * steps[1]
        and (running is None or running > 0)
    )


def _any(p: Pair, sub: str | None) -> Tally:
    t = Tally()
    for name in SIGNALS:
        lr = p.lr(name)
        t.add(name, None if lr is None else abs(lr))
    return t


# The model of each compared class (adding a problem class: its model here, or the class
# in BY_MOVE; ``tests/test_diagnose_classes.py`` fails until it is one or the other).
MODELS: dict[str, Callable[[Pair, str | None], Tally]] = {
    C.PREFILL_BOUND.value: _prefill,
    C.QUEUE_BOUND.value: _queue,
    C.KV_PRESSURE.value: _kv,
    C.DECODE_BOUND.value: _decode,
    C.STALLED.value: _stalled,
}
# The problem classes with no model of their own: every signal ranked by its move.
BY_MOVE = frozenset({C.TRANSFER_BOUND.value, C.FRONTEND_BOUND.value})
# The classes whose windows are compared: the problem classes.
COMPARED = frozenset(str(c) for c in PROBLEM_CLASSES)


def model_for(cls: str, p: Pair) -> Callable[[Pair, str | None], Tally]:
    """The model that ranks a window of ``cls``: the stall's when the engine stopped
    stepping (whatever the class), else the class's, else every move by its size."""
    return _stalled if _stopped(p) else MODELS.get(cls, _any)
