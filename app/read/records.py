"""The record types the pages hold, re-exported so that ``app.ui`` imports ``app.read``
only (the sixth import contract in ``pyproject.toml``).

Each is a plain frozen record computed below the read side — a fleet and its window
(``app.fleet``), a probe's and a P/D transfer's readings (``app.windows``) and the
diagnosis' configuration (thresholds, SLOs, the targets' server settings:
``app.diagnose.config``, which the pages are handed and pass on). The UI draws them and
calls nothing that computes them (a budget's words, ``budget_text`` and ``budget_title``,
are the ones the alerts and the API give: one wording); the diagnosis' own records and vocabulary
(``app.diagnose.records``, ``app.diagnose.classes``) it imports where they are.
"""

from __future__ import annotations

from app.diagnose.config import DiagnosisConfig
from app.fleet.aggregate import FleetKey
from app.fleet.budget import Budget, budget_text, budget_title
from app.fleet.imbalance import Imbalance
from app.fleet.pools import ClientTtft, PDView, Pool
from app.fleet.tracker import SloStatus
from app.fleet.view import FleetView
from app.windows.probefacts import ProbeFacts
from app.windows.transferfacts import TransferFacts

__all__ = [
    "Budget",
    "ClientTtft",
    "DiagnosisConfig",
    "FleetKey",
    "FleetView",
    "Imbalance",
    "PDView",
    "Pool",
    "ProbeFacts",
    "SloStatus",
    "TransferFacts",
    "budget_text",
    "budget_title",
]
