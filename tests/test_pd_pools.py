"""P/D fleets as phasewatch reads them: roles, pools, transfer_bound, client TTFT, ratio.

Each scenario is recorded by the simulator as a fleet (one folder per replica) and
replayed through the service's own code (``app.evaluate.fleet_replay``); the ground
truth is the simulator's own accounting (``client.jsonl``, the replicas' truth)."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from pathlib import Path

import pytest

from app.diagnose import DEFAULT_CONFIG, diagnose
from app.evaluate.fleet_replay import FleetReplay, is_fleet_recording, replay_fleet_recording
from app.fleet.aggregate import FleetKey
from app.fleet.pools import pd_view, roles_from_labels
from app.fleet.view import FleetView
from app.sim.pd_record import record_pd
from app.ui.pools_components import pools_panel

Replay = Callable[[str], tuple[Path, FleetReplay]]


@pytest.fixture(scope="module")
def replayed(tmp_path_factory: pytest.TempPathFactory) -> Replay:
    cache: dict[str, tuple[Path, FleetReplay]] = {}

    def get(name: str) -> tuple[Path, FleetReplay]:
        if name not in cache:
            out = record_pd(name, tmp_path_factory.mktemp(name), duration=600, seed=1)
            cache[name] = (out, replay_fleet_recording(out))
        return cache[name]

    return get


def _last(replay: FleetReplay) -> FleetView:
    view = replay.views[-1]
    assert view.pd is not None
    return view


def _classes(view: FleetView) -> dict[str, tuple[str, str | None]]:
    assert view.pd is not None
    return {
        role: (
            str(p.diagnosis.cls),
            None if p.diagnosis.sub_cause is None else str(p.diagnosis.sub_cause),
        )
        for role, p in view.pd.pools.items()
    }


def test_roles_come_from_the_pages_and_pools_are_healthy(replayed: Replay) -> None:
    folder, replay = replayed("pd_healthy")
    assert is_fleet_recording(folder) and not is_fleet_recording(folder / "decode-0")
    view = _last(replay)
    assert view.pd is not None
    assert dict(view.pd.roles) == {
        "prefill-0": "prefill",
        "prefill-1": "prefill",
        "decode-0": "decode",
        "decode-1": "decode",
    }
    assert set(view.pd.role_sources.values()) == {"page"}
    assert _classes(view) == {"prefill": ("healthy", None), "decode": ("healthy", None)}
    assert view.pd.imbalance is None and view.pd.client.mismatch is None
    # Replicas are compared within their pool: a decode instance's hundred streams are
    # no load imbalance against a prefill instance's few.
    assert not [o for o in view.imbalance.outliers if o.kind in ("load", "queue")]
    assert view.to_dict(())["pd"]["pools"]["decode"]["name"].endswith("{role=decode}")


def test_a_configured_role_wins_over_the_page() -> None:
    roles = roles_from_labels({"a": {"role": "both"}, "b": {"role": "prefill"}, "c": {}})
    assert roles == {"a": "both", "b": "prefill"}


def test_labels_override_and_a_both_replica_stays_out_of_the_pools(replayed: Replay) -> None:
    folder, _ = replayed("pd_healthy")
    replay = replay_fleet_recording(folder, roles={"prefill-1": "both"})
    view = _last(replay)
    assert view.pd is not None
    assert view.pd.role_sources["prefill-1"] == "label"
    assert view.pd.pools["both"].replicas == ("prefill-1",)
    assert view.pd.pools["prefill"].replicas == ("prefill-0",)
    assert any("serve both phases" in n for n in view.pd.notes)


def test_a_fleet_without_a_kv_connector_has_no_pools() -> None:
    from app.sim.record import record
    from app.sources.recording import read_scrapes
    from app.windows.aggregate import window

    out = record("healthy", Path(__import__("tempfile").mkdtemp()), duration=120, seed=0)
    scrapes = read_scrapes(out, "plain")
    model = next(iter(scrapes.deltas))
    w = window(scrapes.deltas[model], start=scrapes.start, end=scrapes.end, target="plain",
               model_name=model)  # fmt: skip
    assert pd_view(FleetKey(model), [w], start=w.start, end=w.end, config=DEFAULT_CONFIG) is None


def _client_truth(folder: Path, start: float, end: float) -> float:
    rows = [json.loads(x) for x in (folder / "client.jsonl").read_text().splitlines()]
    inside = [r for r in rows if r["t0"] >= start and r["t1"] <= end]
    n = sum(r["first_tokens"] for r in inside)
    return sum(r["ttft_sum_s"] for r in inside) / n


@pytest.mark.parametrize("name", ["pd_healthy", "pd_slow_transfer"])
def test_the_client_ttft_estimate_is_the_clients_mean(replayed: Replay, name: str) -> None:
    folder, replay = replayed(name)
    for view in replay.views[4::6]:
        assert view.pd is not None
        c = view.pd.client
        assert not c.measured and c.mean is not None and c.upper is not None
        w = view.fleet.window
        truth = _client_truth(folder, w.start, w.end)
        assert c.mean == pytest.approx(truth, rel=0.1)
        assert c.upper >= c.mean
        assert c.prefill_mean is not None and c.transfer_mean is not None
        assert c.first_step_mean is not None
        assert c.mean == pytest.approx(c.prefill_mean + c.transfer_mean + c.first_step_mean)


def test_slow_transfers_make_the_decode_pool_transfer_bound_with_its_hints(
    replayed: Replay,
) -> None:
    _, replay = replayed("pd_slow_transfer")
    early, late = replay.views[12], _last(replay)
    assert _classes(early)["decode"] == ("healthy", None)
    assert _classes(late) == {
        "prefill": ("healthy", None),
        "decode": ("transfer_bound", "slow_transfer"),
    }
    assert late.pd is not None
    d = late.pd.pools["decode"].diagnosis
    share = next(e for e in d.evidence if e.signal == "transfer_share")
    assert share.holds and share.value is not None and share.value >= 0.5
    ids = [h.id for h in d.hints]
    assert ids[0] == "transfer-backend"  # promoted: far below an RDMA link's speed
    assert {"transfer-network", "transfer-block-size", "transfer-buffer"} <= set(ids)
    block = next(h for h in d.hints if h.id == "transfer-block-size")
    assert "--block-size 32" in block.action  # the page says 16
    # Each decode instance's own window says the same.
    for w in late.fleet.replicas:
        if w.target.startswith("decode"):
            assert diagnose(w).cls == "transfer_bound"


def test_failing_transfers_and_expired_kv_are_transfer_bound(replayed: Replay) -> None:
    _, failing = replayed("pd_transfer_failures")
    assert _classes(_last(failing))["decode"] == ("transfer_bound", "transfer_failures")
    view = _last(failing)
    assert view.pd is not None
    hints = view.pd.pools["decode"].diagnosis.hints
    assert hints[0].id == "transfer-failures" and "kv_load_failure_policy" in hints[0].action
    folder, expired = replayed("pd_kv_expired")
    classes = _classes(_last(expired))
    assert classes["prefill"] == ("transfer_bound", "kv_expired")
    view = _last(expired)
    assert view.pd is not None
    ids = [h.id for h in view.pd.pools["prefill"].diagnosis.hints]
    assert ids[:2] == ["kv-lease", "decode-fetch-capacity"]
    # The router's queue is in no page: a client waits longer than the estimate says
    # (only a probe sees it).
    w = view.fleet.window
    assert view.pd.client.mean is not None
    assert _client_truth(folder, w.start, w.end) > 2 * view.pd.client.mean


@pytest.mark.parametrize(
    ("name", "saturated", "ratio"),
    [("pd_prefill_starved", "prefill", "3P1D"), ("pd_decode_starved", "decode", "1P3D")],
)
def test_a_saturated_pool_beside_an_idle_one_names_the_ratio_to_move_to(
    replayed: Replay, name: str, saturated: str, ratio: str
) -> None:
    _, replay = replayed(name)
    view = _last(replay)
    assert view.pd is not None and view.pd.imbalance is not None
    imb = view.pd.imbalance
    assert (imb.saturated, imb.ratio) == (saturated, ratio)
    pool = [o for o in view.imbalance.outliers if o.kind == "pool"]
    assert len(pool) == 1 and pool[0].replica == f"{saturated} pool"
    assert ratio in pool[0].hints[0].action
    idle = view.pd.pools[imb.idle]
    assert idle.load is not None and idle.load < 0.5


def test_the_mismatch_is_named_when_every_pool_is_within_its_slo(replayed: Replay) -> None:
    _, replay = replayed("pd_healthy")
    view = _last(replay)
    assert view.pd is not None
    pools = view.pd.pools
    p99s = [p.fleet.window.quantiles["ttft"]["p99"].value for p in pools.values()]
    upper = view.pd.client.upper
    assert upper is not None and all(v is not None for v in p99s)
    slo = (max(v for v in p99s if v is not None) + upper) / 2  # between the two
    config = dataclasses.replace(DEFAULT_CONFIG, slo_ttft_p99=slo)
    w = view.fleet.window
    again = pd_view(view.fleet.key, view.fleet.replicas, start=w.start, end=w.end, config=config)
    assert again is not None and again.client.mismatch is not None
    assert "each instance times only its part" in again.client.mismatch


def test_the_fleet_page_shows_both_pools_the_client_ttft_and_the_transfer(
    replayed: Replay,
) -> None:
    _, replay = replayed("pd_prefill_starved")
    text = str(pools_panel(_last(replay)))
    for words in (
        "Prefill pool",
        "Decode pool",
        "Estimate",
        "KV transfer",
        "move toward 3P1D",
        "Queue-bound",
    ):
        assert words in text, words
    _, plain = replayed("pd_healthy")
    assert "Prefill pool" in str(pools_panel(_last(plain)))
