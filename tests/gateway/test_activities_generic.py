"""The gateway's generic verbs and the generic node and record activities, against clustersim
over real HTTP (the real ``kubernetes`` client underneath the gateway)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest
from temporalio.exceptions import ApplicationError

from activities.cluster.models import (
    CordonInput,
    DeleteNodeInput,
    FieldRecord,
    ObjectRef,
    PatchObjectInput,
    RestoreFieldsInput,
    SetNodeLabelsInput,
    SnapshotFieldsInput,
    WaitNodeReadyInput,
)
from activities.kube.errors import Invalid, NotFound
from activities.kube.resources import RESOURCES, resource
from tests.gateway.test_activities_cluster import Harness, _harness

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
async def static() -> AsyncIterator[Harness]:
    """R1 without agents: nothing changes unless the test does it."""
    async for h in _harness("r1-ovn-interrupted", start_agents=False):
        yield h


def _daemonset(h: Harness) -> dict[str, Any]:
    return h.sim.store.list("daemonsets.apps")[0]


def _ref(ds: dict[str, Any]) -> ObjectRef:
    return ObjectRef(kind="DaemonSet", name=ds["metadata"]["name"], namespace=ds["metadata"]["namespace"])


def test_resource_table_builds_rest_paths() -> None:
    assert resource("Pod").path("ns", "p", "eviction") == "/api/v1/namespaces/ns/pods/p/eviction"
    assert resource("Node").path(None, "n") == "/api/v1/nodes/n"
    assert resource("DeploymentConfig").path("app") == "/apis/apps.openshift.io/v1/namespaces/app/deploymentconfigs"
    assert resource("ClusterNetwork").path(None, "default") == "/apis/network.openshift.io/v1/clusternetworks/default"
    assert resource("Network").group == "config.openshift.io"
    assert RESOURCES["Network.operator.openshift.io"].group == "operator.openshift.io"
    with pytest.raises(ValueError):
        resource("Pod").path(None, "p")
    with pytest.raises(KeyError, match="unknown kind"):
        resource("Widget")


async def test_generic_verbs_on_a_daemonset(static: Harness) -> None:
    h, gw = static, static.gateway
    ds = _daemonset(h)
    ns, name = ds["metadata"]["namespace"], ds["metadata"]["name"]
    got = await asyncio.to_thread(gw.get, "DaemonSet", name, ns)
    assert got["metadata"]["uid"] == ds["metadata"]["uid"]
    listed, rv = await asyncio.to_thread(gw.list_with_rv, "DaemonSet")
    assert name in {d["metadata"]["name"] for d in listed} and rv
    merged = await asyncio.to_thread(gw.patch, "DaemonSet", name, {"metadata": {"labels": {"a": "1"}}}, ns)
    assert merged["metadata"]["labels"]["a"] == "1"
    strategic = await asyncio.to_thread(
        gw.patch, "DaemonSet", name, {"metadata": {"labels": {"b": "2"}}}, ns, patch_type="strategic"
    )
    assert strategic["metadata"]["labels"]["b"] == "2"
    json_ops = [{"op": "test", "path": "/metadata/labels/a", "value": "1"}, {"op": "remove", "path": "/metadata/labels/a"}]
    after = await asyncio.to_thread(gw.patch, "DaemonSet", name, json_ops, ns, patch_type="json")
    assert "a" not in after["metadata"]["labels"]
    with pytest.raises(Invalid):  # the failed test op refuses the whole patch
        await asyncio.to_thread(gw.patch, "DaemonSet", name, json_ops, ns, patch_type="json")
    with pytest.raises(NotFound):
        await asyncio.to_thread(gw.get, "DaemonSet", "no-such", ns)


async def test_records_snapshot_patch_restore_exactly(static: Harness) -> None:
    h = static
    ds = _daemonset(h)
    ref = _ref(ds)
    selector_path = "/spec/template/spec/nodeSelector"
    marker = "/metadata/annotations/lockkeeper.io~1test"
    original_selector = ds["spec"]["template"]["spec"].get("nodeSelector")
    record = await h.run(h.acts.snapshot_fields, SnapshotFieldsInput(ref=ref, paths=[selector_path, marker]))
    assert isinstance(record, FieldRecord) and not record.value(marker).present
    ops = [
        {"op": "add", "path": selector_path, "value": {"node-role.kubernetes.io/infra": ""}},
        {"op": "add", "path": "/metadata/annotations", "value": {**(ds["metadata"].get("annotations") or {}), "lockkeeper.io/test": "x"}},
    ]
    changed = await h.run(h.acts.patch_object, PatchObjectInput(ref=ref, ops=ops, record=record))
    assert changed.changed
    again = await h.run(h.acts.patch_object, PatchObjectInput(ref=ref, ops=ops, record=record))
    assert not again.changed  # a retry after success sends nothing
    # An unrelated change elsewhere in the object does not stand in the way of the restore.
    h.sim.store.mutate("daemonsets.apps", ref.name, ref.namespace, lambda o: o["metadata"]["labels"].update(other="y"))
    expected = {selector_path: {"node-role.kubernetes.io/infra": ""}, marker: "x"}
    restored = await h.run(h.acts.restore_fields, RestoreFieldsInput(record=record, expected=expected))
    assert sorted(restored.restored) == sorted([selector_path, marker])
    stored = h.sim.store.get("daemonsets.apps", ref.name, ref.namespace)
    assert stored["spec"]["template"]["spec"].get("nodeSelector") == original_selector
    assert "lockkeeper.io/test" not in (stored["metadata"].get("annotations") or {})
    assert stored["metadata"]["labels"]["other"] == "y"
    noop = await h.run(h.acts.restore_fields, RestoreFieldsInput(record=record, expected=expected))
    assert noop.restored == [] and sorted(noop.unchanged) == sorted([selector_path, marker])


async def test_records_remove_a_field_once_and_a_retry_sends_nothing(static: Harness) -> None:
    """A ``remove`` (the kit's REMOVE, e.g. the SDN DaemonSet's image triggers annotation) is done
    once; the same patch retried after success, or removing a field that was never there, changes
    nothing and sends no write (RFC 6902 alone would refuse the whole patch)."""
    h = static
    ref = _ref(_daemonset(h))
    marker = "/metadata/annotations/lockkeeper.io~1gone"
    h.sim.store.mutate("daemonsets.apps", ref.name, ref.namespace,
                       lambda o: o["metadata"].setdefault("annotations", {}).update({"lockkeeper.io/gone": "x"}))
    record = await h.run(h.acts.snapshot_fields, SnapshotFieldsInput(ref=ref, paths=[marker]))
    ops = [{"op": "remove", "path": marker}]
    h.sim.requests.clear()
    assert (await h.run(h.acts.patch_object, PatchObjectInput(ref=ref, ops=ops, record=record))).changed
    assert len(h.writes()) == 1
    again = await h.run(h.acts.patch_object, PatchObjectInput(ref=ref, ops=ops, record=record))
    never = await h.run(h.acts.patch_object, PatchObjectInput(ref=ref, ops=[{"op": "remove", "path": "/metadata/annotations/x~1y"}]))
    assert not again.changed and not never.changed and len(h.writes()) == 1
    assert "lockkeeper.io/gone" not in (h.sim.store.get("daemonsets.apps", ref.name, ref.namespace)["metadata"].get("annotations") or {})


async def test_records_refuse_when_changed_since(static: Harness) -> None:
    h = static
    ref = _ref(_daemonset(h))
    path = "/spec/template/spec/nodeSelector"
    record = await h.run(h.acts.snapshot_fields, SnapshotFieldsInput(ref=ref, paths=[path]))
    ours = {"node-role.kubernetes.io/infra": ""}
    await h.run(h.acts.patch_object, PatchObjectInput(ref=ref, ops=[{"op": "add", "path": path, "value": ours}], record=record))
    theirs = {"somebody": "else"}
    h.sim.store.mutate("daemonsets.apps", ref.name, ref.namespace, lambda o: o["spec"]["template"]["spec"].update(nodeSelector=theirs))
    h.sim.requests.clear()
    with pytest.raises(ApplicationError) as info:
        await h.run(h.acts.restore_fields, RestoreFieldsInput(record=record, expected={path: ours}))
    assert info.value.type == "RecordChanged" and info.value.non_retryable and "somebody" in info.value.message
    with pytest.raises(ApplicationError) as info:  # a patch against a stale record is refused too
        await h.run(h.acts.patch_object, PatchObjectInput(ref=ref, ops=[{"op": "add", "path": path, "value": ours}], record=record))
    assert info.value.type == "RecordChanged"
    assert h.writes() == []
    assert h.sim.store.get("daemonsets.apps", ref.name, ref.namespace)["spec"]["template"]["spec"]["nodeSelector"] == theirs


async def test_node_labels_are_written_only_when_they_differ(static: Harness) -> None:
    h = static
    node = h.sim.store.list("nodes")[0]["metadata"]["name"]
    h.sim.requests.clear()
    await h.run(h.acts.set_node_labels, SetNodeLabelsInput(node=node, labels={"lockkeeper.io/x": "1"}))
    await h.run(h.acts.set_node_labels, SetNodeLabelsInput(node=node, labels={"lockkeeper.io/x": "1"}))
    assert len(h.writes()) == 1
    await h.run(h.acts.set_node_labels, SetNodeLabelsInput(node=node, labels={"lockkeeper.io/x": None}))
    assert "lockkeeper.io/x" not in h.sim.store.get("nodes", node)["metadata"]["labels"]


async def test_delete_node_only_when_cordoned_and_idempotent(static: Harness) -> None:
    h = static
    node = h.sim.store.list("nodes")[-1]["metadata"]["name"]
    with pytest.raises(ApplicationError) as info:
        await h.run(h.acts.delete_node, DeleteNodeInput(node=node))
    assert info.value.type == "NodeNotCordoned"
    await h.run(h.acts.cordon_node, CordonInput(node=node, owner="t"))
    assert (await h.run(h.acts.delete_node, DeleteNodeInput(node=node))).deleted
    assert h.sim.store.try_get("nodes", node) is None
    assert not (await h.run(h.acts.delete_node, DeleteNodeInput(node=node))).deleted


async def test_delete_node_with_a_uid_deletes_only_the_recorded_node(static: Harness) -> None:
    h = static
    node = h.sim.store.list("nodes")[-1]["metadata"]["name"]
    uid = h.sim.store.get("nodes", node)["metadata"]["uid"]
    other = await h.run(h.acts.delete_node, DeleteNodeInput(node=node, uid="not-" + uid, require_cordoned=False))
    assert not other.deleted and f"not the recorded not-{uid}" in other.detail
    assert h.sim.store.try_get("nodes", node) is not None
    res = await h.run(h.acts.delete_node, DeleteNodeInput(node=node, uid=uid, require_cordoned=False))
    assert res.deleted and uid in res.detail
    assert h.sim.store.try_get("nodes", node) is None
    again = await h.run(h.acts.delete_node, DeleteNodeInput(node=node, uid=uid, require_cordoned=False))
    assert not again.deleted and again.detail == f"node {node} is absent"


async def test_wait_node_ready_sees_the_change_through_the_watch(static: Harness) -> None:
    h = static
    node = h.sim.store.list("nodes")[0]["metadata"]["name"]

    def not_ready(obj: dict[str, Any]) -> None:
        for cond in obj["status"]["conditions"]:
            if cond["type"] == "Ready":
                cond["status"] = "False"

    async def flip() -> None:
        await asyncio.sleep(0.5)
        h.sim.store.mutate("nodes", node, None, not_ready)

    flipper = asyncio.ensure_future(flip())
    result = await h.run(h.acts.wait_node_ready, WaitNodeReadyInput(node=node, ready=False, timeout_seconds=20))
    await flipper
    assert result.matched and not result.node.ready
    timed = await h.run(h.acts.wait_node_ready, WaitNodeReadyInput(node=node, ready=True, timeout_seconds=1))
    assert timed.timed_out and not timed.matched
