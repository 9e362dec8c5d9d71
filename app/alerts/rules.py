"""Rule files: YAML in, validated :class:`Rule` records out, or one error naming the place.

A file is a list of rules under ``rules:`` (or Prometheus' ``groups: [{name, rules}]``)::

    rules:
      - alert: PhasewatchTTFTOverSLO          # also accepted: name
        expr: ttft_p99 > slo.ttft_p99         # also accepted: condition
        for: 2m                               # pending this long before firing (default 0)
        keep_firing_for: 1m                   # stay firing this long after it clears
        severity: warning                     # critical | warning | info (default warning)
        value: ttft_p99                       # what {{ value }} shows (default: the left
                                              #   side of the first comparison)
        labels: {team: inference}             # static extra labels
        annotations:
          summary: "TTFT p99 {{ value | seconds }} on {{ labels.model_name }}"

Annotations also read ``active_for`` (seconds the condition has held: since when, not
the rule's ``for``) and ``held`` (the values it held with, and how long each).

Durations are seconds or Go-style ``90s``, ``2m``, ``1h30m``, ``500ms``
(:func:`app.durations.parse_duration`). Every field
name in ``expr``, ``value`` and the templates is checked against the fields rules can
read (:mod:`app.alerts.fields`), so a misspelt ``kv_mx`` fails here with a suggestion
instead of never firing. Errors read ``FILE:LINE:COLUMN: rule 'NAME': what``, on one
line — also for what is not valid YAML, a ``!!python/…`` tag (safe types only) or
nesting deeper than :data:`app.safeyaml.MAX_DEPTH` (YAML) or
:data:`app.alerts.expr.MAX_DEPTH` (a condition): never a traceback.

Pure apart from :func:`load_rule_file`, :func:`check_rule_files` and
:func:`default_rules`, which read a file.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

from app.alerts import expr as ex
from app.alerts.fields import (
    ALERT_FIELDS,
    LABEL_PREFIX,
    SLO_ONLY_FIELDS,
    field_type,
    known_names,
)
from app.alerts.template import Template, TemplateError, parse_template
from app.config import AlertsConfig
from app.durations import parse_duration
from app.safeyaml import Loader, error_from

__all__ = [
    "DEFAULT_RULES",
    "Rule",
    "RuleError",
    "check_rule_files",
    "default_rules",
    "load_rule_file",
    "load_rules",
    "parse_duration",
]

DEFAULT_RULES = "default_rules.yaml"
SEVERITIES = ("critical", "warning", "info")
RESERVED_LABELS = ("alertname", "severity", "target", "model_name")
_RULE_KEYS = {
    "alert",
    "name",
    "expr",
    "condition",
    "for",
    "keep_firing_for",
    "severity",
    "value",
    "labels",
    "annotations",
}
_ALERT_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_LABEL_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class RuleError(ValueError):
    """A rule file that cannot be used; the message names the file, line, column and rule."""


@dataclass(frozen=True, slots=True)
class Rule:
    """One validated alerting rule.

    ``scope`` is ``slo`` when the condition reads an SLO field such as
    ``slo.burn_rate_1h`` (evaluated once per SLO and fleet), ``target`` when it reads only
    target fields (once per target, also with no streams), else ``stream`` (once per
    target and model).
    """

    name: str
    expr: str
    condition: ex.Node
    value: ex.Node | None
    for_s: float
    keep_firing_for_s: float
    severity: str
    labels: tuple[tuple[str, str], ...]
    annotations: tuple[tuple[str, Template], ...]
    scope: str
    where: str


class _Where:
    """Turns YAML marks and expression columns into ``FILE:LINE:COLUMN`` prefixes."""

    def __init__(self, source: str, text: str) -> None:
        self.source = source
        self.lines = text.splitlines()

    def node(self, node: yaml.Node, offset: int = 0) -> str:
        """Position of ``offset`` (0-based) inside a scalar's value, as best YAML allows."""
        mark = node.start_mark
        line, col = mark.line, mark.column
        style = getattr(node, "style", None)
        if style in ("|", ">"):
            # Block scalar: the text starts on the next line, indented; a literal block
            # keeps its line breaks, a folded one is placed on its first line.
            before = str(getattr(node, "value", ""))[:offset]
            k = before.count("\n") if style == "|" else 0
            line = mark.line + 1 + k
            text = self.lines[line] if line < len(self.lines) else ""
            indent = len(text) - len(text.lstrip(" "))
            col = indent + len(before.rsplit("\n", 1)[-1])
        elif style in ("'", '"'):
            col = mark.column + 1 + offset
        else:
            col = mark.column + offset
        return f"{self.source}:{line + 1}:{col + 1}"


def _suggest(name: str) -> str:
    close = difflib.get_close_matches(name, known_names(), n=1)
    return f" (did you mean '{close[0]}'?)" if close else ""


def _scope(condition: ex.Node) -> str:
    names = ex.names(condition)
    if any(n.path in SLO_ONLY_FIELDS for n in names):
        return "slo"
    if names and all(field_type(n.path, "target") is not None for n in names):
        return "target"
    return "stream"


def _type_of(scope: str) -> ex.TypeOf:
    def type_of(name: ex.Name) -> str:
        kind = field_type(name.path, scope)
        if kind is not None:
            return kind
        raise ex.ExprError(f"unknown field '{name.path}'{_suggest(name.path)}", name.column)

    return type_of


class _RuleBuilder:
    def __init__(self, where: _Where, loader: Loader, node: yaml.MappingNode) -> None:
        self.where = where
        self.loader = loader
        self.node = node
        self.items: dict[str, tuple[yaml.Node, yaml.Node]] = {}
        self.name = "?"

    def fail(self, node: yaml.Node, message: str, offset: int = 0) -> RuleError:
        return RuleError(f"{self.where.node(node, offset)}: rule '{self.name}': {message}")

    def value(self, key: str) -> Any:
        return self.loader.construct_object(self.items[key][1], deep=True)

    def build(self) -> Rule:
        for key_node, value_node in self.node.value:
            key = self.loader.construct_object(key_node, deep=True)
            if not isinstance(key, str) or key not in _RULE_KEYS:
                known = ", ".join(sorted(_RULE_KEYS))
                self.name = self._peek_name()
                raise self.fail(key_node, f"unknown key {key!r} (known: {known})")
            self.items[key] = (key_node, value_node)
        self.name = self._peek_name()
        name_key = self._one_of("alert", "name")
        if name_key is None:
            raise self.fail(self.node, "missing 'alert' (the alert's name)")
        name = self.value(name_key)
        if not isinstance(name, str) or not _ALERT_NAME.match(name):
            raise self.fail(
                self.items[name_key][1], "the name must be letters, digits and _ (not first)"
            )
        expr_key = self._one_of("expr", "condition")
        if expr_key is None:
            raise self.fail(self.node, "missing 'expr' (the condition)")
        expr_node = self.items[expr_key][1]
        source = self.value(expr_key)
        if not isinstance(source, str):
            source = str(source)
        try:
            condition = ex.parse(source)
            scope = _scope(condition)
            ex.check(condition, _type_of(scope))
        except ex.ExprError as exc:
            raise self.fail(expr_node, f"{expr_key}: {exc.message}", exc.column - 1) from None
        except RecursionError:  # a backstop: the parser's depth limit comes first
            raise self.fail(expr_node, f"{expr_key}: nested too deeply") from None
        value_node = None
        if "value" in self.items:
            vsrc = str(self.value("value"))
            try:
                value_node = ex.parse(vsrc)
                ex.check(value_node, _type_of(scope), condition=False)
            except ex.ExprError as exc:
                raise self.fail(
                    self.items["value"][1], f"value: {exc.message}", exc.column - 1
                ) from None
        else:
            value_node = ex.first_comparison_operand(condition)
        return Rule(
            name=name,
            expr=source,
            condition=condition,
            value=value_node,
            for_s=self._duration("for"),
            keep_firing_for_s=self._duration("keep_firing_for"),
            severity=self._severity(),
            labels=self._labels(),
            annotations=self._annotations(scope),
            scope=scope,
            where=self.where.node(self.node),
        )

    def _peek_name(self) -> str:
        for key in ("alert", "name"):
            if key in self.items:
                v = self.value(key)
                if isinstance(v, str):
                    return v
        return "?"

    def _one_of(self, a: str, b: str) -> str | None:
        if a in self.items and b in self.items:
            raise self.fail(self.items[b][0], f"give '{a}' or '{b}', not both")
        return a if a in self.items else b if b in self.items else None

    def _duration(self, key: str) -> float:
        if key not in self.items:
            return 0.0
        try:
            return parse_duration(self.value(key))
        except ValueError as exc:
            raise self.fail(self.items[key][1], f"{key}: {exc}") from None

    def _severity(self) -> str:
        if "severity" not in self.items:
            return "warning"
        sev = self.value("severity")
        if sev not in SEVERITIES:
            raise self.fail(
                self.items["severity"][1], f"severity must be one of {', '.join(SEVERITIES)}"
            )
        return str(sev)

    def _mapping(self, key: str) -> list[tuple[yaml.Node, str, yaml.Node, Any]]:
        node = self.items[key][1]
        if not isinstance(node, yaml.MappingNode):
            raise self.fail(node, f"{key} must be a mapping of names to text")
        out = []
        for k_node, v_node in node.value:
            k = self.loader.construct_object(k_node, deep=True)
            v = self.loader.construct_object(v_node, deep=True)
            if not isinstance(k, str) or not _LABEL_NAME.match(k):
                raise self.fail(k_node, f"{key}: {k!r} is not a valid name")
            if isinstance(v, dict | list) or v is None:
                raise self.fail(v_node, f"{key}.{k} must be text")
            out.append((k_node, k, v_node, v))
        return out

    def _labels(self) -> tuple[tuple[str, str], ...]:
        if "labels" not in self.items:
            return ()
        out = []
        for k_node, k, _, v in self._mapping("labels"):
            if k in RESERVED_LABELS:
                hint = " (use the 'severity' key)" if k == "severity" else ""
                raise self.fail(k_node, f"labels: '{k}' is set by phasewatch{hint}")
            out.append((k, str(v)))
        return tuple(sorted(out))

    def _annotations(self, scope: str) -> tuple[tuple[str, Template], ...]:
        if "annotations" not in self.items:
            return ()
        out = []
        for _, k, v_node, v in self._mapping("annotations"):
            text = str(v)
            try:
                template = parse_template(text)
            except TemplateError as exc:
                raise self.fail(v_node, f"annotations.{k}: {exc.message}", exc.column - 1) from None
            for name, column in template.names:
                if name in ("value", *ALERT_FIELDS) or name.startswith(LABEL_PREFIX):
                    continue
                if field_type(name, scope) is None:
                    why = (
                        " (only per-stream rules have it)"
                        if field_type(name, "stream") is not None
                        else _suggest(name)
                    )
                    raise self.fail(
                        v_node, f"annotations.{k}: unknown field '{name}'{why}", column - 1
                    )
            out.append((k, template))
        return tuple(out)


def load_rules(text: str, source: str = "<rules>") -> list[Rule]:
    """Parse and validate a rule file's text; :class:`RuleError` says where it is wrong."""
    loader = Loader(text)
    try:
        root = loader.get_single_node()
        # Values are constructed rule by rule: a bad tag fails there, at its node.
        return [] if root is None else _load(root, _Where(source, text), loader)
    except yaml.YAMLError as exc:
        raise RuleError(str(error_from(exc, source))) from None
    finally:
        loader.dispose()


def _load(root: yaml.Node, where: _Where, loader: Loader) -> list[Rule]:
    rule_nodes = _rule_nodes(root, where, loader)
    rules: list[Rule] = []
    seen: dict[str, str] = {}
    for node in rule_nodes:
        if not isinstance(node, yaml.MappingNode):
            raise RuleError(f"{where.node(node)}: each rule must be a mapping")
        rule = _RuleBuilder(where, loader, node).build()
        if rule.name in seen:
            raise RuleError(
                f"{rule.where}: rule '{rule.name}': a rule of that name is already at "
                f"{seen[rule.name]}"
            )
        seen[rule.name] = rule.where
        rules.append(rule)
    return rules


def _rule_nodes(root: yaml.Node, where: _Where, loader: Loader) -> list[yaml.Node]:
    if not isinstance(root, yaml.MappingNode):
        raise RuleError(f"{where.node(root)}: the top level must be a mapping with 'rules:'")
    top = _keyed(root, loader)
    unknown = set(top) - {"rules", "groups"}
    if unknown or len(top) != 1:
        raise RuleError(
            f"{where.node(root)}: expected exactly one of 'rules:' or 'groups:' at the top "
            f"level, found {', '.join(sorted(map(str, top))) or 'nothing'}"
        )
    if "rules" in top:
        seq = top["rules"]
        if not isinstance(seq, yaml.SequenceNode):
            raise RuleError(f"{where.node(seq)}: 'rules' must be a list")
        return list(seq.value)
    groups = top["groups"]
    if not isinstance(groups, yaml.SequenceNode):
        raise RuleError(f"{where.node(groups)}: 'groups' must be a list")
    out: list[yaml.Node] = []
    for group in groups.value:
        entries = _keyed(group, loader) if isinstance(group, yaml.MappingNode) else {}
        listed = entries.get("rules")
        if not isinstance(listed, yaml.SequenceNode):
            raise RuleError(f"{where.node(group)}: each group needs a 'rules:' list")
        out.extend(listed.value)
    return out


def _keyed(node: yaml.MappingNode, loader: Loader) -> dict[str, yaml.Node]:
    """A mapping's value nodes by key, as text (a list as a key would be unhashable)."""
    return {str(loader.construct_object(k, deep=True)): v for k, v in node.value}


def load_rule_file(path: str | Path) -> list[Rule]:
    """Read and validate a rule file; :class:`RuleError` also for a file that cannot be read."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise RuleError(f"{path}: cannot read rule file: {exc.strerror}") from None
    return load_rules(text, str(path))


def check_rule_files(cfg: AlertsConfig) -> None:
    """Refuse the configured rule file before anything starts: :class:`RuleError`, one
    ``FILE:LINE:COLUMN`` line, if ``alerts.rules_file`` cannot be read or used.

    Run where the CLI and the service start (``app.config`` knows no rules); whether
    ``alerts`` is enabled or not, as a bad file in a configuration is an error either way.
    """
    if cfg.rules_file is not None:
        load_rule_file(cfg.rules_file)


def default_rules() -> list[Rule]:
    """The shipped rule pack (``app/alerts/default_rules.yaml``)."""
    text = resources.files("app.alerts").joinpath(DEFAULT_RULES).read_text(encoding="utf-8")
    return load_rules(text, f"(default pack) {DEFAULT_RULES}")


def combine(*packs: list[Rule]) -> list[Rule]:
    """Join rule packs; a name defined twice is an error naming both places."""
    out: list[Rule] = []
    seen: dict[str, Rule] = {}
    for pack in packs:
        for rule in pack:
            if rule.name in seen:
                raise RuleError(
                    f"{rule.where}: rule '{rule.name}' is also defined at "
                    f"{seen[rule.name].where} (rename it, or turn off alerts.default_rules)"
                )
            seen[rule.name] = rule
            out.append(rule)
    return out
