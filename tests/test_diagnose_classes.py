"""The class vocabulary (``app.diagnose.classes``) is the one definition: every place that
names, orders or enumerates the classes agrees with it."""

from __future__ import annotations

import json
import re

from app.alerts.rules import default_rules
from app.diagnose import classes, hints, rules
from app.diagnose.changes import models
from app.diagnose.classes import PROBLEM_CLASSES, VOCABULARY, DiagnosisClass, SubCause

C = DiagnosisClass


def _situations() -> set[str]:
    """Every situation a diagnosis can rank hints for: each class, and each problem class
    with each of its sub-causes (a class with sub-causes is always refined by one)."""
    out = set()
    for t in VOCABULARY:
        if t.sub_causes:
            out |= {classes.situation(t.cls, s) for s in t.sub_causes}
        else:
            out.add(classes.situation(t.cls))
    return out


def test_every_class_has_exactly_one_vocabulary_entry() -> None:
    assert sorted(t.cls for t in VOCABULARY) == sorted(DiagnosisClass)
    assert {s for t in VOCABULARY for s in t.sub_causes} == set(SubCause)


def test_precedence_and_severity_come_from_the_vocabulary_order() -> None:
    assert PROBLEM_CLASSES == (
        C.STALLED,
        C.TRANSFER_BOUND,
        C.KV_PRESSURE,
        C.QUEUE_BOUND,
        C.PREFILL_BOUND,
        C.DECODE_BOUND,
        C.FRONTEND_BOUND,
    )
    order = [C.STALLED, C.TRANSFER_BOUND, C.KV_PRESSURE, C.QUEUE_BOUND, C.PREFILL_BOUND]
    order += [C.DECODE_BOUND, C.FRONTEND_BOUND, C.INSUFFICIENT_DATA, C.HEALTHY, C.IDLE]
    assert [classes.severity(c) for c in order] == [9, 8, 7, 6, 5, 4, 3, 2, 1, 0]
    assert classes.severity("no_such_class") == -1


def test_every_problem_class_has_its_rule_and_nothing_else_does() -> None:
    assert list(rules.PROBLEM_RULES) == list(PROBLEM_CLASSES)


def test_every_problem_class_is_compared_by_its_model_or_by_the_size_of_each_move() -> None:
    """What changed (``app.diagnose.changes``): each problem class has a model of what
    drives its symptom (``models.MODELS``) or is named as ranked by the size of each move
    (``models.BY_MOVE``), never both, and nothing else is compared."""
    problems = {c.value for c in PROBLEM_CLASSES}
    assert set(models.MODELS) | models.BY_MOVE == problems
    assert not set(models.MODELS) & models.BY_MOVE
    assert problems == models.COMPARED


def test_every_situation_has_hints_and_every_hint_names_a_known_situation() -> None:
    known = _situations()
    applied = {s for spec in hints.CATALOG for s in spec.applies}
    conflicts = {s for spec in hints.CATALOG for s in spec.conflicts}
    assert applied | conflicts <= known, (applied | conflicts) - known
    wanted = {
        s for s in known if s.split("/")[0] in PROBLEM_CLASSES or s == C.INSUFFICIENT_DATA.value
    }
    assert wanted <= applied, wanted - applied


def test_situation_and_label_spell_class_and_sub_cause() -> None:
    assert classes.situation(C.DECODE_BOUND, SubCause.BANDWIDTH_BOUND) == (
        "decode_bound/bandwidth_bound"
    )
    assert (
        classes.situation(C.QUEUE_BOUND) == classes.situation(C.QUEUE_BOUND, "") == ("queue_bound")
    )
    assert classes.label("decode_bound", "prefill_interference") == (
        "Decode-bound (prefill interference)"
    )
    assert classes.label("nope") == "Unknown"


def test_default_rule_pack_names_only_vocabulary_classes_and_all_problem_classes() -> None:
    """The shipped rules are a plain rule file users copy, so the classes are written out
    there; this pins them to the vocabulary (a new problem class fails here until the
    bottleneck rule lists it)."""
    pack = {r.name: r.expr for r in default_rules()}
    names = set()
    for expr in pack.values():
        for m in re.finditer(r"\bclass\s*(?:==|!=)\s*\"(\w+)\"", expr):
            names.add(m.group(1))
        for m in re.finditer(r"\bclass\s+in\s+(\[[^\]]*\])", expr):
            names.update(json.loads(m.group(1)))
    assert names <= {c.value for c in DiagnosisClass}, names
    listed = re.search(r"\bclass\s+in\s+(\[[^\]]*\])", pack["PhasewatchBottleneckPersisting"])
    assert listed is not None
    assert json.loads(listed.group(1)) == [c.value for c in PROBLEM_CLASSES]
