"""The fleet pages' read side over a real store: three simulated replicas, one overloaded."""

from __future__ import annotations

import dataclasses
import threading

import pytest

from app.config import Settings
from app.diagnose import DEFAULT_CONFIG
from app.fleet.aggregate import FleetKey
from app.fleet.specs import slo_specs
from app.fleet.tracker import SloTracker
from app.fleet.view import fleet_view
from app.read.fleetpage import SLO_POINTS, FleetData
from app.read.fleetpoints import FleetBudget, FleetOptions
from app.read.source import StoreSource, TargetInfo, replay_into
from app.sim.record import record
from app.store.sqlite import Store

START = 1764403200.0
DURATION = 300.0
MODEL = "meta-llama/Llama-3.1-8B-Instruct"


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Store:
    root = tmp_path_factory.mktemp("fleetdata")
    s = Store(":memory:")
    for i in range(3):
        overrides = {"workload.rate_multiplier": 3.0} if i == 2 else {}
        rec = record("healthy", root / f"r{i}", DURATION, i + 1, overrides, start_unix=START)
        replay_into(s, rec, f"r{i}")
    return s


def _options(settings: Settings) -> FleetOptions:
    return FleetOptions.from_config(
        settings.fleet, settings.storage, slo_specs(settings), settings.targets
    )


def _source(store: object, *, live: bool = False, known: int = 3) -> StoreSource:
    """The fleet pages' source over ``store`` (the store, or one standing in for it)."""
    infos = [TargetInfo(f"r{i}", "x", True, None, None, (MODEL,)) for i in range(known)]
    return StoreSource(
        lambda: store,  # type: ignore[arg-type, return-value]
        targets=lambda: infos,
        clock=lambda: START + DURATION,
        live=live,
        settled=0.0,
        span=(START, START + DURATION),
    )


def _data(store: Store, options: FleetOptions, *, live: bool = False, known: int = 3) -> FleetData:
    return FleetData(_source(store, live=live, known=known), DEFAULT_CONFIG, options)


def test_replicas_of_a_model_form_one_fleet_or_split_by_label(store: Store) -> None:
    fd = _data(store, _options(Settings()))
    assert fd.groups() == {FleetKey(MODEL): ["r0", "r1", "r2"]}
    split = dataclasses.replace(
        fd.options,
        group_by=("cluster",),
        labels_of={"r0": {"cluster": "a"}, "r1": {"cluster": "a"}, "r2": {"cluster": "b"}},
    )
    groups = _data(store, split).of_model(MODEL)
    assert sorted(k.name for k in groups) == [f"{MODEL}{{cluster=a}}", f"{MODEL}{{cluster=b}}"]
    live = _data(store, fd.options, live=True, known=2)  # r2 no longer configured
    assert live.groups() == {FleetKey(MODEL): ["r0", "r1"]}


def test_series_flags_the_overloaded_replica_and_sums_the_fleet(store: Store) -> None:
    fd = _data(store, _options(Settings()))
    key, members = next(iter(fd.groups().items()))
    s = fd.series(key, members, START, START + DURATION)
    assert (s.step, s.length) == (15.0, 60.0)
    assert s.flagged == ("r2",)
    late = [p for p in s.points["r2"] if p.end > START + 120]
    assert late and all("load" in p.flags for p in late)
    assert not any(p.flags for p in s.points["r0"])
    end = START + DURATION
    view = fleet_view(
        store,
        key,
        members,
        start=end - 60,
        end=end,
        config=DEFAULT_CONFIG,
        thresholds=fd.options.thresholds,
    )
    last = s.fleet_points[-1]
    assert last.end == end
    p99 = view.fleet.window.quantiles["ttft"]["p99"].value
    assert last.ttft_p99 == pytest.approx(p99, rel=1e-9)
    assert last.running_avg == pytest.approx(sum(s.points[r][-1].running_avg or 0 for r in members))


def test_budgets_and_slo_history_of_the_fleet(store: Store) -> None:
    fd = _data(store, _options(Settings()))
    statuses = fd.statuses()
    assert fd.statuses() is statuses  # memoised per window end
    (status,) = statuses
    # Five minutes of a 30-day period: the burn so far (a third of the requests miss
    # TTFT), not a share left.
    assert status.spec.name == "default" and status.budget.early
    assert status.budget.remaining is None and status.budget.burn is not None
    assert status.budget.burn > 1
    assert fd.budgets_of("r1", MODEL) == [
        FleetBudget("default", status.budget, status.key.name, len(status.members))
    ]
    assert fd.budgets_of("r1", "other") == []
    key, members = next(iter(fd.groups().items()))
    (hist,) = fd.slo_series(key, members, START, START + DURATION)
    assert hist.window_s >= 60 and 0 < len(hist.points) <= SLO_POINTS
    ttft = [v for p in hist.points if (v := p.attainment.get("ttft")) is not None]
    assert ttft and min(ttft) < 0.9
    (summary,) = fd.summaries()
    assert summary.flagged == ("r2",) and summary.budgets[0][0] == "default"


def test_without_slos_there_is_no_budget(store: Store) -> None:
    fd = _data(store, _options(Settings(slos=[])))
    assert fd.statuses() == [] and fd.budgets_of("r0", MODEL) == []
    key, members = next(iter(fd.groups().items()))
    assert fd.slo_series(key, members, START, START + DURATION) == []


def test_the_fleet_list_judges_imbalance_on_the_rounds_windows_while_fresh(store: Store) -> None:
    """Inside the service the overview's fleet list reads the evaluation round's latest
    windows (``round_windows``) instead of windowing every replica again: the same flags,
    no store read for them; a round older than two steps and the store is read."""
    from app.diagnose import diagnose
    from app.windows.aggregate import window

    fd = _data(store, _options(Settings()))
    reads: list[str] = []
    source = fd.source
    intervals = source.intervals

    def counted(target: str, model: str, start: float, end: float) -> list:  # type: ignore[type-arg]
        reads.append(target)
        return intervals(target, model, start, end)

    source.intervals = counted  # type: ignore[method-assign]

    def round_at(end: float) -> list:  # type: ignore[type-arg]
        out = []
        for t in ("r0", "r1", "r2"):
            w = window(
                store.intervals(t, MODEL, end - 60, end),
                start=end - 60,
                end=end,
                target=t,
                model_name=MODEL,
            )
            out.append((w, diagnose(w, DEFAULT_CONFIG)))
        return out

    end = START + DURATION
    fd.statuses()  # the budgets, memoised for this end (they read counts, not windows)
    reads.clear()
    (from_store,) = fd.summaries()
    assert from_store.flagged == ("r2",) and sorted(reads) == ["r0", "r1", "r2"]
    reads.clear()
    fresh = round_at(end - 5.0)  # a round between two of the UI's steps
    fd.round_windows = lambda: fresh
    (summary,) = fd.summaries()
    assert summary == from_store and reads == []
    stale = round_at(end - 45.0)  # three steps behind: not used
    fd.round_windows = lambda: stale
    (summary,) = fd.summaries()
    assert summary == from_store and sorted(reads) == ["r0", "r1", "r2"]


class _GatedStore:
    """The store, whose reads wait until the test opens the gate (a slow count)."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.reading = threading.Event()
        self.gate = threading.Event()

    def __getattr__(self, name: str) -> object:
        found = getattr(self.store, name)
        if name not in ("intervals", "rollups", "first_end"):
            return found

        def gated(*args: object, **kwargs: object) -> object:
            self.reading.set()
            assert self.gate.wait(30), "the test never opened the gate"
            return found(*args, **kwargs)

        return gated


def test_the_overview_never_waits_for_every_fleets_slo_count(store: Store) -> None:
    """``statuses(wait=False)`` answers at once while the count runs beside it, then
    serves what it counted; a fleet's page counts its own fleet alone."""
    gated = _GatedStore(store)
    options = _options(Settings())
    source = _source(gated)
    fd = FleetData(source, DEFAULT_CONFIG, options)
    assert fd.statuses(wait=False) == [] and fd.budgets(wait=False) == {}
    assert gated.reading.wait(30) and fd.counting  # counting, held at the gate
    assert fd.statuses(wait=False) == []  # the same request again: still no wait
    gated.gate.set()
    assert fd.wait_counted(30) and not fd.counting
    (status,) = fd.statuses(wait=False)
    assert status == _data(store, options).statuses()[0]
    key, members = next(iter(fd.groups().items()))
    alone = _data(store, options)  # nothing counted yet: its own fleet only
    (mine,) = alone.fleet_statuses(key, members)
    assert mine.budget == status.budget and mine.members == status.members
    assert alone._tracker().last == []  # the whole count is left to the overview's


def test_inside_the_service_the_overview_waits_for_the_services_count(store: Store) -> None:
    """With the service's tracker (its jobs count every window step) a page starts no
    count of its own: it reads nothing until the service's statuses are there."""
    gated = _GatedStore(store)
    gated.gate.set()
    options = _options(Settings())
    source = _source(gated)
    service_tracker = SloTracker(source, options.specs, options.group_by)
    fd = FleetData(source, DEFAULT_CONFIG, options, tracker=lambda: service_tracker)
    assert fd.statuses(wait=False) == [] and fd.counting
    assert not gated.reading.is_set()  # no count started by the page
    streams = [(f"r{i}", MODEL) for i in range(3)]
    service_tracker.evaluate(START + DURATION, streams, options.labels_of)  # the service's
    assert fd.statuses(wait=False) == service_tracker.last and not fd.counting


def test_a_pages_count_ends_before_its_store_closes(store: Store) -> None:
    """``close`` (the app's shutdown) waits for the count to end (between two fleets;
    this store has one), and no count starts after it."""
    gated = _GatedStore(store)
    fd = FleetData(_source(gated), DEFAULT_CONFIG, _options(Settings()))
    assert fd.statuses(wait=False) == []
    assert gated.reading.wait(30)  # the count is in its first fleet
    closed: list[bool] = []
    closing = threading.Thread(target=lambda: closed.append(fd.close(30)))
    closing.start()
    gated.gate.set()
    closing.join(30)
    assert closed == [True] and not fd.counting
    fd._tracker().last = []  # nothing at hand: a page would start a count
    gated.reading.clear()
    assert fd.statuses(wait=False) == [] and not fd.counting  # none after the close
    assert not gated.reading.is_set()
