"""The two sides compared: the current window's derived numbers beside the baseline's,
as log-ratios (:class:`Pair`), and the tally of what each signal contributes to a
symptom (:class:`Tally`), with the logarithmic-mean split (LMDI) of a driver that is a
sum of terms."""

from __future__ import annotations

import math

from app.model import Derived

__all__ = [
    "MIN_MISS",
    "NOISE",
    "SIGNALS",
    "Pair",
    "Tally",
    "batch_rest",
    "lmdi_split",
    "log_ratio",
    "neg",
    "value_of",
]

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
# A contribution below ×1.1 is noise (a 60 s window's rates scatter by about that much).
NOISE = math.log(1.1)
# A signal that fell to 0 (or rose from 0) counts as ×1000: large, finite.
_CAP = math.log(1000.0)
# The miss fraction never reaches 0 (a hit rate of 1.0 still prefills the last token).
MIN_MISS = 1e-3


def value_of(d: Derived, name: str) -> float | None:
    v = getattr(d, name, None)
    return None if v is None or not math.isfinite(v) else float(v)


def log_ratio(cur: float | None, base: float | None) -> float | None:
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


class Pair:
    """The current window's numbers beside the baseline's, as log-ratios."""

    def __init__(self, current: Derived, baseline: Derived) -> None:
        self.current = current
        self.baseline = baseline

    def values(self, name: str) -> tuple[float | None, float | None]:
        return value_of(self.current, name), value_of(self.baseline, name)

    def both(self, name: str) -> tuple[float, float] | None:
        """(now, before) when both are known, else None."""
        cur, base = self.values(name)
        return None if cur is None or base is None else (cur, base)

    def lr(self, name: str) -> float | None:
        return log_ratio(*self.values(name))

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
        return math.log(max(MIN_MISS, 1 - cur) / max(MIN_MISS, 1 - base))

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


class Tally:
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


def neg(x: float | None) -> float | None:
    return None if x is None else -x


def batch_rest(p: Pair, known: list[float | None]) -> float | None:
    """The batch growth (``running_avg``) the other drivers leave unexplained, when all
    of them are known (else None: the rest would take their part)."""
    batch = p.lr("running_avg")
    if batch is None or any(k is None for k in known):
        return None
    rest = batch - sum(k for k in known if k is not None)
    return rest if rest > 0 else None


def lmdi_split(
    tally: Tally, terms: list[tuple[float, float, list[tuple[str, float | None]]]]
) -> None:
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
