"""The ranking: which moves explain the symptom (:func:`rank`), shrunk by their sampling
error, then the other notable moves; and the headline change."""

from __future__ import annotations

import math

from app.diagnose.changes.models import model_for
from app.diagnose.changes.pair import NOISE, SIGNALS, Pair, log_ratio, value_of
from app.diagnose.records import Change
from app.model import Derived

__all__ = ["headline", "rank"]

# 0–1 fractions: a move is judged by its difference, not its ratio (0.02 → 0.01 is none).
_FRACTIONS = frozenset({"prefix_cache_hit_rate", "kv_usage_avg", "spec_decode_acceptance"})
# A listed change that explains nothing moved at least ×1.25 (or 0.05 for a fraction).
_NOTABLE = math.log(1.25)
_NOTABLE_FRACTION = 0.05
# The events a signal is read from (their rate): its sampling error (``_sampling_error``).
_EVENTS: dict[str, str] = {
    "arrival_rate": "arrival_rate",
    "completion_rate": "completion_rate",
    "prompt_tokens_mean": "completion_rate",
    "output_tokens_mean": "completion_rate",
    "preemptions_rate": "preemptions_rate",
}


def _measured_as(p: Pair, name: str) -> str:
    """The name a candidate is shown under: the drafter's acceptance per draft token, or
    where the page gives only its accept length (SGLang), per draft
    (``spec_decode_accepted_per_draft``)."""
    per_draft = "spec_decode_accepted_per_draft"
    if name == "spec_decode_acceptance" and p.both(name) is None and p.both(per_draft):
        return per_draft
    return name


def _moved(p: Pair, name: str) -> float:
    """How far a signal moved, for listing and ordering the changes that explain nothing."""
    cur, base = p.values(name)
    if cur is None or base is None:
        return 0.0
    if name in _FRACTIONS:
        return abs(cur - base) / _NOTABLE_FRACTION * _NOTABLE
    return abs(log_ratio(cur, base) or 0.0)


def _sampling_error(
    p: Pair, name: str, seconds: float | None, baseline_seconds: float | None
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
        rate = value_of(d, source)
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
    p = Pair(current, baseline)
    model = model_for(str(cls), p)
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
        shown = _measured_as(p, name)
        cur, base = p.values(shown)
        if cur is None or base is None:
            continue
        share = explaining.get(name, 0.0) / total if total > 0 else 0.0
        moved = _moved(p, shown)
        if share <= 0 and moved < _NOTABLE:
            continue
        effect = tally.effects.get(name) if share > 0 else None
        change = Change(
            signal=shown,
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
