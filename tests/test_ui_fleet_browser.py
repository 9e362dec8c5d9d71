"""The fleet page in a real browser (fixtures and session of ``test_ui_browser``).

Seeded data: three simulated ``healthy`` replicas of one model, the third with three
times the traffic (the overloaded one), written into a temp store through the
collector's own path. Their recordings run from ten minutes ago to seven and a half
minutes ahead, so the live page's latest window always holds data and the twin's span
(the 15 minutes to the last 5-minute boundary) holds the 5 minutes of history it needs.
The targets carry a ``cluster`` label whose value is markup, and
``fleet.group_by: [cluster]`` puts it into the fleet's name: it must show as text. One
SLO object (``chat``) is configured, and its fast-burn alert is firing (saved through
the alert repository): the alerts page must open the fleet.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterator
from typing import Any
from urllib.parse import parse_qs, quote, urlsplit

import pytest

from app.alerts.history import AlertStore
from app.alerts.state import Alert, AlertState, fingerprint
from app.config import load_settings
from app.main import create_app
from app.read.source import replay_into
from app.sim.record import record
from app.store.sqlite import Store
from app.ui import palette
from tests.test_e2e import ServiceThread
from tests.test_ui_browser import MODEL, TIMEOUT_MS, TWIN_TIMEOUT_MS, Session, browser  # noqa: F401

LABEL = "<img src=x onerror=alert(1)>"
FLEET = f"{MODEL}{{cluster={LABEL}}}"
BAD = "r2"
BURN_AT_AGO = 120.0


def _seed_burn_alert(store: Store, now: float) -> None:
    """The critical SLO alert, as the evaluation saves it: labels ``slo``, ``model_name``
    and the fleet's ``group_by`` label, no ``target`` (it is about every replica)."""
    labels = {
        "alertname": "PhasewatchSLOBurnFast",
        "severity": "critical",
        "slo": "chat",
        "model_name": MODEL,
        "cluster": LABEL,
    }
    fp = fingerprint(labels)
    alert = Alert(
        fingerprint=fp,
        rule="PhasewatchSLOBurnFast",
        labels=labels,
        annotations={"summary": "chat burns its error budget 20x too fast"},
        state=AlertState.FIRING,
        active_at=now - BURN_AT_AGO - 60,
        last_eval=now,
        fired_at=now - BURN_AT_AGO,
    )
    AlertStore(store).save({fp: alert}, [], [], [], now)


@pytest.fixture(scope="module")
def fleet_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    root = tmp_path_factory.mktemp("ui-fleet")
    start = math.floor(time.time() / 15) * 15 - 600
    store = Store(root / "pw.db")
    for i in range(3):
        overrides = {"workload.rate_multiplier": 3.0} if f"r{i}" == BAD else {}
        rec = record(
            "healthy",
            root / f"r{i}",
            duration=1050,
            seed=i + 1,
            start_unix=start,
            overrides=overrides,
        )
        replay_into(store, rec, f"r{i}")
    _seed_burn_alert(store, time.time())
    store.close()
    settings = load_settings(
        None,
        {
            "targets": [
                {"name": f"r{i}", "url": "http://127.0.0.1:9/metrics", "labels": {"cluster": LABEL}}
                for i in range(3)
            ],
            "storage": {"path": str(root / "pw.db")},
            # The twin priced for the page at a whole core (whatif.cpu_share), not paced at a
            # quarter: what is shown is under test here, the pacing in test_hint_effects.
            "whatif": {"cpu_share": 1.0},
            "fleet": {"group_by": ["cluster"]},
            "slos": [{"name": "chat", "ttft": 2.0, "itl": 0.1, "target": 0.99, "period": "30d"}],
        },
    )
    svc = ServiceThread(create_app(settings, start_jobs=False))
    try:
        yield svc.url
    finally:
        svc.close()


@pytest.fixture
def fleet_session(browser: Any, fleet_url: str) -> Iterator[Session]:  # noqa: F811
    s = Session(browser, fleet_url)
    yield s
    s.close()


def _trace_names(session: Session, graph_id: str, at_least: int) -> list[str]:
    query = f"document.querySelector('#{graph_id} .js-plotly-plot')"
    session.page.wait_for_function(
        f"(() => {{ const g = {query}; return g && g.data && g.data.length >= {at_least}; }})()",
        timeout=TIMEOUT_MS,
    )
    names: list[str] = session.page.evaluate(f"{query}.data.map(t => t.name)")
    return names


def test_overview_links_the_fleet_and_the_fleet_page_shows_the_imbalance(
    fleet_session: Session, fleet_url: str
) -> None:
    page = fleet_session.page
    page.goto(fleet_url + "/ui/")
    # The budgets are counted beside the first answer: there at once, or at a refresh.
    page.wait_for_selector(".fleet-link .card-budget", timeout=TIMEOUT_MS)
    link = page.locator(".fleet-link").first
    text = link.inner_text()
    assert FLEET in text, "the label value must show as plain text"
    assert BAD in text and "imbalanced" in text.lower()
    assert "error budget (chat)" in text
    page.wait_for_selector(".card .card-budget", timeout=TIMEOUT_MS)
    assert page.locator(".card-budget").count() >= 3  # each replica's card too
    assert page.locator("img[src='x']").count() == 0
    fleet_session.shot("overview-fleets")

    link.click()
    page.wait_for_url("**/ui/fleets/**", timeout=TIMEOUT_MS)
    headroom = page.locator("#fleet-headroom")
    headroom.locator("strong").wait_for(timeout=TWIN_TIMEOUT_MS)  # the twin runs when asked
    assert "its tightest replica" in headroom.inner_text()
    panel = page.locator(f".imbalance-panel[data-flagged='{BAD}']")
    panel.wait_for(timeout=TIMEOUT_MS)
    words = panel.inner_text()
    assert "imbalanced: load, queue" in words.lower()
    assert f"{BAD} runs" in words and "fair share 33%" in words
    assert "have none and spare slots" in words
    assert "Route by outstanding requests" in words and "why:" in words
    assert page.locator(".outlier").count() == 1

    rows = page.locator("table.replicas tr.replica-row")
    assert rows.count() == 3
    flagged = page.locator("table.replicas tr[data-flagged='true']")
    assert flagged.count() == 1 and flagged.get_attribute("data-replica") == BAD
    assert "imbalanced" in flagged.inner_text().lower()
    assert "Queue-bound" in flagged.inner_text()
    assert "in line with its peers" in page.locator("tr[data-replica='r0']").inner_text()

    names = _trace_names(fleet_session, "fleet-graph", 10)
    assert {"r0", "r1", f"{BAD} (imbalanced)", "fleet p99 (all requests)"} <= set(names)
    assert "imbalanced window" in names and "SLO p99 2 s" in names
    # Legend and table agree: the replicas called imbalanced are the table's flagged ones.
    legend = {n.removesuffix(" (imbalanced)") for n in names if n.endswith("(imbalanced)")}
    assert legend == {BAD}
    # The flags are drawn behind the lines (first), thin and open; replicas are drawn in
    # colours of their own, none of them a class colour.
    assert names.index("imbalanced window") < names.index("r0")
    graph = "document.querySelector('#fleet-graph .js-plotly-plot')"
    symbols = page.evaluate(
        f"{graph}.data.filter(t => t.name === 'imbalanced window').map(t => t.marker.symbol)"
    )
    assert symbols and all(sym == palette.IMBALANCED_SYMBOL for sym in symbols)
    colours = page.evaluate(
        f"{graph}.data.filter(t => ['r0', 'r1', '{BAD} (imbalanced)'].includes(t.name))"
        ".map(t => t.line.color.toUpperCase())"
    )
    class_colours = {st.colour.upper() for st in palette.STYLES.values()}
    assert colours and not set(colours) & class_colours
    bars = page.evaluate(
        "document.querySelector('#fleet-bars .js-plotly-plot').data.map(t => t.text)"
    )
    assert len(bars) == 5
    for texts in bars:  # every signal's bar of the bad replica says so in words
        assert texts[2].endswith("imbalanced") and not texts[0].endswith("imbalanced")
    # Bar labels keep a readable size: none shrunk to fit its bar.
    sizes = page.evaluate(
        "[...document.querySelectorAll('#fleet-bars .bartext')]"
        ".map(t => parseFloat(getComputedStyle(t).fontSize))"
    )
    assert len(sizes) == 15 and min(sizes) >= 10, sizes
    slo_names = _trace_names(fleet_session, "fleet-slo-graph", 3)
    assert "chat: ttft ≤ 2.00 s" in slo_names and "chat: budget left" in slo_names
    slo = page.locator(".slo-panel").inner_text()
    assert "chat" in slo and "error budget" in slo and "burn rate" in slo
    assert page.locator("#fleet-card .diagnosis-card").count() == 1
    assert FLEET in page.locator("#fleet-select").inner_text()
    assert page.locator("img[src='x']").count() == 0
    fleet_session.shot("fleet")


def test_the_alert_link_form_opens_the_fleet_at_that_time(
    fleet_session: Session, fleet_url: str
) -> None:
    page = fleet_session.page
    at = int(time.time() - 120)
    page.goto(f"{fleet_url}/ui/fleets/{quote(MODEL, safe='')}?at={at}")
    page.wait_for_selector(".imbalance-panel", timeout=TIMEOUT_MS)
    page.wait_for_function(
        "document.querySelector('#fleet-status').innerText.includes('chosen window')",
        timeout=TIMEOUT_MS,
    )
    assert "chosen window" in page.locator("#fleet-card").inner_text()
    assert page.locator(".imbalance-panel").get_attribute("data-flagged") == BAD
    assert page.locator("input[value='custom']").is_checked()


def test_the_slo_alert_opens_its_fleet_page_at_its_time(
    fleet_session: Session, fleet_url: str
) -> None:
    page = fleet_session.page
    page.goto(fleet_url + "/ui/alerts")
    page.wait_for_selector(".alerts-firing table", timeout=TIMEOUT_MS)
    row = page.locator(".alerts-firing .alert-row", has_text="PhasewatchSLOBurnFast")
    assert "critical" in row.inner_text() and "fleet" in row.inner_text()
    link = row.locator(".alert-link")
    href = link.get_attribute("href") or ""
    parts = urlsplit(href)
    assert parts.path.endswith(f"/ui/fleets/{quote(MODEL, safe='')}"), href
    q = parse_qs(parts.query)
    assert q["fleet"] == [FLEET]  # the fleet its labels name (fleet.group_by: cluster)
    assert abs(int(q["at"][0]) - (time.time() - BURN_AT_AGO)) < 600  # when it fired
    fleet_session.shot("alerts-fleet")
    link.click()
    page.wait_for_url("**/ui/fleets/**", timeout=TIMEOUT_MS)
    headroom = page.locator("#fleet-headroom")
    headroom.locator("strong").wait_for(timeout=TWIN_TIMEOUT_MS)  # the twin runs when asked
    assert "its tightest replica" in headroom.inner_text()
    page.wait_for_selector(".imbalance-panel", timeout=TIMEOUT_MS)
    assert "Not found" not in page.inner_text("main")
    page.wait_for_function(
        "document.querySelector('#fleet-status').innerText.includes('chosen window')",
        timeout=TIMEOUT_MS,
    )
    assert FLEET in page.locator("#fleet-select").inner_text()  # its own fleet, by label
    assert page.locator("img[src='x']").count() == 0
