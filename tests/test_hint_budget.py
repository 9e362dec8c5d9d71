"""The chunk-budget hint of prefill interference (issue #44 item 6): a first
``decode_bound/prefill_interference`` window gets one beside "Shorten the prompt", and
no hint proposes the value in force."""

from __future__ import annotations

import re

import pytest

from app.diagnose import DiagnosisClass as C
from app.diagnose import DiagnosisConfig, SubCause, diagnose
from app.diagnose.server import ServerSettings
from tests.diagnose_windows import make_window


def interference(steps_p99: float) -> object:
    return make_window(itl=(0.03, 0.35, 20000, 0.05), step_tokens=(9.0, steps_p99, 3000))


@pytest.mark.parametrize("budget", [None, 1024, 2048, 4096, 8192])
def test_interference_gets_a_chunk_budget_hint_never_the_value_in_force(
    budget: int | None,
) -> None:
    config = DiagnosisConfig(server=ServerSettings(max_num_batched_tokens=budget))
    d = diagnose(interference(2048.0 if budget is None else float(budget)), config)  # type: ignore[arg-type]
    assert (d.cls, d.sub_cause) == (C.DECODE_BOUND, SubCause.PREFILL_INTERFERENCE)
    ids = [h.id for h in d.hints]
    assert "batched-tokens-down" in ids, ids
    for h in d.hints:
        m = re.match(r"--max-num-batched-tokens ([\d,]+) \(now ([\d,]+)", h.action)
        if m:
            assert m.group(1) != m.group(2), h.action
