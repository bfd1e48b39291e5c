"""deploy/kubernetes/ validates against the Kubernetes API's schemas (kubernetes-validate,
which ships them, so this runs offline) and KEDA's ScaledObject schema, and holds
together: triggers watch the queues their workers consume, disruption budgets and
services select real pods, shutdown grace covers a page's time limit, and the shared
settings pass pagemill's own start-up checks."""

from __future__ import annotations

import json
import os
import shlex
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import pytest
import yaml

from pagemill.settings import Settings

ROOT = Path(__file__).resolve().parents[2]
MANIFESTS = ROOT / "deploy" / "kubernetes"
KEDA_SCHEMA = json.loads((Path(__file__).parent / "keda_scaledobject.schema.json").read_text())
# The oldest Kubernetes release the manifests target (policy/v1 PDBs and the rest).
KUBERNETES_VERSION = "1.29.0"
# After the last page's time limit: recording it, acknowledging, deregistering.
SHUTDOWN_MARGIN_S = 30


def documents() -> list[dict[str, Any]]:
    found = []
    for path in sorted(MANIFESTS.glob("*.yaml")):
        found += [doc for doc in yaml.safe_load_all(path.read_text()) if doc is not None]
    return found


def of_kind(kind: str) -> dict[str, dict[str, Any]]:
    return {doc["metadata"]["name"]: doc for doc in documents() if doc["kind"] == kind}


def container(deployment: dict[str, Any]) -> dict[str, Any]:
    [only] = deployment["spec"]["template"]["spec"]["containers"]
    return dict(only)


def consumed_stages(deployment: dict[str, Any]) -> set[str]:
    command = container(deployment)["command"]
    return set(command[command.index("--queues") + 1].split(","))


@pytest.mark.parametrize(
    "doc", documents(), ids=lambda doc: f"{doc['kind']}/{doc.get('metadata', {}).get('name', '')}"
)
def test_each_manifest_validates_against_its_schema(doc: dict[str, Any]) -> None:
    if doc["apiVersion"].startswith("keda.sh/"):
        jsonschema.validate(doc, KEDA_SCHEMA)
    elif doc["kind"] == "Kustomization":
        listed = set(doc["resources"])
        on_disk = {path.name for path in MANIFESTS.glob("*.yaml")} - {"kustomization.yaml"}
        assert listed == on_disk
    else:
        kubernetes_validate.validate(doc, KUBERNETES_VERSION, strict=True)


def test_the_validators_refuse_broken_manifests() -> None:
    deployment = of_kind("Deployment")["pagemill-worker-cpu"]
    broken = json.loads(json.dumps(deployment))
    broken["spec"]["template"]["spec"]["terminationGracePeriod"] = 630  # a misspelt field
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(broken, KUBERNETES_VERSION, strict=True)
    scaled = json.loads(json.dumps(of_kind("ScaledObject")["pagemill-worker-cpu"]))
    scaled["spec"]["triggers"][0]["metadata"]["listLenght"] = "20"
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(scaled, KEDA_SCHEMA)
    del scaled["spec"]["scaleTargetRef"]
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(scaled, KEDA_SCHEMA)


def test_each_worker_kind_scales_on_the_queues_it_consumes() -> None:
    deployments = of_kind("Deployment")
    scaled = of_kind("ScaledObject")
    targets = {doc["spec"]["scaleTargetRef"]["name"] for doc in scaled.values()}
    assert targets == {"pagemill-worker-cpu", "pagemill-worker-gpu"}
    config = of_kind("ConfigMap")["pagemill-config"]["data"]
    broker = config["PAGEMILL_BROKER_URL"]
    for doc in scaled.values():
        deployment = deployments[doc["spec"]["scaleTargetRef"]["name"]]
        watched = set()
        for trigger in doc["spec"]["triggers"]:
            assert trigger["type"] == "redis"
            metadata = trigger["metadata"]
            # The trigger reads the broker the workers consume from.
            assert broker == f"redis://{metadata['address']}/{metadata['databaseIndex']}"
            watched.add(metadata["listName"])
        assert "ocr" in watched or "ocr-gpu" in watched
        assert watched <= consumed_stages(deployment)


def test_gpu_workers_hold_one_gpu_each_and_every_container_requests_resources() -> None:
    deployments = of_kind("Deployment")
    gpu = container(deployments["pagemill-worker-gpu"])
    assert gpu["resources"]["limits"]["nvidia.com/gpu"] == "1"
    assert gpu["resources"]["requests"]["nvidia.com/gpu"] == "1"
    env = {item["name"]: item.get("value") for item in gpu["env"]}
    assert env["PAGEMILL_DEVICE_COUNT"] == "1"
    assert "--pool" in gpu["command"] and "threads" in gpu["command"]
    for name, deployment in deployments.items():
        requests = container(deployment)["resources"]["requests"]
        assert {"cpu", "memory"} <= set(requests), name
        if name != "pagemill-worker-gpu":
            assert "nvidia.com/gpu" not in container(deployment)["resources"].get("limits", {})


def test_warm_shutdown_fits_in_the_termination_grace_period(monkeypatch: Any) -> None:
    settings = deployed_settings(monkeypatch)
    for name in ("pagemill-worker-cpu", "pagemill-worker-gpu"):
        spec = of_kind("Deployment")[name]["spec"]["template"]["spec"]
        # SIGTERM lets running pages finish (each within the time limit) before the kill.
        assert spec["terminationGracePeriodSeconds"] >= (
            settings.task_time_limit_s + SHUTDOWN_MARGIN_S
        ), name
    # A pod that stops for good within its grace period leaves no lease running long.
    assert settings.page_lease_s > settings.task_time_limit_s


def test_disruption_budgets_and_services_select_real_pods() -> None:
    pods = [doc["spec"]["template"]["metadata"]["labels"] for doc in of_kind("Deployment").values()]
    budgets = of_kind("PodDisruptionBudget")
    assert set(budgets) >= {"pagemill-api", "pagemill-worker-cpu", "pagemill-worker-gpu"}
    selectors = [doc["spec"]["selector"]["matchLabels"] for doc in budgets.values()]
    selectors += [doc["spec"]["selector"] for doc in of_kind("Service").values()]
    for selector in selectors:
        matching = [labels for labels in pods if selector.items() <= labels.items()]
        assert len(matching) == 1, selector


def test_the_shared_settings_pass_pagemills_start_up_checks(monkeypatch: Any) -> None:
    settings = deployed_settings(monkeypatch)
    assert settings.environment == "production"
    for deployment in of_kind("Deployment").values():
        command = container(deployment)["command"]
        assert command[0] == "pagemill", shlex.join(command)


def deployed_settings(monkeypatch: Any) -> Settings:
    """Settings as a pod builds them: the ConfigMap, a container's own variables and
    the secrets (placeholders here), nothing from this test's environment."""
    for name in list(os.environ):
        if name.startswith("PAGEMILL_"):
            monkeypatch.delenv(name)
    data = of_kind("ConfigMap")["pagemill-config"]["data"]
    secrets = {
        "PAGEMILL_DATABASE_URL": "postgresql+psycopg://pagemill:secret@postgres:5432/pagemill",
        "PAGEMILL_S3_ACCESS_KEY": "access",
        "PAGEMILL_S3_SECRET_KEY": "a-production-secret",
    }
    for name, value in {**data, **secrets}.items():
        monkeypatch.setenv(name, value)
    return Settings(_env_file=None)  # type: ignore[call-arg]
