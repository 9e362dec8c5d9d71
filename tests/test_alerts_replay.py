"""The default rule pack over simulator recordings: it fires on the matching scenario and
stays silent on a healthy one (the "which alerts would have fired?" replay path)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from app.alerts.rules import default_rules, load_rules
from app.evaluate.replay import replay_alerts, replay_recording
from app.sim.record import record
from app.sources.recording import read_scrapes

START = 1764403200.0


@pytest.fixture(scope="module")
def recordings(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("recordings")
    out = {}
    for scenario in ("healthy", "kv_pressure", "queue_overload", "prefill_heavy"):
        out[scenario] = Path(record(scenario, root / scenario, duration=420, seed=1))
    return out


def fired(transitions: list[dict[str, Any]]) -> set[str]:
    return {t["alertname"] for t in transitions if t["state"] == "firing"}


@pytest.mark.parametrize(
    ("scenario", "expected"),
    [
        ("kv_pressure", "PhasewatchKVCachePressure"),
        ("queue_overload", "PhasewatchQueueBuildup"),
        ("prefill_heavy", "PhasewatchTTFTOverSLO"),
    ],
)
def test_default_pack_fires_on_the_matching_scenario(
    recordings: dict[str, Path], scenario: str, expected: str
) -> None:
    transitions = replay_recording(recordings[scenario], default_rules())
    assert expected in fired(transitions)
    first = next(t for t in transitions if t["alertname"] == expected and t["state"] == "firing")
    # The notification carries the diagnosis, its hints and a link to the UI at that time.
    notes = first["annotations"]
    assert notes["diagnosis"] and notes["hints"].startswith("- ")
    assert f"at={int(first['at'])}" in notes["ui_url"]
    assert first["labels"]["model_name"] == "meta-llama/Llama-3.1-8B-Instruct"
    assert isinstance(first["at"], float) and first["at"] > START


def test_a_hung_engine_fires_engine_stalled(tmp_path: Path) -> None:
    folder = record("hang", tmp_path / "hang", duration=1110, seed=1)
    transitions = replay_recording(folder, default_rules())
    stalled = [t for t in transitions if t["alertname"] == "PhasewatchEngineStalled"]
    assert [t["state"] for t in stalled] == ["pending", "firing"]
    assert stalled[1]["labels"]["severity"] == "critical"
    assert stalled[1]["annotations"]["hints"].startswith("- Check the engine")


def test_default_pack_is_silent_on_healthy(recordings: dict[str, Path]) -> None:
    assert replay_recording(recordings["healthy"], default_rules()) == []


def test_transitions_respect_for(recordings: dict[str, Path]) -> None:
    transitions = replay_recording(recordings["kv_pressure"], default_rules())
    kv = [t for t in transitions if t["alertname"] == "PhasewatchKVCachePressure"]
    assert [t["state"] for t in kv[:2]] == ["pending", "firing"]
    assert kv[1]["at"] - kv[0]["at"] >= 120


def test_a_rule_file_can_be_tried_on_a_recording(recordings: dict[str, Path]) -> None:
    rules = load_rules(
        "rules:\n  - alert: AnyWaiting\n    expr: waiting_max > 0\n    for: 30s\n", "try.yaml"
    )
    scrapes = read_scrapes(recordings["healthy"])
    assert replay_alerts(scrapes, rules) == []
    assert "AnyWaiting" in fired(replay_recording(recordings["kv_pressure"], rules))


def test_target_down_in_a_recording(recordings: dict[str, Path], tmp_path: Path) -> None:
    folder = tmp_path / "outage"
    folder.mkdir()
    pages = sorted(recordings["healthy"].glob("*.prom"))[:30]
    for page in pages:
        (folder / page.name).write_bytes(page.read_bytes())
    last = float(pages[-1].name[: -len(".prom")])
    for k in range(1, 25):  # two minutes of a proxy answering 502 instead of metrics
        (folder / f"{last + 5 * k:.3f}.prom").write_text("<html>502 Bad Gateway</html>")
    transitions = replay_recording(folder, default_rules())
    assert fired(transitions) == {"PhasewatchTargetDown"}
    (down,) = [t for t in transitions if t["state"] == "firing"]
    assert "model_name" not in down["labels"]
    assert "not_prometheus" in down["annotations"]["summary"]


def test_metrics_disabled_fires_without_any_stream(tmp_path: Path) -> None:
    page = "# HELP process_cpu_seconds_total cpu\n# TYPE process_cpu_seconds_total counter\n"
    for k in range(30):  # a server started with --disable-log-stats: no vllm: families
        (tmp_path / f"{START + 5 * k:.3f}.prom").write_text(
            page + f"process_cpu_seconds_total {k}\n"
        )
    transitions = replay_recording(tmp_path, default_rules())
    assert fired(transitions) == {"PhasewatchMetricsDisabled"}
    (t,) = [t for t in transitions if t["state"] == "firing"]
    assert t["at"] - START >= 60
