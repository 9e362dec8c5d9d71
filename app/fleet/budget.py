"""An SLO's error budget over its period, and the one way it is told. Pure.

Per objective the budget left is ``1 − bad / ((1 − target) · total)`` over the period's
data so far, and the SLO's is the objective with the least left. That is ``1 − burn``,
``burn`` being the burn rate of the data so far: exactly the budget left once the data
spans the period, but early in the period a projection — five minutes at 83× read
"overspent (−8208 %)" of a 30-day budget of which 1 % was spent.

So while the data spans less than :data:`EARLY_SHARE` of the period (:attr:`Budget.early`)
nothing is "left" yet (``remaining`` None): the budget is told by its burn rate over the
data so far and what that projects, labelled as a projection — when the whole period's
budget would be spent at that rate (``spent_in_s``, from now; the period's traffic taken
as steady), or, burning under 1×, how much would be left at the period's end.
:func:`budget_text` is those words, for the UI, the alerts (``slo.budget``) and the API
(``budget.text``) alike.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

__all__ = [
    "EARLY_SHARE",
    "Budget",
    "budget_text",
    "budget_title",
    "from_per_objective",
    "span_text",
]

# The share of its period the data must span before a budget is said to be "left".
EARLY_SHARE = 0.1


def span_text(seconds: float) -> str:
    """``40 s``, ``5 min``, ``8.6 h``, ``30 d``: a span for people (one decimal under 10)."""
    for unit, size in (("d", 86400.0), ("h", 3600.0), ("min", 60.0)):
        if seconds >= size:
            value = seconds / size
            shown = f"{value:.1f}".removesuffix(".0") if value < 10 else f"{value:,.0f}"
            return f"{shown} {unit}"
    return f"{seconds:.0f} s"


@dataclass(frozen=True, slots=True)
class Budget:
    """The error budget over the SLO's period (or the part of it that has data).

    ``remaining`` is 1 at the start, 0 when spent, negative when overspent; ``objective``
    the one with the least left; ``covered_s`` the replica-seconds of data it rests on,
    ``span_s`` the seconds the data spans (its longest-covered replica's), ``period_s``
    the SLO's period (0: not known, never early). ``burn`` is the burn rate of the data
    so far (``1 − remaining`` where judged). ``events`` is the fewest events of an
    objective that has any (0: none has); ``remaining`` and ``burn`` are None while that
    is under ``min_events`` (:attr:`judged`), and ``remaining`` while :attr:`early`.
    """

    remaining: float | None
    objective: str | None
    per_objective: dict[str, float | None]
    covered_s: float
    events: float = 0.0
    min_events: float = 0.0
    burn: float | None = None
    span_s: float = 0.0
    period_s: float = 0.0

    @property
    def judged(self) -> bool:
        """Enough events to say how much is left (``remaining`` may still be None: no
        objective had an event, or the period is :attr:`early`)."""
        return self.events > 0 and self.events >= self.min_events

    @property
    def early(self) -> bool:
        """The data spans less than :data:`EARLY_SHARE` of the period."""
        return self.period_s > 0 and self.span_s < EARLY_SHARE * self.period_s

    @property
    def spent_in_s(self) -> float | None:
        """Projected: seconds from now until the period's whole budget is spent at the
        burn rate so far (0: already spent); None when nothing burns."""
        if self.burn is None or self.burn <= 0 or self.period_s <= 0:
            return None
        return max(0.0, self.period_s / self.burn - self.span_s)

    @property
    def left_at_end(self) -> float | None:
        """Projected: the share left at the period's end at the burn rate so far."""
        return None if self.burn is None else 1.0 - self.burn

    def to_dict(self) -> dict[str, object]:
        return {
            "remaining": self.remaining,
            "objective": self.objective,
            "per_objective": dict(self.per_objective),
            "covered_s": self.covered_s,
            "span_s": self.span_s,
            "events": self.events,
            "min_events": self.min_events,
            "early": self.early,
            "burn_rate": self.burn,
            "projected_spent_in_s": self.spent_in_s if self.early else None,
            "projected_left_at_end": self.left_at_end if self.early else None,
            "text": budget_text(self),
        }


def budget_text(b: Budget) -> str:
    """``87% left``, ``overspent (-12%)``; early in the period ``burn 83× over 5 min of
    30 d, projected: all spent in 8.7 h`` (or ``…: 50% left at its end``); ``n/a (312
    events)`` while its period holds too few events to judge, or ``no data``."""
    if b.remaining is not None:
        return f"overspent ({b.remaining:.0%})" if b.remaining < 0 else f"{b.remaining:.0%} left"
    if b.judged and b.early and b.burn is not None:
        head = f"burn {b.burn:.3g}× over {span_text(b.span_s)} of {span_text(b.period_s)}"
        spent_in = b.spent_in_s
        if b.burn < 1.0 or spent_in is None:
            return f"{head}, projected: {1.0 - b.burn:.0%} left at its end"
        if spent_in <= 0:
            return f"{head}, projected: all spent already"
        return f"{head}, projected: all spent in {span_text(spent_in)}"
    return f"n/a ({b.events:,.0f} events)" if b.events > 0 and not b.judged else "no data"


def budget_title(b: Budget) -> str | None:
    """Why a budget reads as it does when it is not a plain share left: too few events,
    or too little of the period to say what is left."""
    if b.events > 0 and not b.judged:
        return (
            f"judged once its period holds {b.min_events:,.0f} events of each objective "
            f"(slo.min_events_for_budget); {b.events:,.0f} so far"
        )
    if b.judged and b.early:
        return (
            f"the data spans {span_text(b.span_s)} of the {span_text(b.period_s)} period "
            f"(under {EARLY_SHARE:.0%}): what is left is not told yet; the burn rate so far "
            "and, at that rate with steady traffic, when the period's budget would be spent"
        )
    return None


def from_per_objective(
    per: Mapping[str, float | None],
    covered_s: float,
    events: float,
    min_events: float,
    span_s: float,
    period_s: float,
) -> Budget:
    """The SLO's budget from its objectives' (the one with the least left), None early."""
    known = [(v, k) for k, v in per.items() if v is not None]
    if not known:
        return Budget(None, None, dict(per), covered_s, events, min_events, None, span_s, period_s)
    value, name = min(known)
    b = Budget(value, name, dict(per), covered_s, events, min_events, 1.0 - value, span_s, period_s)
    if not b.early:
        return b
    # nothing is "left" yet: the burn so far, and its projection (``budget_text``)
    return Budget(
        None, name, dict.fromkeys(per), covered_s, events, min_events, b.burn, span_s, period_s
    )
