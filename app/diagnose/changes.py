"""What changed: a problem window against its stream's own healthy baseline (pure).

:func:`rank` compares the derived numbers of the current window (``Window.derived``)
with those of the stream's baseline — the windows classed healthy in the hour before the
current run of problem windows began, at least :data:`MIN_HEALTHY_S` of them, assembled
by ``app.evaluate.baseline`` — and ranks the signals that moved by **how much of the
symptom each explains under the physics** (``reference/physics.md``), not by raw ratio.

Each symptom is modelled as a product of the signals that drive it, so its growth in
logs is a sum of their log-ratios: a signal's *contribution* is its term of that sum
(what it multiplied the symptom's driver by), its ``share`` its contribution over the
sum of the positive ones (the moves that made it worse; below ×1.1 a move is noise).
Where a driver is a sum (a context of prompt plus output), its log change is split over
the terms by the logarithmic mean (LMDI), so the parts add up exactly. A signal that is a
consequence of others is credited only with what they leave unexplained: the batch grows
with arrivals and answer length (Little's law), so ``running_avg`` gets only the growth
those do not account for. Latencies are the symptom, never a candidate.

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
* ``stalled`` — the engine stopped stepping: ``steps_per_s`` (``completion_rate`` on a
  page without the step histogram; never the arrivals, which a hung engine's frozen
  gauges read as none). So does any window with
  requests in the engine and no step at all where the baseline stepped: no completion,
  no token and a frozen batch are what a stall looks like, not separate changes.

Any other problem class ranks every signal by the size of its move. A signal whose
current or baseline value is missing is skipped, never taken as 0.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from app.diagnose.classes import PROBLEM_CLASSES, DiagnosisClass, SubCause
from app.diagnose.classify import with_changed_hints
from app.diagnose.config import DiagnosisConfig
from app.diagnose.hints import reorder
from app.diagnose.records import BaselineInfo, Change, Diagnosis
from app.diagnose.render import change_sentence
from app.model import Derived, Window
from app.windows.probefacts import is_probe_window

__all__ = [
    "COMPARED",
    "LOOKBACK_S",
    "MIN_HEALTHY_S",
    "SIGNALS",
    "Baseline",
    "change_of",
    "headline",
    "rank",
    "with_changes",
]

# The baseline: healthy windows of the hour before the run began, at least 10 minutes of
# them (a few minutes of healthy traffic is one burst, not a reference).
LOOKBACK_S = 3600.0
MIN_HEALTHY_S = 600.0

# The candidates, in the order a tie keeps. Latencies are the symptom, not candidates.
SIGNALS: tuple[str, ...] = (
    "arrival_rate",
    "completion_rate",
    "prompt_tokens_mean",
    "output_tokens_mean",
    "prefix_cache_hit_rate",
    "spec_decode_acceptance",
    "running_avg",
    "step_tokens_p99",
    "steps_per_s",
    "preemptions_rate",
    "kv_usage_avg",
    "waiting_deferred_avg",
)
# 0–1 fractions: a move is judged by its difference, not its ratio (0.02 → 0.01 is none).
_FRACTIONS = frozenset({"prefix_cache_hit_rate", "kv_usage_avg", "spec_decode_acceptance"})
# A contribution below ×1.1 is noise (a 60 s window's rates scatter by about that much).
NOISE = math.log(1.1)
# A listed change that explains nothing moved at least ×1.25 (or 0.05 for a fraction).
_NOTABLE = math.log(1.25)
_NOTABLE_FRACTION = 0.05
# A signal that fell to 0 (or rose from 0) counts as ×1000: large, finite.
_CAP = math.log(1000.0)
# Below this share of its baseline's engine steps, with requests in it, the engine stopped.
_STOPPED = 0.01
# The events a signal is read from (their rate): its sampling error (``_sampling_error``).
_EVENTS: dict[str, str] = {
    "arrival_rate": "arrival_rate",
    "completion_rate": "completion_rate",
    "prompt_tokens_mean": "completion_rate",
    "output_tokens_mean": "completion_rate",
    "preemptions_rate": "preemptions_rate",
}
# The miss fraction never reaches 0 (a hit rate of 1.0 still prefills the last token).
_MIN_MISS = 1e-3


@dataclass(frozen=True, slots=True)
class Baseline:
    """The derived numbers of a stream's healthy baseline (None: too little of it) and
    what it covered."""

    derived: Derived | None
    info: BaselineInfo


def _value(d: Derived, name: str) -> float | None:
    v = getattr(d, name, None)
    return None if v is None or not math.isfinite(v) else float(v)


def _log_ratio(cur: float | None, base: float | None) -> float | None:
    """ln(cur / base), capped at ±ln 1000; None when either is unknown or negative."""
    if cur is None or base is None or cur < 0 or base < 0:
        return None
    if cur == base:
        return 0.0
    if base == 0:
        return _CAP
    if cur == 0:
        return -_CAP
    return max(-_CAP, min(_CAP, math.log(cur / base)))


def _log_mean(a: float, b: float) -> float:
    """The logarithmic mean L(a, b) of two positive numbers (LMDI's weight)."""
    if a <= 0 or b <= 0:
        return 0.0
    if abs(a - b) <= 1e-12 * max(a, b):
        return a
    return (a - b) / (math.log(a) - math.log(b))


class _Pair:
    """The current window's numbers beside the baseline's, as log-ratios."""

    def __init__(self, current: Derived, baseline: Derived) -> None:
        self.current = current
        self.baseline = baseline

    def values(self, name: str) -> tuple[float | None, float | None]:
        return _value(self.current, name), _value(self.baseline, name)

    def both(self, name: str) -> tuple[float, float] | None:
        """(now, before) when both are known, else None."""
        cur, base = self.values(name)
        return None if cur is None or base is None else (cur, base)

    def lr(self, name: str) -> float | None:
        return _log_ratio(*self.values(name))

    def own(self, name: str) -> float | None:
        """How far a signal itself moved, in logs of the quantity it drives (the miss
        fraction for the hit rate, steps per token for the acceptance): a signal that
        moved less than noise explains nothing, whatever roles it plays."""
        if name == "prefix_cache_hit_rate":
            return self.miss()
        if name == "spec_decode_acceptance":
            return self.spec()
        return self.lr(name)

    def miss(self) -> float | None:
        """ln of the miss fraction's ratio, (1 − hit now) / (1 − hit before)."""
        cur, base = self.values("prefix_cache_hit_rate")
        if cur is None or base is None:
            return None
        return math.log(max(_MIN_MISS, 1 - cur) / max(_MIN_MISS, 1 - base))

    def uncached(self) -> float | None:
        """ln of the uncached prompt tokens per request's ratio: measured where the page
        counts them, else prompt × miss fraction."""
        measured = self.lr("uncached_prompt_tokens_mean")
        if measured is not None:
            return measured
        prompt, miss = self.lr("prompt_tokens_mean"), self.miss()
        if prompt is None and miss is None:
            return None
        return (prompt or 0.0) + (miss or 0.0)

    def spec(self) -> float | None:
        """ln of the decode steps per output token's ratio: (1 + a before) / (1 + a now),
        ``a`` the accepted tokens per draft (vLLM's mean acceptance length is 1 + a);
        without the drafts counter, the acceptance rate (one draft token) as a floor."""
        for name in ("spec_decode_accepted_per_draft", "spec_decode_acceptance"):
            cur, base = self.values(name)
            if cur is not None and base is not None and cur >= 0 and base >= 0:
                return math.log((1 + base) / (1 + cur))
        return None


class _Tally:
    """Contributions per signal, and the driver each one moves."""

    def __init__(self) -> None:
        self.contrib: dict[str, float] = {}
        self.effects: dict[str, tuple[str, float]] = {}

    def add(self, signal: str, amount: float | None) -> None:
        if amount is None:
            return
        self.contrib[signal] = self.contrib.get(signal, 0.0) + amount

    def effect(self, signal: str, driver: str, log_ratio: float | None) -> None:
        if log_ratio is not None:
            self.effects[signal] = (driver, math.exp(log_ratio))

    def explained(self) -> float:
        return sum(v for v in self.contrib.values() if v >= NOISE)


def _positive(x: float | None) -> float:
    return 0.0 if x is None else max(0.0, x)


def _neg(x: float | None) -> float | None:
    return None if x is None else -x


def _batch_rest(p: _Pair, known: list[float | None]) -> float | None:
    """The batch growth (``running_avg``) the other drivers leave unexplained, when all
    of them are known (else None: the rest would take their part)."""
    batch = p.lr("running_avg")
    if batch is None or any(k is None for k in known):
        return None
    rest = batch - sum(k for k in known if k is not None)
    return rest if rest > 0 else None


def _split(tally: _Tally, terms: list[tuple[float, float, list[tuple[str, float | None]]]]) -> None:
    """LMDI over a sum of terms: each term (now, before, its factors as (signal, log
    ratio)) weighs its factors' log-ratios by L(term) / L(sum)."""
    total_now = sum(t[0] for t in terms)
    total_before = sum(t[1] for t in terms)
    whole = _log_mean(total_now, total_before)
    if whole <= 0:
        return
    for now, before, factors in terms:
        w = _log_mean(now, before) / whole
        for signal, lr in factors:
            if lr is not None:
                tally.add(signal, w * lr)


def _prefill(p: _Pair, sub: str | None) -> _Tally:
    t = _Tally()
    t.add("arrival_rate", p.lr("arrival_rate"))
    t.add("prompt_tokens_mean", p.lr("prompt_tokens_mean"))
    t.add("prefix_cache_hit_rate", p.miss())
    uncached = p.uncached()
    t.effect("prompt_tokens_mean", "uncached_prompt_tokens_mean", uncached)
    t.effect("prefix_cache_hit_rate", "uncached_prompt_tokens_mean", uncached)
    if t.explained() < NOISE:  # no workload change: the engine or its budget
        t.add("steps_per_s", _neg(p.lr("steps_per_s")))
        t.add("step_tokens_p99", _neg(p.lr("step_tokens_p99")))
    return t


def _queue(p: _Pair, sub: str | None) -> _Tally:
    t = _Tally()
    t.add("arrival_rate", p.lr("arrival_rate"))
    # The work each request brings, in tokens the engine processes: its uncached prompt
    # and its output (at the admission limit a step's budget and compute are shared by
    # both), split by LMDI over output, prompt and hit rate.
    work = _Tally()
    out, prompt = p.both("output_tokens_mean"), p.both("prompt_tokens_mean")
    if out is not None and prompt is not None:
        hit = p.both("prefix_cache_hit_rate")
        miss = (1.0, 1.0) if hit is None else tuple(max(_MIN_MISS, 1 - h) for h in hit)
        _split(
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
    drop = _neg(p.lr("completion_rate"))
    if drop is not None:
        grown = sum(work.contrib.values())
        t.add("completion_rate", max(0.0, drop - max(0.0, grown)))
    if sub == SubCause.DEFERRED.value:
        # The queue is deferred requests: what defers them is the change.
        t.add("waiting_deferred_avg", p.lr("waiting_deferred_avg"))
    return t


def _kv(p: _Pair, sub: str | None) -> _Tally:
    t = _Tally()
    arrivals, output, spec = p.lr("arrival_rate"), p.lr("output_tokens_mean"), p.spec()
    # Requests in flight: arrivals × time in the system (answer length, steps per token).
    t.add("arrival_rate", arrivals)
    t.add("output_tokens_mean", output)
    t.add("spec_decode_acceptance", spec)
    t.add("running_avg", _batch_rest(p, [arrivals, output, spec or 0.0]))
    # KV per request: the uncached prompt (a cached prefix is shared) plus half the answer.
    prompt, out = p.both("prompt_tokens_mean"), p.both("output_tokens_mean")
    if prompt is not None and out is not None:
        hit = p.both("prefix_cache_hit_rate")
        miss = (1.0, 1.0) if hit is None else tuple(max(_MIN_MISS, 1 - h) for h in hit)
        _split(
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


def _decode(p: _Pair, sub: str | None) -> _Tally:
    t = _Tally()
    arrivals, output, spec = p.lr("arrival_rate"), p.lr("output_tokens_mean"), p.spec()
    # Steps per output token (directly) and the batch through them.
    t.add("spec_decode_acceptance", None if spec is None else 2 * spec)
    if spec is not None:
        t.effect("spec_decode_acceptance", "steps_per_output_token", spec)
    # The batch: arrivals × answer length × time per token (Little's law).
    t.add("arrival_rate", arrivals)
    t.add("output_tokens_mean", output)
    t.add("running_avg", _batch_rest(p, [arrivals, output, spec or 0.0]))
    # The context each step reads per sequence: prompt + half the answer.
    prompt, out = p.both("prompt_tokens_mean"), p.both("output_tokens_mean")
    if prompt is not None and out is not None:
        _split(
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
        t.add("steps_per_s", _neg(p.lr("steps_per_s")))
    return t


def _stalled(p: _Pair, sub: str | None) -> _Tally:
    t = _Tally()
    steps = _neg(p.lr("steps_per_s"))
    t.add("steps_per_s", steps)
    if steps is None:  # a page without the step histogram (vLLM < 0.7): no completions
        t.add("completion_rate", _neg(p.lr("completion_rate")))
    return t


def _stopped(p: _Pair) -> bool:
    """The engine stopped stepping (under 1 % of its baseline's steps, requests in it):
    whatever the class, the stall is the change and the rest (no completions, a frozen
    batch) follows. No load change takes a busy engine from its steps to none."""
    steps = p.both("steps_per_s")
    running = _value(p.current, "running_avg")
    return (
        steps is not None
        and steps[1] > 0
        and steps[0] < _STOPPED * steps[1]
        and (running is None or running > 0)
    )


def _any(p: _Pair, sub: str | None) -> _Tally:
    t = _Tally()
    for name in SIGNALS:
        lr = p.lr(name)
        t.add(name, None if lr is None else abs(lr))
    return t


_MODELS: dict[str, Callable[[_Pair, str | None], _Tally]] = {
    DiagnosisClass.PREFILL_BOUND.value: _prefill,
    DiagnosisClass.QUEUE_BOUND.value: _queue,
    DiagnosisClass.KV_PRESSURE.value: _kv,
    DiagnosisClass.DECODE_BOUND.value: _decode,
    "stalled": _stalled,
}
# The classes whose windows are compared: the problem classes (``stalled`` by its name
# until the vocabulary has it).
COMPARED = frozenset({str(c) for c in PROBLEM_CLASSES} | {"stalled"})


def _moved(p: _Pair, name: str) -> float:
    """How far a signal moved, for listing and ordering the changes that explain nothing."""
    cur, base = p.values(name)
    if cur is None or base is None:
        return 0.0
    if name in _FRACTIONS:
        return abs(cur - base) / _NOTABLE_FRACTION * _NOTABLE
    return abs(_log_ratio(cur, base) or 0.0)


def _sampling_error(
    p: _Pair, name: str, seconds: float | None, baseline_seconds: float | None
) -> float:
    """The standard error of a signal's log-ratio from the events behind it: about
    sqrt(1/N now + 1/N before) for a rate or a per-request mean read from N events
    (Poisson; a token-length mean's coefficient of variation taken as 1). 0 when the
    signal is not read from countable events or the seconds are unknown."""
    source = _EVENTS.get(name)
    if source is None:
        return 0.0
    var = 0.0
    for d, secs in ((p.current, seconds), (p.baseline, baseline_seconds)):
        rate = _value(d, source)
        if secs is None or rate is None or secs <= 0:
            continue
        var += 1.0 / max(1.0, rate * secs)
    return math.sqrt(var)


def rank(
    current: Derived,
    baseline: Derived,
    cls: str,
    sub_cause: str | None = None,
    *,
    seconds: float | None = None,
    baseline_seconds: float | None = None,
) -> tuple[Change, ...]:
    """The signals that moved against the baseline, those that explain most of the
    symptom of ``cls`` (and ``sub_cause``) first; then the other notable moves (share 0),
    those the symptom's model would credit most first, then the largest. Signals missing
    on either side are skipped.

    ``seconds`` (the current window's) and ``baseline_seconds`` size the sampling error
    of the signals read from counted events (arrivals, completions, per-request means):
    a signal's contribution is shrunk by what lies within two standard errors of its
    move (``|move| - 2 SE`` of ``|move|``), so a low-traffic window's 7 arrivals do not
    outweigh a hit-rate collapse. When that leaves no move explaining anything (none is
    significant alone, yet the symptom holds), the unshrunk contributions rank. Without
    the seconds, no shrinkage."""
    p = _Pair(current, baseline)
    model = _stalled if _stopped(p) else _MODELS.get(str(cls), _any)
    tally = model(p, None if sub_cause is None else str(sub_cause))
    credited = {k: v for k, v in tally.contrib.items() if abs(p.own(k) or 0.0) >= NOISE}
    shrunk = {}
    for k, v in credited.items():
        own = abs(p.own(k) or 0.0)
        err = 2.0 * _sampling_error(p, k, seconds, baseline_seconds)
        shrunk[k] = v * max(0.0, own - err) / own
    explaining = {k: v for k, v in shrunk.items() if v >= NOISE}
    if not explaining:
        # No move is significant on its own, yet the symptom is there: the moves the
        # physics credits, as measured.
        explaining = {k: v for k, v in credited.items() if v >= NOISE}
    total = sum(explaining.values())
    out: list[tuple[float, float, float, int, Change]] = []
    for i, name in enumerate(SIGNALS):
        cur, base = p.values(name)
        if cur is None or base is None:
            continue
        share = explaining.get(name, 0.0) / total if total > 0 else 0.0
        moved = _moved(p, name)
        if share <= 0 and moved < _NOTABLE:
            continue
        effect = tally.effects.get(name) if share > 0 else None
        change = Change(
            signal=name,
            baseline=base,
            value=cur,
            ratio=cur / base if base > 0 else None,
            share=round(share, 4),
            effect=None if effect is None else effect[0],
            effect_ratio=None if effect is None else effect[1],
        )
        out.append((-share, -max(0.0, tally.contrib.get(name, 0.0)), -moved, i, change))
    out.sort(key=lambda x: x[:4])
    return tuple(c for *_, c in out)


def headline(changes: tuple[Change, ...]) -> Change | None:
    """The change that explains most of the symptom (None: none explains any of it)."""
    return changes[0] if changes and changes[0].share > 0 else None


def with_changes(
    diagnosis: Diagnosis,
    window: Window,
    baseline: Baseline | None,
    *,
    no_history: str = "",
    config: DiagnosisConfig | None = None,
) -> Diagnosis:
    """The diagnosis of ``window`` with its ``changes`` against ``baseline`` and its
    summary saying the headline (or that there is no baseline). Only a problem window is
    compared; any other is returned as it is. ``baseline`` None: the caller has no
    history of the stream at all (``no_history`` says why).

    The hints that address the headline change move first: built again with the
    baseline's numbers under ``config`` (the one the window was diagnosed with), or,
    without it, reordered as they are (``hints.reorder``). A probe's window is not
    compared: the numbers a baseline holds are a server's."""
    if str(diagnosis.cls) not in COMPARED or is_probe_window(window):
        return diagnosis
    info = None if baseline is None else baseline.info
    changes: tuple[Change, ...] = ()
    if baseline is not None and baseline.derived is not None:
        sub = None if diagnosis.sub_cause is None else str(diagnosis.sub_cause)
        changes = rank(
            window.derived,
            baseline.derived,
            str(diagnosis.cls),
            sub,
            seconds=window.covered,
            baseline_seconds=baseline.info.healthy_s,
        )
    sentence = change_sentence(changes, info, no_history=no_history)
    summary = f"{diagnosis.summary}; {sentence}" if sentence else diagnosis.summary
    out = dataclasses.replace(diagnosis, changes=changes, baseline=info, summary=summary)
    if not changes:
        return out
    if config is not None:
        derived = None if baseline is None else baseline.derived
        return with_changed_hints(out, window, derived, config)
    return dataclasses.replace(out, hints=reorder(out.hints, out.label, changes))


def _float(x: Any) -> float | None:
    return float(x) if isinstance(x, int | float) and not isinstance(x, bool) else None


def change_of(payload: Mapping[str, Any]) -> str | None:
    """The sentence a problem diagnosis's summary ends with, from its JSON form
    (``Diagnosis.to_dict``: a stored row, a rule instance): the headline change, or why
    there is none. None for a window that was not compared (not a problem, or a row
    stored before changes were ranked)."""
    if "changes" not in payload or str(payload.get("class")) not in COMPARED:
        return None
    base = payload.get("baseline")
    info = None
    if isinstance(base, Mapping):
        info = BaselineInfo(
            run_start=_float(base.get("run_start")) or 0.0,
            healthy_s=_float(base.get("healthy_s")) or 0.0,
            needed_s=_float(base.get("needed_s")) or MIN_HEALTHY_S,
            start=_float(base.get("start")),
            end=_float(base.get("end")),
        )
    changes = []
    for c in payload.get("changes") or []:
        if not isinstance(c, Mapping):
            continue
        value, baseline = _float(c.get("value")), _float(c.get("baseline"))
        if value is None or baseline is None:
            continue
        changes.append(
            Change(
                signal=str(c.get("signal")),
                baseline=baseline,
                value=value,
                ratio=_float(c.get("ratio")),
                share=_float(c.get("share")) or 0.0,
                effect=None if c.get("effect") is None else str(c.get("effect")),
                effect_ratio=_float(c.get("effect_ratio")),
            )
        )
    return change_sentence(changes, info)
