"""Issue 16 end to end: a rollout whose plan is larger than ``window_node_leases_above`` leases
each node only while it is in the node window, and (patch ``node-run-holds-node-lease``) each
node run holds its node's lease itself, as its own child, so that the lease ends with the run
(parent close policy TERMINATE, applied by the real server) and the rollout's history records no
node lease at all. On a generated 20-node pool with maxUnavailable 2 and the threshold at 0: the
rollout completes every node; its history starts no node lease; every node run's first child is
its node's lease; at no time did more node leases run than the window needs (the nodes in flight
and a few whose run just ended); and every lease has closed at the end (read from the lease
workflows' descriptions)."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pytest
from temporalio.client import WorkflowExecutionStatus

from clustersim.scenario import generate_scenario
from tests.e2e.harness import drive, fast_timings, max_overlap, start_rollout

pytestmark = pytest.mark.e2e

SCALE = 0.05
NODES, WINDOW = 20, 2
FAST = fast_timings(SCALE)


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
    started = [e.start_child_workflow_execution_initiated_event_attributes.workflow_id for e in events
               if e.HasField("start_child_workflow_execution_initiated_event_attributes")]
    assert not [i for i in started if i.startswith(f"lease/{cluster}/node:")], started  # none in the rollout's history
    spans = []
    for node in result.nodes:
        run = temporal_client.get_workflow_handle(f"{handle.id}/node/{node}/1")
        run_children = [e.start_child_workflow_execution_initiated_event_attributes.workflow_id
                        async for e in run.fetch_history_events()
                        if e.HasField("start_child_workflow_execution_initiated_event_attributes")]
        lease_id = f"lease/{cluster}/node:{node}"
        assert run_children == [lease_id], run_children
        desc = None
        for _ in range(100):  # the server applies the parent close policy just after the run closes
            desc = await temporal_client.get_workflow_handle(lease_id).describe()
            if desc.status != WorkflowExecutionStatus.RUNNING:
                break
            await asyncio.sleep(0.1)
        assert desc is not None and desc.status == WorkflowExecutionStatus.TERMINATED, (lease_id, desc and desc.status)
        assert desc.parent_id == run.id and desc.close_time is not None
        spans.append((desc.start_time.timestamp(), desc.close_time.timestamp()))
    most = max_overlap(spans)
    print(f"node leases: {len(spans)}, at most {most} open at once")
    # The nodes in flight, plus a lease or two whose run just closed; never one per planned node.
    assert WINDOW <= most <= NODES // 2, most
    # The pool's lease has closed too (released and waited for).
    for wid in [i for i in started if i.startswith("lease/")]:
        desc = await temporal_client.get_workflow_handle(wid).describe()
        assert desc.status == WorkflowExecutionStatus.COMPLETED, (wid, desc.status)
    await worker.stop()
