"""deploy/kubernetes is valid Kubernetes, offline, and holds together as phasewatch needs.

Each object is checked against the API schemas PyPI ``kubernetes-validate`` ships (strict:
an unknown field is an error; no cluster, no network); then what the schemas cannot
know: both configurations load, the Deployment reads the one it mounts, the token comes
from a Secret, the store lies on the volume, and the Service reaches the pod inside the
cluster only.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

from app.config import load_settings

MANIFEST = Path(__file__).resolve().parents[1] / "deploy" / "kubernetes" / "phasewatch.yaml"


def objects() -> dict[str, dict[str, Any]]:
    return {d["kind"]: d for d in yaml.safe_load_all(MANIFEST.read_text()) if d}


@pytest.mark.parametrize("kind", ["ConfigMap", "PersistentVolumeClaim", "Deployment", "Service"])
def test_every_object_is_valid_against_the_kubernetes_schema(kind: str) -> None:
    version = kubernetes_validate.latest_version()
    kubernetes_validate.validate(objects()[kind], version, strict=True)


def test_a_wrong_field_would_be_caught() -> None:
    deployment = objects()["Deployment"]
    deployment["spec"]["template"]["spec"]["containers"][0]["commands"] = ["serve"]
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(deployment, kubernetes_validate.latest_version(), strict=True)


def test_both_configurations_load_one_from_http_sd_one_from_prometheus(tmp_path: Path) -> None:
    data = objects()["ConfigMap"]["data"]
    loaded = {}
    for key, text in data.items():
        path = tmp_path / key
        path.write_text(text)
        loaded[key] = load_settings(path)
    assert loaded["phasewatch.yaml"].http_sd and not loaded["phasewatch.yaml"].targets
    assert loaded["from-prometheus.yaml"].source.kind == "prometheus"
    assert "app_kubernetes_io_name" in loaded["from-prometheus.yaml"].source.selector


def test_the_deployment_reads_its_configmap_keeps_its_store_and_takes_the_token_from_a_secret(
    tmp_path: Path,
) -> None:
    found = objects()
    pod = found["Deployment"]["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    mounts = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
    volumes = {v["name"]: v for v in pod["volumes"]}
    config_path = Path(container["args"][container["args"].index("--config") + 1])
    assert volumes["config"]["configMap"]["name"] == found["ConfigMap"]["metadata"]["name"]
    assert str(config_path.parent) == mounts["config"]
    assert config_path.name in found["ConfigMap"]["data"]
    text = found["ConfigMap"]["data"][config_path.name]
    (tmp_path / "c.yaml").write_text(text)
    store = Path(load_settings(tmp_path / "c.yaml").storage.path)
    assert str(store.parent) == mounts["data"]
    assert (
        volumes["data"]["persistentVolumeClaim"]["claimName"]
        == (found["PersistentVolumeClaim"]["metadata"]["name"])
    )
    (token,) = [e for e in container["env"] if e["name"] == "PHASEWATCH_API_TOKEN"]
    assert token["valueFrom"]["secretKeyRef"]["key"] == "api-token"
    assert "api_token" not in text  # never in the ConfigMap
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert container["securityContext"]["readOnlyRootFilesystem"] is True


def test_the_service_reaches_the_pod_inside_the_cluster_only() -> None:
    found = objects()
    service = found["Service"]["spec"]
    pod = found["Deployment"]["spec"]["template"]
    assert service.get("type", "ClusterIP") == "ClusterIP"
    assert service["selector"].items() <= pod["metadata"]["labels"].items()
    ports = {p["name"] for p in pod["spec"]["containers"][0]["ports"]}
    assert {p["targetPort"] for p in service["ports"]} <= ports
