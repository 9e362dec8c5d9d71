"""What SGLang's pages carry under other names, and what they do not carry: the accept
length of speculative decoding (``sglang:spec_accept_length``) read as accepted drafts
per step, a speculating SGLang stream judged on its mean time per output token (its ITL
is per token), and a stall on a page that counts no engine steps said to be untold."""

from __future__ import annotations

import dataclasses

import pytest

from app.diagnose import Diagnosis, DiagnosisClass
from app.diagnose.changes import MIN_HEALTHY_S, Baseline, change_of, rank, with_changes
from app.diagnose.changes.attach import UNTOLD
from app.diagnose.config import Slo
from app.diagnose.facts import Facts
from app.diagnose.records import BaselineInfo
from app.diagnose.rules.latency import decode_breach, speculating
from app.model import Derived, GaugeStats, Window
from app.scrape.normalize import normalize
from app.scrape.parse import parse
from app.windows.derived import derive

C = DiagnosisClass
LABELS = 'engine_type="unified",model_name="m",tp_rank="0",pp_rank="0"'


def page(*accept: float) -> str:
    """An SGLang page with one scheduler per ``dp_rank`` and its accept length."""
    lines = [
        "# TYPE sglang:num_running_reqs gauge",
        *(f'sglang:num_running_reqs{{dp_rank="{i}",{LABELS}}} 4' for i in range(len(accept))),
        "# TYPE sglang:spec_accept_length gauge",
        *(f'sglang:spec_accept_length{{dp_rank="{i}",{LABELS}}} {a}' for i, a in enumerate(accept)),
    ]
    return "\n".join(lines) + "\n"


def gauges_of(text: str) -> dict[str, float]:
    snap = normalize(parse(text), target="t", ts=0.0)
    return dict(snap.streams["m"].gauges)


def test_the_accept_length_is_the_mean_of_the_ranks_that_speculate() -> None:
    assert gauges_of(page(3.0, 2.0))["spec_accept_length"] == pytest.approx(2.5)
    # SGLang prints 0 when it does not speculate: not an accept length.
    assert "spec_accept_length" not in gauges_of(page(0.0, 0.0))


def gauge(avg: float) -> GaugeStats:
    return GaugeStats(avg=avg, max=avg, last=avg, first=avg)


def derived_of(gauges: dict[str, GaugeStats], increases: dict[str, float]) -> Derived:
    return derive(
        covered=60.0,
        quantiles={},
        means={},
        observations={},
        increases=increases,
        rates={},
        gauges=gauges,
        gauge_span=60.0,
    )


def test_accepted_drafts_per_step_from_sglang_accept_length() -> None:
    d = derived_of({"spec_accept_length": gauge(3.4)}, {})
    assert d.spec_decode_accepted_per_draft == pytest.approx(2.4)
    # The draft tokens per step are not on SGLang's page: no acceptance per draft token.
    assert d.spec_decode_acceptance is None
    # vLLM's counters, where the page has them, come first.
    counted = derived_of(
        {"spec_accept_length": gauge(3.4)}, {"spec_drafts": 10.0, "spec_accepted_tokens": 5.0}
    )
    assert counted.spec_decode_accepted_per_draft == pytest.approx(0.5)


def facts(**kw: object) -> Facts:
    values: dict[str, object] = {f.name: None for f in dataclasses.fields(Facts)}
    values.update(
        itl_n=1000.0,
        itl_p99=0.12,
        itl_p99_ge=False,
        itl_mean=0.04,
        tpot_n=0.0,
        spec_draft_tokens=None,
        derived=Derived(spec_decode_accepted_per_draft=2.4),
        itl_per_token=True,
        probe=None,
        transfer=None,
    )
    values.update(kw)
    return Facts(**values)  # type: ignore[arg-type]


def test_a_speculating_sglang_stream_is_judged_on_its_mean_time_per_token() -> None:
    slo = Slo(ttft_p99=2.0, itl_p99=0.1)
    f = facts()
    assert speculating(f)
    # The per-token p99 (0.12 s: a step that accepted no draft) is no request's TPOT.
    within = decode_breach(f, slo)
    assert within.evidence.signal == "itl_mean_per_token"
    assert within.holds is False and within.proven is False
    over = decode_breach(facts(itl_mean=0.13), slo)
    assert over.holds is True and over.proven is False


def test_a_drafter_mismatch_on_sglang_names_the_accepted_drafts_per_step() -> None:
    before = Derived(spec_decode_accepted_per_draft=2.35, running_avg=7.0)
    now = Derived(spec_decode_accepted_per_draft=0.32, running_avg=19.0)
    first = rank(now, before, "decode_bound", "spec_decode_regression")[0]
    assert first.signal == "spec_decode_accepted_per_draft"
    assert first.share > 0.5
    assert first.text().startswith("accepted draft tokens per step fell 2.35 → 0.32")


def diagnosis() -> Diagnosis:
    return Diagnosis(
        target="t",
        model_name="m",
        start=0.0,
        end=60.0,
        cls=C.STALLED,
        confidence=1.0,
        summary="Stalled: requests in the engine and no token for 60 s",
    )


def window_of(d: Derived) -> Window:
    return Window(
        target="t",
        model_name="m",
        start=0.0,
        end=60.0,
        quantiles={},
        means={},
        observations={},
        increases={},
        rates={},
        gauges={},
        histograms={},
        covered=60.0,
        intervals=12,
        derived=d,
    )


def test_a_stall_on_a_page_without_steps_is_said_to_be_untold() -> None:
    info = BaselineInfo(run_start=60.0, healthy_s=900.0, needed_s=MIN_HEALTHY_S)
    before = Derived(completion_rate=2.0, arrival_rate=2.0, running_avg=8.0)
    now = Derived(completion_rate=0.0, arrival_rate=0.0, running_avg=8.0)
    d = with_changes(diagnosis(), window_of(now), Baseline(before, info))
    # Completions stop with any stall: listed, explaining nothing.
    assert all(c.share == 0 for c in d.changes)
    assert "completion_rate" in {c.signal for c in d.changes}
    assert d.summary.endswith(
        f"; {UNTOLD}: the page counts no engine steps, and a stall is the steps stopping"
    )
    assert d.notes[-1].startswith(UNTOLD)
    assert change_of(d.to_dict()) == d.notes[-1]
    # With the step count the stall is named.
    counted = with_changes(
        diagnosis(),
        window_of(dataclasses.replace(now, steps_per_s=0.0)),
        Baseline(dataclasses.replace(before, steps_per_s=40.0), info),
    )
    assert counted.changes[0].signal == "steps_per_s"
    assert not any(n.startswith(UNTOLD) for n in counted.notes)
