"""R3d nodes end to end: NodeUpgradeWorkflow on a real dev server, a real worker process and
clustersim ``r3-okd310-upgrade``, with the ansible-playbook stand-in as the node action.

Facts come from the simulator (Node kubelet versions, the stand-in's invocation log), not from
lockkeeper's own report.
"""

from __future__ import annotations

import asyncio
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from temporalio.client import Client, WorkflowHandle

from clustersim import ClusterSim
from clustersim.external import shipped_files
from clustersim.scenario import load_scenario
from workflows.kit.models import ApproveInput, GateState
from workflows.node_upgrade import NodeUpgradeWorkflow
from workflows.node_upgrade.models import (
    BatchPolicy,
    NodeAction,
    NodeSelection,
    NodeUpgradeInput,
    NodeUpgradeResult,
    NodeUpgradeStatus,
)

pytestmark = pytest.mark.e2e

SHIM = str(Path(sys.executable).parent / "clustersim-ansible-playbook")
PLAYBOOK = "/usr/share/ansible/openshift-ansible/playbooks/byo/openshift-cluster/upgrades/v3_10/upgrade_nodes.yml"
NEW = "v1.10.0+b81c8f8"
MASTERS = ["master01.example.com", "master02.example.com", "master03.example.com"]
SCALE = 0.02

#: The scenario's openshift-ansible inventory (its ``external.files``, what ``lockkeeper sim serve
#: --write-files`` writes for the README's R3d run): every node with its node group.
INVENTORY = shipped_files("r3-okd310-upgrade")["inventory"]


def r3_scenario() -> Any:
    """r3-okd310-upgrade as bundled: its ``external`` section runs the ansible-playbook stand-in."""
    sc = load_scenario("r3-okd310-upgrade")
    assert sc.external is not None and sc.external.get("node_group_configmaps") is True
    return sc


def upgrade_action(tmp: Path) -> NodeAction:
    """The stand-in for one node: ``-e openshift_upgrade_nodes_label=kubernetes.io/hostname={node}``."""
    inv = tmp / "hosts"
    inv.write_text(INVENTORY)
    return NodeAction(argv=[SHIM, "-i", str(inv), PLAYBOOK, "-e", "openshift_upgrade_nodes_label=kubernetes.io/hostname={node}"],
                      timeout_seconds=120)


def upgrade_input(tmp: Path, selector: str, policy: BatchPolicy) -> NodeUpgradeInput:
    return NodeUpgradeInput(
        selection=NodeSelection(label_selector=selector, masters=MASTERS), policy=policy, target_version=NEW,
        action=upgrade_action(tmp), search_attributes=False, approvals={"requested_by": "e2e"}, ready_timeout_seconds=120,
        ready_poll_seconds=0.5, drain={"wait_seconds": 5, "backoff_initial_seconds": 0.5, "backoff_max_seconds": 2},
        calls={"short_call_seconds": 15, "heartbeat_seconds": 5},
    )


#: The 3.10 API's static-pod manifest (what the control-plane upgrade writes on every master).
#: The 3.10 API manifest the scenario ships for the README's control-plane upgrade.
API_310_MANIFEST = shipped_files("r3-okd310-upgrade")["apiserver.yaml"]


async def control_plane_on_310(sim: ClusterSim) -> None:
    """The state the control-plane upgrade leaves (R3's order: masters before nodes): every
    master's API restarted from the 3.10 manifest, so ``/version`` reports 3.10's Kubernetes
    and a node upgrade to 3.10's kubelet passes its version-skew check."""
    from clustersim.masters.model import API_MANIFEST

    masters, hosts = sim.components["masters"], sim.components["hosts"]  # type: ignore[attr-defined]
    hosts.hosts["master01.example.com"].files["/etc/origin/master/freeipa_ldap_ca.crt"] = "ca\n"  # symptom (c) fixed
    for m in masters.masters:
        hosts.hosts[m].files[API_MANIFEST] = API_310_MANIFEST
    await asyncio.gather(*(masters.restart(m, "api") for m in masters.masters))


async def sim_get(sim: ClusterSim, path: str) -> Any:
    async with aiohttp.ClientSession() as http, http.get(f"{sim.url}/_sim/{path}") as resp:
        assert resp.status == 200, await resp.text()
        return await resp.json()


def kubelet(sim: ClusterSim, node: str) -> str:
    return sim.store.get("nodes", node)["status"]["nodeInfo"]["kubeletVersion"]


async def external_runs(sim: ClusterSim) -> list[dict[str, Any]]:
    ext = await sim_get(sim, "external")
    return ext if isinstance(ext, list) else ext.get("runs", [])


def hosts_env(sim: ClusterSim) -> dict[str, str]:
    return {"CLUSTERSIM_URL": sim.url, **sim.components["hosts"].client_env()}  # type: ignore[attr-defined]


async def status_of(handle: WorkflowHandle[Any, Any]) -> NodeUpgradeStatus:
    return await handle.query("status", result_type=NodeUpgradeStatus)


async def wait_for(handle: WorkflowHandle[Any, Any], pred: Any, timeout: float = 300.0) -> NodeUpgradeStatus:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        st = await status_of(handle)
        if pred(st):
            return st
        desc = await handle.describe()
        if desc.status is not None and desc.status.name != "RUNNING":
            raise AssertionError(f"closed early: {st.error} {st.phase}")
        await asyncio.sleep(0.3)
    raise AssertionError(f"timed out; status {(await status_of(handle)).model_dump_json(indent=1)[:3000]}")


async def test_infra_canary_then_serial_50_percent(dev_server: Any, temporal_client: Client, sim_factory: Any,
                                                   worker_process_factory: Any, task_queue: str, tmp_path: Path) -> None:
    sim = await sim_factory(r3_scenario(), time_scale=SCALE)
    await control_plane_on_310(sim)
    worker = worker_process_factory(address=dev_server.address, kubeconfig=sim.kubeconfig_path, task_queue=task_queue,
                                    env=hosts_env(sim))
    await worker.start()
    inp = upgrade_input(tmp_path, "region=infra", BatchPolicy(serial="50%", canary=1))
    handle = await temporal_client.start_workflow(NodeUpgradeWorkflow.run, inp, id=f"nu-{uuid.uuid4().hex[:8]}",
                                                  task_queue=task_queue, result_type=NodeUpgradeResult)
    st = await wait_for(handle, lambda s: any(g.id == "canary" and g.state == GateState.WAITING for g in s.gates))
    # The canary gate opens after the canary and before any other node.
    assert kubelet(sim, "node01.example.com") == NEW
    assert kubelet(sim, "node02.example.com") != NEW
    runs = await external_runs(sim)
    assert [r["extra_vars"] for r in runs] == [{"openshift_upgrade_nodes_label": "kubernetes.io/hostname=node01.example.com"}]
    assert st.plan is not None and st.plan.canary == ["node01.example.com"] and st.plan.batches == [["node02.example.com"]]
    await handle.execute_update("approve", ApproveInput(gate_id="canary", identity="e2e-approver"))
    result = await handle.result()
    assert result.outcome == "completed", result.message
    for n in ("node01.example.com", "node02.example.com"):
        assert kubelet(sim, n) == NEW
        assert not sim.store.get("nodes", n)["spec"].get("unschedulable"), f"{n} left cordoned"
        # 3.10 put them in node-config-infra: the new role label beside the old ones (R3e's start)
        labels = sim.store.get("nodes", n)["metadata"]["labels"]
        assert (labels.get("node-role.kubernetes.io/infra"), labels.get("region")) == ("true", "infra"), labels
    assert "node-role.kubernetes.io/infra" not in sim.store.get("nodes", "node03.example.com")["metadata"]["labels"]
    # masters and compute nodes untouched
    assert all(kubelet(sim, m) != NEW for m in MASTERS)
    assert kubelet(sim, "node03.example.com") != NEW
    # exactly one stand-in run per node
    assert len(await external_runs(sim)) == 2

    # A re-run finds both done and touches nothing.
    again = await temporal_client.start_workflow(NodeUpgradeWorkflow.run, inp, id=f"nu-{uuid.uuid4().hex[:8]}",
                                                 task_queue=task_queue, result_type=NodeUpgradeResult)
    res2 = await again.result()
    assert res2.outcome == "completed" and res2.plan is not None and res2.plan.done == ["node01.example.com", "node02.example.com"]
    assert len(await external_runs(sim)) == 2
