"""RBAC of the debug-pod backend (deploy/k8s/components/debug-pods), checked at unit level.

Clustersim has no exec API, so instead of recording, the test runs
:class:`activities.nodecmd.DebugPodExecutor` against a fake ``CoreV1Api`` and a fake
``kubernetes.stream.stream`` that log each API operation it performs, maps each to the
authorization check the API server makes (a websocket exec is a GET upgrade: ``get`` and, since
Kubernetes 1.35, ``create`` on ``pods/exec``), and asserts the Role allows each and grants
nothing else. A new call in the executor has no fake method and fails this test.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import yaml

from activities import nodecmd
from tests.deploy.conftest import DEPLOY, kustomize_build
from tests.deploy.rbac import Access, role_allows, unused_grants

COMPONENT = DEPLOY / "k8s" / "components" / "debug-pods"
NAMESPACE = "lockkeeper-debug"


class _FakeExec:
    returncode = 0

    def __init__(self) -> None:
        self._open = True

    def is_open(self) -> bool:
        return self._open

    def update(self, timeout: float = 0) -> None:
        self._open = False

    def peek_stdout(self) -> bool:
        return False

    def peek_stderr(self) -> bool:
        return False

    def write_stdin(self, data: str) -> None:
        pass

    def close(self) -> None:
        self._open = False


def _recording_api(log: list[Access]) -> type:
    class FakeCoreV1Api:
        def __init__(self, api_client: Any) -> None:
            pass

        def create_namespaced_pod(self, namespace: str, body: dict) -> dict:
            assert namespace == NAMESPACE
            log.append(Access("", "pods", "create", body["metadata"]["name"]))
            return body

        def read_namespaced_pod(self, name: str, namespace: str) -> Any:
            log.append(Access("", "pods", "get", name))
            return SimpleNamespace(status=SimpleNamespace(phase="Running"))

        def connect_get_namespaced_pod_exec(self, *a: Any, **kw: Any) -> None:
            raise AssertionError("exec goes through kubernetes.stream.stream")

        def delete_namespaced_pod(self, name: str, namespace: str, **kw: Any) -> None:
            log.append(Access("", "pods", "delete", name))

    return FakeCoreV1Api


def test_debug_pod_executor_needs_exactly_the_component_role(monkeypatch) -> None:
    import kubernetes.client
    import kubernetes.stream

    log: list[Access] = []

    def fake_stream(fn: Any, name: str, namespace: str, **kw: Any) -> _FakeExec:
        assert fn.__name__ == "connect_get_namespaced_pod_exec" and namespace == NAMESPACE
        log.append(Access("", "pods/exec", "get", name))
        log.append(Access("", "pods/exec", "create", name))
        return _FakeExec()

    monkeypatch.setattr(kubernetes.client, "CoreV1Api", _recording_api(log))
    monkeypatch.setattr(kubernetes.stream, "stream", fake_stream)
    executor = nodecmd.DebugPodExecutor("master-0", namespace=NAMESPACE, api_client_factory=lambda: object())
    code, _, _, timed_out = executor._run_sync(["true"], 5.0, None, {})
    assert code == 0 and not timed_out

    role = next(d for d in yaml.safe_load_all((COMPONENT / "role.yaml").read_text()) if d["kind"] == "Role")
    assert {a.verb for a in log if a.resource == "pods"} == {"create", "get", "delete"}
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
