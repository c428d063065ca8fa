"""R3d nodes, drain timeout end to end (real dev server, real worker process, clustersim
``r3-okd310-upgrade`` with the ansible-playbook stand-in): a PodDisruptionBudget that never
allows the router's eviction blocks node01's drain.

- ``drain.on_timeout="proceed"`` (openshift-ansible's ``openshift_upgrade_nodes_drain_timeout``
  > 0): after the timeout the node is upgraded with the router pod still on it, no decision gate
  opens, and the node's result says so;
- ``"gate"`` with the same timeout: the decision gate ``drain/node01`` opens and the node action
  does not run before a decision.
"""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path
from typing import Any

import pytest
from temporalio.client import Client

from clustersim import ClusterSim
from tests.node_upgrade.test_upgrade_nodes_e2e import control_plane_on_310, NEW, SCALE, external_runs, hosts_env, kubelet, r3_scenario, upgrade_input, wait_for
from workflows.kit.models import GateState
from workflows.node_upgrade import NodeUpgradeWorkflow
from workflows.node_upgrade.models import BatchPolicy, NodeUpgradeResult

pytestmark = pytest.mark.e2e

NODE = "node01.example.com"
PDB = {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "router", "namespace": "default"},
       "spec": {"minAvailable": 2, "selector": {"matchLabels": {"router": "router"}}}}


def routers_on(sim: ClusterSim, node: str) -> list[str]:
    return sorted(p["metadata"]["name"] for p in sim.store.list("pods", "default")
                  if p["metadata"].get("labels", {}).get("router") == "router" and p["spec"].get("nodeName") == node
                  and not p["metadata"].get("deletionTimestamp"))


async def blocked_world(sim_factory: Any, worker_process_factory: Any, dev_server: Any, task_queue: str) -> ClusterSim:
    sim = await sim_factory(r3_scenario(), time_scale=SCALE)
    await control_plane_on_310(sim)
    worker = worker_process_factory(address=dev_server.address, kubeconfig=sim.kubeconfig_path, task_queue=task_queue,
                                    env=hosts_env(sim))
    await worker.start()
    for _ in range(300):
        if routers_on(sim, NODE) and routers_on(sim, "node02.example.com"):
            break
        await asyncio.sleep(0.1)
    assert routers_on(sim, NODE), "no router pod on node01"
    sim.store.create("poddisruptionbudgets.policy", dict(PDB))
    return sim


def node_input(tmp: Path, mode: str) -> Any:
    inp = upgrade_input(tmp, "region=infra", BatchPolicy(serial=1))
    inp.selection.label_selector, inp.selection.nodes = None, [NODE]
    return inp.model_copy(update={"drain": inp.drain.model_copy(update={"timeout_seconds": 6.0, "on_timeout": mode,
                                                                         "decide_after_seconds": 600.0})})


async def test_proceed_after_drain_timeout_upgrades_with_pods_left(dev_server: Any, temporal_client: Client, sim_factory: Any,
                                                                   worker_process_factory: Any, task_queue: str, tmp_path: Path) -> None:
    sim = await blocked_world(sim_factory, worker_process_factory, dev_server, task_queue)
    router = routers_on(sim, NODE)
    handle = await temporal_client.start_workflow(NodeUpgradeWorkflow.run, node_input(tmp_path, "proceed"), id=f"nu-{uuid.uuid4().hex[:8]}",
                                                  task_queue=task_queue, result_type=NodeUpgradeResult)
    result: NodeUpgradeResult = await handle.result()
    assert result.outcome == "completed", result.message
    assert kubelet(sim, NODE) == NEW and not sim.store.get("nodes", NODE)["spec"].get("unschedulable")
    assert routers_on(sim, NODE) == router  # never evicted: the budget refused, the upgrade went on
    reason = result.nodes[NODE].reason or ""
    assert "drain not finished after 6s; proceeded with default/" in reason and "drain.on_timeout=proceed" in reason, reason
    st = await handle.query("status")
    assert not [g for g in st["gates"] if str(g["id"]).startswith("drain/")], st["gates"]
    assert len(await external_runs(sim)) == 1


async def test_gate_mode_opens_the_decision_gate_at_the_timeout(dev_server: Any, temporal_client: Client, sim_factory: Any,
                                                                worker_process_factory: Any, task_queue: str, tmp_path: Path) -> None:
    sim = await blocked_world(sim_factory, worker_process_factory, dev_server, task_queue)
    handle = await temporal_client.start_workflow(NodeUpgradeWorkflow.run, node_input(tmp_path, "gate"), id=f"nu-{uuid.uuid4().hex[:8]}",
                                                  task_queue=task_queue, result_type=NodeUpgradeResult)
    st = await wait_for(handle, lambda s: NODE in s.nodes and s.nodes[NODE].decision_gate is not None
                        and s.nodes[NODE].decision_gate.state == GateState.WAITING, timeout=120)
    gate = st.nodes[NODE].decision_gate
    assert gate is not None and gate.id == f"drain/{NODE}"
    # it opened at the drain timeout (6 s after the first refusal), not at drain.decide_after_seconds (600 s)
    blocked = st.nodes[NODE].blocked_since
    assert blocked is not None and (gate.opened_at - blocked).total_seconds() < 60
    assert await external_runs(sim) == [] and kubelet(sim, NODE) != NEW
    await handle.cancel()
