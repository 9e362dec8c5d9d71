"""The vocabulary of diagnosis classes and sub-causes, defined once.

One entry per class: its name (the value the API, the store, alert labels and rule files
carry), its display names, how the UI draws it, and its place in :data:`VOCABULARY`,
which is ordered most severe first. That one order is both the **precedence** of the
problem classes when several hold in a window (``classify``: an engine that takes no step
explains every load reading, a full KV pool makes requests queue, so ``kv_pressure``
explains ``queue_bound``, …) and the **severity** the UI sorts and merges by
(``severity``: higher is worse).

Everything that names, orders, draws or enumerates the classes reads them from here:
``classify`` (precedence), ``records`` (the ``Diagnosis``), ``hints`` (the situations
the catalog is keyed by), ``app.ui.palette`` and ``app.ui.spikes``, ``app.selfmetrics``,
``app.read.review``. ``app/alerts/default_rules.yaml`` lists the problem classes in plain
text (a rule file users copy must read on its own); a test pins it to
:data:`PROBLEM_CLASSES`.

Adding a class: an entry here, its rule in a module of ``rules/`` (registered in
``rules.PROBLEM_RULES``) and its hints in ``hints.py``; a problem class also gets its
model of what drives its symptom in ``changes.models.MODELS`` (or is named in
``changes.models.BY_MOVE``: its changes ranked by the size of each move) and goes into
the bottleneck rule's list in ``default_rules.yaml`` (``tests/test_diagnose_classes.py``
fails until it does both).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

__all__ = [
    "PROBLEM_CLASSES",
    "VOCABULARY",
    "ClassTerm",
    "DiagnosisClass",
    "SubCause",
    "label",
    "severity",
    "situation",
    "term",
]


class DiagnosisClass(StrEnum):
    """The primary class of a window: exactly one per window and stream."""

    HEALTHY = "healthy"
    IDLE = "idle"
    INSUFFICIENT_DATA = "insufficient_data"
    PREFILL_BOUND = "prefill_bound"
    DECODE_BOUND = "decode_bound"
    QUEUE_BOUND = "queue_bound"
    KV_PRESSURE = "kv_pressure"
    STALLED = "stalled"
    FRONTEND_BOUND = "frontend_bound"
    TRANSFER_BOUND = "transfer_bound"


class SubCause(StrEnum):
    """Why a problem class holds (``rules``, each rule's docstring has the physics).

    Prefill: the computed prompt is long (``long_prompts``) or the prefix cache misses
    what it should serve (``prefix_cache_miss``). Queue: more arrive than the server
    completes (``arrival_surge``), the server completes fewer at the same arrivals
    (``capacity_loss``), or admission is deferred, not short of capacity (``deferred``).
    Decode: prefill chunks stall decode steps (``prefill_interference``), every step is
    slow (``bandwidth_bound``), or speculative decoding stopped multiplying the tokens
    per step (``spec_decode_regression``). Transfer (disaggregated prefill/decode): the
    KV transfer between the pools takes the larger part of the first token's wait
    (``slow_transfer``), transfers fail (``transfer_failures``), or KV held for a transfer
    expires before it is read (``kv_expired``).
    """

    LONG_PROMPTS = "long_prompts"
    PREFIX_CACHE_MISS = "prefix_cache_miss"
    ARRIVAL_SURGE = "arrival_surge"
    CAPACITY_LOSS = "capacity_loss"
    DEFERRED = "deferred"
    PREFILL_INTERFERENCE = "prefill_interference"
    BANDWIDTH_BOUND = "bandwidth_bound"
    SPEC_DECODE_REGRESSION = "spec_decode_regression"
    SLOW_TRANSFER = "slow_transfer"
    TRANSFER_FAILURES = "transfer_failures"
    KV_EXPIRED = "kv_expired"


@dataclass(frozen=True, slots=True)
class ClassTerm:
    """One class: ``label`` and ``short`` are its display names; ``colour`` (Okabe–Ito,
    distinguishable under the common colour-vision deficiencies) fills it, ``text`` is
    the colour of text on that fill, ``pattern`` its band's fill pattern (colour is never
    the only carrier); ``problem`` says it names a problem to act on (a bottleneck, or an
    engine that stopped); ``sub_causes`` are the names that refine it."""

    cls: DiagnosisClass
    label: str
    short: str
    colour: str
    text: str
    pattern: str
    problem: bool = False
    sub_causes: tuple[SubCause, ...] = ()


C = DiagnosisClass
_WHITE, _BLACK = "#ffffff", "#000000"

# Most severe first (module docstring): the problem classes' order is their precedence.
# Fills, in order: black, dark red (far from every replica line colour, darker than the
# vermillion beside it), vermillion, reddish purple, orange, blue, yellow (Okabe–Ito),
# grey, bluish green, sky blue — the swatches of ``app.ui.palette``. Plotly has eight
# fill patterns for ten classes: frontend_bound shares "x" with insufficient_data, whose
# grey is far from its yellow in lightness too, and transfer_bound "." with idle, dark
# red against light sky blue (and every class has its text label).
VOCABULARY: tuple[ClassTerm, ...] = (
    ClassTerm(C.STALLED, "Stalled", "STALLED", "#000000", _WHITE, "|", problem=True),
    # Disaggregated prefill/decode: the KV cache's trip between the pools. Before KV
    # pressure: a prefill pool full of KV held for transfers the decode side is late to
    # read is the transfer's doing (a decode pool short of blocks to receive into shows
    # as waiting to start, which the transfer rule leaves to KV pressure); before
    # queueing: requests waiting for their KV are deferred, not short of slots.
    ClassTerm(
        C.TRANSFER_BOUND,
        "Transfer-bound",
        "TRANSFER",
        "#920000",
        _WHITE,
        ".",
        problem=True,
        sub_causes=(SubCause.SLOW_TRANSFER, SubCause.TRANSFER_FAILURES, SubCause.KV_EXPIRED),
    ),
    ClassTerm(C.KV_PRESSURE, "KV-cache pressure", "KV", "#D55E00", _WHITE, "+", problem=True),
    ClassTerm(
        C.QUEUE_BOUND,
        "Queue-bound",
        "QUEUE",
        "#CC79A7",
        _BLACK,
        "-",
        problem=True,
        sub_causes=(SubCause.ARRIVAL_SURGE, SubCause.CAPACITY_LOSS, SubCause.DEFERRED),
    ),
    ClassTerm(
        C.PREFILL_BOUND,
        "Prefill-bound",
        "PREFILL",
        "#E69F00",
        _BLACK,
        "/",
        problem=True,
        sub_causes=(SubCause.LONG_PROMPTS, SubCause.PREFIX_CACHE_MISS),
    ),
    ClassTerm(
        C.DECODE_BOUND,
        "Decode-bound",
        "DECODE",
        "#0072B2",
        _WHITE,
        "\\",
        problem=True,
        sub_causes=(
            SubCause.PREFILL_INTERFERENCE,
            SubCause.BANDWIDTH_BOUND,
            SubCause.SPEC_DECODE_REGRESSION,
        ),
    ),
    # What a client sees beyond what the server reports: the network, a proxy, the API
    # server's own work (a probe's stream only; the server's own problems come first).
    ClassTerm(C.FRONTEND_BOUND, "Frontend-bound", "FRONTEND", "#F0E442", _BLACK, "x", problem=True),
    ClassTerm(C.INSUFFICIENT_DATA, "Insufficient data", "NO DATA", "#999999", _BLACK, "x"),
    ClassTerm(C.HEALTHY, "Healthy", "OK", "#009E73", _WHITE, ""),
    ClassTerm(C.IDLE, "Idle", "IDLE", "#56B4E9", _BLACK, "."),
)

_BY_NAME: dict[str, ClassTerm] = {t.cls.value: t for t in VOCABULARY}
_SEVERITY: dict[str, int] = {t.cls.value: len(VOCABULARY) - 1 - i for i, t in enumerate(VOCABULARY)}

# The problem classes in order of precedence (the first that holds is the primary class).
PROBLEM_CLASSES: tuple[DiagnosisClass, ...] = tuple(t.cls for t in VOCABULARY if t.problem)


def term(cls: str) -> ClassTerm | None:
    """The entry of a class value (``"queue_bound"``); None for a value not in it."""
    return _BY_NAME.get(cls)


def severity(cls: str) -> int:
    """Higher is worse: stalled > transfer > KV pressure > queue > prefill > decode >
    frontend > no data > healthy > idle; -1 for a value not in the vocabulary."""
    return _SEVERITY.get(cls, -1)


def situation(cls: str, sub_cause: str | None = None) -> str:
    """``decode_bound/prefill_interference`` style key: the class, and its sub-cause."""
    return f"{cls}/{sub_cause}" if sub_cause else str(cls)


def label(cls: str, sub_cause: str | None = None, *, unknown: str = "Unknown") -> str:
    """``"Decode-bound (prefill interference)"`` style text for a class and sub-cause."""
    t = term(cls)
    text = unknown if t is None else t.label
    return f"{text} ({sub_cause.replace('_', ' ')})" if sub_cause else text
