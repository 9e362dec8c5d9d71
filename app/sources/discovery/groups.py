"""Prometheus target groups → the targets to scrape (pure: text in, targets out).

A ``file_sd`` file and an ``http_sd`` answer carry the same thing, Prometheus' target
groups::

    [{"targets": ["10.0.0.5:8000", "10.0.0.6:8000"], "labels": {"pod": "vllm-0"}}]

Each address is scraped at ``SCHEME://ADDRESS/METRICS_PATH``, from the discovery config,
or from the group's ``__scheme__`` and ``__metrics_path__`` labels, as Prometheus reads
them before relabelling. Labels starting ``__`` are not kept (``__meta_*`` too); the
others become the target's labels. A target is named by its ``name_label``'s value when
the config sets one and the group has it, else by its address.

Edge cases, each said in the error or the skipped list, never raised past the caller:

* a list that is not a list of groups (a group without ``targets``, a label value that
  is no string), or over ``max_targets`` addresses, is refused whole (:class:`GroupsError`):
  the caller keeps its last good list, as Prometheus does;
* an address with a scheme, a path or spaces, or a name that is no target name
  (``[A-Za-z0-9_.:@-]``, 1-128), is skipped alone;
* the same name twice: the first is kept, the later ones are skipped.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from app import safeyaml
from app.config import TargetConfig

__all__ = ["MAX_LABELS", "MAX_LABEL_VALUE", "Found", "GroupsError", "decode", "targets_of"]

# Caps on what one group may carry (an http_sd answer is untrusted).
MAX_LABELS = 64
MAX_LABEL_VALUE = 1024
_ADDRESS_RE = re.compile(r"^[^\s/@?#]+$")
# Skipped entries named in the health view (the count is always whole).
_SKIPPED_SHOWN = 5


class GroupsError(ValueError):
    """A list of target groups that cannot be used at all; the message says where."""


@dataclass(frozen=True, slots=True)
class Found:
    """The targets of one list, and the entries skipped (how many, the first few why)."""

    targets: tuple[TargetConfig, ...]
    skipped: int = 0
    why: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class _Group:
    addresses: tuple[str, ...]
    labels: dict[str, str]


def decode(text: str, source: str, *, yaml_ok: bool) -> Any:
    """The data of a JSON text (or YAML, a superset, when ``yaml_ok``)."""
    if yaml_ok:
        try:
            return safeyaml.load(text, source)
        except safeyaml.YamlError as exc:
            raise GroupsError(str(exc)) from None
    try:
        return json.loads(text)
    except ValueError as exc:
        raise GroupsError(f"not JSON: {exc}") from None


def _groups(data: Any, max_targets: int | None) -> list[_Group]:
    if data is None:
        return []  # an empty YAML file: no targets
    if not isinstance(data, list):
        raise GroupsError("not a list of target groups")
    out: list[_Group] = []
    total = 0
    for i, group in enumerate(data):
        if not isinstance(group, dict):
            raise GroupsError(f"[{i}]: a target group is a mapping with targets and labels")
        addresses = group.get("targets")
        if not isinstance(addresses, list) or not all(isinstance(a, str) for a in addresses):
            raise GroupsError(f"[{i}].targets: must be a list of host:port strings")
        labels = group.get("labels") or {}
        if not isinstance(labels, dict) or len(labels) > MAX_LABELS:
            raise GroupsError(f"[{i}].labels: must be a mapping of at most {MAX_LABELS}")
        for key, value in labels.items():
            if not isinstance(key, str) or not isinstance(value, str):
                raise GroupsError(f"[{i}].labels.{key}: names and values must be strings")
            if len(value) > MAX_LABEL_VALUE:
                raise GroupsError(f"[{i}].labels.{key}: longer than {MAX_LABEL_VALUE}")
        total += len(addresses)
        if max_targets is not None and total > max_targets:
            raise GroupsError(f"more than {max_targets} targets")
        out.append(_Group(tuple(addresses), dict(labels)))
    return out


def targets_of(
    data: Any,
    *,
    scheme: str,
    metrics_path: str,
    name_label: str | None,
    max_targets: int | None = None,
) -> Found:
    """The targets of decoded target groups (module docstring); :class:`GroupsError` if
    the data are not target groups or hold more than ``max_targets`` addresses."""
    targets: list[TargetConfig] = []
    names: set[str] = set()
    why: list[str] = []
    skipped = 0
    for group in _groups(data, max_targets):
        kept = {k: v for k, v in group.labels.items() if not k.startswith("__")}
        group_scheme = group.labels.get("__scheme__", scheme)
        path = group.labels.get("__metrics_path__", metrics_path)
        for address in group.addresses:
            name = kept.get(name_label, address) if name_label else address
            problem = _problem(address, name, group_scheme, path, names)
            target = None
            if problem is None:
                try:
                    target = TargetConfig(
                        name=name, url=f"{group_scheme}://{address}{path}", labels=kept
                    )
                except ValidationError as exc:
                    problem = f"{name}: {exc.errors()[0]['msg']}"
            if target is None:
                skipped += 1
                if len(why) < _SKIPPED_SHOWN:
                    why.append(problem or name)
                continue
            names.add(name)
            targets.append(target)
    return Found(tuple(targets), skipped, tuple(why))


def _problem(address: str, name: str, scheme: str, path: str, names: set[str]) -> str | None:
    if not _ADDRESS_RE.match(address):
        return f"{address!r}: not a host:port address"
    if scheme not in ("http", "https"):
        return f"{address}: __scheme__ {scheme!r} is not http or https"
    if not path.startswith("/") or any(c.isspace() for c in path):
        return f"{address}: __metrics_path__ {path!r} does not start with /"
    if name in names:
        return f"{name}: named twice (the first is kept)"
    return None
