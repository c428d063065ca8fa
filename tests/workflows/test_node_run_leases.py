"""Large plans (leases in the window): each node run takes its node's lease itself, as its own
child, for as long as it runs (patch ``node-run-holds-node-lease``,
:meth:`workflows.kit.lease.Leases.hold_while_running`). The rollout's history then records no
node lease at all; a node another procedure leased in the meantime is failed untouched, naming
that procedure; a degraded node's lease is taken over by the rollout, which keeps it until the
end so that a skip's rollback stays protected.
"""

from __future__ import annotations

import asyncio

from temporalio.client import WorkflowExecutionStatus, WorkflowHistory
from temporalio.service import RPCError, RPCStatusCode
from test_machineconfig_rollout import phase_of, rollout_input, start, terminate_quietly, wait_status
from wf_fakes import FakeCluster, old_config, r2_block_report, rollout_worker

from workflows.kit.lease import LeaseWorkflow
from workflows.kit.models import LeaseInput, NodePhase
from workflows.kit.scopes import node_scope, scope_workflow_id


async def run_lease_once_closed(client, lease_id: str, run_id: str, timeout: float = 60):
    """The description of ``lease_id`` held by the node run ``run_id``, once that run has closed
    (polled every 20 ms of real time)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while loop.time() < deadline:
        try:
            run = await client.get_workflow_handle(run_id).describe()
            if run.status != WorkflowExecutionStatus.RUNNING:
                lease = await client.get_workflow_handle(lease_id).describe()
                assert lease.parent_id == run_id, lease.parent_id
                return lease
        except RPCError as exc:
            if exc.status != RPCStatusCode.NOT_FOUND:
                raise  # not started yet otherwise
        await asyncio.sleep(0.02)
    raise AssertionError(f"node run {run_id} did not close within {timeout} s")


def started_children(history: WorkflowHistory) -> list[str]:
    return [
        e.start_child_workflow_execution_initiated_event_attributes.workflow_id
        for e in history.events
        if e.HasField("start_child_workflow_execution_initiated_event_attributes")
    ]


async def test_node_runs_hold_their_own_leases(time_skipping_env, wf_task_queue):
    fake = FakeCluster({"worker": 3})
    inp = rollout_input(max_unavailable=2, window_node_leases_above=0)
    client = time_skipping_env.client
    async with rollout_worker(client, fake, wf_task_queue):
        handle = await start(time_skipping_env, wf_task_queue, inp)
        result = await handle.result()
        parent = await handle.fetch_history()
        runs = {n: await client.get_workflow_handle(f"{handle.id}/node/{n}/1").fetch_history() for n in fake.nodes}
        leases = {n: await client.get_workflow_handle(scope_workflow_id(node_scope(inp.cluster, n))).describe() for n in fake.nodes}
    assert result.outcome == "completed" and result.summary.done == 3
    # The rollout leased its pool only; every node lease is its node run's first child.
    assert not [i for i in started_children(parent) if ":" in i.rsplit("/", 1)[-1]], started_children(parent)
    for n, h in runs.items():
        assert started_children(h) == [scope_workflow_id(node_scope(inp.cluster, n))]
        # A child of the run (its parent close policy ends it with the run: the time-skipping
        # server does not apply that policy, tests/e2e/test_window_leases.py checks it on a real one).
        assert leases[n].parent_id == f"{handle.id}/node/{n}/1"


async def test_a_node_leased_meanwhile_fails_untouched_naming_the_holder(time_skipping_env, wf_task_queue):
    fake = FakeCluster({"worker": 2})
    fake.drain_blocked["worker-0"] = r2_block_report("worker-0")  # holds the window until removed
    inp = rollout_input(max_unavailable=1, window_node_leases_above=0, pause_on_degraded=False)
    client = time_skipping_env.client
    async with rollout_worker(client, fake, wf_task_queue):
        handle = await start(time_skipping_env, wf_task_queue, inp)
        await wait_status(handle, lambda s: phase_of(s, "worker-0") == NodePhase.BLOCKED)
        scope = node_scope(inp.cluster, "worker-1")
        other = await client.start_workflow(
            LeaseWorkflow.run, LeaseInput(cluster=inp.cluster, scope=scope, holder="upgrade-7", procedure="node-upgrade"),
            id=scope_workflow_id(scope), task_queue=wf_task_queue,
        )
        del fake.drain_blocked["worker-0"]
        try:
            s = await wait_status(handle, lambda s: phase_of(s, "worker-1") == NodePhase.FAILED, timeout=60)
        finally:
            await other.signal(LeaseWorkflow.release, "upgrade-7")
        result = await handle.result()
    reason = s.nodes["worker-1"].reason or ""
    assert "upgrade upgrade-7" in reason and "worker-1" in reason, reason
    assert result.nodes["worker-1"].phase == NodePhase.FAILED
    # Nothing was asked of worker-1: no desiredConfig, no cordon.
    assert fake.nodes["worker-1"].desired_config == old_config("worker") and not fake.nodes["worker-1"].unschedulable
    assert all(getattr(c[1], "node", None) != "worker-1" for c in fake.calls if c[0] != "read_node"), fake.calls


async def test_the_rollout_keeps_a_degraded_nodes_lease(time_skipping_env, wf_task_queue):
    fake = FakeCluster({"worker": 1})
    fake.degrade_on_config["worker-0"] = "unexpected on-disk state"
    inp = rollout_input(window_node_leases_above=0)
    client = time_skipping_env.client
    lease_id = scope_workflow_id(node_scope(inp.cluster, "worker-0"))
    # Real time: the rollout asks again for the lease a second apart, KEEP_LEASE_TRIES times; with
    # time skipping those seconds could all pass before the test plays the server's part below.
    with time_skipping_env.auto_time_skipping_disabled():
        async with rollout_worker(client, fake, wf_task_queue):
            handle = await start(time_skipping_env, wf_task_queue, inp)
            try:
                # What a real server does when the node run closes (the time-skipping one does not):
                # its parent close policy terminates the run's lease. Played as soon as the run
                # closes, since the rollout asks again for the lease only KEEP_LEASE_TRIES seconds.
                run_lease = await run_lease_once_closed(client, lease_id, f"{handle.id}/node/worker-0/1")
                await client.get_workflow_handle(lease_id, run_id=run_lease.run_id).terminate("parent closed")
                await wait_status(handle, lambda s: phase_of(s, "worker-0") == NodePhase.DEGRADED, timeout=60)
                for _ in range(100):  # then the rollout's own lease starts (same ID, a new run)
                    desc = await client.get_workflow_handle(lease_id).describe()
                    if desc.status == WorkflowExecutionStatus.RUNNING and desc.parent_id == handle.id:
                        break
                    await asyncio.sleep(0.1)
                assert desc.status == WorkflowExecutionStatus.RUNNING and desc.parent_id == handle.id, (desc.status, desc.parent_id)
                s = await wait_status(handle, lambda s: True)
                assert not s.nodes["worker-0"].warning, s.nodes["worker-0"].warning
            finally:
                await terminate_quietly(handle)
