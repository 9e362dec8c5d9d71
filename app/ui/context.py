"""What every page gets: the data, the alerts, link building and the refresh period."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from urllib.parse import quote, urlencode

from app.read.alertfeed import AlertFeed, AlertRow
from app.read.board import Board
from app.read.fleetpage import FleetData
from app.read.fleetpoints import fleet_name
from app.read.pricing import PagePricer
from app.read.target import UiData
from app.read.twincache import TwinCache


@dataclass(frozen=True)
class PageContext:
    """Built once per Dash app; callbacks close over it (no module-level state)."""

    data: UiData
    alerts: AlertFeed
    relative: Callable[[str], str]
    refresh_ms: int = 5000
    fleets: FleetData | None = None
    # The what-if twin's answers of this UI: headroom and hints' effects, computed when a
    # page asks (app.read.twincache), or shared with the service's.
    twin: TwinCache = field(default_factory=TwinCache)
    # The overview's cards, kept by a thread of their own (app.read.board); None: one
    # over ``data``, made with the context.
    board_given: Board | None = None
    board: Board = field(init=False)
    # The twin's answers from the pricing job's cache (app.read.pricing); None: one over
    # ``data`` and ``twin``, made with the context.
    pricer_given: PagePricer | None = None
    pricer: PagePricer = field(init=False)

    def __post_init__(self) -> None:  # frozen: each set once, here
        board = self.board_given
        if board is None:
            board = Board(self.data, fleets=self.fleets)
        object.__setattr__(self, "board", board)
        pricer = self.pricer_given
        object.__setattr__(self, "pricer", pricer or PagePricer(self.data, self.twin))

    def target_href(
        self,
        target: str,
        model: str | None = None,
        *,
        at: float | None = None,
        start: float | None = None,
        end: float | None = None,
    ) -> str:
        """The target page, optionally at a time or over a range (the alerts' link form)."""
        params: dict[str, str] = {}
        if model:
            params["model"] = model
        if at is not None:
            params["at"] = str(int(at))
        if start is not None and end is not None:
            params["from"] = str(int(start))
            params["to"] = str(int(end))
        path = self.relative(f"/targets/{quote(target, safe='')}")
        return f"{path}?{urlencode(params)}" if params else path

    def fleet_href(self, model: str, fleet: str | None = None, *, at: float | None = None) -> str:
        """The fleet page of a model (``fleet``: one of its fleets by name), optionally at a
        time (the SLO alerts' link form: ``/fleets/<model>?at=<unix>``)."""
        params: dict[str, str] = {}
        if fleet and fleet != model:
            params["fleet"] = fleet
        if at is not None:
            params["at"] = str(int(at))
        path = self.relative(f"/fleets/{quote(model, safe='')}")
        return f"{path}?{urlencode(params)}" if params else path

    def alert_href(self, alert: AlertRow, *, at: float | None = None) -> str:
        """Where an alert is explained, at ``at``: a target's alert opens the target page;
        an alert about a model and no target (the SLO burn-rate alerts: labels ``slo``,
        ``model_name`` and the ``fleet.group_by`` labels) opens its fleet's page, the
        fleet named by those labels, as the alert's own ``ui_url`` does."""
        if alert.target:
            return self.target_href(alert.target, alert.model_name, at=at)
        if not alert.model_name:
            return self.relative("/")
        group_by = () if self.fleets is None else self.fleets.options.group_by
        fleet = fleet_name(alert.model_name, alert.labels, group_by)
        return self.fleet_href(alert.model_name, fleet, at=at)

    def incident_href(
        self,
        target: str | None = None,
        model: str | None = None,
        *,
        start: float | None = None,
        end: float | None = None,
    ) -> str:
        params: dict[str, str] = {}
        if target:
            params["target"] = target
        if model:
            params["model"] = model
        if start is not None and end is not None:
            params["from"] = str(int(start))
            params["to"] = str(int(end))
        path = self.relative("/incident")
        return f"{path}?{urlencode(params)}" if params else path
