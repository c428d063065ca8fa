"""The whole R3 upgrade end to end: ClusterUpgradeWorkflow on a real dev server, a real worker process
and clustersim ``r3-okd310-upgrade``: GlusterFS recovery (the offline brick), control plane master
by master, the masters' kubelets, infra nodes with a canary, compute nodes, the nodeSelector
migration. Facts come from the simulator (Nodes, DCs, ``/_sim/api/availability``)."""

from __future__ import annotations

import asyncio
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from temporalio.client import Client, WorkflowHandle

from clustersim import ClusterSim
from tests.support.cli_status import person_status
from tests.control_plane.test_upgrade_control_plane_e2e import CA, assert_one_master_down_at_most, cp_input, hosts_env, sim_get
from tests.node_upgrade.test_upgrade_nodes_e2e import MASTERS, NEW, control_plane_on_310, r3_scenario, upgrade_input
from tests.support.replay import record
from workflows.cluster_upgrade import ClusterUpgradeWorkflow
from workflows.cluster_upgrade.models import ClusterUpgradeInput, ClusterUpgradePlan, ClusterUpgradeResult, ClusterUpgradeStatus
from workflows.gluster.models import GlusterHealthParams, GlusterRecoveryInput
from workflows.kit.models import ApproveInput, GateState
from workflows.node_upgrade.models import BatchPolicy, NodeSelection
from workflows.node_selectors.models import NodeSelectorMigrationInput

pytestmark = pytest.mark.e2e

SCALE = 0.02
INFRA = {"node-role.kubernetes.io/infra": "true"}


def plan(sim: ClusterSim, tmp: Path) -> ClusterUpgradePlan:
    masters = upgrade_input(tmp, "node-role.kubernetes.io/master=true", BatchPolicy(serial=1)).model_copy(
        update={"selection": NodeSelection(nodes=list(MASTERS), exclude_selector=None)})
    return ClusterUpgradePlan(
        # R3a first: the registry volume's brick on 10.0.0.12 is Online N (the scenario's symptom);
        # the recovery restarts master03's GlusterFS pod (no per-host approval in this test).
        gluster=GlusterRecoveryInput(mode="recover", approve_pod_delete=False, replacement_timeout_seconds=120, reread_delay_seconds=0.5,
                                     heal=GlusterHealthParams(interval_seconds=1, max_interval_seconds=2, timeout_seconds=120,
                                                              stall_after_seconds=None)),
        control_plane=cp_input(sim),
        master_nodes=masters,
        infra_nodes=upgrade_input(tmp, "region=infra", BatchPolicy(serial="50%", canary=1)),
        compute_nodes=upgrade_input(tmp, "node-role.kubernetes.io/compute=true", BatchPolicy(serial="50%")),
        node_selectors=NodeSelectorMigrationInput(
            mapping={"region=infra": dict(INFRA), "region=primary": {"node-role.kubernetes.io/compute": "true"}},
            approve_plan=False, approve_label_removal=False, revert_window_seconds=0, poll_seconds=0.5, rollout_timeout_seconds=120,
            pods_timeout_seconds=60),
    )


async def wait_gate(handle: WorkflowHandle[Any, Any], gate_id: str, timeout: float = 120.0) -> ClusterUpgradeStatus:
    """The upgrade's status once gate ``gate_id`` (its own or a phase's) waits; fails after ``timeout`` seconds."""
    end = time.monotonic() + timeout
    while True:
        st = await handle.query("status", result_type=ClusterUpgradeStatus)
        if any(g.id == gate_id and g.state == GateState.WAITING for g in st.gates):
            return st
        assert time.monotonic() < end, f"gate {gate_id} never waited: {st.gates}"
        await asyncio.sleep(0.3)


async def node_groups(sim: ClusterSim, stop: asyncio.Event) -> None:
    """What 3.10's node groups do as each infra node comes back on the new kubelet: label it
    ``node-role.kubernetes.io/infra=true`` (the stand-in only changes the kubelet)."""
    while not stop.is_set():
        for n in ("node01.example.com", "node02.example.com"):
            obj = sim.store.get("nodes", n)
            if obj["status"]["nodeInfo"]["kubeletVersion"] == NEW and "node-role.kubernetes.io/infra" not in obj["metadata"]["labels"]:
                sim.store.mutate("nodes", n, None, lambda o: o["metadata"]["labels"].update(INFRA))
        await asyncio.sleep(0.2)


async def test_whole_cluster_upgrade(dev_server: Any, temporal_client: Client, sim_factory: Any, worker_process_factory: Any,
                                     task_queue: str, tmp_path: Path) -> None:
    sim = await sim_factory(r3_scenario(), time_scale=SCALE)
    worker = worker_process_factory(address=dev_server.address, kubeconfig=sim.kubeconfig_path, task_queue=task_queue,
                                    env={"CLUSTERSIM_URL": sim.url, **hosts_env(sim)})
    await worker.start()
    host = sim.components["hosts"].hosts["master01.example.com"]  # type: ignore[attr-defined]
    host.files[CA] = host.files["/etc/origin/master/ipa-ca.crt"]  # the CA fault has its own test
    stop = asyncio.Event()
    labeller = asyncio.create_task(node_groups(sim, stop))
    handle: WorkflowHandle[Any, Any] = await temporal_client.start_workflow(
        ClusterUpgradeWorkflow.run, ClusterUpgradeInput(plan=plan(sim, tmp_path), search_attributes=False, approvals={"requested_by": "e2e"}),
        id=f"cu-{uuid.uuid4().hex[:8]}", task_queue=task_queue, result_type=ClusterUpgradeResult)
    approved: set[str] = set()
    end = time.monotonic() + 900
    try:
        while time.monotonic() < end:
            desc = await handle.describe()
            if desc.status is not None and desc.status.name != "RUNNING":
                break
            st = await handle.query("status", result_type=ClusterUpgradeStatus)
            # No gate of its own waits (a phase gate); a child's gates show with their owner.
            own = [g for g in st.gates if g.state == GateState.WAITING and g.workflow_id is None]
            assert not own, f"phase gate: {[g.comment for g in own]}"
            running = {p.child_id for p in st.phases if p.state == "running"}
            assert {g.workflow_id for g in st.gates if g.workflow_id} <= running, st.gates
            cur = next((p for p in st.phases if p.state == "running"), None)
            if cur is not None and cur.child_id and cur.name == "infra-nodes" and cur.child_id not in approved:
                child = temporal_client.get_workflow_handle(cur.child_id)
                try:
                    cst = await child.query("status")
                except Exception:  # noqa: BLE001 - the child may not have started its first task yet
                    cst = None
                if cst is not None and any(g["id"] == "canary" and g["state"] == "waiting" for g in cst.get("gates", [])):
                    # the parent's status shows the child's own state: its canary gate waits
                    for _ in range(50):
                        pst = await handle.query("status", result_type=ClusterUpgradeStatus)
                        ph = next(p for p in pst.phases if p.name == "infra-nodes")
                        if ph.child_status is not None and "canary" in [g.id for g in ph.child_status.gates]:
                            break
                        await asyncio.sleep(0.1)
                    assert ph.child_status is not None and [g.id for g in ph.child_status.gates] == ["canary"], ph.child_status
                    assert "canary" in (pst.waiting_for or ""), pst.waiting_for
                    await child.execute_update("approve", ApproveInput(gate_id="canary", identity="e2e-approver"))
                    approved.add(cur.child_id)
            await asyncio.sleep(0.5)
        result = await handle.result()
        await record(handle, "ClusterUpgradeWorkflow.r3")
    finally:
        stop.set()
        await labeller
    assert result.outcome == "completed", result.message
    assert approved, "the canary gate was approved on the infra phase's child"
    assert [p.state for p in result.phases] == ["done", "skipped", "done", "done", "done", "done", "done"], result.phases
    for n in [*MASTERS, "node01.example.com", "node02.example.com", "node03.example.com", "node04.example.com"]:
        obj = sim.store.get("nodes", n)
        assert obj["status"]["nodeInfo"]["kubeletVersion"] == NEW, n
        assert "region" not in obj["metadata"]["labels"] and "zone" not in obj["metadata"]["labels"], (n, obj["metadata"]["labels"])
    dc = sim.store.get("deploymentconfigs.apps.openshift.io", "docker-registry", "default")
    assert dc["spec"]["template"]["spec"]["nodeSelector"] == INFRA
    pods = [p for p in sim.store.list("pods", "default") if p["metadata"]["labels"].get("deploymentconfig") == "docker-registry"]
    assert pods and all(p["status"]["phase"] == "Running" for p in pods)
    assert_one_master_down_at_most(await sim_get(sim, "api/availability"))
    # R3a recovered the offline brick first: every brick online at the end, master03's pod replaced
    g = await sim_get(sim, "gluster")
    assert all(b["online"] for v in g["volumes"] for b in v["bricks"]), g["volumes"]
    assert sim.store.try_get("pods", "glusterfs-storage-r24wg", "glusterfs") is None


async def test_failed_phase_is_fixed_and_retried(dev_server: Any, temporal_client: Client, sim_factory: Any, worker_for: Any,
                                                 task_queue: str, tmp_path: Path) -> None:
    """A phase whose plan fails (no node carries the label yet) opens phase/<name>/1; after the
    fix, approving retries the phase as a new child and the upgrade completes."""
    sim = await sim_factory(r3_scenario(), time_scale=SCALE)
    await control_plane_on_310(sim)
    await worker_for(sim, env={"CLUSTERSIM_URL": sim.url})
    selector = "upgrade-wave=one"
    plan_ = ClusterUpgradePlan(compute_nodes=upgrade_input(tmp_path, selector, BatchPolicy(serial=1)))
    handle: WorkflowHandle[Any, Any] = await temporal_client.start_workflow(
        ClusterUpgradeWorkflow.run, ClusterUpgradeInput(plan=plan_, search_attributes=False, approvals={"requested_by": "e2e"}),
        id=f"cu-{uuid.uuid4().hex[:8]}", task_queue=task_queue, result_type=ClusterUpgradeResult)
    st = await wait_gate(handle, "phase/compute-nodes/1")
    assert st.current_phase == "compute-nodes"
    shown = await person_status(dev_server.address, handle.id)  # the command that answers the gate, no repr
    assert f"lockkeeper approve {handle.id} phase/compute-nodes/1 -m REASON" in shown, shown
    ph = next(p for p in st.phases if p.name == "compute-nodes")
    assert ph.state == "waiting-retry" and "no nodes matched" in (ph.message or "") and ph.child_id and ph.child_id.endswith("/1")
    sim.store.mutate("nodes", "node03.example.com", None, lambda o: o["metadata"]["labels"].update({"upgrade-wave": "one"}))
    await handle.execute_update("approve", ApproveInput(gate_id="phase/compute-nodes/1", identity="e2e-approver", comment="labelled"))
    result = await handle.result()
    assert result.outcome == "completed", result.message
    ph = next(p for p in result.phases if p.name == "compute-nodes")
    assert ph.attempts == 2 and ph.state == "done"
    assert sim.store.get("nodes", "node03.example.com")["status"]["nodeInfo"]["kubeletVersion"] == NEW


async def test_dry_run_prints_every_phase_with_nodes_and_batches(dev_server: Any, temporal_client: Client, sim_factory: Any,
                                                                 worker_process_factory: Any, task_queue: str, tmp_path: Path) -> None:
    sim = await sim_factory(r3_scenario(), time_scale=SCALE)
    worker = worker_process_factory(address=dev_server.address, kubeconfig=sim.kubeconfig_path, task_queue=task_queue,
                                    env={"CLUSTERSIM_URL": sim.url, **hosts_env(sim)})
    await worker.start()
    before = {n["metadata"]["name"]: (n["metadata"]["labels"], n["status"]["nodeInfo"]["kubeletVersion"]) for n in sim.store.list("nodes")}
    handle: WorkflowHandle[Any, Any] = await temporal_client.start_workflow(
        ClusterUpgradeWorkflow.run, ClusterUpgradeInput(plan=plan(sim, tmp_path), search_attributes=False, approvals={"requested_by": "e2e"}, dry_run=True),
        id=f"cu-{uuid.uuid4().hex[:8]}", task_queue=task_queue, result_type=ClusterUpgradeResult)
    result = await handle.result()
    assert result.outcome == "dry-run"
    lines = {p.name: "\n".join(p.dry_run_lines) for p in result.phases}
    assert "master01.example.com -> master02.example.com -> master03.example.com" in lines["control-plane"]
    assert "canary: [node01.example.com] then approval gate" in lines["infra-nodes"]
    assert "batches: [node02.example.com]" in lines["infra-nodes"]
    assert "batches: [node03.example.com][node04.example.com]" in lines["compute-nodes"]
    # the selector migration would be refused today: the infra nodes do not carry the new label yet
    assert "would fail today" in lines["node-selectors"] and "docker-registry" in lines["node-selectors"]
    # Issue 39: each phase's own dry run checked its own preconditions, listed as it lists them
    # (no second copy in the upgrade): the control plane's version step and etcd backup and its
    # programs on the masters, the GlusterFS checks, each node phase's action program and skew.
    for name in ("gluster", "control-plane", "master-nodes", "infra-nodes", "compute-nodes"):
        assert "preconditions (" in lines[name], (name, lines[name])
    assert "update-step" in lines["control-plane"] and "etcd backup" in lines["control-plane"], lines["control-plane"]
    assert "master-restart" in lines["control-plane"], lines["control-plane"]
    # Today the kubelets would be newer than the 3.9 control plane: shown failed, but not counted,
    # as this plan upgrades the control plane first.
    assert "version-skew" in lines["compute-nodes"] and "expected today" in lines["compute-nodes"], lines["compute-nodes"]
    assert not any("version-skew" in p for p in result.problems), result.problems
    # No phase child wrote: every phase ran dry (each child's own result says so).
    assert all(p.child_id for p in result.phases if p.state != "skipped"), result.phases
    assert {n["metadata"]["name"]: (n["metadata"]["labels"], n["status"]["nodeInfo"]["kubeletVersion"])
            for n in sim.store.list("nodes")} == before


async def test_an_abort_reaches_the_running_phase(dev_server: Any, temporal_client: Client, sim_factory: Any, worker_for: Any,
                                                  task_queue: str, tmp_path: Path) -> None:
    """Aborting the cluster upgrade while a phase waits at its canary gate aborts that phase too
    (the kit's ``parent_abort`` signal): the child ends aborted, naming the cluster upgrade's
    abort, and the upgrade ends aborted without opening a retry gate or waiting for the child's gate."""
    from workflows.kit.models import ControlInput

    sim = await sim_factory(r3_scenario(), time_scale=SCALE)
    await control_plane_on_310(sim)
    await worker_for(sim, env={"CLUSTERSIM_URL": sim.url})
    plan_ = ClusterUpgradePlan(infra_nodes=upgrade_input(tmp_path, "region=infra", BatchPolicy(serial="50%", canary=1)))
    handle: WorkflowHandle[Any, Any] = await temporal_client.start_workflow(
        ClusterUpgradeWorkflow.run, ClusterUpgradeInput(plan=plan_, search_attributes=False, approvals={"requested_by": "e2e"}),
        id=f"cu-{uuid.uuid4().hex[:8]}", task_queue=task_queue, result_type=ClusterUpgradeResult)
    st = await wait_gate(handle, "canary")
    child_id = next(p for p in st.phases if p.name == "infra-nodes").child_id
    await handle.execute_update("abort", ControlInput(identity="e2e-operator", reason="change window closed"))
    result = await asyncio.wait_for(handle.result(), 60)
    assert result.outcome == "aborted", result.message
    ph = next(p for p in result.phases if p.name == "infra-nodes")
    assert ph.state == "aborted" and ph.attempts == 1, ph
    child = await temporal_client.get_workflow_handle(child_id).result()
    assert child["outcome"] == "aborted" and "cluster upgrade aborted: change window closed" in child["message"], child
