"""The ``probes:`` and ``probing:`` settings: small by default, refused when unusable,
credentials never logged, and every key in docs/configuration.md's complete file."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from app.alerts import expr as ex
from app.alerts.fields import stream_fields
from app.alerts.rules import load_rules
from app.config import ConfigError, load_settings
from app.logs import collect_secrets
from app.probeconfig import ProbeConfig, ProbingConfig

REFERENCE = Path(__file__).resolve().parents[1] / "docs" / "configuration.md"
BASE = {"name": "p", "kind": "openai_chat", "url": "http://127.0.0.1:8000/", "model": "m"}


def _load(**probe: object) -> ProbeConfig:
    return load_settings(None, {"probes": [{**BASE, **probe}]}).probes[0]


def test_defaults_are_safe_for_production() -> None:
    p = _load()
    assert (p.interval, p.timeout, p.max_tokens, p.words) == (30.0, 20.0, 16, 8)
    assert p.endpoint == "http://127.0.0.1:8000/v1/chat/completions"
    assert not p.ignore_eos and p.tls_verify
    probing = ProbingConfig()
    assert (probing.concurrency, probing.frontend_gap_min, probing.frontend_gap_share) == (
        4,
        0.1,
        0.5,
    )


def test_durations_may_be_written_as_text() -> None:
    p = _load(interval="2m", timeout="45s")
    assert (p.interval, p.timeout) == (120.0, 45.0)


@pytest.mark.parametrize(
    ("probe", "message"),
    [
        ({"prompt": "hi", "prompt_words": 3}, "prompt or prompt_words"),
        ({"prompt": "   "}, "prompt is empty"),
        ({"interval": 10, "timeout": 20}, "timeout must not exceed interval"),
        ({"kind": "grpc"}, "probes.0.kind"),
        ({"url": "http://h:8000/v1?x=1"}, "base URL"),
        ({"url": "ftp://h"}, "base URL"),
        ({"headers": {"Content-Type": "x"}}, "set by the probe"),
        ({"headers": {"X-Key": "a\r\nInjected: yes"}}, "line break"),
        ({"headers": {"bad name": "x"}}, "HTTP token"),
        ({"bearer_token": "t", "headers": {"Authorization": "Basic x"}}, "not both"),
        ({"weight_bits": 3}, "4, 8, 16 or 32"),
        ({"max_tokens": 0}, "probes.0.max_tokens"),
        ({"name": "bad name"}, "probes.0.name"),
    ],
)
def test_an_unusable_probe_is_a_config_error_naming_the_field(
    probe: dict[str, object], message: str
) -> None:
    with pytest.raises(ConfigError, match=message):
        _load(**probe)


def test_a_probe_name_is_unique_and_no_targets() -> None:
    with pytest.raises(ConfigError, match="already a target's or a probe's"):
        load_settings(None, {"targets": [{"name": "p", "url": "http://h/metrics"}],
                             "probes": [BASE]})  # fmt: skip
    with pytest.raises(ConfigError, match="already a target's or a probe's"):
        load_settings(None, {"probes": [BASE, BASE]})


def test_probes_come_from_the_environment_too(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PHASEWATCH_PROBES", '[{"name": "o", "kind": "ollama_generate", '
                       '"url": "http://127.0.0.1:11434", "model": "llama3.2"}]')  # fmt: skip
    monkeypatch.setenv("PHASEWATCH_PROBING__CONCURRENCY", "2")
    s = load_settings(None)
    assert s.probes[0].endpoint == "http://127.0.0.1:11434/api/generate"
    assert s.probing.concurrency == 2


def test_the_token_and_every_header_value_are_secrets_for_the_logs() -> None:
    s = load_settings(None, {"probes": [{**BASE, "bearer_token": "tok-abcdef",
                                         "headers": {"X-Api-Key": "key-abcdef"}}]})  # fmt: skip
    assert {"tok-abcdef", "key-abcdef"} <= collect_secrets(s.model_dump())


def _reference() -> dict[str, object]:
    text = REFERENCE.read_text()
    block = text[text.index("```yaml\n") + 8 :]
    loaded = yaml.safe_load(block[: block.index("```")])
    assert isinstance(loaded, dict)
    return loaded


def test_the_readme_reference_names_every_probe_key_and_loads() -> None:
    ref = _reference()
    probes = ref["probes"]
    assert isinstance(probes, list) and isinstance(probes[0], dict)
    assert set(probes[0]) == set(ProbeConfig.model_fields)
    probing = ref["probing"]
    assert isinstance(probing, dict) and set(probing) == set(ProbingConfig.model_fields)
    p = ProbeConfig(**probes[0])
    assert p.interval == 30 and p.max_tokens == 16  # the reference shows the defaults
    assert ProbingConfig(**probing) == ProbingConfig()


def test_rules_read_a_probes_window_by_its_probe_fields() -> None:
    (rule,) = load_rules(
        "rules:\n  - alert: ClientGap\n    expr: probe.client_gap > 0.5 and probe.ttft_n >= 2\n"
        "    severity: warning\n"
    )
    assert rule.scope == "stream"
    window = {"target": "p", "model_name": "m", "end": 60.0,
              "probe": {"client_gap": 0.6, "ttft_n": 3.0}}  # fmt: skip
    fields = stream_fields(window, None, {}, slo_ttft_p99=2.0, slo_itl_p99=0.1, ui_base_url="u")
    assert fields["probe.client_gap"] == 0.6 and fields["probe.failures"] is None
    assert ex.evaluate(rule.condition, fields).holds is True
    server = stream_fields({**window, "probe": None}, None, {}, slo_ttft_p99=2.0,
                           slo_itl_p99=0.1, ui_base_url="u")  # fmt: skip
    assert ex.evaluate(rule.condition, server).holds is False  # null on a server's stream
