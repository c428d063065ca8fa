"""The nodeSelector-migration activities against clustersim ``r3-okd310-upgrade`` over real HTTP
(the real ``kubernetes`` client, in a thread while the simulator serves on the loop): CronJobs are scanned at their Job template's nodeSelector, a
DaemonSet's update strategy is scanned, and an OnDelete DaemonSet's pods on the old template are
named by ``read_rollout`` after a patch (and only those: a deleted pod's replacement is current)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest
from temporalio.testing import ActivityEnvironment

from activities.cluster.models import ObjectRef
from activities.kube.gateway import KubeGateway
from activities.kube.resources import resource
from activities.node_selectors.activities import NodeSelectorActivities
from activities.node_selectors.models import CRONJOB_SELECTOR_PATH, SELECTOR_PATH, RolloutInput, RolloutState, ScanInput, ScanResult
from clustersim import ClusterSim

pytestmark = pytest.mark.timeout(120)

INFRA = ["node01.example.com", "node02.example.com"]

CRONJOB = {
    "apiVersion": "batch/v1", "kind": "CronJob",
    "metadata": {"name": "registry-prune", "namespace": "default"},
    "spec": {"schedule": "0 3 * * *", "jobTemplate": {"spec": {"template": {"spec": {
        "nodeSelector": {"region": "infra"}, "restartPolicy": "Never",
        "containers": [{"name": "prune", "image": "docker.io/openshift/origin-cli:v3.9.0"}]}}}}},
}


def daemonset(strategy: str) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1", "kind": "DaemonSet",
        "metadata": {"name": f"logging-{strategy.lower()}", "namespace": "default"},
        "spec": {"selector": {"matchLabels": {"app": f"logging-{strategy.lower()}"}}, "updateStrategy": {"type": strategy},
                 "template": {"metadata": {"labels": {"app": f"logging-{strategy.lower()}"}},
                              "spec": {"nodeSelector": {"region": "infra"},
                                       "containers": [{"name": "fluentd", "image": "docker.io/openshift/origin-logging-fluentd:v3.9"}]}}},
    }


@pytest.fixture
async def world() -> AsyncIterator[tuple[ClusterSim, KubeGateway, NodeSelectorActivities]]:
    async with ClusterSim("r3-okd310-upgrade", time_scale=0.01) as sim:
        gw = KubeGateway.from_kubeconfig(sim.kubeconfig_path)
        try:
            yield sim, gw, NodeSelectorActivities(lambda: gw)
        finally:
            gw.close()


async def run(fn: Any, arg: Any) -> Any:
    return await asyncio.to_thread(ActivityEnvironment().run, fn, arg)


def test_cronjob_is_in_the_resource_table() -> None:
    r = resource("CronJob")
    assert r.path("default", "x") == "/apis/batch/v1/namespaces/default/cronjobs/x"


async def until(pred: Any, timeout: float = 30) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if pred():
            return
        await asyncio.sleep(0.1)
    raise AssertionError("condition never held")


async def test_scan_finds_cronjob_and_daemonset_strategy(world: Any) -> None:
    sim, gw, acts = world
    await asyncio.to_thread(gw.create, "CronJob", CRONJOB, "default")
    await asyncio.to_thread(gw.create, "DaemonSet", daemonset("OnDelete"), "default")
    await until(lambda: len([p for p in sim.store.list("pods", "default") if p["metadata"]["labels"].get("app") == "logging-ondelete"
                             and p["status"].get("phase") == "Running"]) == 2)
    scan: ScanResult = await run(acts.scan_node_selectors, ScanInput())
    by = {w.ref.describe(): w for w in scan.workloads}
    cj = by["CronJob default/registry-prune"]
    assert cj.path == CRONJOB_SELECTOR_PATH and cj.node_selector == {"region": "infra"} and cj.running_nodes == []
    ds = by["DaemonSet default/logging-ondelete"]
    assert ds.path == SELECTOR_PATH and ds.update_strategy == "OnDelete" and ds.running_nodes == INFRA
    assert by["DaemonSet glusterfs/glusterfs-storage"].update_strategy == "OnDelete"
    assert by["DeploymentConfig default/docker-registry"].update_strategy is None
    # without CronJob in the kinds, it is not scanned (the kinds list is what is scanned)
    only = await run(acts.scan_node_selectors, ScanInput(kinds=["DaemonSet"]))
    assert all(w.ref.kind == "DaemonSet" for w in only.workloads)
    rs: RolloutState = await run(acts.read_rollout, RolloutInput(ref=ObjectRef(kind="CronJob", name="registry-prune", namespace="default")))
    assert rs.done


async def test_ondelete_daemonset_keeps_old_pods_until_deleted(world: Any) -> None:
    sim, gw, acts = world
    await asyncio.to_thread(gw.create, "DaemonSet", daemonset("OnDelete"), "default")
    app = "logging-ondelete"

    def pods() -> list[dict[str, Any]]:
        return [p for p in sim.store.list("pods", "default") if p["metadata"]["labels"].get("app") == app
                and not p["metadata"].get("deletionTimestamp")]

    await until(lambda: len(pods()) == 2 and all(p["status"].get("phase") == "Running" for p in pods()))
    ref = ObjectRef(kind="DaemonSet", name=app, namespace="default")
    before: RolloutState = await run(acts.read_rollout, RolloutInput(ref=ref))
    assert before.on_delete and before.old_pods == [] and before.done
    for n in INFRA:
        sim.store.mutate("nodes", n, None, lambda o: o["metadata"]["labels"].update({"node-role.kubernetes.io/infra": "true"}))
    await asyncio.to_thread(gw.patch, "DaemonSet", app, [{"op": "replace", "path": "/spec/template/spec/nodeSelector",
                                                          "value": {"node-role.kubernetes.io/infra": "true"}}], "default",
                            patch_type="json")
    await asyncio.sleep(1.0)
    after: RolloutState = await run(acts.read_rollout, RolloutInput(ref=ref))
    assert not after.done and [p.split("@")[1] for p in after.old_pods] == INFRA, after
    # delete the pod on node01: its replacement is current, node02's stays old
    first = after.old_pods[0].split("@")[0].split("/")[1]
    sim.store.delete("pods", first, "default", grace_period_seconds=0)
    await until(lambda: len(pods()) == 2 and all(p["status"].get("phase") == "Running" for p in pods()))
    later: RolloutState = await run(acts.read_rollout, RolloutInput(ref=ref))
    assert [p.split("@")[1] for p in later.old_pods] == INFRA[1:], later


@pytest.mark.parametrize(("name", "latency"), [("scan_node_selectors", 0.7), ("read_pod_states", 4.5)])
async def test_a_slow_api_does_not_silence_the_scans(world: Any, name: str, latency: float) -> None:
    """Every LIST answered late (the scan makes many, the pod states one): both reads beat while
    they wait, so their heartbeat timeout (10 s in the workflow) tells a live worker on a slow API
    from a dead one."""
    from activities.context import HEARTBEAT_INTERVAL_SECONDS

    sim, _, acts = world
    sim.faults.configure(latency_seconds=latency, verbs=["list"])
    env = ActivityEnvironment()
    beats: list[Any] = []
    env.on_heartbeat = lambda *details: beats.append(details[0] if details else None)
    result = await asyncio.to_thread(env.run, getattr(acts, name), ScanInput())
    assert result is not None
    # The premise and the expectation from the request record, not the wall clock: the LISTs run
    # one after another, each served ``latency`` late, so the call lasted at least this long.
    slow = sim.requests.count(verb="list") * latency
    assert slow > 2 * HEARTBEAT_INTERVAL_SECONDS, slow
    assert len(beats) >= int(slow / HEARTBEAT_INTERVAL_SECONDS) - 1, (beats, slow)
