"""The hints' effects during an incident and beside the window shown (app.read.effects,
app.read.backlog, app.diagnose.effects): from the state now, each with its error, the
unreliable left out of alerts, the most helpful first."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from app.alerts.fields import _hint_lines
from app.diagnose import diagnose
from app.diagnose.classes import DiagnosisClass
from app.diagnose.config import DiagnosisConfig
from app.diagnose.effects import Effect, Figure, rank_by_effect
from app.read.effects import TwinEffects, priced, rebased
from app.read.headroom import stream_headroom
from app.read.twincache import TwinCache
from app.sim.scale_out import EPOCH, record_until
from app.sim.scenario import from_tree, read_tree
from app.sources.recording import record_into
from app.store.sqlite import Store
from app.twin.headroom import Limit
from app.windows.aggregate import window
from tests.diagnose_windows import make_window


@pytest.fixture(scope="module")
def surge(tmp_path_factory: pytest.TempPathFactory) -> tuple[Store, float]:
    """A ×4 surge two minutes old after four calm minutes, in a store: the queue grows
    through its end (the twin's span, the 15 minutes to the last 5-minute boundary, holds
    the calm minutes and the surge's first)."""
    root = tmp_path_factory.mktemp("surge")
    t: dict[str, Any] = copy.deepcopy(read_tree("incident"))
    t["phases"] = [{"at_s": 240.0, "name": "spike", "set": {"workload.rate_multiplier": 4.0}}]
    t.pop("loop_s", None)
    record_until(from_tree(t), 3, 360.0, root / "rec")
    store = Store(root / "pw.db")
    record_into(store, root / "rec", "r0")
    return store, EPOCH + 360.0


def test_during_a_surge_effects_are_said_in_the_incidents_terms(
    surge: tuple[Store, float],
) -> None:
    store, end = surge
    model = store.streams("r0")[0][1]
    shown = window(store.intervals("r0", model, end - 60, end), start=end - 60, end=end,
                   target="r0", model_name=model)  # fmt: skip
    job = TwinEffects(store.intervals, DiagnosisConfig(), TwinCache(), cpu_share=1.0)
    asked = [("replicas", 2.0), ("replicas", 1.0), ("max_num_seqs", 512.0)]
    first = job.effects(shown, asked)
    # The traffic's answers need no twin: there at once, from the state now.
    two = first[("replicas", 2.0)]
    assert two.backlog is not None and two.backlog.drain_s is not None
    assert two.backlog.backlog > 100  # the queue at the window's end, not a 15-minute mean
    assert two.text().startswith("predicted: the ") and "queued drain in ≈" in two.text()
    assert two.to_dict()["regime"] == "growing" and two.to_dict()["drain_s"] > 0
    same = first[("replicas", 1.0)]
    assert same.backlog is not None and same.backlog.drain_s is None
    assert "never drains" in same.text() and same.flagged
    # An engine setting's capacity is the twin's: priced by the job, then found.
    assert ("max_num_seqs", 512.0) not in first and job.queued == 1
    assert job.work() == 1
    again = job.effects(shown, asked)
    seqs = again[("max_num_seqs", 512.0)]
    assert seqs.error is None and seqs.backlog is not None
    # A bigger batch on a replica that ran pinned at 128: more capacity, less growth.
    assert seqs.backlog.drain_s is not None or (
        seqs.backlog.still_grows_by < same.backlog.still_grows_by
    )


def _fig(now: float, pred: float, slo: float = 2.0) -> Figure:
    return Figure(now, pred, pred * 0.8, pred * 1.2, slo)


def test_an_effect_starts_from_the_value_shown_beside_it() -> None:
    e = Effect("max_num_seqs=64", _fig(9.17, 6.14), _fig(0.05, 0.05, 0.1), 0.1)
    w = make_window(ttft=(1.0, 39.0, 120, 5.0), itl=(0.03, 0.06, 24000, 0.032))
    shown = w.quantiles["ttft"]["p99"].value
    moved = rebased({("max_num_seqs", 64.0): e}, w)[("max_num_seqs", 64.0)]
    assert moved.ttft_p99 is not None and moved.ttft_p99.now == shown
    assert moved.ttft_p99.predicted == pytest.approx(shown * 6.14 / 9.17)
    assert moved.ttft_p99.low == pytest.approx(shown * 6.14 * 0.8 / 9.17)


def test_an_unreliable_prediction_is_said_so_and_left_out_of_alert_text() -> None:
    bad = Effect("replicas=2", _fig(39.0, 6.0), None, replay_error=0.53)
    assert bad.unreliable == "replay error 53%, over 25%"
    assert bad.text().startswith("unreliable — predicted: TTFT p99 39 s → 6 s")
    assert bad.text().endswith("(replay error 53%)")
    assert bad.to_dict()["reliable"] is False
    good = Effect("replicas=2", _fig(39.0, 6.0), None, replay_error=0.08)
    hints = [
        {"title": "Add replicas", "action": "replicas 2", "effect": bad.to_dict()},
        {"title": "Raise the batch", "action": "max-num-seqs", "effect": good.to_dict()},
    ]
    lines = _hint_lines(hints).splitlines()
    assert lines[0] == "- Add replicas: replicas 2"  # no unreliable number in an alert
    assert "TTFT p99 39 s → 6 s" in lines[1] and "(replay error 8%)" in lines[1]


def test_the_hints_that_help_most_come_first() -> None:
    replicas = Effect("replicas=2", _fig(75.0, 9.0), None, 0.1)
    seqs = Effect("max_num_seqs=128", _fig(75.0, 0.23), None, 0.1)
    none = Effect("x=1", _fig(75.0, 75.0), None, 0.1)
    hints = [("replicas", replicas), ("unpriced", None), ("seqs", seqs), ("none", none)]
    order = rank_by_effect(hints, lambda h: h[1])
    assert [h[0] for h in order] == ["seqs", "unpriced", "replicas", "none"]


def test_a_growing_queues_headroom_needs_no_twin_and_agrees_with_the_class(
    surge: tuple[Store, float],
) -> None:
    """Over its SLO with a growing queue: the capacity needed now, the queue as what
    broke (a queue-bound class), and no twin fitted to say so."""
    store, end = surge
    model = store.streams("r0")[0][1]
    cache = TwinCache()
    r = stream_headroom(store.intervals, "r0", model, now=end, config=DiagnosisConfig(),
                        cache=cache)  # fmt: skip
    assert r.headroom is not None and r.headroom.limit is Limit.QUEUE
    assert (r.headroom.capacity_now() or 0) > 1.2 and r.headroom.replicas_needed == 2
    assert r.headroom.text().startswith("needs ×") and cache.computed == 0


def test_a_card_during_a_surge_shows_the_incidents_terms_without_a_twin(
    surge: tuple[Store, float],
) -> None:
    """The card's read (no twin run): the traffic's hint said as the drain, from the
    window the card shows."""
    store, end = surge
    model = store.streams("r0")[0][1]
    shown = window(store.intervals("r0", model, end - 60, end), start=end - 60, end=end,
                   target="r0", model_name=model)  # fmt: skip
    d = diagnose(shown, DiagnosisConfig())
    assert d.cls is DiagnosisClass.QUEUE_BOUND
    cache = TwinCache()
    out = priced(d, store.intervals, config=DiagnosisConfig(), cache=cache, compute=False,
                 window=shown)  # fmt: skip
    priced_hints = [h for h in out.hints if h.effect is not None]
    assert priced_hints and cache.computed == 0
    assert all(h.effect.backlog is not None for h in priced_hints if h.effect)
