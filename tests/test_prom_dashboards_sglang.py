"""The Grafana dashboard's engine panels and the PromQL rules on SGLang's families, on a
real Prometheus.

Two simulated SGLang servers (``phasewatch sim --engine sglang`` pages: one stored with
``sglang:`` names, one with the OpenMetrics ``sglang_`` spelling) and the SGLang fixture
page of every release read (tests/fixtures/sglang, each stored as four scrapes that grow
to its values) are backfilled beside a page without SGLang families (``--enable-metrics``
off behind a proxy); every query of the dashboard's engine panels is run through the
query API with the dashboard variables filled in, and must answer for every SGLang
instance, save the gaps of the older releases named below; the rule file's signal rules
must hold for the same instances.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from app.sim.record import record
from tests.test_prom_dashboards import _dashboard, _fill, _query
from tests.test_prom_support import backfill, prometheus, to_openmetrics
from tests.waiting import wait_for

ROOT = Path(__file__).resolve().parent.parent
RULES = ROOT / "dashboards" / "prometheus" / "phasewatch-rules.yml"
FIXTURES = ROOT / "tests" / "fixtures" / "sglang"
RELEASES = {
    "sgl-main:8000": "main-00ae9c15_unified_GENERATED.prom",
    "sgl-main-dp2:8000": "main-00ae9c15_dp2_GENERATED.prom",
    "sgl-93d04878:8000": "93d04878_unified_GENERATED.prom",
    "sgl-docs:8000": "docs-00b08c49_time-per-output-token_EXAMPLE.prom",
}
SIMULATED = {"sim-sgl:8000": "sglang:", "sim-sgl-om:8000": "sglang_"}
METRICS_OFF = "sgl-off:8000"
# What the older releases' pages lack (docs/sglang.md, "Which releases are read"): the
# retraction counter (93d04878 has only the num_retracted_reqs gauge, the docs' page none).
NO_RETRACTION_COUNTER = {"sgl-93d04878:8000", "sgl-docs:8000"}


def _engine_targets() -> list[tuple[str, str]]:
    """(panel title, query) of the panels that read an engine's families, not vLLM's
    P/D (NIXL) panels, phasewatch's own metrics or the SLO lines."""
    out = []
    for panel in _dashboard()["panels"]:
        if panel["type"] == "row" or panel["title"].startswith("P/D:"):
            continue
        for t in panel.get("targets", []):
            expr = t["expr"]
            if "phasewatch_" in expr or re.fullmatch(r"vector\(.*\)", expr):
                continue
            out.append((panel["title"], expr))
    return out


def _grown(page: Path, out: Path, t0: float) -> Path:
    """``page`` as four scrapes 10 s apart from ``t0`` whose values grow to its own (0, ⅓,
    ⅔, 1): counters and histograms increase, so rates and quantiles have data."""
    out.mkdir(parents=True)
    lines = [x for x in page.read_text().splitlines() if x and not x.startswith("#")]
    for k in range(4):
        rows = []
        for line in lines:
            series, value = line.rsplit(" ", 1)
            rows.append(f"{series} {float(value) * k / 3!r}")
        (out / f"{int(t0) + 10 * k}.prom").write_text("\n".join(rows) + "\n")
    return out


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    tmp = tmp_path_factory.mktemp("dash-sglang")
    now = float(int(time.time()))
    for instance, spelling in SIMULATED.items():
        rec = record(
            "kv_pressure",
            tmp / instance,
            duration=180,
            seed=2,
            version="sglang",
            start_unix=now - 180,
        )
        om = tmp / f"{instance}.om"
        to_openmetrics(rec, om, labels={"instance": instance, "job": "sglang"}, spelling=spelling)
        backfill(om, tmp / "data")
    pages = {**RELEASES, METRICS_OFF: "metrics-off_no-sglang-families.prom"}
    for instance, name in pages.items():
        rec = _grown(FIXTURES / name, tmp / f"page-{instance}", time.time() - 31)
        om = tmp / f"page-{instance}.om"
        to_openmetrics(rec, om, labels={"instance": instance, "job": "sglang"})
        backfill(om, tmp / "data")
    with prometheus(tmp, data=tmp / "data", rule_files=[str(RULES)]) as url:
        yield url


def test_every_engine_panel_has_data_for_every_sglang_release(live: str) -> None:
    targets = _engine_targets()
    assert len({title for title, _ in targets}) >= 7  # TTFT, ITL, running, KV, retractions…
    every = set(RELEASES) | set(SIMULATED)
    for title, expr in targets:
        result = _query(live, _fill(expr))
        instances = {s["metric"].get("instance") for s in result}
        want = every - NO_RETRACTION_COUNTER if "retracted" in expr else every
        assert instances == want, (title, expr, sorted(instances))


def test_the_dashboard_reads_each_release_by_its_own_names(live: str) -> None:
    """The ITL panel reads the docs' release by ``time_per_output_token_seconds`` and the
    newer ones by ``inter_token_latency_seconds``; the hit-ratio panel reads the radix
    cache's counters where the page has them and the ``cache_hit_rate`` gauge where not."""
    targets = _engine_targets()
    itl = [e for t, e in targets if t.startswith("Inter-token latency")]
    inner = re.fullmatch(r"histogram_quantile\(0\.99, (.*)\)", _fill(itl[0]))
    assert inner, itl[0]
    newest, _, older = inner.group(1).partition(" or ")
    assert {s["metric"]["instance"] for s in _query(live, newest)} == (
        set(RELEASES) | set(SIMULATED)
    ) - {"sgl-docs:8000"}
    assert {s["metric"]["instance"] for s in _query(live, older)} == {"sgl-docs:8000"}
    (hits,) = [_fill(e) for t, e in targets if t.startswith("Prefix-cache")]
    gauge = hits.rsplit(" or ", 1)[1]
    assert "cache_hit_rate" in gauge
    counters = _query(live, hits.rsplit(" or ", 1)[0])
    assert {s["metric"]["instance"] for s in counters} >= set(RELEASES) - {"sgl-docs:8000"}
    assert "sgl-docs:8000" in {s["metric"]["instance"] for s in _query(live, gauge)}


def test_a_page_without_sglang_families_shows_in_no_panel(live: str) -> None:
    for title, expr in _engine_targets():
        result: list[dict[str, Any]] = _query(live, _fill(expr))
        assert METRICS_OFF not in {s["metric"].get("instance") for s in result}, title


def test_the_variables_list_sglang_models_and_instances(live: str) -> None:
    variables = {v["name"]: v for v in _dashboard()["templating"]["list"]}
    for name in ("model_name", "instance"):
        query = _fill(variables[name]["query"]["query"])
        match = re.fullmatch(r"label_values\((.*), (\w+)\)", query)
        assert match, query
        series = httpx.get(f"{live}/api/v1/series", params={"match[]": match.group(1)}).json()
        values = {s[match.group(2)] for s in series["data"]}
        if name == "instance":
            assert values == set(RELEASES) | set(SIMULATED)
        else:
            assert values and all(values)


def test_the_rules_read_every_sglang_release(live: str) -> None:
    """The signal rules and the SGLang mark hold for every release's page, the
    retractions for those with the counter; the page without SGLang families in none."""
    every = set(RELEASES) | set(SIMULATED)
    want = {
        "phasewatch:sglang_stream:1m": every,
        "phasewatch:vllm_ttft_seconds:p99_1m": every,
        "phasewatch:vllm_itl_seconds:p99_1m": every,
        "phasewatch:vllm_waiting:avg1m": every,
        "phasewatch:vllm_kv_usage:max1m": every,
        "phasewatch:vllm_queue_share:1m": every,
        "phasewatch:vllm_preemptions:increase1m": every - NO_RETRACTION_COUNTER,
    }

    def instances() -> dict[str, set[str]]:
        return {r: {s["metric"]["instance"] for s in _query(live, r)} for r in want}

    wait_for(lambda: instances() == want, 30, "every rule on its SGLang instances", every=0.2)
