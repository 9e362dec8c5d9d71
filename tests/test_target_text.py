"""What a target writes stays the target's: set apart, on one line, in every text a person
reads (issue #40, item 3).

A ``model_name`` scraped from a page carrying line breaks, Slack markup, a backtick, a
mention and U+2028 goes through the real path — a rule's template, the state machine,
each receiver's body, the engine's log line — and nowhere adds a line, formats itself
or leaves its code span.
"""

from __future__ import annotations

import io
import json
import logging
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from app.alerts.engine import AlertEngine
from app.alerts.fields import Instance
from app.alerts.receivers.alertmanager import alertmanager_alert
from app.alerts.receivers.slack import slack_message
from app.alerts.receivers.webhook import webhook_payload
from app.alerts.rules import load_rules
from app.alerts.shown import BACKTICK_LOOKALIKE, set_apart, shown, shown_lines
from app.alerts.state import Alert, evaluate
from app.config import AlertsConfig
from app.logs import setup_logging
from app.read import markdown_text as md
from app.store.sqlite import Store

HOSTILE = "m\nFAKE LOG LINE level=ERROR injected\r*bold* `tick` <!channel>\u2028tail"
# Every character that starts a line or a record somewhere: no text for people holds one.
RAW_CONTROLS = re.compile("[\x00-\x09\x0b-\x1f\x7f\x80-\x9f\u2028\u2029]")

RULES = """
rules:
  - alert: KVFull
    expr: kv_max >= 0.9
    severity: critical
    annotations:
      summary: "KV {{ value | percent }} full on {{ labels.model_name }} ({{ labels.target }})"
      diagnosis: "{{ class }}: {{ summary }}"
      hints: "{{ hints }}"
      ui_url: "http://ui/targets/a"
"""


def firing(model: str = HOSTILE) -> Alert:
    (rule,) = load_rules(RULES)
    fields: dict[str, Any] = {
        "kv_max": 0.97,
        "class": "kv_pressure",
        "summary": "the KV cache is full\r\u2028forged",
        "hints": "- lower --max-num-seqs\n- raise --gpu-memory-utilization",
        "labels.model_name": model,
        "labels.target": "a",
    }
    instance = Instance("stream", "a", model, {"target": "a", "model_name": model}, fields)
    (alert,) = evaluate([rule], [instance], 100.0, {}).alerts.values()
    return alert


def test_set_apart_value_is_one_code_span_whatever_the_target_wrote() -> None:
    text = set_apart(HOSTILE)
    assert text.startswith("`") and text.endswith("`") and text.count("`") == 2
    assert not RAW_CONTROLS.search(text) and "\n" not in text
    assert "\\n" in text and "\\r" in text and "\\u2028" in text
    assert BACKTICK_LOOKALIKE + "tick" + BACKTICK_LOOKALIKE in text
    assert shown(shown(HOSTILE)) == shown(HOSTILE)  # escaping twice changes nothing


def test_phasewatch_text_keeps_its_lines_and_loses_other_controls() -> None:
    assert shown_lines("one\r\ntwo\u2028\x1b[2J") == "one\\r\ntwo\\u2028\\x1b[2J"


def test_slack_headline_is_one_line_with_the_scraped_model_in_a_code_span() -> None:
    alert = firing()
    msg = slack_message(alert, "firing")
    text, fallback = msg["text"], msg["attachments"][0]["fallback"]
    headline = text.split("\n")[0]
    assert headline.startswith("*[FIRING] KVFull — a / `m\\nFAKE LOG LINE level=ERROR")
    assert headline.endswith("tail`*")
    spans = re.findall(r"`[^`]*`", headline)
    assert len(spans) == 1 and "*bold*" in spans[0] and "&lt;!channel&gt;" in spans[0]
    assert "FAKE LOG LINE" not in text.split("\n", 1)[1].replace(spans[0], "")  # no own line
    for shown_text in (text, fallback):
        assert not RAW_CONTROLS.search(shown_text)
        assert "<!channel>" not in shown_text
    # The summary sets the value apart too; phasewatch's hints keep their two lines.
    assert "full on `m\\nFAKE" in text
    assert "- lower --max-num-seqs\n- raise --gpu-memory-utilization" in text


def test_webhook_and_alertmanager_text_fields_have_no_raw_controls() -> None:
    alert = firing()
    hook = webhook_payload(alert, "firing", external_url="http://ui")
    am = alertmanager_alert(alert, "firing")
    for notes in (hook["commonAnnotations"], hook["alerts"][0]["annotations"], am["annotations"]):
        assert not any(RAW_CONTROLS.search(v) for v in notes.values()), notes
        assert notes["summary"].startswith("KV 97% full on `m\\nFAKE LOG LINE")
        assert "\\r\\u2028forged" in notes["diagnosis"]
    # Labels are data: JSON carries the value the target wrote, exactly.
    assert json.loads(json.dumps(hook))["commonLabels"]["model_name"] == HOSTILE
    assert am["labels"]["model_name"] == HOSTILE


def test_an_alert_stored_with_raw_annotations_is_escaped_when_sent() -> None:
    alert = firing("llama")
    raw = Alert(**{**_fields(alert), "annotations": {"summary": "on m\nFAKE\u2028x"}})
    hook = webhook_payload(raw, "firing", external_url="http://ui")
    assert hook["commonAnnotations"]["summary"] == "on m\nFAKE\\u2028x"
    assert "\u2028" not in slack_message(raw, "firing")["text"]


def _fields(alert: Alert) -> dict[str, Any]:
    return {name: getattr(alert, name) for name in Alert.__dataclass_fields__}


@pytest.fixture
def restore_logging() -> Iterator[None]:
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    yield
    root.handlers[:] = handlers
    root.setLevel(level)


def test_the_engines_log_line_sets_the_model_apart_on_one_line(
    tmp_path: Path, restore_logging: None
) -> None:
    out = io.StringIO()
    setup_logging("INFO", json_lines=False, stream=out)
    store = Store(tmp_path / "pw.db")
    try:
        engine = AlertEngine(
            AlertsConfig(default_rules=False), store, ui_base_url="", rules=load_rules(RULES)
        )
        instance = firing_instance()
        engine.evaluate_once([instance], 100.0)
    finally:
        store.close()
    (line,) = [ln for ln in out.getvalue().splitlines() if "KVFull" in ln]
    assert line.endswith(
        "alert KVFull firing a/`m\\nFAKE LOG LINE level=ERROR injected\\r"
        "*bold* ˋtickˋ <!channel>\\u2028tail`"
    )
    assert len(out.getvalue().splitlines()) == out.getvalue().count("\n")


def firing_instance() -> Instance:
    fields = {"kv_max": 0.97, "labels.model_name": HOSTILE, "labels.target": "a"}
    return Instance("stream", "a", HOSTILE, {"target": "a", "model_name": HOSTILE}, fields)


def test_a_markdown_summary_shows_a_scraped_name_in_a_code_span_without_controls() -> None:
    for value in (md.code(HOSTILE + "\x1b[2J\x00"), md.text("on " + HOSTILE + "\x1b[2J")):
        assert not RAW_CONTROLS.search(value) and "\n" not in value
        assert "\\x1b" in value
    assert md.code("m\x1b").startswith("`m\\x1b")
