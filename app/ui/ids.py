"""Every component id of the UI, in one place.

Plain ids are constants named after the page they live on; repeated widgets use
pattern-matching ids built by the functions below (``{"type": ..., "index": ...}``), so
callbacks match them with ``ALL``/``MATCH`` and read ``ctx.triggered_id``.
"""

from __future__ import annotations

from typing import Any

# -- shell ---------------------------------------------------------------------------------
URL = "url"
PAGE = "page"
PAGE_ERROR = "page-error"  # why a URL cannot be shown (a time out of range)
SOURCE_LABEL = "source-label"

# -- overview -----------------------------------------------------------------------------
OVERVIEW_CARDS = "overview-cards"
OVERVIEW_TICK = "overview-tick"
OVERVIEW_STATUS = "overview-status"
TARGET_CARD = "target-card"  # pattern type, index: "target\nmodel"
OVERVIEW_FLEETS = "overview-fleets"
OVERVIEW_PAGE = "overview-page"  # dcc.Store: the page of problem cards shown (?page=N)
OVERVIEW_PAGER = "overview-pager"
OVERVIEW_GRID = "overview-grid"  # every stream, one row each (app.ui.streamgrid)
OVERVIEW_ROWS_KEY = "overview-rows-key"  # dcc.Store: what the table's rows were made of
FLEET_LINK = "fleet-link"  # pattern type, index: the fleet's name

# -- target page --------------------------------------------------------------------------
TARGET_STREAM = "target-stream"  # dcc.Store: {"target", "model"}
TARGET_TITLE = "target-title"
TARGET_MODEL = "target-model"
TARGET_RANGE = "target-range"
TARGET_FROM = "target-from"
TARGET_TO = "target-to"
TARGET_CUSTOM = "target-custom"
TARGET_LIVE = "target-live"
TARGET_TICK = "target-tick"
TARGET_GRAPH = "target-graph"
TARGET_CARD = "target-card-detail"
TARGET_ENGINES = "target-engines"
TARGET_STATUS = "target-status"
TARGET_INCIDENT_LINK = "target-incident-link"
TARGET_AT = "target-at"  # dcc.Store: the window end the card shows (None = latest)
TARGET_HEADROOM = "target-headroom"  # the what-if twin's headroom line
TARGET_EFFECTS = "target-effects"  # the what-if twin's predicted effects of the hints
TARGET_TWIN_TICK = "target-twin-tick"  # asks the pricing job's cache again (headroom, effects)
TARGET_ZOOM = "target-zoom"  # dcc.Store: [start, end] the user zoomed to (None = whole range)

# -- fleet page ---------------------------------------------------------------------------
FLEET_MODEL = "fleet-model"  # dcc.Store: {"model"}
FLEET_AT = "fleet-at"  # dcc.Store: the window end the page explains (None = latest)
FLEET_SELECT = "fleet-select"
FLEET_RANGE = "fleet-range"
FLEET_FROM = "fleet-from"
FLEET_TO = "fleet-to"
FLEET_CUSTOM = "fleet-custom"
FLEET_TICK = "fleet-tick"
FLEET_STATUS = "fleet-status"
FLEET_HEADROOM = "fleet-headroom"  # the tightest replica's headroom line
FLEET_TWIN_TICK = "fleet-twin-tick"  # asks the pricing job's cache again (headroom)
FLEET_IMBALANCE = "fleet-imbalance"
FLEET_POOLS = "fleet-pools"  # a P/D fleet's pools, client TTFT and KV transfer
FLEET_TABLE = "fleet-table"
FLEET_BARS = "fleet-bars"
FLEET_GRAPH = "fleet-graph"
FLEET_CARD = "fleet-card"
FLEET_SLO = "fleet-slo"
FLEET_SLO_GRAPH = "fleet-slo-graph"

# -- incident review ----------------------------------------------------------------------
INCIDENT_STREAM = "incident-stream"
INCIDENT_RANGE = "incident-range"
INCIDENT_FROM = "incident-from"
INCIDENT_TO = "incident-to"
INCIDENT_CUSTOM = "incident-custom"
INCIDENT_K = "incident-k"
INCIDENT_SPIKES = "incident-spikes"
INCIDENT_FOUND = "incident-found"  # dcc.Store: the spikes found (JSON)
INCIDENT_STATUS = "incident-status"
INCIDENT_VIEW = "incident-view"  # the chosen spike's view (hidden until one is chosen)
INCIDENT_GRAPH = "incident-graph"
INCIDENT_DETAIL = "incident-detail"
INCIDENT_EXPORT = "incident-export"
INCIDENT_DOWNLOAD = "incident-download"
INCIDENT_PREVIEW = "incident-preview"
INCIDENT_EXPORT_HTML = "incident-export-html"
INCIDENT_DOWNLOAD_HTML = "incident-download-html"
INCIDENT_OPEN = "incident-open"  # dcc.Store: the index of the open spike in INCIDENT_FOUND
SPIKE_ROW = "spike-row"  # pattern type, index: position in INCIDENT_FOUND

# -- alerts -------------------------------------------------------------------------------
ALERTS_TABLES = "alerts-tables"
ALERTS_TICK = "alerts-tick"


def target_card(target: str, model: str) -> dict[str, Any]:
    """The pattern id of one stream's overview card."""
    return {"type": TARGET_CARD, "index": f"{target}\n{model}"}


def fleet_link(fleet: str) -> dict[str, Any]:
    """The pattern id of one fleet's link on the overview."""
    return {"type": FLEET_LINK, "index": fleet}


def spike_row(index: int) -> dict[str, Any]:
    """The pattern id of one row of the spike table."""
    return {"type": SPIKE_ROW, "index": index}
