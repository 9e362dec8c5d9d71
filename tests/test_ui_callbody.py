"""A UI callback body nested thousands deep is a 400 with nothing logged (issue #40, item 6).

Python's ``json`` recursed once per level: 5,000 levels — 10 kB, far under the body
cap — were a ``RecursionError``, a 500 and a traceback per request.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.ui.callbody import MAX_DEPTH, nesting
from tests.test_alerts_api import TOKEN, ApiClient, make_client

CALLBACK = "/ui/_dash-update-component"
JSON = {"content-type": "application/json"}


@pytest.fixture
def client(tmp_path: Path) -> Iterator[ApiClient]:
    with make_client(tmp_path, api_token=TOKEN) as c:
        yield c


def deep(levels: int, opener: str = "[") -> bytes:
    if opener == "[":
        return b"[" * levels + b"]" * levels
    return b'{"a":' * levels + b"1" + b"}" * levels


@pytest.mark.parametrize("opener", ["[", "{"])
def test_a_callback_body_nested_5000_deep_is_400_without_a_traceback(
    client: ApiClient, caplog: pytest.LogCaptureFixture, opener: str
) -> None:
    caplog.set_level(logging.INFO)
    resp = client.post(CALLBACK, content=deep(5000, opener), headers=JSON)
    assert resp.status_code == 400
    assert not [r for r in caplog.records if r.exc_info or r.levelno >= logging.ERROR]
    assert "Traceback" not in caplog.text and "RecursionError" not in caplog.text


def test_a_callback_body_within_the_depth_still_reaches_dash(client: ApiClient) -> None:
    body = {
        "output": "page.children",
        "outputs": {"id": "page", "property": "children"},
        "inputs": [
            {"id": "url", "property": "pathname", "value": "/ui/alerts"},
            {"id": "url", "property": "search", "value": ""},
        ],
        "changedPropIds": ["url.pathname"],
        "state": [],
        "nested": json.loads(deep(MAX_DEPTH - 1)),  # Dash reads no such key
    }
    assert client.post(CALLBACK, json=body).status_code == 200


def _depth(value: Any) -> int:
    if isinstance(value, list):
        return 1 + max(map(_depth, value), default=0)
    if isinstance(value, dict):
        return 1 + max(map(_depth, value.values()), default=0)
    return 0


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(alphabet='[]{}"\\ab\n'),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner),
    max_leaves=30,
)


@settings(max_examples=300, deadline=None)
@given(JSON_VALUES)
def test_nesting_counts_the_levels_json_parses_ignoring_brackets_in_strings(value: Any) -> None:
    text = json.dumps(value)
    assert nesting(text) == _depth(value)
    assert nesting(text.encode("utf-8").decode("latin-1")) == _depth(value)
