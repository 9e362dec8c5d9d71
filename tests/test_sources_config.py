"""The ``source`` section of the configuration."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.config import ConfigError, load_settings
from app.logs import collect_secrets


def test_scrape_is_the_default_source() -> None:
    s = load_settings()
    assert s.source.kind == "scrape" and s.source.url is None


def test_prometheus_source_from_yaml_with_shorthand_and_full_form(tmp_path: Path) -> None:
    p = tmp_path / "pw.yaml"
    p.write_text(
        """
source:
  kind: prometheus
  url: https://mimir.example:8080/prometheus/
  bearer_token: s3cret
  tls_verify: false
  headers: {X-Scope-OrgID: team-a}
  selector: '{job="vllm", cluster=~"eu-.*"}'
  mode: raw
  step: 15
"""
    )
    s = load_settings(p)
    assert s.source.url == "https://mimir.example:8080/prometheus"
    assert s.source.mode == "raw" and s.source.step == 15 and not s.source.tls_verify
    assert "s3cret" in collect_secrets(s.model_dump())  # never logged
    with pytest.raises(ConfigError, match="source: Value error, source.url is required"):
        load_settings(None, {"source": "prometheus"})


def test_prometheus_source_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PHASEWATCH_SOURCE__KIND", "prometheus")
    monkeypatch.setenv("PHASEWATCH_SOURCE__URL", "http://127.0.0.1:9090")
    monkeypatch.setenv("PHASEWATCH_SOURCE__BASIC_AUTH", '{"username": "u", "password": "p"}')
    s = load_settings()
    assert s.source.kind == "prometheus" and s.source.basic_auth is not None
    assert s.source.basic_auth.username == "u"


@pytest.mark.parametrize(
    ("source", "message"),
    [
        ({"kind": "prometheus", "url": "ftp://x"}, "must be an http"),
        ({"kind": "prometheus", "url": "http://x", "selector": "job=vllm"}, "label matchers"),
        (
            {
                "kind": "prometheus",
                "url": "http://x",
                "bearer_token": "t",
                "basic_auth": {"username": "u"},
            },
            "not both",
        ),
        ({"kind": "thanos"}, "source.kind"),
        ({"kind": "prometheus", "url": "http://x", "step": 0}, "source.step"),
    ],
)
def test_bad_source_settings_name_the_field(source: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        load_settings(None, {"source": source})
