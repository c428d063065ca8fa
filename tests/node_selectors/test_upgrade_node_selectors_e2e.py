"""R3e end to end: NodeSelectorMigrationWorkflow on a real dev server, a real worker process and
clustersim ``r3-okd310-upgrade`` (DeploymentConfigs docker-registry and router on
``region: infra``). Facts are read from the simulator's store."""

from __future__ import annotations

import asyncio
import time
import uuid
from typing import Any

import pytest
from temporalio.client import Client, WorkflowHandle

from clustersim import ClusterSim
from workflows.node_selectors import NodeSelectorMigrationWorkflow
from workflows.node_selectors.models import NodeSelectorMigrationInput, NodeSelectorMigrationResult, NodeSelectorMigrationStatus

pytestmark = pytest.mark.e2e

SCALE = 0.02
INFRA_NODES = ["node01.example.com", "node02.example.com"]
NEW = {"node-role.kubernetes.io/infra": "true"}


def migration_input(**kw: Any) -> NodeSelectorMigrationInput:
    return NodeSelectorMigrationInput(
        mapping={"region=infra": dict(NEW), "region=primary": {"node-role.kubernetes.io/compute": "true"}},
        search_attributes=False, approvals={"requested_by": "e2e"}, approve_plan=False, approve_label_removal=False, poll_seconds=0.5,
        rollout_timeout_seconds=120, pods_timeout_seconds=60, **kw,
    )


def selector(sim: ClusterSim, dc: str) -> dict[str, str]:
    return sim.store.get("deploymentconfigs.apps.openshift.io", dc, "default")["spec"]["template"]["spec"].get("nodeSelector") or {}


def labels(sim: ClusterSim, node: str) -> dict[str, str]:
    return sim.store.get("nodes", node)["metadata"].get("labels") or {}


def add_new_labels(sim: ClusterSim) -> None:
    """What the 3.10 node groups do: infra nodes get node-role.kubernetes.io/infra=true."""
    for n in INFRA_NODES:
        sim.store.mutate("nodes", n, None, lambda o: o["metadata"].setdefault("labels", {}).update(NEW))


def registry_pods(sim: ClusterSim) -> list[dict[str, Any]]:
    return [p for p in sim.store.list("pods", "default") if p["metadata"].get("labels", {}).get("deploymentconfig") == "docker-registry"]


async def start(client: Client, inp: NodeSelectorMigrationInput, tq: str) -> WorkflowHandle[Any, Any]:
    return await client.start_workflow(NodeSelectorMigrationWorkflow.run, inp, id=f"ns-{uuid.uuid4().hex[:8]}", task_queue=tq,
                                       result_type=NodeSelectorMigrationResult)


async def wait_step(handle: WorkflowHandle[Any, Any], step: str, timeout: float = 300) -> NodeSelectorMigrationStatus:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        st = await handle.query("status", result_type=NodeSelectorMigrationStatus)
        if st.step == step:
            return st
        desc = await handle.describe()
        if desc.status is not None and desc.status.name != "RUNNING":
            raise AssertionError(f"closed: {st.error}")
        await asyncio.sleep(0.3)
    raise AssertionError(f"never reached {step}: {st.model_dump_json(indent=1)[:3000]}")


async def test_refuses_mapping_no_node_carries_and_changes_nothing(dev_server: Any, temporal_client: Client, sim_factory: Any,
                                                                   worker_for: Any, task_queue: str) -> None:
    sim = await sim_factory("r3-okd310-upgrade", time_scale=SCALE)
    await worker_for(sim)
    before = {dc: selector(sim, dc) for dc in ("docker-registry", "router")}
    handle = await start(temporal_client, migration_input(), task_queue)
    result = await handle.result()
    assert result.outcome == "refused" and result.message.startswith("refused before any change"), result.message
    text = "\n".join(result.problems)
    assert "DeploymentConfig default/docker-registry" in text and "no schedulable node carries node-role.kubernetes.io/infra=true" in text
    assert {dc: selector(sim, dc) for dc in before} == before
    assert all(labels(sim, n).get("region") == "infra" for n in INFRA_NODES)


async def test_labels_removed_first_leave_the_registry_pending(sim_factory: Any) -> None:
    """The variant the migration prevents: old labels removed before the DC patch; the next
    reschedule of the registry pod stays Pending on the node selector."""
    sim = await sim_factory("r3-okd310-upgrade", time_scale=SCALE)
    while not registry_pods(sim):  # the DC controller creates the first pods just after start
        await asyncio.sleep(0.1)
    for n in list(INFRA_NODES):
        sim.store.mutate("nodes", n, None, lambda o: [o["metadata"]["labels"].pop(k, None) for k in ("region", "zone")])
    pod = registry_pods(sim)[0]
    sim.store.delete("pods", pod["metadata"]["name"], "default")
    end = time.monotonic() + 60
    while time.monotonic() < end:
        pending = [p for p in sim.store.list("pods", "default")
                   if p["metadata"].get("labels", {}).get("deploymentconfig") == "docker-registry" and p["status"].get("phase") == "Pending"]
        msgs = [c.get("message", "") for p in pending for c in p["status"].get("conditions", [])]
        # k8s 1.10 words it "didn't match node selector", later releases "didn't match Pod's node affinity/selector"
        if any("didn't match node selector" in m or "didn't match Pod's node affinity/selector" in m for m in msgs):
            return
        await asyncio.sleep(0.2)
    raise AssertionError("no Pending registry pod with the node-selector message")


async def test_migration_then_revert(dev_server: Any, temporal_client: Client, sim_factory: Any, worker_for: Any,
                                     task_queue: str) -> None:
    sim = await sim_factory("r3-okd310-upgrade", time_scale=SCALE)
    await worker_for(sim)
    for n in ("node03.example.com", "node04.example.com"):  # compute nodes already carry the compute role
        assert labels(sim, n).get("node-role.kubernetes.io/compute") == "true"
    add_new_labels(sim)
    old_labels = {n: labels(sim, n) for n in INFRA_NODES + ["node03.example.com", "node04.example.com"]}
    handle = await start(temporal_client, migration_input(revert_window_seconds=600), task_queue)
    st = await wait_step(handle, "revert-window")
    assert selector(sim, "docker-registry") == NEW and selector(sim, "router") == NEW
    for n in old_labels:
        assert "region" not in labels(sim, n) and "zone" not in labels(sim, n), labels(sim, n)
    assert st.regressions == []
    running = registry_pods(sim)
    assert running and all(p["status"].get("phase") == "Running" for p in running)
    await handle.execute_update("revert", {"identity": "e2e", "reason": "test"})
    result: NodeSelectorMigrationResult = await handle.result()
    assert result.outcome == "reverted", result.message
    assert result.revert_refused == []
    assert selector(sim, "docker-registry") == {"region": "infra"}
    for n, lb in old_labels.items():
        assert labels(sim, n).get("region") == lb["region"] and labels(sim, n).get("zone") == lb["zone"]
