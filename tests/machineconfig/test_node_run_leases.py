"""Large plans (leases in the window): each node run is its node's lease. The rollout starts it
with the node scope's lease ID. The rollout's history then records no node lease at all and no lease
workflow runs per node; a running node run refuses its node to another procedure, naming the
rollout; a node another procedure leased in the meantime is failed untouched, naming that
procedure; a degraded node's lease is taken over by the rollout, which keeps it until the end so
that a skip's rollback stays protected.
"""

from __future__ import annotations

import asyncio
import uuid

import pytest
from tests.support.kit_fakes import KitFake, kit_worker, start_probe
from tests.support.kit_probes import BetaLeaseProbeWorkflow, ProbeInput
from tests.support.replay import recording, store
from temporalio.client import WorkflowExecutionStatus, WorkflowFailureError, WorkflowHistory
from temporalio.exceptions import ApplicationError, WorkflowAlreadyStartedError
from tests.machineconfig.test_machineconfig_rollout import phase_of, rollout_input, start, terminate_quietly, wait_status
from tests.support.wf_fakes import FakeCluster, old_config, r2_block_report, rollout_worker

from workflows.kit.lease import LeaseWorkflow
from workflows.kit.models import LeaseInfo, LeaseInput, NodePhase
from workflows.kit.scopes import node_scope, pool_scope, scope_workflow_id


def started_children(history: WorkflowHistory) -> list[tuple[str, str]]:
    """(workflow ID, workflow type) of every child the history started."""
    return [
        (e.start_child_workflow_execution_initiated_event_attributes.workflow_id,
         e.start_child_workflow_execution_initiated_event_attributes.workflow_type.name)
        for e in history.events
        if e.HasField("start_child_workflow_execution_initiated_event_attributes")
    ]


async def test_node_runs_are_their_node_leases(time_skipping_env, wf_task_queue):
    fake = FakeCluster({"worker": 3})
    # A fixed cluster and rollout ID: the histories recorded below replay in test_replay.py.
    inp = rollout_input(max_unavailable=2, window_node_leases_above=0, cluster="window-history")
    client = time_skipping_env.client
    lease_ids = {n: scope_workflow_id(node_scope(inp.cluster, n)) for n in fake.nodes}
    async with rollout_worker(client, fake, wf_task_queue):
        wf_id = "rollout-window" if recording() else f"rollout-window-{uuid.uuid4().hex[:6]}"
        handle = await start(time_skipping_env, wf_task_queue, inp, wf_id=wf_id)
        result = await handle.result()
        parent = await handle.fetch_history()
        runs = {n: await client.get_workflow_handle(lease_ids[n]).fetch_history() for n in fake.nodes}
        descs = {n: await client.get_workflow_handle(lease_ids[n]).describe() for n in fake.nodes}
        if recording():
            await store(parent, "MachineConfigRolloutWorkflow.window")
            await store(runs["worker-0"], "NodeRolloutWorkflow.window-lease")
    assert result.outcome == "completed" and result.summary.done == 3
    # The rollout leased its pool only (a lease workflow); every node child is a node run whose ID
    # is its node's lease ID.
    children = started_children(parent)
    assert [t for _, t in children if t == "LeaseWorkflow"] == ["LeaseWorkflow"], children
    assert sorted(i for i, t in children if t == "NodeRolloutWorkflow") == sorted(lease_ids.values()), children
    for n, h in runs.items():
        assert started_children(h) == [], (n, started_children(h))  # no lease workflow of its own
        assert descs[n].workflow_type == "NodeRolloutWorkflow" and descs[n].parent_id == handle.id
        assert descs[n].status == WorkflowExecutionStatus.COMPLETED


async def test_a_planned_node_held_at_the_start_refuses_the_rollout_before_any_write(time_skipping_env, wf_task_queue):
    fake = FakeCluster({"worker": 3})
    inp = rollout_input(max_unavailable=1, window_node_leases_above=0)
    client = time_skipping_env.client
    scope = node_scope(inp.cluster, "worker-1")
    async with rollout_worker(client, fake, wf_task_queue):
        with time_skipping_env.auto_time_skipping_disabled():  # the holder waits for nothing
            other = await client.start_workflow(
                LeaseWorkflow.run, LeaseInput(cluster=inp.cluster, scope=scope, holder="upgrade-7", procedure="node-upgrade"),
                id=scope_workflow_id(scope), task_queue=wf_task_queue,
            )
            handle = await start(time_skipping_env, wf_task_queue, inp)
            try:
                with pytest.raises(WorkflowFailureError) as refused:
                    await handle.result()
            finally:
                await other.signal(LeaseWorkflow.release, "upgrade-7")
        history = await handle.fetch_history()
    cause = refused.value.cause
    assert isinstance(cause, ApplicationError) and cause.type == "LeaseHeld", cause
    assert "worker-1" in cause.message and "upgrade upgrade-7" in cause.message, cause.message
    assert fake.mutating_calls() == [], fake.mutating_calls()
    # One activity asked which planned nodes are held (patch lease-probe-by-activity); the
    # signals asked the cluster-wide lease (the pools' acquire) and the holder for its name (no
    # contend per planned node), then the kit's ending released the pool's lease it held.
    activities = [e.activity_task_scheduled_event_attributes.activity_type.name for e in history.events
                  if e.HasField("activity_task_scheduled_event_attributes")]
    assert activities.count("find_held_leases") == 1, activities
    signalled = [e.signal_external_workflow_execution_initiated_event_attributes.workflow_execution.workflow_id
                 for e in history.events if e.HasField("signal_external_workflow_execution_initiated_event_attributes")]
    assert signalled == [scope_workflow_id(f"cluster/{inp.cluster}"), scope_workflow_id(scope),
                         scope_workflow_id(pool_scope(inp.cluster, "worker"))], signalled


async def test_a_running_node_run_refuses_its_node_naming_the_rollout(time_skipping_env, wf_task_queue):
    fake = FakeCluster({"worker": 2})
    fake.drain_blocked["worker-0"] = r2_block_report("worker-0")  # keeps worker-0's run running
    inp = rollout_input(max_unavailable=1, window_node_leases_above=0)
    client = time_skipping_env.client
    scope = node_scope(inp.cluster, "worker-0")
    probe_queue = f"{wf_task_queue}-probe"
    async with rollout_worker(client, fake, wf_task_queue), kit_worker(time_skipping_env, KitFake(), probe_queue):
        handle = await start(time_skipping_env, wf_task_queue, inp)
        try:
            await wait_status(handle, lambda s: phase_of(s, "worker-0") == NodePhase.BLOCKED)
            with time_skipping_env.auto_time_skipping_disabled():
                # The ID runs: Temporal refuses a lease workflow of the same scope outright ...
                with pytest.raises(WorkflowAlreadyStartedError):
                    await client.start_workflow(
                        LeaseWorkflow.run, LeaseInput(cluster=inp.cluster, scope=scope, holder="x", procedure="drain"),
                        id=scope_workflow_id(scope), task_queue=wf_task_queue,
                    )
                # ... the run answers the holder query as a lease does ...
                info = await client.get_workflow_handle(scope_workflow_id(scope)).query("holder", result_type=LeaseInfo)
                assert (info.holder, info.procedure, info.scope) == (handle.id, "machineconfig-rollout", scope)
                # ... and another procedure's acquire is refused, naming the rollout (contend answered).
                probe = await start_probe(time_skipping_env, probe_queue, BetaLeaseProbeWorkflow,
                                          ProbeInput(cluster=inp.cluster, scopes=[scope]))
                with pytest.raises(WorkflowFailureError) as refused:
                    await probe.result()
            cause = refused.value.cause
            assert isinstance(cause, ApplicationError) and cause.type == "LeaseHeld", cause
            assert cause.message == f"node worker-0 on cluster {inp.cluster} is held by rollout {handle.id}"
            assert list(cause.details) == [handle.id]
        finally:
            await terminate_quietly(handle)


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
    with time_skipping_env.auto_time_skipping_disabled():
        async with rollout_worker(client, fake, wf_task_queue):
            handle = await start(time_skipping_env, wf_task_queue, inp)
            try:
                await wait_status(handle, lambda s: phase_of(s, "worker-0") == NodePhase.DEGRADED, timeout=60)
                desc = None
                for _ in range(100):  # the node run closed; the rollout's own lease starts (same ID, a new run)
                    desc = await client.get_workflow_handle(lease_id).describe()
                    if desc.workflow_type == "LeaseWorkflow" and desc.status == WorkflowExecutionStatus.RUNNING:
                        break
                    await asyncio.sleep(0.1)
                assert desc is not None and desc.workflow_type == "LeaseWorkflow", desc and desc.workflow_type
                assert desc.status == WorkflowExecutionStatus.RUNNING and desc.parent_id == handle.id, (desc.status, desc.parent_id)
                s = await wait_status(handle, lambda s: True)
                assert not s.nodes["worker-0"].warning, s.nodes["worker-0"].warning
            finally:
                await terminate_quietly(handle)
