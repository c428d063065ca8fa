"""The Kubernetes manifests: kustomize builds, every object validates against the Kubernetes 1.33
schema (kubernetes-validate, strict: no unknown fields), and the Deployment is wired to the
worker as it really behaves (settings names, probe endpoints, graceful shutdown, secrets)."""

from __future__ import annotations

from typing import Any

import kubernetes_validate
import pytest

from workers.settings import Settings
from tests.deploy.conftest import DEPLOY, kustomize_build

K8S_VERSION = "1.33"


@pytest.mark.parametrize("path", ["base", "overlays/example"])
def test_kustomize_build_validates_strictly(path: str) -> None:
    objs = kustomize_build(DEPLOY / "k8s" / path)
    kinds = sorted(o["kind"] for o in objs)
    assert kinds == sorted(["Namespace", "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "ConfigMap",
                            "Deployment", "Service"])
    for obj in objs:
        kubernetes_validate.validate(obj, K8S_VERSION, strict=True)


def _deployment(objs: list[dict[str, Any]]) -> dict[str, Any]:
    return next(o for o in objs if o["kind"] == "Deployment")


def _env(container: dict[str, Any]) -> dict[str, Any]:
    return {e["name"]: e for e in container.get("env") or []}


def test_deployment_env_names_are_worker_settings(rendered_example) -> None:
    container = _deployment(rendered_example)["spec"]["template"]["spec"]["containers"][0]
    known = set()
    for field in Settings.model_fields.values():
        alias = field.validation_alias
        known.update(getattr(alias, "choices", None) or [])
    known |= {"LOCKKEEPER_SSH_KEY", "LOCKKEEPER_SSH_KNOWN_HOSTS"}  # activities/host/factory.py reads them
    unknown = set(_env(container)) - known
    assert not unknown, f"env variables the worker ignores: {unknown}"


def test_deployment_probes_ports_and_shutdown(rendered_example) -> None:
    dep = _deployment(rendered_example)
    pod = dep["spec"]["template"]["spec"]
    container = pod["containers"][0]
    env = _env(container)
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert int(env["LOCKKEEPER_HEALTH_PORT"]["value"]) == ports["health"]
    assert int(env["LOCKKEEPER_METRICS_PORT"]["value"]) == ports["metrics"]
    assert container["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "health"}
    assert container["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "health"}
    assert env["LOCKKEEPER_IN_CLUSTER"]["value"] == "true"
    # The kubelet waits longer than the worker's own graceful shutdown before SIGKILL.
    assert pod["terminationGracePeriodSeconds"] > float(env["LOCKKEEPER_GRACEFUL_SHUTDOWN_SECONDS"]["value"])
    # A rolling update starts the new worker before stopping the old one.
    assert dep["spec"]["strategy"]["rollingUpdate"]["maxUnavailable"] == 0
    assert container["resources"]["requests"] and container["resources"]["limits"]["memory"]


def test_deployment_runs_unprivileged(rendered_example) -> None:
    pod = _deployment(rendered_example)["spec"]["template"]["spec"]
    container = pod["containers"][0]
    assert pod["securityContext"]["runAsNonRoot"] is True and pod["securityContext"]["runAsUser"] != 0
    sc = container["securityContext"]
    assert sc["allowPrivilegeEscalation"] is False and sc["readOnlyRootFilesystem"] is True
    assert sc["capabilities"]["drop"] == ["ALL"]
    assert pod["serviceAccountName"] == next(o for o in rendered_example if o["kind"] == "ServiceAccount")["metadata"]["name"]


def test_secrets_are_referenced_never_inlined(rendered_example) -> None:
    assert not [o for o in rendered_example if o["kind"] == "Secret"]
    pod = _deployment(rendered_example)["spec"]["template"]["spec"]
    container = pod["containers"][0]
    env = _env(container)
    assert env["TEMPORAL_API_KEY"]["valueFrom"]["secretKeyRef"]["name"] == "lockkeeper-temporal"
    volumes = {v["name"]: v for v in pod["volumes"]}
    mounts = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
    assert volumes["temporal-tls"]["secret"]["secretName"] == "lockkeeper-temporal-tls"
    assert volumes["ssh-key"]["secret"]["secretName"] == "lockkeeper-ssh"
    # The example overlay uses mTLS: its cert/key paths are inside the mounted secret.
    assert env["TEMPORAL_TLS_CERT"]["value"].startswith(mounts["temporal-tls"] + "/")
    assert env["TEMPORAL_TLS_KEY"]["value"].startswith(mounts["temporal-tls"] + "/")
    assert env["LOCKKEEPER_SSH_KEY"]["value"].startswith(mounts["ssh-key"] + "/")
    assert volumes["temporal-tls"]["secret"]["optional"] is False
