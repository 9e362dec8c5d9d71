"""The rule condition language: a tokenizer, a recursive-descent parser and an evaluator.

Small and safe on purpose — no Python ``eval``. A condition reads the fields of one
evaluation (window numbers, the diagnosis, target health, SLOs, labels)::

    ttft_p99 > slo.ttft_p99 and ttft_count >= 20
    class == "kv_pressure" or (kv_max >= 0.95 and preemptions_per_s > 0)
    class in ["queue_bound", "kv_pressure"]
    target_up == 0
    not metrics_disabled

Grammar, loosest binding first::

    or      := and ("or" and)*
    and     := not ("and" not)*
    not     := "not" not | compare
    compare := sum [("==" | "!=" | "<" | "<=" | ">" | ">=" | "in" | "not in") sum]
    sum     := product (("+" | "-") product)*
    product := unary (("*" | "/") unary)*
    unary   := "-" unary | atom
    atom    := number | string | true | false | null | name | "(" or ")" | "[" list "]"

Names are dotted (``slo.ttft_p99``, ``labels.cluster``); strings use single or double
quotes with backslash escapes. Comparisons do not chain (``a < b < c`` is an error).

**Missing values.** A field that is absent or null is *unknown*, never 0 and never "ok".
A comparison or arithmetic with an unknown operand is unknown; ``and``/``or``/``not``
follow three-valued (Kleene) logic, so ``true or unknown`` is true but
``false or unknown`` and ``not unknown`` stay unknown. A condition that ends unknown
does not hold *and* is reported as "cannot evaluate" with the fields that were missing.
``x == null`` and ``x != null`` are the explicit presence tests (always known).

Booleans compare equal to the numbers 1 and 0 (``target_up == 0`` works whether
``target_up`` is a number or a bool). Division by zero is unknown.

Every error carries the 1-based ``column`` of the offending token.

**Depth.** At most ``MAX_DEPTH`` levels of nesting — brackets, ``not``, unary ``-``, and
the operands of one chain of ``+ - * /`` — so that parsing, checking and evaluating
(all recursive) stay far from Python's stack limit; deeper is an error at the column
where the limit is crossed. ``and``/``or`` chains are flat and may be any length.

Modules: ``parser`` (text → tree), ``tree`` (the nodes, ``ExprError``, walks),
``typecheck`` (operand types, checked before a rule is accepted) and ``evaluation``
(tree and fields → ``Result``). Their public names are imported from here.
"""

from app.alerts.expr.evaluation import UNKNOWN, Result, evaluate, value_of
from app.alerts.expr.parser import parse, tokenize
from app.alerts.expr.tree import (
    MAX_DEPTH,
    Compare,
    ExprError,
    Name,
    Node,
    Value,
    first_comparison_operand,
    names,
)
from app.alerts.expr.typecheck import TypeOf, check

__all__ = [
    "MAX_DEPTH",
    "UNKNOWN",
    "Compare",
    "ExprError",
    "Name",
    "Node",
    "Result",
    "TypeOf",
    "Value",
    "check",
    "evaluate",
    "first_comparison_operand",
    "names",
    "parse",
    "tokenize",
    "value_of",
]
