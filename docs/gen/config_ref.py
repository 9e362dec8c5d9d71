"""The configuration reference, rendered from the pydantic models of ``app.config``.

Every setting of :class:`app.config.Settings`, section by section, with its type, its
default and its description. A setting without a description is an error: the docs build
(``mkdocs build --strict``, run by ``make lint``) fails until it has one. Run alone, it
prints the page: ``.venv/bin/python docs/gen/config_ref.py``.
"""

from __future__ import annotations

import json
import sys
import types
import typing
from typing import Any, Literal, Union

import annotated_types
from pydantic import BaseModel
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

from app.config import Settings

HEADER = """# Configuration reference

Generated from the pydantic models of `app/config/` (and `app/probeconfig.py`) when the
site is built, so it cannot drift from the code. Every setting, with its type, its default
and what it does; the [Configuration](../configuration.md) page has a complete annotated
file, the precedence of file, environment and flags, and how errors are reported.

A setting is set in the YAML file (`--config`), or through the environment as
`PHASEWATCH_` + its path in capitals with `__` between the parts
(`scrape.interval` → `PHASEWATCH_SCRAPE__INTERVAL`; a list or a mapping as JSON).
`[]` in a path is an entry of a list, `<name>` a key of a mapping.
"""


class MissingDescription(ValueError):
    """Settings without a description: the reference would not say what they do."""


def _models(annotation: Any) -> list[type[BaseModel]]:
    """The models an annotation holds: itself, a list's items, an optional's value."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    out: list[type[BaseModel]] = []
    for arg in typing.get_args(annotation):
        out += _models(arg)
    return out


def _type(annotation: Any) -> str:
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if annotation is type(None):
        return "null"
    if origin is Literal:
        return " | ".join(json.dumps(a) for a in args)
    if origin in (Union, types.UnionType):
        return " | ".join(_type(a) for a in args)
    if origin in (list, tuple, set, frozenset):
        return f"list of {_type(args[0])}" if args else "list"
    if origin is dict:
        return f"mapping of {_type(args[0])} to {_type(args[1])}"
    if isinstance(annotation, type):
        if issubclass(annotation, BaseModel):
            return "section"
        return annotation.__name__
    return str(annotation).replace("typing.", "")


def _bounds(field: FieldInfo) -> str:
    signs = {"gt": ">", "ge": "≥", "lt": "<", "le": "≤"}
    out = []
    for item in field.metadata:
        for attr, sign in signs.items():
            if isinstance(item, getattr(annotated_types, attr.capitalize())):
                out.append(f"{sign} {getattr(item, attr)}")
    return ", ".join(out)


def _default(field: FieldInfo) -> str:
    if field.is_required():
        return "required"
    value = field.get_default(call_default_factory=True)
    if isinstance(value, BaseModel):
        return "(section)"
    if value is PydanticUndefined:
        return "required"
    return f"`{json.dumps(value, default=str)}`"


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|").replace("<", "&lt;").replace(">", "&gt;")


def _rows(
    model: type[BaseModel], prefix: str, sections: list[tuple[str, type[BaseModel]]]
) -> tuple[list[str], list[str]]:
    rows, missing = [], []
    for name, field in model.model_fields.items():
        path = prefix + name
        if not field.description:
            missing.append(path)
        kind = _type(field.annotation)
        bounds = _bounds(field)
        if bounds:
            kind += f" ({bounds})"
        rows.append(
            f"| `{path}` | {_cell(kind)} | {_cell(_default(field))} "
            f"| {_cell(field.description or '')} |"
        )
        origin = typing.get_origin(field.annotation)
        for sub in _models(field.annotation):
            if origin is dict or any(
                typing.get_origin(a) is dict for a in typing.get_args(field.annotation)
            ):
                sections.append((f"{path}.<name>", sub))
            elif origin is list or any(
                typing.get_origin(a) is list for a in typing.get_args(field.annotation)
            ):
                sections.append((f"{path}[]", sub))
            else:
                sections.append((path, sub))
    return rows, missing


def render() -> str:
    """The page as Markdown; raises :class:`MissingDescription` naming every setting
    that has no description."""
    out = [HEADER]
    missing: list[str] = []
    queue: list[tuple[str, type[BaseModel]]] = []
    top, miss = _rows(Settings, "", queue)
    missing += miss
    out += ["## Top level", "", "| setting | type | default | description |", "|---|---|---|---|"]
    out += top
    while queue:
        path, model = queue.pop(0)
        nested: list[tuple[str, type[BaseModel]]] = []
        rows, miss = _rows(model, path + ".", nested)
        missing += miss
        doc = (model.__doc__ or "").strip()
        out += ["", f"## `{path}`", ""]
        if doc and model.__doc__ != BaseModel.__doc__:
            out += [" ".join(doc.split("\n\n")[0].split()).replace("``", "`"), ""]
        out += ["| setting | type | default | description |", "|---|---|---|---|"]
        out += rows
        queue[0:0] = nested
    if missing:
        raise MissingDescription(
            "settings without a description (give each Field a description=): " + ", ".join(missing)
        )
    return "\n".join(out) + "\n"


if __name__ == "__main__":
    sys.stdout.write(render())
