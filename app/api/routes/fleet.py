"""``GET /api/v1/fleets``: replicas of one model summed, their imbalance and SLO figures."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Mapping, Sequence
from typing import Annotated, Any

from fastapi import APIRouter, HTTPException, Path, Query, Request, Response
from pydantic import Field

from app.api.deps import (
    DiagnosisConfigDep,
    FleetConfigDep,
    SloSpecsDep,
    StoreDep,
    TargetLabelsDep,
    WindowConfigDep,
)
from app.api.disconnect import run_while_connected
from app.api.params import (
    MAX_ANSWER_BYTES,
    TOTAL_HEADER,
    HistoryKeptDep,
    PageDep,
    Seconds,
    Step,
    UnixTime,
    json_answer,
)
from app.api.schemas import (
    Answer,
    EvidencePublic,
    HintPublic,
    SloCountsPublic,
    WindowPublic,
)
from app.fleet.aggregate import FleetKey
from app.fleet.pools import probe_targets, roles_from_labels
from app.fleet.slo import SloSpec
from app.fleet.specs import imbalance_thresholds
from app.fleet.tracker import matches
from app.fleet.view import fleet_view
from app.read.fleet import find_fleet, fleet_views, fleets
from app.read.windows import QueryError, least_window_bytes
from app.store.sqlite import Store

router = APIRouter(tags=["fleets"])


class FleetDiagnosisPublic(Answer):
    """The diagnosis of a fleet (or replica) window, with its top three hints."""

    cls: str = Field(alias="class")
    sub_cause: str | None
    confidence: float
    summary: str
    hints: list[HintPublic]


class OutlierPublic(Answer):
    """One replica departing from its peers in one way (``kind``)."""

    replica: str
    kind: str
    summary: str
    evidence: list[EvidencePublic]
    hints: list[HintPublic]


class ReplicaSharePublic(Answer):
    """One replica's figures next to its peers'."""

    replica: str
    running_avg: float | None
    running_share: float | None
    waiting_avg: float | None
    kv_avg: float | None
    ttft_p99: float | None
    itl_p99: float | None


class ImbalancePublic(Answer):
    """The replicas that depart from their peers, each replica's share, the hints."""

    flagged: list[str]
    summary: str | None
    fair_share: float | None
    outliers: list[OutlierPublic]
    replicas: list[ReplicaSharePublic]
    hints: list[HintPublic]


class GoodputPublic(Answer):
    """Requests per second that met TTFT and TPOT and did not fail: an estimate inside
    a range (``app.fleet.slo.Goodput``); null with no finished requests."""

    requests: float | None
    good: float | None
    good_min: float | None
    good_max: float | None
    goodput_per_s: float | None
    goodput_min_per_s: float | None
    goodput_max_per_s: float | None
    approximated: bool
    notes: list[str]


class SloWindowPublic(Answer):
    """One SLO over one window: attainment per objective, shares, goodput, counts."""

    slo: str
    attainment: dict[str, float | None]
    interpolated: list[str]
    error_share: float | None
    abort_share: float | None
    goodput: GoodputPublic
    counts: SloCountsPublic


class ReplicaWindowPublic(WindowPublic):
    """One replica's window, flagged when it departs from its peers."""

    flagged: bool
    diagnosis: FleetDiagnosisPublic
    slo: list[SloWindowPublic]


class PDRolePublic(Answer):
    """One replica's role in a P/D fleet and where it comes from (``label`` or ``page``)."""

    replica: str
    role: str
    source: str


class PoolPublic(Answer):
    """One pool of a P/D fleet: its replicas summed, diagnosed; its load (share of its
    capacity in use, ``load_basis`` says how it was read) and its KV-transfer readings."""

    role: str
    name: str
    replicas: list[str]
    absent: list[str]
    cls: str = Field(alias="class")
    sub_cause: str | None
    confidence: float
    summary: str
    hints: list[HintPublic]
    load: float | None
    load_basis: str
    ttft_mean: float | None
    ttft_p99: float | None
    itl_p99: float | None
    running_avg: float | None
    waiting_avg: float | None
    kv_avg: float | None
    transfer: dict[str, float | None] | None


class ClientTtftPublic(Answer):
    """What a client waits for a first token: measured by a probe of the model, else
    estimated from the pools (``parts``), with the mismatch against each pool's own TTFT."""

    measured: bool
    mean: float | None = Field(description="the estimate from the pools, seconds")
    upper: float | None = Field(description="the pools' p99s added, seconds")
    parts: dict[str, float | None]
    probe_mean: float | None
    probe_p99: float | None
    probes: list[str]
    mismatch: str | None
    notes: list[str]


class PoolImbalancePublic(Answer):
    """One pool saturated while the other idles, and the ratio of replicas to move to."""

    saturated: str
    idle: str
    now: str
    move_to: str
    prefill_load: float
    decode_load: float
    demand: float | None
    summary: str


class PDPublic(Answer):
    """A disaggregated prefill/decode fleet (``docs/pd-fleets.md``): roles, pools, the
    client's TTFT and the pool imbalance."""

    roles: list[PDRolePublic]
    pools: dict[str, PoolPublic]
    client_ttft: ClientTtftPublic
    pool_imbalance: PoolImbalancePublic | None
    notes: list[str]


class FleetWindowPublic(WindowPublic):
    """A fleet window: the replicas' windows summed (``/windows``' fields), its diagnosis,
    imbalance and SLO figures, and every replica's own window."""

    fleet: str
    labels: dict[str, str]
    replicas_up: int
    absent: list[str] = Field(description="members without data in this window")
    notes: list[str]
    diagnosis: FleetDiagnosisPublic
    imbalance: ImbalancePublic
    slo: list[SloWindowPublic]
    replicas: list[ReplicaWindowPublic]
    pd: PDPublic | None = Field(
        None, description="a P/D fleet's pools (null: replicas serve both phases)"
    )


class FleetPublic(Answer):
    """A fleet (a model, and the ``fleet.group_by`` labels), its replicas, its latest
    window."""

    name: str
    model_name: str
    labels: dict[str, str]
    members: list[str]
    latest: FleetWindowPublic


def _groups(
    store: Store, labels_of: Mapping[str, Mapping[str, str]], group_by: Sequence[str]
) -> dict[FleetKey, list[str]]:
    return fleets(store.streams(), labels_of, group_by)


def _slos(
    specs: Sequence[SloSpec],
    labels_of: Mapping[str, Mapping[str, str]],
    key: FleetKey,
    members: list[str],
) -> list[SloSpec]:
    """The SLOs that select any of the fleet's replicas."""
    return [
        spec
        for spec in specs
        if key.model_name not in spec.exclude_models
        and any(matches(spec.selector, key.model_name, labels_of.get(t, {})) for t in members)
    ]


def _too_big(size: str) -> HTTPException:
    return HTTPException(
        422,
        f"the answer would be {size}, over the {MAX_ANSWER_BYTES / 1e6:.0f} MB limit: "
        "ask for fewer fleets (limit)",
    )


# Encoded as it is computed, to stop at the size cap.
@router.get("/fleets", response_model=list[FleetPublic])
def list_fleets(
    store: StoreDep,
    labels_of: TargetLabelsDep,
    fleet: FleetConfigDep,
    config: DiagnosisConfigDep,
    specs: SloSpecsDep,
    defaults: WindowConfigDep,
    page: PageDep,
    response: Response,
) -> Response:
    """Every fleet (model, and ``fleet.group_by`` labels) with its replicas and its latest
    window: summed percentiles, imbalance, diagnosis and SLO attainment; one page of
    them by name (``limit``, ``offset``; ``X-Total-Count``: all), and only its fleets
    computed. An answer over 10 MB is a 422: before any fleet is computed when their
    names alone make it so (each fleet's window holds its ``model_name``), else as soon
    as the fleets computed reach it."""
    end = time.time()
    groups = sorted(_groups(store, labels_of, fleet.group_by).items(), key=lambda kv: kv[0].name)
    chosen = page.take(groups, response)
    least = sum(least_window_bytes("", key.model_name) for key, _ in chosen)
    if least > MAX_ANSWER_BYTES:
        raise _too_big(f"at least {least / 1e6:.1f} MB")
    parts: list[bytes] = []
    size = 2
    for key, members in chosen:
        view = fleet_view(
            store,
            key,
            members,
            start=end - defaults.length,
            end=end,
            config=config,
            thresholds=imbalance_thresholds(fleet.imbalance),
            diagnose_replicas=True,
            roles=roles_from_labels(labels_of),
            probes=probe_targets(store.streams(), labels_of, key),
        )
        item = {
            **key.to_dict(),
            "members": members,
            "latest": view.to_dict(_slos(specs, labels_of, key, members)),
        }
        parts.append(_encode(item))
        size += len(parts[-1]) + 1
        if size > MAX_ANSWER_BYTES:
            raise _too_big(f"over {size / 1e6:.1f} MB by its fleet {len(parts)}")
    answer = Response(b"[" + b",".join(parts) + b"]", media_type="application/json")
    answer.headers[TOTAL_HEADER] = response.headers[TOTAL_HEADER]
    return answer


def _encode(item: Any) -> bytes:
    """Compact JSON, as every answer of this router (no NaN: the schema has none)."""
    return json.dumps(item, ensure_ascii=False, allow_nan=False, separators=(",", ":")).encode()


# The answer is encoded as it is computed, never validated again: the model documents it
# (and the schema tests check it against real answers).
@router.get(
    "/fleets/{name:path}/windows",
    response_model=list[FleetWindowPublic],
    response_description="one object per fleet window, oldest first",
)
async def fleet_windows(
    request: Request,
    store: StoreDep,
    labels_of: TargetLabelsDep,
    fleet: FleetConfigDep,
    config: DiagnosisConfigDep,
    specs: SloSpecsDep,
    defaults: WindowConfigDep,
    kept: HistoryKeptDep,
    name: Annotated[str, Path(description="fleet name: the model_name, or model{label=value}")],
    start: Annotated[UnixTime | None, Query(description="Unix seconds; default end - 1 h")] = None,
    end: Annotated[UnixTime | None, Query(description="Unix seconds; default now")] = None,
    window: Annotated[
        Seconds | None, Query(description="window length, seconds; at most the history kept")
    ] = None,
    step: Annotated[Step | None, Query(description="step between windows, seconds")] = None,
) -> Response:
    """One object per window, oldest first: the fleet's fields (as ``/windows``), its
    diagnosis, imbalance, SLO attainment and goodput, and every replica's window with its
    own diagnosis. At most ``app.read.windows.MAX_WINDOWS`` replica windows (windows ×
    replicas) per request, and an answer that cannot be under 10 MB (a long
    ``model_name``): 422 beyond either, before any work; a client that disconnects stops
    the work between replicas and windows."""
    end_ts = time.time() if end is None else end
    start_ts = end_ts - 3600.0 if start is None else start

    def work(cancel: threading.Event) -> bytes:
        try:
            key, members = find_fleet(_groups(store, labels_of, fleet.group_by), name)
        except KeyError:
            raise HTTPException(404, f"unknown fleet {name!r}") from None
        views = fleet_views(
            store,
            key,
            members,
            start=start_ts,
            end=end_ts,
            length=window or defaults.length,
            step=step or defaults.step,
            config=config,
            thresholds=imbalance_thresholds(fleet.imbalance),
            diagnose_replicas=True,
            max_length=kept,
            max_bytes=MAX_ANSWER_BYTES,
            cancel=cancel,
            roles=roles_from_labels(labels_of),
        )
        slos = _slos(specs, labels_of, key, members)
        out = [v.to_dict(slos) for v in views]
        return _encode(out)

    try:
        body = await run_while_connected(request, work)
    except QueryError as exc:
        raise HTTPException(422, str(exc)) from exc
    return json_answer(body)
