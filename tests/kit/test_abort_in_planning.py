"""``abort`` during planning ends every procedure aborted at once (issue 18, "abort works in every
phase, planning included"), with a real dev server, a real worker process and the simulator over
real HTTP.

For each procedure that plans from a read-only activity (the drain's node read, the node
upgrade's node list, the nodeSelector scan, the runtime migration's preconditions, the network
migration's state read, the VXLAN preflight, the first GlusterFS read), every API request hangs
and then drops, so the planning read keeps failing and retrying. ``abort`` is sent while that read
is pending: the procedure ends ``aborted`` (its result names who aborted and why, status phase
``aborted``, the read's activity cancelled, its leases released) well before the planning retries
would have given up (at least 5 attempts of ``HANG_SECONDS`` each), and nothing was written to the
cluster.
"""

from __future__ import annotations

import asyncio
import sys
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest
from temporalio.client import WorkflowExecutionStatus

from activities.host.models import ExecBackend, HostAccess
from clustersim.scenario import generate_scenario
from tests.support.harness import write_requests
from workflows.drain.models import NodeDrainInput
from workflows.gluster.models import GlusterRecoveryInput
from workflows.kit.models import ApprovalRules, ControlInput
from workflows.kit.scopes import cluster_scope, node_scope, scope_workflow_id
from workflows.network_migration.models import NetworkMigrationInput
from workflows.node_selectors.models import NodeSelectorMigrationInput
from workflows.node_upgrade.models import NodeAction, NodeSelection, NodeUpgradeInput
from workflows.runtime_migration.models import ExternalStep, GlusterTargetSpec, RuntimeMigrationInput
from workflows.vxlan_port.models import MasterAccess, VxlanPortChangeInput

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(240)]

#: Every API request hangs this long, then the connection drops (one failed attempt each).
HANG_SECONDS = 8
#: The kit's planning retry gives up after 5 attempts 1, 2, 4, 8 s apart: >= 5 * 8 + 15 s with the
#: API hanging (the GlusterFS read much later). The abort must end the procedure well within that.
ABORT_WITHIN = 30.0
REASON = "wrong cluster"
WHO = "e2e-operator"

#: A host nobody listens on: the runtime migration's and the VXLAN run's host access (never used:
#: they are aborted before any host command).
NOWHERE = HostAccess(backend=ExecBackend.SSH, host="127.0.0.1", port=1, user="root")


@dataclass(frozen=True)
class Case:
    """One procedure: its workflow type, its input for (node, cluster), the planning activity to
    abort, the API requests that hang (verbs and resources, None: all), and the lease scopes it
    holds while planning."""

    name: str
    workflow: str
    make: Callable[[str, str], Any]
    activity: str
    resources: list[str] | None = None
    verbs: list[str] | None = None
    leases: Callable[[str, str], list[str]] = field(default=lambda node, cluster: [])


CASES = [
    Case("drain", "NodeDrainWorkflow", lambda node, c: NodeDrainInput(node=node, cluster=c, approvals={"requested_by": "e2e"}), "read_node",
         leases=lambda node, c: [node_scope(c, node)]),
    Case("node-upgrade", "NodeUpgradeWorkflow",
         lambda node, c: NodeUpgradeInput(cluster=c, selection=NodeSelection(), action=NodeAction(argv=["true", "{node}"]), approvals=ApprovalRules(requested_by="e2e"),
                                          search_attributes=False), "read_upgrade_nodes"),
    Case("node-selectors", "NodeSelectorMigrationWorkflow",
         lambda node, c: NodeSelectorMigrationInput(cluster=c, mapping={"region=infra": {"node-role.kubernetes.io/infra": "true"}},
                                                    approvals=ApprovalRules(requested_by="e2e"), search_attributes=False), "scan_node_selectors"),
    # Its preconditions come first, before any lease: the Node list of the names-exist check
    # hangs, so the abort lands while check_preconditions runs (the kit cancels it).
    Case("runtime-migration", "RuntimeMigrationWorkflow",
         lambda node, c: RuntimeMigrationInput(cluster=c, nodes=[node], host_access={node: NOWHERE}, gluster=GlusterTargetSpec(namespace="app-storage"),
                                               scaleup_step=ExternalStep(argv=[sys.executable, "-c", "pass"]), approvals=ApprovalRules(requested_by="e2e"),
                                               search_attributes=False),
         "check_preconditions", resources=["nodes"], verbs=["get", "list"]),
    Case("network-migration", "NetworkMigrationWorkflow",
         lambda node, c: NetworkMigrationInput(cluster=c, approvals={"requested_by": "e2e"}, search_attributes=False), "read_migration_state"),
    Case("vxlan-port", "VxlanPortChangeWorkflow",
         lambda node, c: VxlanPortChangeInput(cluster=c, new_port=4889, custom_image="registry.example.com/ose-node:custom",
                                              host_access={"master-0": NOWHERE}, approvals=ApprovalRules(requested_by="e2e"),
                                              search_attributes=False,
                                              masters=[MasterAccess(name="master-0", access=NOWHERE, api_url="https://127.0.0.1:1")]),
         "preflight_vxlan_port", leases=lambda node, c: [cluster_scope(c)]),
    Case("gluster", "GlusterRecoveryWorkflow",
         lambda node, c: GlusterRecoveryInput(cluster=c, mode="recover", search_attributes=False), "read_gluster"),
]


async def _pending(handle: Any, activity: str, timeout: float = 30.0) -> Any:
    """The procedure's pending ``activity`` once it exists (describe's raw description)."""
    deadline = time.monotonic() + timeout
    seen: list[str] = []
    while time.monotonic() < deadline:
        desc = await handle.describe()
        for act in desc.raw_description.pending_activities:
            if act.activity_type.name == activity:
                return act
            seen.append(f"{act.activity_type.name}#{act.attempt}: {act.last_failure.message[:200]}")
        await asyncio.sleep(0.2)
    raise AssertionError(f"{activity} never showed as pending; pending instead: {seen[-3:]}")


async def _lease_status(client: Any, scope: str, timeout: float = 15.0) -> WorkflowExecutionStatus | None:
    """The lease workflow's status once it is no longer running (released leases complete)."""
    handle = client.get_workflow_handle(scope_workflow_id(scope))
    deadline = time.monotonic() + timeout
    while True:
        desc = await handle.describe()
        if desc.status != WorkflowExecutionStatus.RUNNING or time.monotonic() >= deadline:
            return desc.status
        await asyncio.sleep(0.2)


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
async def test_abort_while_planning_ends_the_procedure_aborted_with_nothing_written(
    case: Case, sim_factory: Any, worker_for: Any, temporal_client: Any, task_queue: str
) -> None:
    sim = await sim_factory(generate_scenario(nodes=2, pods=4, pools={"worker": 2}, name=f"abort-planning-{case.name}",
                                              pod_start_seconds=1, namespaces=1, pods_per_deployment=2), time_scale=0.05)
    await worker_for(sim)
    node = min(n["metadata"]["name"] for n in sim.store.list("nodes"))
    cluster = f"abort-planning-{case.name}-{uuid.uuid4().hex[:6]}"
    sim.faults.configure(timeout=1.0, timeout_seconds=HANG_SECONDS, resources=case.resources or [], verbs=case.verbs or [])
    handle = await temporal_client.start_workflow(case.workflow, case.make(node, cluster), id=f"{cluster}-wf", task_queue=task_queue)

    await _pending(handle, case.activity)
    before = await handle.query("status")
    assert before["phase"] in ("planning", "running"), before["phase"]
    for scope in case.leases(node, cluster):  # held while planning
        assert await temporal_client.get_workflow_handle(scope_workflow_id(scope)).describe()

    await handle.execute_update("abort", ControlInput(identity=WHO, reason=REASON))
    result = await asyncio.wait_for(handle.result(), ABORT_WITHIN)  # the retries would need far longer

    assert result["outcome"] == "aborted", result
    message = result["message"]
    assert WHO in message and REASON in message and "nothing was changed" in message, message
    st = await handle.query("status")
    assert st["phase"] == "aborted", st["phase"]
    history = await handle.fetch_history()
    scheduled = [e.activity_task_scheduled_event_attributes.activity_type.name for e in history.events
                 if e.HasField("activity_task_scheduled_event_attributes")]
    assert scheduled[-1] == case.activity, scheduled  # nothing ran after the aborted read
    assert any(e.HasField("activity_task_cancel_requested_event_attributes") for e in history.events)
    for scope in case.leases(node, cluster):
        assert await _lease_status(temporal_client, scope) == WorkflowExecutionStatus.COMPLETED, scope  # released
    sim.faults.clear()
    assert not write_requests(sim.requests)
    assert not (sim.store.get("nodes", node).get("spec") or {}).get("unschedulable")
