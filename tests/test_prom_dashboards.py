"""The Grafana dashboard and the PromQL rules in dashboards/, on a real Prometheus.

A simulated vLLM 0.10 page (old and new names side by side: the case that breaks naive
``{__name__=~…}`` rules with "vector cannot contain metrics with the same labelset") and
a 0.33 page stored with ``vllm_`` names are backfilled with timestamps up to now, beside
a simulated P/D fleet (two prefill and two decode instances with the NIXL families, its
KV links slowed to TCP), a real Prometheus evaluates the rule file on them, and every
dashboard query is run through its query API with the dashboard variables filled in.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from app.sim.pd_record import record_pd
from app.sim.record import record
from tests.test_prom_support import backfill, prometheus, to_openmetrics
from tests.waiting import wait_for

ROOT = Path(__file__).resolve().parent.parent
DASHBOARD = ROOT / "dashboards" / "grafana" / "phasewatch-vllm.json"
RULES = ROOT / "dashboards" / "prometheus" / "phasewatch-rules.yml"
VARIABLES = {
    "$model_name": ".*",
    "$instance": ".*",
    "$__rate_interval": "1m",
    "$ttft_slo": "2",
    "$itl_slo": "0.1",
    "$kv_high": "0.9",
}
PD_INSTANCES = {f"{role}-{i}:8000" for role in ("prefill", "decode") for i in (0, 1)}
PD_MODEL = "pd-llama"


def _dashboard() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(DASHBOARD.read_text())
    return data


def _targets() -> list[tuple[str, str]]:
    out = []
    for panel in _dashboard()["panels"]:
        for t in panel.get("targets", []):
            out.append((panel["title"], t["expr"]))
    return out


def _fill(expr: str) -> str:
    for name in sorted(VARIABLES, key=len, reverse=True):
        expr = expr.replace(name, VARIABLES[name])
    assert "$" not in expr, expr
    return expr


def test_dashboard_is_importable_as_is() -> None:
    d = _dashboard()
    assert d["uid"] and d["title"] and "__inputs" not in d
    names = [v["name"] for v in d["templating"]["list"]]
    assert names[:3] == ["datasource", "model_name", "instance"]
    ids = [p["id"] for p in d["panels"]]
    assert len(ids) == len(set(ids))
    for panel in d["panels"]:
        assert {"x", "y", "w", "h"} <= set(panel["gridPos"])
        if panel["type"] == "row":
            continue
        assert panel["datasource"] == {"type": "prometheus", "uid": "${datasource}"}
        assert panel["targets"] and all(t["refId"] and t["expr"] for t in panel["targets"])
    text = DASHBOARD.read_text()
    for signal in (
        "time_to_first_token_seconds",
        "inter_token_latency_seconds",
        "num_requests_running",
        "num_requests_waiting",
        "kv_cache_usage_perc",
        "phasewatch_diagnosis",
    ):
        assert signal in text
    assert "vector($ttft_slo)" in text and "vector($itl_slo)" in text


def test_the_class_timeline_names_every_class_of_the_vocabulary() -> None:
    """The timeline panel codes each class as a number and maps it back to its name: every
    class of ``app.diagnose.classes`` has its code in the query and its name in the map."""
    from app.diagnose.classes import DiagnosisClass

    (panel,) = [p for p in _dashboard()["panels"] if "phasewatch_diagnosis{class=" in str(p)]
    expr = panel["targets"][0]["expr"]
    (mapping,) = panel["fieldConfig"]["defaults"]["mappings"]
    named = {int(k): v["text"] for k, v in mapping["options"].items()}
    for cls in DiagnosisClass:
        code = [k for k, v in named.items() if v == cls.value]
        assert code, f"{cls.value} has no name in the timeline's value map"
        assert (
            f'{code[0]} * sum by (target, model_name) (phasewatch_diagnosis{{class="{cls.value}"'
            in expr
            or (code[0] == 0 and f'(phasewatch_diagnosis{{class="{cls.value}"' in expr)
        ), cls.value


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    tmp = tmp_path_factory.mktemp("dash")
    now = float(int(time.time()))
    stores = (("0.10", "vllm:", "sim-010:8000"), ("0.33", "vllm_", "sim-om:8000"))
    for version, spelling, instance in stores:
        rec = record(
            "kv_pressure",
            tmp / version,
            duration=180,
            seed=2,
            version=version,
            start_unix=now - 180,
        )
        om = tmp / f"{version}.om"
        to_openmetrics(rec, om, labels={"instance": instance, "job": "vllm"}, spelling=spelling)
        backfill(om, tmp / "data")
    # A P/D fleet whose KV links are slow from the start: every P/D panel has data.
    pd = record_pd(
        "pd_slow_transfer",
        tmp / "pd",
        duration=180,
        seed=1,
        overrides={
            "engine.served_model_name": PD_MODEL,
            "pd.transfer.bandwidth_gb_s": 1.2,
            "pd.transfer.failure_prob": 0.05,
        },
        start_unix=now - 180,
    )
    for replica in sorted(p for p in pd.iterdir() if p.is_dir()):
        om = tmp / f"pd-{replica.name}.om"
        to_openmetrics(replica, om, labels={"instance": f"{replica.name}:8000", "job": "vllm"})
        backfill(om, tmp / "data")
    with prometheus(tmp, data=tmp / "data", rule_files=[str(RULES)]) as url:

        def all_evaluated() -> bool:
            groups = httpx.get(f"{url}/api/v1/rules").json()["data"]["groups"]
            rules = [r for g in groups for r in g["rules"]]
            return bool(rules) and all(r.get("health") != "unknown" for r in rules)

        wait_for(all_evaluated, 30, "every rule evaluated at least once", every=0.2)
        yield url


def _query(url: str, expr: str) -> list[dict[str, Any]]:
    body = httpx.post(f"{url}/api/v1/query", data={"query": expr}).json()
    assert body["status"] == "success", (expr, body)
    result: list[dict[str, Any]] = body["data"]["result"]
    return result


def test_rules_evaluate_without_errors_on_old_and_new_names(live: str) -> None:
    groups = httpx.get(f"{live}/api/v1/rules").json()["data"]["groups"]
    for rule in (r for g in groups for r in g["rules"]):
        assert rule["health"] == "ok", (rule["name"], rule.get("lastError"))
    for name in (
        "phasewatch:vllm_itl_seconds:p99_1m",
        "phasewatch:vllm_kv_usage:max1m",
        "phasewatch:vllm_waiting:avg1m",
    ):
        instances = {s["metric"]["instance"] for s in _query(live, name)}
        assert instances == {"sim-010:8000", "sim-om:8000"} | PD_INSTANCES, name
    # The P/D rules: roles from the families on the page, the decode side's transfers.
    decode = {s["metric"]["instance"] for s in _query(live, "phasewatch:vllm_pd_decode:1m")}
    prefill = {s["metric"]["instance"] for s in _query(live, "phasewatch:vllm_pd_prefill:1m")}
    assert decode == {"decode-0:8000", "decode-1:8000"}
    assert prefill == {"prefill-0:8000", "prefill-1:8000"}
    means = _query(live, "phasewatch:vllm_kv_xfer_seconds:mean1m")
    # 0 / 0 on the prefill instances: NIXL counts a pull on the decode side.
    assert {s["metric"]["instance"] for s in means if s["value"][1] != "NaN"} == decode
    estimate = _query(live, "phasewatch:vllm_pd_client_ttft_seconds:estimate1m")
    assert [s["metric"]["model_name"] for s in estimate] == [PD_MODEL]
    # Rule groups run independently: the alert group sees the classes a tick later.

    def kv_alerts() -> list[dict[str, Any]]:
        alerts = _query(live, 'ALERTS{alertstate=~"pending|firing"}')
        return [s for s in alerts if s["metric"]["alertname"] == "VllmKVCachePressure"]

    kv = wait_for(kv_alerts, 15, "VllmKVCachePressure pending or firing", every=0.2)
    assert {s["metric"]["instance"] for s in kv} == {"sim-010:8000", "sim-om:8000"}
    # The P/D fleet: its decode instances wait on slow, failing transfers.
    alerts = wait_for(
        lambda: _query(live, 'ALERTS{alertname="VllmKVTransferBound"}'),
        15,
        "VllmKVTransferBound pending or firing",
        every=0.2,
    )
    assert {s["metric"]["instance"] for s in alerts} <= PD_INSTANCES
    assert {s["metric"]["instance"] for s in alerts} & {"decode-0:8000", "decode-1:8000"}


def test_every_dashboard_query_runs_and_the_vllm_panels_have_data(live: str) -> None:
    for title, expr in _targets():
        result = _query(live, _fill(expr))
        if "phasewatch_" in expr or re.fullmatch(r"vector\(.*\)", expr):
            continue  # phasewatch's own metrics are not in this Prometheus
        if title.startswith("P/D:"):
            assert result, (title, expr)
            for s in result:  # per instance, or per model (the pools)
                where = s["metric"].get("instance") or s["metric"].get("model_name")
                assert where in PD_INSTANCES | {PD_MODEL, "sim-om:8000"}, (title, s)
            continue
        instances = {s["metric"].get("instance") for s in result}
        assert instances == {"sim-010:8000", "sim-om:8000"} | PD_INSTANCES, (title, expr, result)
