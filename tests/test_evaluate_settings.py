"""The one SLO resolution: ``Settings.slo`` → ``DiagnosisConfig`` (``app.evaluate.settings``),
looked up per stream with ``DiagnosisConfig.slo_for`` by the diagnosis, the alert fields
and the UI alike."""

from __future__ import annotations

import dataclasses

from app.alerts.fields import ScrapeStatus
from app.config import SloConfig, SloValues, load_settings
from app.diagnose import DEFAULT_CONFIG, Hardware, Slo
from app.evaluate.instances import evaluate_stream, target_input
from app.evaluate.settings import diagnosis_config, with_slo
from app.windows.aggregate import window

SLO = SloConfig(
    ttft_p99=1.5,
    itl_p99=0.2,
    overrides={
        "tgt-a": SloValues(ttft_p99=0.5, itl_p99=0.05),
        "llama": SloValues(ttft_p99=4.0),
    },
)


def test_a_target_key_beats_a_model_key_and_an_override_replaces_both_objectives() -> None:
    cfg = with_slo(DEFAULT_CONFIG, SLO)
    assert cfg.slo_for("tgt-a", "llama") == Slo(0.5, 0.05)
    # An override replaces both objectives: its unset one is the built-in default.
    assert cfg.slo_for("other", "llama") == Slo(4.0, 0.1)
    assert cfg.slo_for("other", "mistral") == Slo(1.5, 0.2)
    assert cfg.slo_for("x", "tgt-a") == Slo(0.5, 0.05)  # a key names a target or a model


def test_the_slo_section_keeps_the_rest_of_the_base_config() -> None:
    hw = Hardware.resolve(device="h100-sxm", params=8e9)
    base = dataclasses.replace(DEFAULT_CONFIG, kv_usage_high=0.8, hardware=hw)
    cfg = with_slo(base, SLO)
    assert (cfg.kv_usage_high, cfg.hardware) == (0.8, hw)
    assert (cfg.slo_ttft_p99, cfg.slo_itl_p99) == (1.5, 0.2)


def test_the_service_config_is_the_defaults_with_the_configured_slos() -> None:
    settings = load_settings(overrides={"slo": SLO.model_dump()})
    assert diagnosis_config(settings) == with_slo(DEFAULT_CONFIG, SLO)
    assert diagnosis_config(load_settings()) == DEFAULT_CONFIG


def test_alert_fields_carry_the_slos_the_diagnosis_was_judged_against() -> None:
    cfg = with_slo(DEFAULT_CONFIG, SLO)
    tgt = target_input(
        "tgt-a",
        ScrapeStatus(100.0, True, None),
        now=100.0,
        stale_after=15.0,
        labels={},
        ui_base_url="http://ui",
    )
    w = window([], start=40.0, end=100.0, target="tgt-a", model_name="llama")
    diagnosis, inst, _ = evaluate_stream(
        w, tgt, cfg, failed_scrapes=0, attempted_scrapes=1, labels={}, ui_base_url="http://ui"
    )
    assert (diagnosis.slo_ttft_p99, diagnosis.slo_itl_p99) == (0.5, 0.05)
    assert (inst.fields["slo.ttft_p99"], inst.fields["slo.itl_p99"]) == (0.5, 0.05)


def test_the_targets_server_blocks_become_each_streams_server_settings() -> None:
    from app.diagnose.server import ServerSettings

    settings = load_settings(
        overrides={
            "targets": [
                {"name": "a", "url": "http://a/metrics", "server": {"max_num_seqs": 64}},
                {"name": "b", "url": "http://b/metrics"},
            ]
        }
    )
    cfg = diagnosis_config(settings)
    assert cfg.server_for("a") == ServerSettings(max_num_seqs=64)
    assert cfg.server_for("b") == ServerSettings()
    # The diagnosis reads them per stream, as it reads the SLOs: the hints start from them.
    w = dataclasses.replace(window([], start=0.0, end=60.0, target="a", model_name="m"))
    from app.diagnose import diagnose

    d = diagnose(w, cfg)
    assert d.server is not None and d.server.max_num_seqs.said() == "64, configured"
