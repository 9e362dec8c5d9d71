"""The configuration's documentation against the models: the complete annotated file of
docs/configuration.md loads and names every setting, and the reference generated from the
models (docs/gen/config_ref.py, built into the site) names every setting and refuses one
without a description; the CLI reference (docs/gen/cli_ref.py) likewise every command and
flag. (The README's reference moved to the documentation site, issue #47.)"""

from __future__ import annotations

import argparse
import re
import sys
import typing
from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic import BaseModel, Field

from app.config import Settings, load_settings

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "configuration.md"
sys.path.insert(0, str(ROOT / "docs" / "gen"))

import cli_ref  # noqa: E402
import config_ref  # noqa: E402


def _reference() -> str:
    match = re.search(r"```yaml\n(.*?)```", PAGE.read_text(), re.S)
    assert match, "docs/configuration.md has the complete file as a yaml block"
    return match.group(1)


def _model_keys(model: type[BaseModel], prefix: str = "") -> set[str]:
    out = set()
    for name, field in model.model_fields.items():
        out.add(prefix + name)
        sub = field.annotation
        if isinstance(sub, type) and issubclass(sub, BaseModel):
            out |= _model_keys(sub, f"{prefix}{name}.")
    return out


def _doc_keys(doc: Any, prefix: str = "") -> set[str]:
    if not isinstance(doc, dict):
        return set()
    out = set()
    for key, value in doc.items():
        out.add(prefix + key)
        out |= _doc_keys(value, f"{prefix}{key}.")
    return out


def _paths(annotation: Any, path: str = "") -> set[str]:
    """Every setting as the generated reference names it: ``[]`` an entry of a list,
    ``<name>`` a key of a mapping."""
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        out = set()
        for name, field in annotation.model_fields.items():
            sub = f"{path}.{name}" if path else name
            out |= {sub} | _paths(field.annotation, sub)
        return out
    if origin is list:
        return _paths(args[0], path + "[]")
    if origin is dict:
        return _paths(args[1], path + ".<name>")
    return set().union(*(_paths(a, path) for a in args)) if args else set()


def test_the_complete_file_loads(tmp_path: Path) -> None:
    path = tmp_path / "phasewatch.yaml"
    path.write_text(_reference())
    load_settings(str(path))


def test_the_complete_file_names_every_setting() -> None:
    missing = _model_keys(Settings) - _doc_keys(yaml.safe_load(_reference()))
    assert not missing, f"settings missing from docs/configuration.md: {sorted(missing)}"


def test_the_complete_file_names_every_target_setting_and_server_key() -> None:
    """``targets`` is a list: its entries' settings, and their ``server:`` block (the
    engine settings the hints start from), are named in the reference's first target."""
    from app.config import TargetConfig, TargetServerConfig
    from app.diagnose.server import SERVER_KEYS

    target = yaml.safe_load(_reference())["targets"][0]
    assert set(TargetConfig.model_fields) <= set(target)
    assert set(TargetServerConfig.model_fields) <= set(target["server"])
    # The configuration's keys are the diagnosis' (``app.evaluate.settings``).
    assert tuple(TargetServerConfig.model_fields) == SERVER_KEYS


def test_the_generated_reference_names_every_setting_with_its_description() -> None:
    page = config_ref.render()
    missing = {p for p in _paths(Settings) if f"| `{p}` |" not in page}
    assert not missing, f"settings missing from the generated reference: {sorted(missing)}"
    assert "| `scrape.interval` | float (> 0, ≤ 3600) | `5.0` | seconds between scrapes |" in (
        page.replace("&gt;", ">")
    )


def test_a_setting_without_a_description_fails_the_reference(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    class Undescribed(Settings):
        new_setting: int = Field(1)

    monkeypatch.setattr(config_ref, "Settings", Undescribed)
    with pytest.raises(config_ref.MissingDescription, match="new_setting"):
        config_ref.render()


def test_the_generated_cli_reference_names_every_command_and_flag() -> None:
    from app.cli import build_parser

    page = cli_ref.render()
    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    for name, parser in sub.choices.items():
        assert f"## `phasewatch {name}`" in page
        for action in parser._actions:
            for flag in action.option_strings:
                if flag not in ("-h", "--help"):
                    assert f"`{flag}" in page, f"phasewatch {name} {flag}"


def test_a_flag_without_a_help_fails_the_cli_reference(monkeypatch: pytest.MonkeyPatch) -> None:
    from app.cli import build_parser

    def parser() -> argparse.ArgumentParser:
        p = build_parser()
        sub = next(a for a in p._actions if isinstance(a, argparse._SubParsersAction))
        sub.choices["serve"].add_argument("--undocumented")
        return p

    monkeypatch.setattr(cli_ref, "build_parser", parser)
    with pytest.raises(cli_ref.MissingHelp, match="--undocumented"):
        cli_ref.render()
