"""A Slack incoming webhook: a headline, the diagnosis, hints and a link, escaped.

What a target wrote is set apart as a code span, on one line (:mod:`app.alerts.shown`):
the headline's ``model_name`` here, the annotations' values when they were rendered.

The URL is the key to the channel: it stays out of ids, logs and errors
(:mod:`.http`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from app.alerts.receivers.alertmanager import rfc3339
from app.alerts.receivers.http import JsonReceiver
from app.alerts.shown import set_apart, shown, shown_annotations
from app.alerts.state import Alert

__all__ = ["Slack", "slack_escape", "slack_message"]

_SLACK_COLOUR = {"critical": "danger", "warning": "warning", "info": "#439FE0"}
_SLACK_ESCAPES = str.maketrans({"&": "&amp;", "<": "&lt;", ">": "&gt;"})


def slack_escape(text: str) -> str:
    """Text as Slack shows it literally: ``& < >`` as ``&amp; &lt; &gt;`` (Slack's
    formatting rules), so a scraped value cannot post ``<!channel>`` or a link."""
    return text.translate(_SLACK_ESCAPES)


def _slack_link(url: str, label: str) -> str:
    # A ``|`` or ``>`` in the URL would end it early; Slack decodes ``&amp;`` in links.
    return f"<{slack_escape(url).replace('|', '%7C')}|{slack_escape(label)}>"


def slack_message(alert: Alert, state: str) -> dict[str, Any]:
    """A Slack incoming-webhook message: a headline, the diagnosis, hints and a link.

    Every text is escaped (:func:`slack_escape`): labels, ``model_name`` and the
    annotations carry scraped values. Control characters are shown escaped and the
    scraped ``model_name`` is a code span (:mod:`app.alerts.shown`), so the headline is
    one line whatever the target wrote. The only markup is ours: the bold headline, the
    code spans and the link to the UI.
    """
    labels = alert.labels
    where = shown(labels.get("target", ""))
    if labels.get("model_name"):
        where += f" / {set_apart(labels['model_name'])}"
    notes = shown_annotations(alert.annotations)
    head = slack_escape(f"[{state.upper()}] {shown(alert.rule)} — {where}")
    lines = [f"*{head}*", slack_escape(notes.get("summary", ""))]
    if state == "firing":
        if notes.get("diagnosis"):
            lines.append(slack_escape(f"Diagnosis: {notes['diagnosis']}"))
        if notes.get("hints"):
            lines.append(slack_escape("What to change:\n" + notes["hints"]))
    else:
        lines.append(f"Resolved at {rfc3339(alert.resolved_at or alert.last_eval)}")
    if notes.get("ui_url"):
        lines.append(_slack_link(notes["ui_url"], "Open in phasewatch"))
    text = "\n".join(line for line in lines if line)
    colour = "good" if state == "resolved" else _SLACK_COLOUR.get(labels.get("severity", ""), "")
    return {"text": text, "attachments": [{"color": colour, "fallback": head}]}


@dataclass(frozen=True, slots=True)
class Slack(JsonReceiver):
    """A Slack incoming-webhook URL: events in order, one message per post."""

    kind: ClassVar[str] = "slack"

    def payload(self, alert: Alert, state: str, *, external_url: str) -> Any:
        return slack_message(alert, state)
