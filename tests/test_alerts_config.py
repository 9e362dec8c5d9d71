"""The ``alerts`` configuration section, ``api_token`` and ``ui_base_url``."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from app.alerts.rules import RuleError
from app.cli.config import load_config
from app.config import ConfigError, load_settings
from app.main import create_app


def test_defaults_ship_the_pack_with_resend_below_alertmanagers_resolve_timeout() -> None:
    s = load_settings(None)
    assert s.alerts.enabled and s.alerts.default_rules and s.alerts.rules_file is None
    assert s.alerts.resend_interval < 300
    assert s.api_token is None
    assert s.ui_base_url is None  # derived from where the service listens
    assert s.ui_url("host-a") == "http://127.0.0.1:8321/ui"


def test_token_and_receivers_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PHASEWATCH_API_TOKEN", "from-env-token")
    monkeypatch.setenv("PHASEWATCH_ALERTS__RECEIVERS__SLACK", '["https://hooks.slack.com/x"]')
    s = load_settings(None)
    assert s.api_token == "from-env-token"
    assert s.alerts.receivers.slack == ["https://hooks.slack.com/x"]


def test_a_bad_rule_file_is_a_config_error_naming_rule_and_position(tmp_path: Path) -> None:
    rules = tmp_path / "r.yaml"
    rules.write_text("rules:\n  - alert: X\n    expr: kv_mx > 1\n")
    cfg = tmp_path / "c.yaml"
    cfg.write_text(f"alerts:\n  rules_file: {rules}\n")
    load_settings(cfg)  # config knows no rules: the CLI and the service check the file
    with pytest.raises(ConfigError) as info:
        load_config(cfg)
    msg = str(info.value)
    assert msg.startswith(f"config error in {cfg}: alerts: ")
    assert f"{rules}:3:11: rule 'X'" in msg and "kv_mx" in msg


def test_the_service_refuses_a_bad_rule_file_before_building_anything(tmp_path: Path) -> None:
    rules = tmp_path / "r.yaml"
    rules.write_text("rules:\n  - alert: X\n    expr: kv_mx > 1\n")
    settings = load_settings(None, {"alerts": {"rules_file": str(rules)}})
    with pytest.raises(RuleError, match=rf"^{re.escape(str(rules))}:3:11: rule 'X'"):
        create_app(settings, start_jobs=False)


def test_receivers_must_be_http_urls() -> None:
    with pytest.raises(ConfigError, match="alerts.receivers.webhook"):
        load_settings(None, {"alerts": {"receivers": {"webhook": ["ftp://x"]}}})
