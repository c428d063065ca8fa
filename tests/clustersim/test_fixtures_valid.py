"""Every object of every scenario is schema-valid (kubernetes-validate) and deserializes
with the pydantic-based kubernetes 37 client models, including objects the agents write."""

from __future__ import annotations

import asyncio
from typing import Any

import kubernetes_validate
import pytest
from kubernetes import client

from clustersim.agents import Agents
from clustersim.clock import Clock
from clustersim.scenario import generate_scenario, list_scenarios, load_scenario
from clustersim.store import Store

K8S_VERSION = "1.33.0"
MODELS: dict[str, Any] = {
    "Node": client.V1Node, "Pod": client.V1Pod, "DaemonSet": client.V1DaemonSet,
    "Deployment": client.V1Deployment, "ReplicaSet": client.V1ReplicaSet,
    "PodDisruptionBudget": client.V1PodDisruptionBudget, "Namespace": client.V1Namespace,
    "Event": client.CoreV1Event, "Lease": client.V1Lease, "StatefulSet": client.V1StatefulSet,
    "CronJob": client.V1CronJob, "ReplicationController": client.V1ReplicationController,
}
OPENSHIFT_GROUPS = ("machineconfiguration.openshift.io", "config.openshift.io", "operator.openshift.io",
                    "apps.openshift.io", "network.openshift.io", "image.openshift.io")
# Kinds whose fields sit at the top level (no spec), as in origin 3.11.
TOP_LEVEL_KINDS = {"ClusterNetwork": "clusterNetworks", "ImageStreamTag": "tag"}


def _check(obj: dict[str, Any]) -> None:
    if obj["apiVersion"].split("/")[0] in OPENSHIFT_GROUPS:
        # No OpenAPI schema ships for OpenShift CRDs: check the fields clients rely on.
        assert obj["metadata"]["name"] and TOP_LEVEL_KINDS.get(obj["kind"], "spec") in obj
        return
    kubernetes_validate.validate(obj, K8S_VERSION, strict=True)
    model = MODELS.get(obj["kind"])
    if model is not None:
        parsed = model.from_dict(obj)
        assert parsed is not None and parsed.metadata.name == obj["metadata"]["name"]


def _all(store: Store) -> list[dict[str, Any]]:
    from clustersim.store import RESOURCES

    return [o for key in RESOURCES for o in store.list(key)]


@pytest.mark.parametrize("name", [n for n, _ in list_scenarios()])
def test_scenario_objects_are_valid(name: str) -> None:
    store = Store()
    load_scenario(name).populate(store)
    objs = _all(store)
    kinds = {o["kind"] for o in objs}
    assert kinds >= {"Node", "Pod"}
    # OpenShift 4 scenarios carry the machine-config world; 3.x ones (r3-r5) have none.
    assert "MachineConfigPool" not in kinds or "MachineConfig" in kinds
    for obj in objs:
        _check(obj)


async def test_objects_written_by_agents_are_valid() -> None:
    """Run R2 through a reboot and a FailedScheduling so agent-written statuses and events are checked too."""
    from tests.clustersim.test_agents_mcd import Cluster

    c = Cluster(load_scenario("r2-pdb-blocked"))
    await c.agents.start()
    try:
        new = c.store.get("machineconfigpools.machineconfiguration.openshift.io", "worker")["spec"]["configuration"]["name"]
        c.cordon("okd-worker-01")
        c.annotate("okd-worker-01", desiredConfig=new, lastAppliedDrain=f"drain-{new}")
        await c.until(lambda: c.ann("okd-worker-01")["machineconfiguration.openshift.io/desiredDrain"]
                      == f"uncordon-{new}")
        await c.until(lambda: c.store.list("events", "openshift-ingress"))
        await asyncio.sleep(c.clock.real(5))
        for obj in _all(c.store):
            _check(obj)
    finally:
        await c.agents.stop()


def test_generated_scenario_is_valid() -> None:
    store = Store()
    generate_scenario(8, 40).populate(store)
    for obj in _all(store):
        _check(obj)


async def test_agents_start_on_generated_scenario() -> None:
    sc = generate_scenario(20, 100, {"master": 3, "worker": 17})
    store = Store(Clock(0.001))
    sc.populate(store)
    agents = Agents(store, store.clock, sc)
    await agents.start()
    try:
        await asyncio.sleep(0.05)
        pool = store.get("machineconfigpools.machineconfiguration.openshift.io", "worker")["status"]
        assert pool["machineCount"] == 17 and pool["updatedMachineCount"] == 0
    finally:
        await agents.stop()
