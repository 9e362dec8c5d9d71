"""The simulator's ground truth spells the diagnosis' classes and sub-causes on its own:
it may share no code with the diagnosis (the import contract "The simulator's ground
truth shares no code with the diagnosis"), so this test ties the two vocabularies —
``app.sim.truth`` against ``app.diagnose.classes`` — and the names truth hands out to
its own tuples."""

from __future__ import annotations

import ast
from pathlib import Path

from app.diagnose.classes import DiagnosisClass, SubCause
from app.sim import truth

C = DiagnosisClass
# The diagnosis' own: whether a window's data can be judged (the engine's accounting
# always knows where its time went).
DIAGNOSIS_ONLY = {C.INSUFFICIENT_DATA.value}
# What only a probe's stream is (``truth.client_class``), never a server's.
CLIENT_ONLY = {C.FRONTEND_BOUND.value}
# Sub-causes the diagnosis names from the page alone; no scenario phase declares them
# (deferred waiting is simulated, as KV transfers, but is no phase's change).
UNDECLARED_SUB_CAUSES = {SubCause.DEFERRED.value}


def test_every_truth_class_is_a_diagnosis_class_and_every_diagnosis_class_one_of_truth() -> None:
    classes = {c.value for c in DiagnosisClass}
    assert set(truth.CLIENT_CLASSES) == classes - DIAGNOSIS_ONLY
    assert set(truth.CLASSES) == classes - DIAGNOSIS_ONLY - CLIENT_ONLY
    assert len(truth.CLIENT_CLASSES) == len(set(truth.CLIENT_CLASSES))


def test_every_declared_sub_cause_is_a_diagnosis_sub_cause_and_back() -> None:
    assert set(truth.SUB_CAUSES) == {s.value for s in SubCause} - UNDECLARED_SUB_CAUSES


def _strings(node: ast.AST) -> set[str]:
    return {
        n.value for n in ast.walk(node) if isinstance(n, ast.Constant) and isinstance(n.value, str)
    }


def test_the_names_truth_hands_out_are_in_its_tuples() -> None:
    """Every class a ``Verdict`` is given or a class is compared with is in
    ``CLIENT_CLASSES``, every sub-cause in ``SUB_CAUSES``, and any other string in its
    code that names a diagnosis class or sub-cause (or ends in ``_bound``) is one of them."""
    tree = ast.parse(Path(truth.__file__).read_text(encoding="utf-8"))
    docstrings = {
        id(n.body[0].value)
        for n in ast.walk(tree)
        if isinstance(n, ast.Module | ast.ClassDef | ast.FunctionDef)
        and n.body
        and isinstance(n.body[0], ast.Expr)
        and isinstance(n.body[0].value, ast.Constant)
    }
    classes, subs = set(truth.CLIENT_CLASSES), set(truth.SUB_CAUSES)
    given: set[str] = set()
    for n in ast.walk(tree):
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == "Verdict":
            if n.args:
                given |= _strings(n.args[0]) - {""}
                assert _strings(n.args[0]) <= classes, ast.unparse(n.args[0])
            for arg in n.args[3:4]:
                assert _strings(arg) - classes <= subs, ast.unparse(arg)  # x if cls == …
        if isinstance(n, ast.Compare) and any(
            isinstance(x, ast.Attribute) and x.attr == "cls" for x in (n.left, *n.comparators)
        ):
            assert _strings(n) <= classes, ast.unparse(n)
    assert given >= {"idle", "stalled", "kv_pressure", "transfer_bound", "healthy"}
    known = {c.value for c in DiagnosisClass} | {s.value for s in SubCause}
    named = {
        n.value
        for n in ast.walk(tree)
        if isinstance(n, ast.Constant)
        and isinstance(n.value, str)
        and id(n) not in docstrings
        and (n.value in known or n.value.endswith("_bound"))
    }
    assert named <= classes | subs, named - classes - subs
