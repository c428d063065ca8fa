"""Issue 16 end to end: a rollout whose plan is larger than ``window_node_leases_above`` leases
each node only while it is in the node window, and (patch ``node-run-is-node-lease``) each node
run is its node's lease: the rollout starts it with the node scope's lease ID, so the lease is
held exactly while the run runs and neither history records a lease workflow per node. On a
generated 20-node pool with maxUnavailable 2 and the threshold at 0: the rollout completes every
node; its history starts no node lease workflow; every node child has its node's lease ID and
starts no child of its own; at no time did more node runs (so node leases) run than
maxUnavailable, read from the runs' descriptions on the real server; the start command's lease
check lists a running node run as its node's lease; and the pool's lease has closed at the end."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from temporalio.client import WorkflowExecutionStatus

from lockkeeper.starter import lease_holders
from tests.support.harness import drive, fast_timings, max_overlap, start_rollout, worker_pool_scenario

pytestmark = pytest.mark.e2e

SCALE = 0.05
NODES, WINDOW = 20, 2
FAST = fast_timings(SCALE)


@pytest.mark.timeout(600)
async def test_large_plan_leases_nodes_in_the_window_and_closes_them_all(
    sim_factory: Any, worker_process_factory: Any, dev_server: Any, temporal_client: Any
) -> None:
    scenario = worker_pool_scenario(NODES, "window-leases")
    sim = await sim_factory(scenario, time_scale=SCALE)
    queue = f"lk-winlease-{uuid.uuid4().hex[:6]}"
    worker = worker_process_factory(address=dev_server.address, kubeconfig=sim.kubeconfig_path, task_queue=queue)
    await worker.start()
    cluster = f"winlease-{uuid.uuid4().hex[:6]}"
    handle = await start_rollout(temporal_client, queue, cluster=cluster, pools=["worker"], max_unavailable=WINDOW,
                                 window_node_leases_above=0, **FAST)
    # What `lockkeeper start` checks before it starts a procedure: a running node run is listed as
    # its node's lease (visibility, then its holder query), for a node scope and for the cluster.
    seen: dict[str, list[tuple[str, str, str]]] = {}

    async def look(status: Any) -> None:
        running = [n for n, ns in status.nodes.items() if ns.phase == "running" and ns.run_id]
        if running and "cluster" not in seen:
            node = running[0]
            seen["node"] = [h for h in await lease_holders(temporal_client, [f"node/{cluster}/{node}"])
                            if h[0] == f"node/{cluster}/{node}"]
            seen["cluster"] = await lease_holders(temporal_client, [f"cluster/{cluster}"])

    result = await drive(handle, timeout=400, on_status=look)
    assert seen["node"] and seen["node"][0][1:] == (handle.id, "machineconfig-rollout"), seen
    assert [h for h in seen["cluster"] if h[0].startswith(f"node/{cluster}/") and h[1] == handle.id], seen
    assert result.outcome == "completed", result.message
    assert result.summary.done == NODES and len(result.nodes) == NODES

    events = [ev async for ev in handle.fetch_history_events()]
    started = [(e.start_child_workflow_execution_initiated_event_attributes.workflow_id,
                e.start_child_workflow_execution_initiated_event_attributes.workflow_type.name)
               for e in events if e.HasField("start_child_workflow_execution_initiated_event_attributes")]
    runs = sorted(i for i, t in started if t == "NodeRolloutWorkflow")
    assert runs == sorted(f"lease/{cluster}/node:{n}" for n in result.nodes), started
    assert not [i for i, t in started if t == "LeaseWorkflow" and ":" in i.rsplit("/", 1)[-1]], started
    spans = []
    for run_id in runs:
        run = temporal_client.get_workflow_handle(run_id)
        run_children = [e async for e in run.fetch_history_events()
                        if e.HasField("start_child_workflow_execution_initiated_event_attributes")]
        assert run_children == [], run_id  # the run is the lease: it takes none
        desc = await run.describe()
        assert desc.workflow_type == "NodeRolloutWorkflow" and desc.status == WorkflowExecutionStatus.COMPLETED, desc.status
        assert desc.parent_id == handle.id and desc.close_time is not None
        spans.append((desc.start_time.timestamp(), desc.close_time.timestamp()))
    most = max_overlap(spans)
    print(f"node leases (node runs): {len(spans)}, at most {most} open at once")
    assert 1 <= most <= WINDOW, most  # a node lease lives exactly as long as its run
    # The pool's lease has closed too (released and waited for).
    for wid in [i for i, t in started if t == "LeaseWorkflow"]:
        desc = await temporal_client.get_workflow_handle(wid).describe()
        assert desc.status == WorkflowExecutionStatus.COMPLETED, (wid, desc.status)
    await worker.stop()
