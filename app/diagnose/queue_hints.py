"""What to change when requests wait or the engine stops: capacity (replicas, rate
limiting, a server that slowed), deferred admission, and a stalled engine.

Builders of the hint catalog (``hints.CATALOG`` joins them); the numbers, and the
line of docs/concepts.md ("What to change") they trace to:

* ``more-replicas`` / ``rate-limit`` — "num_requests_waiting > 0 means the request had
  not started — a capacity problem": arrivals / completions is how many times this
  replica's capacity the traffic needs.
"""

from __future__ import annotations

import math

from app.diagnose.hintkit import (
    DEFERRED,
    baseline_value,
    fmt_n,
    fmt_pct,
    fmt_rate,
    requests_wait,
)
from app.diagnose.hintspec import Builder, Context, Made


def _stall(x: Context) -> str:
    f = x.facts
    if f.probe is not None:  # a probe's window: what the client saw, and the page beside it
        return (
            f"every probe ({f.probe.attempts:.0f}) timed out while the server's /metrics "
            f"answered and showed no token for {f.covered:.0f} s"
        )
    present = max(f.running_max or 0.0, f.waiting_max or 0.0)
    return (
        f"{fmt_n(present)} requests in the engine and no token, step or finished request for "
        f"{f.covered:.0f} s"
    )


def _deferred(x: Context) -> str | None:
    f = x.facts
    deferred, waiting = f.derived.waiting_deferred_avg, f.waiting_avg
    if deferred is None or not waiting:
        return None
    share = fmt_pct(deferred / waiting)
    return f"{fmt_n(deferred)} of {fmt_n(waiting)} waiting requests deferred ({share})"


def more_replicas(x: Context) -> Made | None:
    f = x.facts
    if not requests_wait(x):
        return None  # nothing waits: more servers would not start anything sooner
    a, c = f.derived.arrival_rate, f.derived.completion_rate
    evidence = f"{fmt_n(f.waiting_avg or 0.0)} requests waiting on average"
    replicas = 2
    action = (
        "run more vLLM replicas behind the load balancer (scale out on vllm:num_requests_waiting)"
    )
    if a is not None and c is not None and c > 0 and a > c:
        r = a / c
        replicas = max(2, math.ceil(r))
        action = (
            f"≈ {r:.1f}× the replicas serving this traffic now (one replica: "
            f"+{max(1, math.ceil(r) - 1)}), behind the load balancer; scale out on "
            "vllm:num_requests_waiting"
        )
        evidence += (
            f"; arrivals {fmt_rate(a)} against {fmt_rate(c)} completed: ×{r:.1f} its capacity"
        )
    elif a is not None and c is not None:
        evidence += (
            f"; arrivals {fmt_rate(a)} ≤ {fmt_rate(c)} completed: more replicas drain it sooner"
        )
    return Made(action, evidence, setting=("replicas", replicas))


def rate_limit(x: Context) -> Made | None:
    f = x.facts
    a, c = f.derived.arrival_rate, f.derived.completion_rate
    if a is None or c is None or c <= 0 or a <= c:
        return None  # arrivals within what the server completes: nothing to shed
    evidence = (
        f"arrivals {fmt_rate(a)} > completions {fmt_rate(c)}: the queue grows by {fmt_rate(a - c)}"
    )
    before = baseline_value(x, "arrival_rate")
    if before:
        evidence += (
            f"; arrivals were {fmt_rate(before)} in the healthy baseline (×{a / before:.2g})"
        )
    return Made(
        f"cap admissions at the gateway to ≈ {fmt_rate(c)} per replica (what it completes now) "
        "and answer the excess with 429 until replicas are added",
        evidence,
    )


def check_slowdown(x: Context) -> Made | None:
    now = x.facts.derived
    parts = []
    for name, label in (("completion_rate", "completions"), ("arrival_rate", "arrivals")):
        a, b = getattr(now, name), baseline_value(x, name)
        if a is not None and b is not None:
            parts.append(f"{label} {fmt_rate(b)} → {fmt_rate(a)}")
    steps, steps_before = now.steps_per_s, baseline_value(x, "steps_per_s")
    if steps and steps_before:
        parts.append(
            f"engine steps {steps_before:.3g}/s → {steps:.3g}/s (×{steps_before / steps:.2g} "
            "the time a step)"
        )
    if not parts:
        return None
    return Made(
        "compare step time and decode speed with before (and with the bandwidth ceiling: "
        "configure the GPU and model); check GPU clocks, power and thermal throttling "
        "(nvidia-smi -q -d PERFORMANCE), a noisy neighbour on the host, a changed flag, "
        "driver or vLLM version",
        "; ".join(parts),
        promoted=True,
    )


def deferred_admission(x: Context) -> Made | None:
    f = x.facts
    text = _deferred(x)
    if text is None:
        return None
    if f.running_avg is not None and f.kv_max is not None:
        limit = x.server.max_num_seqs
        text += (
            f"; {fmt_n(f.running_avg)} running (max_num_seqs {limit.shown()}"
            f"{', assumed' if limit.assumed else ''}) with KV usage max "
            f"{fmt_pct(f.kv_max)}: room to admit them"
        )
    return Made(
        "read vllm:num_requests_waiting_by_reason: with a KV connector, check the transfers "
        "from the prefill instances; with LoRA, the adapter budget (--max-loras); look for "
        "requests blocked on structured-output grammars",
        text,
    )


def for_stall_or_deferred(action: str) -> Builder:
    def build(x: Context) -> Made | None:
        if x.situation == DEFERRED:
            text = _deferred(x)
            return None if text is None else Made(action, text)
        return Made(action, _stall(x))

    return build


def engine_health(x: Context) -> Made | None:
    return Made(
        "curl the server's /health (a dead engine core answers an error; a hung one may "
        "still answer 200), read the engine logs for the last step and any timeout or "
        "traceback, restart the server if the core does not step; if /health is fine and "
        "the logs show steps, the /metrics page itself is stale (a cache or proxy in front)",
        _stall(x),
    )


def hang_collective(x: Context) -> Made | None:
    tp = x.server.tensor_parallel_size
    if not tp.assumed and tp.value is not None and int(tp.value) <= 1:
        return None  # one GPU: no collective to hang
    text = _stall(x)
    if not tp.assumed:
        text += f"; tensor_parallel_size {tp.shown()} (configured)"
    return Made(
        "with tensor or pipeline parallelism, check every rank's process and GPU "
        "(nvidia-smi), run with NCCL_DEBUG=INFO, and look for a collective timeout in the "
        "logs of all ranks",
        text,
    )
