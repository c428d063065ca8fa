"""Cluster activities against the simulator, continued: waiting for a node, the daemon
handshake driven by the activities, pool status and the network switch, pod deletion, and the
activity names the workflows call. Harness and fixtures from test_activities_cluster.py."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from temporalio.exceptions import ApplicationError, CancelledError
from temporalio.testing import ActivityEnvironment

from activities.cluster.activities import ClusterActivities
from activities.cluster.models import (
    ANN_CORDONED_BY,
    ANN_CURRENT_CONFIG,
    ANN_DESIRED_CONFIG,
    ANN_DESIRED_DRAIN,
    ANN_LAST_APPLIED_DRAIN,
    ANN_STATE,
    CordonInput,
    DeleteAllPodsInput,
    DrainInput,
    ListPodsToDeleteInput,
    PodsReadyInput,
    RecordEventInput,
    SetNodeAnnotationsInput,
    UncordonInput,
)
from activities.machineconfig.activities import MachineConfigActivities
from activities.machineconfig.models import (
    PoolNodesInput,
    PoolsStatusInput,
    PreflightInput,
    SetNetworkTypeInput,
    WaitForNodeInput,
    drain_value,
    uncordon_value,
)
from tests.gateway.test_activities_cluster import Harness, r1, r1_static, r2  # noqa: F401,F811 (fixtures)

pytestmark = pytest.mark.timeout(120)

R1_APP_TARGET = "rendered-app-c2144a20e3d0e37e96785165ba81f4e8"
R1_INFRA_TARGET = "rendered-infra-7b3e9d1f5a2c8e4b6d0f3a7c1e5b9d2f"
R2_WORKER_TARGET = "rendered-worker-5e4f3a2b1c0d9e8f7a6b5c4d3e2f1a0b"


async def _start_wait(h: Harness, wait: WaitForNodeInput, env: ActivityEnvironment | None = None) -> asyncio.Task[Any]:
    task = asyncio.ensure_future(h.run(h.mco.wait_for_node, wait, env))
    # Let the activity list the node first: a change after the list's resourceVersion reaches
    # it through the watch (replayed from that resourceVersion if the watch opens later).
    listed = h.sim.requests.count(verb="list", resource="nodes")
    for _ in range(200):
        if h.sim.requests.count(verb="list", resource="nodes") > listed:
            break
        await asyncio.sleep(0.01)
    return task


async def test_wait_for_node_reacts_to_an_annotation_change(r1_static: Harness) -> None:
    h = r1_static
    node = "qsu-app-04"
    task = await _start_wait(h, WaitForNodeInput(node=node, value=drain_value(R1_APP_TARGET), timeout_seconds=30))
    await asyncio.sleep(0.2)
    assert not task.done()
    h.set_annotations(node, **{ANN_DESIRED_DRAIN: drain_value(R1_APP_TARGET), ANN_STATE: "Working"})
    result = await asyncio.wait_for(task, 10)
    assert result.matched and not result.degraded and not result.timed_out
    assert result.node.desired_drain == drain_value(R1_APP_TARGET) and result.node.state == "Working"


async def test_wait_for_node_times_out_degrades_and_matches_any_of(r1_static: Harness) -> None:
    h = r1_static
    node = "qsu-app-04"
    timed_out = await h.run(h.mco.wait_for_node, WaitForNodeInput(node=node, value="drain-never", timeout_seconds=1))
    assert timed_out.timed_out and not timed_out.matched

    task = await _start_wait(h, WaitForNodeInput(node=node, value="drain-never", timeout_seconds=30))
    h.set_annotations(node, **{ANN_STATE: "Degraded", "machineconfiguration.openshift.io/reason": "failed to drain"})
    degraded = await asyncio.wait_for(task, 10)
    assert degraded.degraded and not degraded.matched and degraded.node.reason == "failed to drain"

    h.set_annotations(node, **{ANN_STATE: "Done"})
    h.sim.requests.clear()
    task = await _start_wait(
        h,
        WaitForNodeInput(node=node, value="drain-never", any_of=[(ANN_LAST_APPLIED_DRAIN, "uncordon-x")], timeout_seconds=30),
    )
    h.set_annotations(node, **{ANN_LAST_APPLIED_DRAIN: "uncordon-x"})
    assert (await asyncio.wait_for(task, 10)).matched


async def test_wait_for_node_survives_expired_and_dropped_watches(r1_static: Harness) -> None:
    h = r1_static
    node = "qsu-app-03"
    h.sim.faults.expire_next_watch(2)
    task = await _start_wait(h, WaitForNodeInput(node=node, value="drain-x", timeout_seconds=30))
    await asyncio.sleep(0.3)
    h.sim.faults.drop_watches()
    await asyncio.sleep(0.3)
    assert not task.done()
    h.set_annotations(node, **{ANN_DESIRED_DRAIN: "drain-x"})
    result = await asyncio.wait_for(task, 15)
    assert result.matched
    assert h.sim.requests.count(verb="list", resource="nodes") >= 2  # re-listed after 410 / a broken stream


async def test_wait_for_node_heartbeats_and_stops_when_cancelled(r1_static: Harness) -> None:
    h = r1_static
    env = ActivityEnvironment()
    task = await _start_wait(h, WaitForNodeInput(node="qsu-app-02", value="drain-never", timeout_seconds=60), env)
    for _ in range(100):
        if h.heartbeats:
            break
        await asyncio.sleep(0.05)
    assert h.heartbeats and h.heartbeats[0]["node"] == "qsu-app-02"
    env.cancel()
    with pytest.raises(CancelledError):
        await asyncio.wait_for(task, 10)


# --- the daemon handshake, step by step -------------------------------------------------------


async def test_daemon_handshake_driven_by_the_activities(r2: Harness) -> None:
    """R1's manual procedure on one node with lockkeeper's activities and the simulated daemon.
    R2's worker is used with the router budget relaxed so the drain can finish."""
    h = r2
    node, owner, target = "okd-worker-01", "rollout/node/okd-worker-01", R2_WORKER_TARGET
    h.sim.store.mutate(
        "poddisruptionbudgets.policy", "router-default", "openshift-ingress", lambda o: o["spec"].update(minAvailable=0)
    )

    async def wait(**kw: Any) -> Any:
        result = await h.run(h.mco.wait_for_node, WaitForNodeInput(node=node, timeout_seconds=30, **kw))
        assert result.matched and not result.degraded, result
        return result

    await h.run(h.acts.set_node_annotations, SetNodeAnnotationsInput(node=node, annotations={ANN_DESIRED_CONFIG: target}))
    await wait(value=drain_value(target))
    assert (await h.run(h.acts.cordon_node, CordonInput(node=node, owner=owner))).cordoned_by_us
    for _ in range(20):
        drained = await h.run(h.acts.drain_node, DrainInput(node=node, wait_seconds=5))
        if drained.done:
            break
        await asyncio.sleep(0.1)
    assert drained.done, drained
    await h.run(h.acts.set_node_annotations, SetNodeAnnotationsInput(node=node, annotations={ANN_LAST_APPLIED_DRAIN: drain_value(target)}))
    await wait(value=uncordon_value(target))
    assert (await h.run(h.acts.uncordon_node, UncordonInput(node=node, owner=owner))).uncordoned
    await h.run(
        h.acts.set_node_annotations, SetNodeAnnotationsInput(node=node, annotations={ANN_LAST_APPLIED_DRAIN: uncordon_value(target)})
    )
    done = await wait(kind="config_done", value=target)
    assert done.node.current_config == target and done.node.state == "Done" and not done.node.unschedulable
    stored = h.sim.store.get("nodes", node)["metadata"]["annotations"]
    assert stored[ANN_CURRENT_CONFIG] == target and ANN_CORDONED_BY not in stored

    await h.run(h.acts.record_node_event, RecordEventInput(node=node, reason="NodeUpdated", message=f"now at {target}"))
    (event,) = [e for e in h.sim.store.list("events", namespace="default") if e["reason"] == "NodeUpdated"]
    assert event["involvedObject"]["kind"] == "Node" and event["involvedObject"]["name"] == node
    assert event["involvedObject"]["uid"] == h.sim.store.get("nodes", node)["metadata"]["uid"]
    assert event["source"]["component"] == "lockkeeper"


# --- pools, pods, network type ------------------------------------------------------------------


async def test_pool_status_pod_readiness_and_guarded_network_switch(r1_static: Harness) -> None:
    h = r1_static
    status = await h.run(h.mco.get_pools_status, PoolsStatusInput())
    assert sorted(p.name for p in status.pools) == ["app", "infra", "master"]
    assert not status.all_settled
    with pytest.raises(ApplicationError) as refused:
        await h.run(h.mco.set_network_type, SetNetworkTypeInput(network_type="OpenShiftSDN"))
    assert refused.value.type == "PoolsNotSettled" and refused.value.non_retryable
    for pool in ("app", "infra", "master"):
        assert pool in refused.value.message
    assert h.writes() == []
    with pytest.raises(ApplicationError) as unknown:
        await h.run(h.mco.get_pools_status, PoolsStatusInput(pools=["nope"]))
    assert unknown.value.type == "UnknownPool"

    ovn = await h.run(
        h.acts.check_pods_ready,
        PodsReadyInput(namespace="openshift-ovn-kubernetes", label_selector="app=ovnkube-node", expect_per_node=True),
    )
    # R1: ovnkube-node crash-loops on every node (no OVN config yet).
    assert not ovn.ready and ovn.total == 9 and len(ovn.not_ready) == 9
    assert all(name.startswith("openshift-ovn-kubernetes/ovnkube-node-") for name in ovn.not_ready)
    assert len(ovn.nodes_missing) == 9

    def make_ready(obj: dict[str, Any]) -> None:
        obj["status"]["conditions"] = [
            c for c in obj["status"].get("conditions") or [] if c["type"] not in ("Ready", "ContainersReady")
        ] + [{"type": "Ready", "status": "True"}, {"type": "ContainersReady", "status": "True"}]

    for pod in h.sim.store.list("pods", namespace="openshift-ovn-kubernetes"):
        h.sim.store.mutate("pods", pod["metadata"]["name"], "openshift-ovn-kubernetes", make_ready, subresource="status")
    healed = await h.run(
        h.acts.check_pods_ready,
        PodsReadyInput(namespace="openshift-ovn-kubernetes", label_selector="app=ovnkube-node", expect_per_node=True),
    )
    assert healed.ready and healed.total == 9 and healed.not_ready == [] and healed.nodes_missing == []


async def test_set_network_type_when_pools_settled(r1_static: Harness) -> None:
    h = r1_static

    def settle(obj: dict[str, Any]) -> None:
        obj["status"]["conditions"] = [
            {"type": "Updated", "status": "True", "lastTransitionTime": "2024-05-14T10:00:00Z", "reason": "", "message": ""},
            {"type": "Updating", "status": "False", "lastTransitionTime": "2024-05-14T10:00:00Z", "reason": "", "message": ""},
            {"type": "Degraded", "status": "False", "lastTransitionTime": "2024-05-14T10:00:00Z", "reason": "", "message": ""},
        ]

    for pool in ("app", "infra", "master"):
        h.sim.store.mutate("machineconfigpools.machineconfiguration.openshift.io", pool, None, settle, subresource="status")
    h.sim.requests.clear()
    result = await h.run(h.mco.set_network_type, SetNetworkTypeInput(network_type="OpenShiftSDN"))
    assert result.changed and result.previous == "OVNKubernetes"
    stored = h.sim.store.get("networks.config.openshift.io", "cluster")
    assert stored["spec"]["networkType"] == "OpenShiftSDN"
    again = await h.run(h.mco.set_network_type, SetNetworkTypeInput(network_type="OpenShiftSDN"))
    assert not again.changed
    assert h.writes() == [("patch", "networks", "cluster")]


async def test_delete_all_pods_skips_excluded_namespaces(r1_static: Harness) -> None:
    h = r1_static
    pods = h.sim.store.list("pods")
    excluded = {"openshift-machine-config-operator"}
    expected = [p for p in pods if p["metadata"]["namespace"] not in excluded]
    result = await h.run(h.acts.delete_all_pods, DeleteAllPodsInput(exclude_namespaces=sorted(excluded)))
    assert result.deleted == len(expected) > 0
    deleted_ns = {e.namespace for e in h.sim.requests.entries(verb="delete", resource="pods")}
    assert deleted_ns and not deleted_ns & excluded


async def test_delete_all_pods_heartbeats_by_the_clock_on_a_slow_api(r1_static: Harness) -> None:
    """Every delete answered 0.3 s late: the activity still beats every HEARTBEAT_INTERVAL_SECONDS,
    however few pods it has deleted, so a heartbeat timeout sees a live worker."""
    from activities.context import HEARTBEAT_INTERVAL_SECONDS

    h = r1_static
    total = len(h.sim.store.list("pods"))
    latency = 0.3
    assert total * latency > 3 * HEARTBEAT_INTERVAL_SECONDS, total  # the deletes span several intervals
    h.sim.faults.configure(latency_seconds=latency, verbs=["delete"], resources=["pods"])
    result = await h.run(h.acts.delete_all_pods, DeleteAllPodsInput())
    assert result.deleted == total, result
    beats = [b for b in h.heartbeats if isinstance(b, dict) and "deleted" in b]
    assert len(beats) >= 2, beats
    assert all(b["of"] == total for b in beats)
    assert [b["deleted"] for b in beats] == sorted(b["deleted"] for b in beats) and beats[-1]["deleted"] < total


async def test_drain_beats_between_slow_evictions(r1_static: Harness) -> None:
    """Twelve evictions answered 0.3 s late: the eviction loop beats by the clock (it beat every
    20 pods), so a heartbeat timeout does not take a slow API for a dead worker."""
    node = "qsu-app-03"
    for n in range(12):
        r1_static.sim.store.create("pods", {
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": f"extra-{n}", "namespace": "default", "ownerReferences": [
                {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "extra", "uid": "extra-rs", "controller": True}]},
            "spec": {"nodeName": node, "containers": [{"name": "c", "image": "i"}]},
            "status": {"phase": "Running"},
        })
    r1_static.sim.faults.configure(latency_seconds=0.3, verbs=["create"], resources=["pods"])
    result = await r1_static.run(r1_static.acts.drain_node, DrainInput(node=node, wait_seconds=0.5))
    assert len(result.evicted) >= 12, result
    in_loop = [b for b in r1_static.heartbeats if isinstance(b, dict) and isinstance(b.get("blocked"), int)]
    assert in_loop and all(0 < b["evicted"] < len(result.evicted) for b in in_loop), r1_static.heartbeats


@pytest.mark.parametrize("call", ["preflight", "pool page"])
async def test_the_rollout_preflight_reads_beat_on_a_slow_api(r1_static: Harness, call: str) -> None:
    """Every LIST served 2.5 s late: the preflight and a pool page beat while they wait, so their
    heartbeat timeout tells a slow API server from a dead worker."""
    from activities.context import HEARTBEAT_INTERVAL_SECONDS

    h = r1_static
    latency = 2.5
    h.sim.faults.configure(latency_seconds=latency, verbs=["list"])
    h.sim.requests.clear()
    if call == "preflight":
        await h.run(h.mco.preflight_machineconfig_rollout, PreflightInput())
    else:
        await h.run(h.mco.list_pool_nodes, PoolNodesInput(pool="app", after="", limit=100))
    slow = h.sim.requests.count(verb="list") * latency  # one LIST after another: a lower bound
    assert slow > 2 * HEARTBEAT_INTERVAL_SECONDS, slow
    beats = [b for b in h.heartbeats if b in ("preflight", "pool nodes")]
    assert len(beats) >= int(slow / HEARTBEAT_INTERVAL_SECONDS) - 1, (h.heartbeats, slow)


def test_activity_names_match_what_the_workflows_call() -> None:
    """Every activity name the workflows call (workflows/kit/calls.py) is registered by
    the worker's registry exactly once, and every cluster activity is called by a workflow."""
    from workers.registry import build_activities
    from workflows.kit import calls as activity_calls

    def names(acts: list) -> list[str]:
        return [getattr(a, "__temporal_activity_definition").name for a in acts]

    cluster = names(ClusterActivities(lambda: None).activities())  # type: ignore[arg-type, return-value]
    cluster += names(MachineConfigActivities(lambda: None).activities())  # type: ignore[arg-type, return-value]
    registered = names(build_activities(lambda: None))
    called = {v for k, v in vars(activity_calls).items() if k.isupper() and isinstance(v, str) and v.islower()}
    assert len(registered) == len(set(registered))
    assert called <= set(registered), f"called but not registered: {called - set(registered)}"
    # Generic activities the kit offers to the procedures still to come (records, node
    # labels, node delete, wait for Ready); they are tested against the simulator here. Drop a
    # name from this set once a workflow calls it.
    offered = {"set_node_labels", "delete_node", "wait_node_ready", "snapshot_fields", "patch_object", "restore_fields"}
    assert set(cluster) - offered <= called, f"registered but never called: {set(cluster) - offered - called}"
    assert offered <= set(cluster)


async def test_preflight_pages_and_list_pool_nodes_read_on_by_name(r1_static: Harness) -> None:
    """A paged preflight returns a pool's first nodes by name and where to read on; the pages of
    ``list_pool_nodes`` then give every other node once, and nothing is written."""
    h = r1_static
    paged = await h.run(h.mco.preflight_machineconfig_rollout, PreflightInput(pools=["app", "infra"], page_size=3))
    app, infra = paged.pools
    assert [n.name for n in app.nodes] == ["qsu-app-01", "qsu-app-02", "qsu-app-03"]
    assert (app.more_after, app.node_count) == ("qsu-app-03", 4)
    assert (infra.more_after, infra.node_count) == (None, None) and len(infra.nodes) <= 3
    page = await h.run(h.mco.list_pool_nodes, PoolNodesInput(pool="app", after=app.more_after, limit=3))
    assert ([n.name for n in page.nodes], page.more_after) == (["qsu-app-04"], None)
    assert page.nodes[0].pool == "app" and page.nodes[0].current_config
    # A limit that ends a page on a node with more to come says where to read on.
    first = await h.run(h.mco.list_pool_nodes, PoolNodesInput(pool="app", after="", limit=2))
    assert ([n.name for n in first.nodes], first.more_after) == (["qsu-app-01", "qsu-app-02"], "qsu-app-02")
    with pytest.raises(ApplicationError) as info:
        await h.run(h.mco.list_pool_nodes, PoolNodesInput(pool="gpu", after="", limit=2))
    assert info.value.type == "UnknownPool" and info.value.non_retryable
    assert h.writes() == []


async def test_annotations_without_reading_first(r1_static: Harness) -> None:
    """``read_first=False`` (the node run's writes): one PATCH and no GET; a patch that changes
    nothing leaves the node's resourceVersion as it was (the API server writes nothing)."""
    from activities.cluster.models import ANN_DESIRED_CONFIG, SetNodeAnnotationsInput

    h, node = r1_static, "qsu-app-03"
    h.sim.requests.clear()
    wanted = {ANN_DESIRED_CONFIG: "rendered-app-new", "example.com/gone": None}
    info = await h.run(h.acts.set_node_annotations, SetNodeAnnotationsInput(node=node, annotations=wanted, read_first=False))
    assert info.desired_config == "rendered-app-new"
    assert [(e.verb, e.resource) for e in h.sim.requests.entries()] == [("patch", "nodes")]
    rv = h.sim.store.get("nodes", node)["metadata"]["resourceVersion"]
    again = await h.run(h.acts.set_node_annotations, SetNodeAnnotationsInput(node=node, annotations=wanted, read_first=False))
    assert again.desired_config == "rendered-app-new" and again.resource_version == rv
    assert h.sim.store.get("nodes", node)["metadata"]["resourceVersion"] == rv
    with pytest.raises(ApplicationError) as missing:
        await h.run(h.acts.set_node_annotations, SetNodeAnnotationsInput(node="no-such-node", annotations=wanted, read_first=False))
    assert missing.value.type == "NodeNotFound" and missing.value.non_retryable


def _pod(name: str, uid: str, namespace: str = "default") -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": namespace, "uid": uid, "ownerReferences": [
                {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "app", "uid": "app-rs", "controller": True}]},
            "spec": {"nodeName": "qsu-app-03", "containers": [{"name": "c", "image": "i"}]}, "status": {"phase": "Running"}}


async def test_delete_listed_pods_under_api_faults_deletes_each_approved_pod_once(r1_static: Harness) -> None:
    """Issue 39 case 6: about 14% of the DELETEs answered 500, 503 or 429. The pods listed when
    the cleanup began are each deleted exactly once (a failed request is sent again in place, not
    the whole list); a pod created after the listing is never touched, and a listed pod replaced
    by one of another uid under the same name is left alone (409 on the uid precondition)."""
    h = r1_static
    listed = (await h.run(h.acts.list_pods_to_delete, ListPodsToDeleteInput())).pods
    assert len(listed) > 20 and all(p.uid for p in listed)
    # After the listing: a controller creates a new pod, and one listed pod is replaced.
    h.sim.store.create("pods", _pod("app-created-later", "uid-later"))
    replaced = listed[0]
    h.sim.store.delete("pods", replaced.name, replaced.namespace, grace_period_seconds=0)
    h.sim.store.create("pods", _pod(replaced.name, "uid-replacement", replaced.namespace))
    h.sim.requests.clear()
    h.sim.faults.reseed(39)  # the same dice every run: failures land, none eight times in a row
    h.sim.faults.configure(error_500=0.05, error_503=0.05, error_429=0.04, retry_after_seconds=0, verbs=["delete"], resources=["pods"])
    result = await h.run(h.acts.delete_all_pods, DeleteAllPodsInput(pods=listed))
    h.sim.faults.clear()
    deletes = h.sim.requests.entries(verb="delete", resource="pods")
    ok = [f"{e.namespace}/{e.name}" for e in deletes if e.code in (200, 202)]
    assert sorted(ok) == sorted(p.key() for p in listed[1:]), "each listed pod deleted exactly once"
    assert result.deleted == len(listed) - 1 and result.gone == 1, result
    failed = [e for e in deletes if e.code >= 500 or e.code == 429]
    # The dice failed some; each was sent again in place (the HTTP client itself may resend a 503
    # or 429 before the activity sees it, so the activity counts at most as many).
    assert failed and 0 < result.retried <= len(failed), (result, len(failed))
    assert not [e for e in deletes if e.name == "app-created-later"]
    assert h.sim.store.get("pods", replaced.name, replaced.namespace)["metadata"]["uid"] == "uid-replacement"


async def test_delete_listed_pods_resumes_after_its_last_heartbeat(r1_static: Harness) -> None:
    """A retried attempt (the worker was lost) starts at the ``next`` pod its last heartbeat
    named: the pods before it are not sent again."""
    import dataclasses

    h = r1_static
    listed = (await h.run(h.acts.list_pods_to_delete, ListPodsToDeleteInput())).pods
    env = ActivityEnvironment()
    env.info = dataclasses.replace(env.info, heartbeat_details=[{"next": 5, "deleted": 5, "gone": 0, "retried": 0, "of": len(listed)}])
    h.sim.requests.clear()
    result = await h.run(h.acts.delete_all_pods, DeleteAllPodsInput(pods=listed), env)
    sent = [f"{e.namespace}/{e.name}" for e in h.sim.requests.entries(verb="delete", resource="pods")]
    assert sent == [p.key() for p in listed[5:]]
    assert result.deleted == len(listed)
