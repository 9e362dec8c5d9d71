"""The README's configuration reference is a file that loads and names every setting."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel

from app.config import Settings, load_settings

README = Path(__file__).resolve().parents[1] / "README.md"


def _reference() -> str:
    text = README.read_text()
    section = text[text.index("## Configuration") :]
    match = re.search(r"```yaml\n(.*?)```", section, re.S)
    assert match, "the Configuration section has a yaml block"
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


def test_the_reference_loads(tmp_path: Path) -> None:
    path = tmp_path / "phasewatch.yaml"
    path.write_text(_reference())
    load_settings(str(path))


def test_the_reference_names_every_setting() -> None:
    missing = _model_keys(Settings) - _doc_keys(yaml.safe_load(_reference()))
    assert not missing, f"settings missing from the README's reference: {sorted(missing)}"


def test_the_reference_names_every_target_setting_and_server_key() -> None:
    """``targets`` is a list: its entries' settings, and their ``server:`` block (the
    engine settings the hints start from), are named in the reference's first target."""
    from app.config import TargetConfig, TargetServerConfig
    from app.diagnose.server import SERVER_KEYS

    target = yaml.safe_load(_reference())["targets"][0]
    assert set(TargetConfig.model_fields) <= set(target)
    assert set(TargetServerConfig.model_fields) <= set(target["server"])
    # The configuration's keys are the diagnosis' (``app.evaluate.settings``).
    assert tuple(TargetServerConfig.model_fields) == SERVER_KEYS
