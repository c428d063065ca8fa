"""The installed `kubernetes` Python client (37, pydantic-based) against the simulated API server.

The client is synchronous (urllib3); calls run in a thread so the server keeps serving on the loop.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any, TypeVar

import pytest
from kubernetes import client, config, watch
from kubernetes.client.exceptions import ApiException

from clustersim.sim import ClusterSim

T = TypeVar("T")


@pytest.fixture
def core(sim: ClusterSim) -> client.CoreV1Api:
    api = config.new_client_from_config(config_file=str(sim.kubeconfig_path))
    return client.CoreV1Api(api)


async def call(fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    return await asyncio.to_thread(fn, *args, **kwargs)


async def test_label_and_field_selectors(sim: ClusterSim, core: client.CoreV1Api) -> None:
    pods = await call(core.list_pod_for_all_namespaces, field_selector="spec.nodeName=node1")
    assert sorted(p.metadata.name for p in pods.items) == ["agent-node1", "web-1", "web-2"]
    pods = await call(core.list_namespaced_pod, "app", label_selector="app in (web,db),app!=web")
    assert [p.metadata.name for p in pods.items] == ["db-1"]
    pods = await call(core.list_namespaced_pod, "app", label_selector="!app")
    assert pods.items == []
    nodes = await call(core.list_node, field_selector="metadata.name=node2,metadata.name=node2")
    assert [n.metadata.name for n in nodes.items] == ["node2"]
    assert nodes.items[0].status.node_info.kubelet_version == "v1.30.0"
    assert int(nodes.metadata.resource_version) == sim.store.resource_version


async def test_watch_from_resource_version(sim: ClusterSim, core: client.CoreV1Api) -> None:
    rv = (await call(core.list_node)).metadata.resource_version
    sim.store.mutate("nodes", "node1", None, lambda n: n["metadata"]["labels"].update(w="1"))
    sim.store.create("nodes", {**sim.store.get("nodes", "node3"), "metadata": {"name": "node4"}})

    def collect() -> list[tuple[str, str]]:
        seen = []
        for ev in watch.Watch().stream(core.list_node, resource_version=rv, allow_watch_bookmarks=True,
                                       timeout_seconds=1):
            obj = ev["object"]
            name = obj["metadata"].get("name", "") if isinstance(obj, dict) else obj.metadata.name
            seen.append((ev["type"], name))
        return seen

    seen = await call(collect)
    assert seen[:2] == [("MODIFIED", "node1"), ("ADDED", "node4")]
    assert seen[-1][0] == "BOOKMARK"


async def test_stale_patch_conflicts(sim: ClusterSim, core: client.CoreV1Api) -> None:
    node = await call(core.read_node, "node1")
    stale = node.metadata.resource_version
    await call(core.patch_node, "node1", {"metadata": {"labels": {"a": "1"}}})
    with pytest.raises(ApiException) as exc:
        await call(core.patch_node, "node1", {"metadata": {"resourceVersion": stale, "labels": {"a": "2"}}})
    assert exc.value.status == 409
    body = json.loads(exc.value.body)
    assert body["reason"] == "Conflict"
    assert body["message"] == ('Operation cannot be fulfilled on nodes "node1": the object has been modified; '
                               "please apply your changes to the latest version and try again")
    assert sim.store.get("nodes", "node1")["metadata"]["labels"]["a"] == "1"


async def test_eviction_blocked_by_pdb_exact_body(sim: ClusterSim, core: client.CoreV1Api) -> None:
    body = client.V1Eviction(metadata=client.V1ObjectMeta(name="db-1", namespace="app"),
                             delete_options=client.V1DeleteOptions(grace_period_seconds=5))
    with pytest.raises(ApiException) as exc:
        await call(core.create_namespaced_pod_eviction, "db-1", "app", body)
    assert exc.value.status == 429
    assert "Retry-After" not in (exc.value.headers or {})
    assert json.loads(exc.value.body) == {
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": "Cannot evict pod as it would violate the pod's disruption budget.",
        "reason": "TooManyRequests", "code": 429,
        "details": {"causes": [{"reason": "DisruptionBudget",
                                "message": "The disruption budget db-pdb needs 1 healthy pods and has 1 currently"}]}}

    # An allowed eviction: 201, the PDB budget is consumed, the pod terminates gracefully.
    sim.store.mutate("poddisruptionbudgets.policy", "db-pdb", "app",
                     lambda p: p["status"].update(disruptionsAllowed=1), subresource="status")
    await call(core.create_namespaced_pod_eviction, "db-1", "app", body)
    pdb = sim.store.get("poddisruptionbudgets.policy", "db-pdb", "app")
    assert pdb["status"]["disruptionsAllowed"] == 0 and "db-1" in pdb["status"]["disruptedPods"]
    for _ in range(100):
        if sim.store.try_get("pods", "db-1", "app") is None:
            break
        await asyncio.sleep(0.02)
    assert sim.store.try_get("pods", "db-1", "app") is None


async def test_not_found_status_shape(sim: ClusterSim, core: client.CoreV1Api) -> None:
    with pytest.raises(ApiException) as exc:
        await call(core.read_namespaced_pod, "nope", "app")
    assert exc.value.status == 404
    assert json.loads(exc.value.body) == {
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": 'pods "nope" not found', "reason": "NotFound", "code": 404,
        "details": {"name": "nope", "kind": "pods"}}


async def test_too_old_resource_version_is_410(sim: ClusterSim, core: client.CoreV1Api) -> None:
    def stream(rv: str) -> list[Any]:
        return list(watch.Watch().stream(core.list_node, resource_version=rv, timeout_seconds=1))

    sim.faults.expire_next_watch()
    with pytest.raises(ApiException) as exc:
        await call(stream, "1")
    assert exc.value.status == 410
    assert "too old resource version" in str(exc.value.reason)


async def test_graceful_pod_delete_returns_pod(sim: ClusterSim, core: client.CoreV1Api) -> None:
    pod = await call(core.delete_namespaced_pod, "web-1", "app")
    assert pod.metadata.deletion_timestamp is not None
    assert pod.metadata.deletion_grace_period_seconds == 30
    for _ in range(100):
        if sim.store.try_get("pods", "web-1", "app") is None:
            break
        await asyncio.sleep(0.02)
    assert sim.store.try_get("pods", "web-1", "app") is None
