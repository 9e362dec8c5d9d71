"""The records of the hint catalog: what a builder reads, what it makes, one entry.

``hints.py`` holds the catalog and its ranking; the builders of each family of hints live
in a module of their own (``prefill_hints``, ``memory_hints``, ``queue_hints``,
``frontend_hints``, ``transfer_hints``), built on these records and ``hintkit``, and join
the catalog there.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from app.diagnose.config import DiagnosisConfig, Slo
from app.diagnose.facts import Facts
from app.diagnose.records import Change, Roofline
from app.diagnose.server import ServerView
from app.model import Derived

__all__ = ["Builder", "Context", "HintSpec", "Made"]


@dataclass(frozen=True, slots=True)
class Context:
    """What a hint builder reads: the window, its situation, the thresholds and SLOs,
    the server's settings, the roofline, the baseline and what changed."""

    situation: str
    facts: Facts
    config: DiagnosisConfig
    server: ServerView
    slo: Slo
    roof: Roofline | None = None
    baseline: Derived | None = None
    changes: tuple[Change, ...] = ()


@dataclass(frozen=True, slots=True)
class Made:
    """A built hint: the action with its value, the evidence with its numbers, and
    whether the evidence makes it the lever (promoted)."""

    action: str
    evidence: str
    promoted: bool = False
    # The knob the action sets, as the what-if twin names it (``Hint.setting``).
    setting: tuple[str, float] | None = None


Builder = Callable[[Context], Made | None]


@dataclass(frozen=True, slots=True)
class HintSpec:
    """One catalog entry. ``applies`` maps a situation (class or class/sub-cause) to its
    base rank; ``build`` makes the hint from the evidence (None: not shown);
    ``addresses`` the changes it answers (``signal+`` rose, ``signal-`` fell)."""

    id: str
    title: str
    why: str
    applies: Mapping[str, int]
    build: Builder
    addresses: tuple[str, ...] = ()
    conflicts: tuple[str, ...] = ()
