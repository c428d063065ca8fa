"""Issue 16 end to end: a rollout whose plan is larger than ``window_node_leases_above`` leases
each node only while it is in the node window (workflows.machineconfig.leasing), so the number
of lease children stays near the pools plus maxUnavailable instead of one per planned node
(Temporal caps a workflow's pending children at 2,000). On a generated 20-node pool with
maxUnavailable 2 and the threshold at 0: the rollout completes every node; at no time did more
node leases run than the window needs (the nodes in flight, as many look-ahead nodes, and a few
released ones still closing); node leases were started along the run, not all before the first
node; and every lease workflow has closed at the end (all read from the
rollout's own history and the lease workflows' descriptions)."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from temporalio.client import WorkflowExecutionStatus

from clustersim.scenario import generate_scenario
from tests.e2e.harness import drive, fast_timings, start_rollout

pytestmark = pytest.mark.e2e

SCALE = 0.05
NODES, WINDOW = 20, 2
FAST = fast_timings(SCALE)


def open_leases(events: list[Any]) -> tuple[int, int, int]:
    """From the rollout's history: (most node leases open at once, node leases started before the
    first node run, node leases started in all). A lease is open from its start until the
    history records its child's completion (or failure, termination)."""
    ended_types = {"child_workflow_execution_completed_event_attributes", "child_workflow_execution_failed_event_attributes",
                   "child_workflow_execution_terminated_event_attributes", "child_workflow_execution_canceled_event_attributes"}
    initiated: dict[int, str] = {}
    open_now: set[str] = set()
    most = before_first = started = 0
    first_node_run = False
    for ev in events:
        if ev.HasField("start_child_workflow_execution_initiated_event_attributes"):
            a = ev.start_child_workflow_execution_initiated_event_attributes
            initiated[ev.event_id] = a.workflow_id
            if a.workflow_type.name == "NodeRolloutWorkflow":
                first_node_run = True
            elif ":" in a.workflow_id.rsplit("/", 1)[-1]:  # lease/<cluster>/node:<name>
                started += 1
                before_first += 0 if first_node_run else 1
                open_now.add(a.workflow_id)
                most = max(most, len(open_now))
        for field in ended_types:
            if ev.HasField(field):
                open_now.discard(getattr(ev, field).workflow_execution.workflow_id)
    return most, before_first, started


@pytest.mark.timeout(600)
async def test_large_plan_leases_nodes_in_the_window_and_closes_them_all(
    sim_factory: Any, worker_process_factory: Any, dev_server: Any, temporal_client: Any
) -> None:
    scenario = generate_scenario(nodes=NODES, pods=NODES, pools={"worker": NODES}, name="window-leases", reboot_seconds=20,
                                 write_files_seconds=1, pod_start_seconds=1, namespaces=2, pods_per_deployment=1)
    sim = await sim_factory(scenario, time_scale=SCALE)
    queue = f"lk-winlease-{uuid.uuid4().hex[:6]}"
    worker = worker_process_factory(address=dev_server.address, kubeconfig=sim.kubeconfig_path, task_queue=queue)
    await worker.start()
    cluster = f"winlease-{uuid.uuid4().hex[:6]}"
    handle = await start_rollout(temporal_client, queue, cluster=cluster, pools=["worker"], max_unavailable=WINDOW,
                                 window_node_leases_above=0, **FAST)
    result = await drive(handle, timeout=400)
    assert result.outcome == "completed", result.message
    assert result.summary.done == NODES and len(result.nodes) == NODES

    events = [ev async for ev in handle.fetch_history_events()]
    most, before_first, started = open_leases(events)
    print(f"node leases: {started} started, {before_first} before the first node run, at most {most} open at once")
    # Per node in flight: its own lease and a look-ahead one, plus leases released a moment ago and
    # still closing; never one lease per planned node.
    assert started == NODES, started  # each node was leased once, along the run
    # (measured: 3 before the first node run, at most 6 open at once; half the pool is the bound)
    assert WINDOW <= before_first <= 2 * WINDOW and WINDOW <= most <= NODES // 2, (before_first, most)
    # Every lease workflow of the run has closed (lease-release-waits-closed covers the window's too).
    ids = [a.start_child_workflow_execution_initiated_event_attributes.workflow_id for a in events
           if a.HasField("start_child_workflow_execution_initiated_event_attributes")]
    for wid in [i for i in ids if i.startswith("lease/")]:
        desc = await temporal_client.get_workflow_handle(wid).describe()
        assert desc.status == WorkflowExecutionStatus.COMPLETED, (wid, desc.status)
    await worker.stop()
