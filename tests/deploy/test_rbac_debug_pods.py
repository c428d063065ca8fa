"""RBAC of the debug-pod backend (deploy/k8s/components/debug-pods), checked at unit level.

Clustersim has no exec API, so instead of recording, the test runs
:class:`activities.host.debug_pod.DebugPodExecutor` against a fake gateway that logs each verb
it is asked for, maps each to the authorization check the API server makes (the gateway's
``exec_in_pod`` is a websocket exec, a GET upgrade: ``get`` and, since Kubernetes 1.35,
``create`` on ``pods/exec``), and asserts the Role allows each and grants nothing else. The
executor reaches the API only through the gateway, so a new call has no fake method here and
fails this test.
"""

from __future__ import annotations

import asyncio

from typing import Any

import yaml

from activities.host.debug_pod import DebugPodExecutor, sweep_debug_pods
from activities.kube.errors import NotFound
from activities.kube.gateway import ExecOutput
from tests.deploy.conftest import DEPLOY, kustomize_build
from tests.support.rbac import Access, role_allows, unused_grants

COMPONENT = DEPLOY / "k8s" / "components" / "debug-pods"
NAMESPACE = "lockkeeper-debug"


class RecordingGateway:
    """The gateway verbs the debug-pod executor may use, each logged as the access it needs."""

    def __init__(self, log: list[Access]) -> None:
        self.log = log
        self.gone: set[str] = set()

    def create(self, kind: str, body: dict[str, Any], namespace: str | None = None) -> dict[str, Any]:
        assert kind == "Pod" and namespace == NAMESPACE
        self.log.append(Access("", "pods", "create", body["metadata"]["name"]))
        return body

    def get(self, kind: str, name: str, namespace: str | None = None) -> dict[str, Any]:
        assert kind == "Pod" and namespace == NAMESPACE
        self.log.append(Access("", "pods", "get", name))
        if name in self.gone:
            raise NotFound(f"pods {name} not found")
        return {"status": {"phase": "Running"}}

    def exec_in_pod(self, namespace: str, name: str, argv: list[str], **kw: Any) -> ExecOutput:
        assert namespace == NAMESPACE and argv[:2] == ["chroot", "/host"]
        self.log.append(Access("", "pods/exec", "get", name))
        self.log.append(Access("", "pods/exec", "create", name))
        return ExecOutput(exit_code=0, stdout=b"", stderr=b"", timed_out=False)

    def delete(self, kind: str, name: str, namespace: str | None = None, **kw: Any) -> dict[str, Any]:
        assert kind == "Pod" and namespace == NAMESPACE
        self.log.append(Access("", "pods", "delete", name))
        self.gone.add(name)
        return {}

    def list(self, kind: str, namespace: str | None = None, *, label_selector: str | None = None, **kw: Any) -> list[dict[str, Any]]:
        """The end-of-run sweep's list: one leftover pod of the run."""
        assert kind == "Pod" and namespace == NAMESPACE and label_selector
        self.log.append(Access("", "pods", "list", ""))
        return [{"metadata": {"name": "left", "uid": "u1", "labels": {"lockkeeper.io/run-id": "run-1"}}}]


def test_debug_pod_executor_needs_exactly_the_component_role() -> None:
    log: list[Access] = []
    executor = DebugPodExecutor("master-0", namespace=NAMESPACE, gateway_factory=lambda: RecordingGateway(log))
    result = asyncio.run(executor.run(["true"], timeout=5.0))
    assert result.exit_code == 0 and not result.timed_out
    swept = sweep_debug_pods(RecordingGateway(log), "run-1", [NAMESPACE], poll_seconds=0.01)
    assert (swept.deleted, swept.remaining) == ([f"{NAMESPACE}/left"], [])

    role = next(d for d in yaml.safe_load_all((COMPONENT / "role.yaml").read_text()) if d["kind"] == "Role")
    assert {a.verb for a in log if a.resource == "pods"} == {"create", "get", "delete", "list"}
    denied = [a for a in log if not role_allows(role, a)]
    assert not denied, denied
    assert not unused_grants(role, set(log))


def test_component_binds_the_worker_service_account() -> None:
    objs = kustomize_build(COMPONENT.parent.parent / "overlays" / "example")
    sa = next(o for o in objs if o["kind"] == "ServiceAccount")
    docs = list(yaml.safe_load_all((COMPONENT / "role.yaml").read_text()))
    binding = next(d for d in docs if d["kind"] == "RoleBinding")
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": sa["metadata"]["name"],
                                    "namespace": sa["metadata"]["namespace"]}]


def test_overlay_with_the_component_builds_and_validates(tmp_path) -> None:
    import os

    import kubernetes_validate

    # kustomize wants relative paths to bases and components.
    rel = lambda p: os.path.relpath(p, tmp_path)  # noqa: E731
    (tmp_path / "kustomization.yaml").write_text(yaml.safe_dump({
        "apiVersion": "kustomize.config.k8s.io/v1beta1",
        "kind": "Kustomization",
        "resources": [rel(DEPLOY / "k8s" / "base")],
        "components": [rel(COMPONENT)],
    }))
    objs = kustomize_build(tmp_path)
    assert {("Role", NAMESPACE), ("RoleBinding", NAMESPACE)} <= {(o["kind"], o["metadata"].get("namespace")) for o in objs}
    for obj in objs:
        kubernetes_validate.validate(obj, "1.33", strict=True)
