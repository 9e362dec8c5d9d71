"""One rule per class. Each returns whether its class holds and every comparison it made.

The latency rules are SLO-relative and partition an over-SLO TTFT between three causes,
so a slow first token always has a name (docs/concepts.md, "TTFT ≈ queue wait + prefill"):

* queue-dominated (queue time ≥ half of TTFT) with the KV pool full → ``kv_pressure``;
* queue-dominated with room in the pool → ``queue_bound`` (admission limit: capacity);
* otherwise → ``prefill_bound`` (prefill compute itself is slow).

``kv_pressure`` also holds without an SLO breach when requests are evicted (any
preemption: vLLM preempts only when a block cannot be had) or blocked (usage ≥ 0.90 with
a queue): "waiting rising while KV usage stays near 1 is the exact signature of KV
pressure" (docs/concepts.md, "The KV cache"). ``decode_bound`` is per-token latency p99 over
the ITL SLO, with its sub-cause: a tail of slow steps while prefill chunks run
(``prefill_interference``), every step slow (``bandwidth_bound``), or speculative
decoding that stopped multiplying the tokens per step (``spec_decode_regression``).

``stalled`` comes before them all: requests in the engine and, for the whole window, no
first token, no token, no finished request, no prompt token and — where the page counts
them — no engine step (``stalled``'s module has the physics).

**Sub-causes** name why a class holds; the ones that are about *what changed* compare
the window with its stream's healthy baseline (``baseline``, a ``Derived`` record, when
the caller has one) and otherwise decide on what the window itself shows (each class's
module says how).

The modules: ``result`` (:class:`RuleResult`, the margins), ``inputs`` (what a problem
rule looks at), ``latency`` (the TTFT and decode judgements several rules share),
``compare`` (a reading against its threshold as evidence), and one module per class:
``idle``, ``stalled``, ``transfer``, ``kv``, ``queue``, ``prefill``, ``decode``,
``frontend``. Adding a class: its rule in a module here, registered in
:data:`PROBLEM_RULES` (``classes`` has the whole recipe).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from app.diagnose.classes import DiagnosisClass
from app.diagnose.rules.decode import decode_bound
from app.diagnose.rules.frontend import frontend_bound
from app.diagnose.rules.idle import idle
from app.diagnose.rules.inputs import Inputs, inputs
from app.diagnose.rules.kv import kv_pressure
from app.diagnose.rules.latency import (
    decode_breach,
    queue_dominated,
    speculating,
    ttft_breach,
    waiting_age,
)
from app.diagnose.rules.prefill import prefill_bound
from app.diagnose.rules.queue import queue_bound
from app.diagnose.rules.result import RuleResult, breach_margin
from app.diagnose.rules.stalled import stalled
from app.diagnose.rules.transfer import TransferVerdict, judge_transfer, transfer_bound

__all__ = [
    "PROBLEM_RULES",
    "Inputs",
    "RuleResult",
    "TransferVerdict",
    "breach_margin",
    "decode_bound",
    "decode_breach",
    "frontend_bound",
    "idle",
    "inputs",
    "judge_transfer",
    "kv_pressure",
    "prefill_bound",
    "queue_bound",
    "queue_dominated",
    "speculating",
    "stalled",
    "transfer_bound",
    "ttft_breach",
    "waiting_age",
]

C = DiagnosisClass

# The rule of every problem class (``classes.PROBLEM_CLASSES``); ``classify`` runs them all
# and takes the first that holds, in precedence order.
PROBLEM_RULES: Mapping[DiagnosisClass, Callable[[Inputs], RuleResult]] = {
    C.STALLED: stalled,
    C.TRANSFER_BOUND: transfer_bound,
    C.KV_PRESSURE: kv_pressure,
    C.QUEUE_BOUND: queue_bound,
    C.PREFILL_BOUND: prefill_bound,
    C.DECODE_BOUND: decode_bound,
    C.FRONTEND_BOUND: frontend_bound,
}
