"""MachineConfigRolloutWorkflow on the time-skipping test server, continued: leases, network
repair, search attributes, pause, capacity, abort after hand-off, stale desiredConfig and
termination. The helpers and fakes are those of test_machineconfig_rollout.py.
"""

from __future__ import annotations

import asyncio
import uuid

import pytest
from temporalio.client import WorkflowExecutionStatus, WorkflowFailureError, WorkflowHandle
from temporalio.exceptions import ApplicationError
from tests.support.beats import all_within, heartbeat_timeouts
from tests.support.wf_fakes import FakeCluster, new_config, old_config, rollout_worker

from workflows import MachineConfigRolloutWorkflow
from workflows.kit.models import (
    ApproveInput,
    ControlInput,
    NodePhase,
)
from workflows.kit.plan import ApprovalPolicy
from workflows.machineconfig.models import (
    MachineConfigRolloutResult,
    RolloutPhase,
)


from tests.machineconfig.test_machineconfig_rollout import (
    phase_of,
    request_abort,
    rollout_input,
    start,
    terminate_quietly,
    update_error,
    wait_status,
    waiting_gate,
)


async def test_lease_refuses_second_rollout_naming_the_first(time_skipping_env, wf_task_queue):
    fake = FakeCluster({"worker": 2})
    cluster = f"lease-{uuid.uuid4().hex[:6]}"
    async with rollout_worker(time_skipping_env.client, fake, wf_task_queue):
        first = await start(time_skipping_env, wf_task_queue, rollout_input(approval=ApprovalPolicy.POOL, cluster=cluster))
        await wait_status(first, lambda s: waiting_gate(s, "pool/worker"))
        second = await start(time_skipping_env, wf_task_queue, rollout_input(cluster=cluster))
        with pytest.raises(WorkflowFailureError) as info:
            await second.result()
        cause = info.value.cause
        assert isinstance(cause, ApplicationError) and cause.type == "LeaseHeld"
        assert cause.message == f"pool worker on cluster {cluster} is held by rollout {first.id}"
        assert fake.mutating_calls() == []
        # A different cluster's pool of the same name is a different lease.
        other = await start(time_skipping_env, wf_task_queue, rollout_input(cluster=f"{cluster}-other"))
        assert (await other.result()).outcome == "completed"
        # (The test server does not apply parent close policies; the lease's release on a
        # terminated holder is checked on the dev server below.)
        await terminate_quietly(first)


async def test_lease_refuses_rollout_on_a_node_another_procedure_holds(time_skipping_env, wf_task_queue):
    """The rollout leases the nodes of its plan too: a node held by another procedure type (here a
    drain's lease on worker-1) refuses the rollout before its first write, naming the holder."""
    from workflows.kit.lease import LeaseWorkflow
    from workflows.kit.models import LeaseInput
    from workflows.kit.scopes import node_scope, scope_workflow_id

    fake = FakeCluster({"worker": 2})
    cluster = f"lease-{uuid.uuid4().hex[:6]}"
    scope = node_scope(cluster, "worker-1")
    async with rollout_worker(time_skipping_env.client, fake, wf_task_queue):
        lease = await time_skipping_env.client.start_workflow(
            LeaseWorkflow.run,
            LeaseInput(cluster=cluster, scope=scope, holder="drain-worker-1", procedure="drain"),
            id=scope_workflow_id(scope),
            task_queue=wf_task_queue,
        )
        rollout = await start(time_skipping_env, wf_task_queue, rollout_input(cluster=cluster))
        with pytest.raises(WorkflowFailureError) as info:
            await rollout.result()
        cause = info.value.cause
        assert isinstance(cause, ApplicationError) and cause.type == "LeaseHeld"
        assert cause.message == f"node worker-1 on cluster {cluster} is held by drain drain-worker-1"
        assert fake.mutating_calls() == []
        # No release: while the test waited for the rollout, the time-skipping server may have
        # skipped to the lease's execution timeout (it skips whenever nothing else is pending).
        await terminate_quietly(lease)


# --- R1 network repair ---------------------------------------------------------------------------


async def test_repair_network_waits_ovnkube_gates_delete_and_verifies(time_skipping_env, wf_task_queue):
    fake = FakeCluster({"master": 1, "worker": 1})
    fake.ovnkube_polls, fake.workloads_polls = 2, 1
    inp = rollout_input(repair_network=True, network_poll_initial_seconds=0.05, network_poll_max_seconds=0.1)
    async with rollout_worker(time_skipping_env.client, fake, wf_task_queue):
        handle = await start(time_skipping_env, wf_task_queue, inp)
        s = await wait_status(handle, lambda s: waiting_gate(s, "delete-all-pods"))
        assert s.network_repair.ovnkube_ready and s.network_repair.polls == 3
        assert fake.called("delete_all_pods") == []
        assert s.totals.done == 2
        await handle.execute_update(MachineConfigRolloutWorkflow.approve, ApproveInput(identity="bob", comment="R1"))
        result = await handle.result()
    assert result.outcome == "completed"
    assert result.network_repair.pods_deleted == 10 and result.network_repair.workloads_ready
    assert result.network_repair.stage == "done"
    assert len(fake.called("delete_all_pods")) == 1
    assert [c.namespace for c in fake.called("check_pods_ready")] == ["openshift-ovn-kubernetes"] * 3 + [None] * 2
    # One DELETE per pod can take minutes: a long bound, and a heartbeat timeout for a dead worker.
    scheduled = [ev.activity_task_scheduled_event_attributes async for ev in handle.fetch_history_events()
                 if ev.activity_task_scheduled_event_attributes.activity_type.name == "delete_all_pods"]
    assert len(scheduled) == 1
    assert scheduled[0].start_to_close_timeout.ToTimedelta().total_seconds() >= 300
    assert 0 < scheduled[0].heartbeat_timeout.ToTimedelta().total_seconds() <= 30


# --- search attributes on the dev server -----------------------------------------------------------


async def test_search_attributes_upserted_on_dev_server(temporal_client, wf_task_queue):
    from temporalio.common import SearchAttributeKey

    fake = FakeCluster({"worker": 1})
    async with rollout_worker(temporal_client, fake, wf_task_queue):
        handle = await temporal_client.start_workflow(
            MachineConfigRolloutWorkflow.run,
            rollout_input(search_attributes=True, cluster="sa-test"),
            id=f"rollout-sa-{uuid.uuid4().hex[:8]}",
            task_queue=wf_task_queue,
            result_type=MachineConfigRolloutResult,
        )
        assert (await handle.result()).outcome == "completed"
    desc = await handle.describe()
    sa = desc.typed_search_attributes
    assert sa.get(SearchAttributeKey.for_keyword("LockkeeperStatus")) == "done"
    assert sa.get(SearchAttributeKey.for_keyword("LockkeeperCluster")) == "sa-test"
    assert sa.get(SearchAttributeKey.for_keyword("LockkeeperProcedure")) == "machineconfig-rollout"
    assert list(sa.get(SearchAttributeKey.for_keyword_list("LockkeeperPools"))) == ["worker"]


# --- pause, capacity, abort after the hand-off --------------------------------------------------------


async def test_pause_lets_in_flight_finish_and_starts_nothing_until_resume(time_skipping_env, wf_task_queue):
    fake = FakeCluster({"worker": 2}, reboot_polls=15)
    async with rollout_worker(time_skipping_env.client, fake, wf_task_queue):
        handle = await start(time_skipping_env, wf_task_queue, rollout_input())
        await wait_status(handle, lambda s: phase_of(s, "worker-0") == NodePhase.RUNNING)
        res = await handle.execute_update(MachineConfigRolloutWorkflow.pause, ControlInput(identity="bob", reason="lunch"))
        assert res.status.phase == RolloutPhase.PAUSED
        msg = await update_error(handle.execute_update(MachineConfigRolloutWorkflow.pause, ControlInput(identity="bob")))
        assert "already paused" in msg
        s = await wait_status(handle, lambda s: phase_of(s, "worker-0") == NodePhase.DONE)
        assert s.phase == RolloutPhase.PAUSED and s.paused_reason == "lunch"
        assert s.waiting_for == "resume (paused: lunch)"
        assert s.nodes["worker-1"].phase == NodePhase.PENDING
        assert not [a for a in fake.called("set_node_annotations") if a.node == "worker-1"]
        await handle.execute_update(MachineConfigRolloutWorkflow.resume, ControlInput(identity="bob"))
        result = await handle.result()
    assert result.outcome == "completed" and result.summary.done == 2


async def test_no_capacity_pauses_until_unavailable_node_recovers(time_skipping_env, wf_task_queue):
    fake = FakeCluster({"worker": 2})
    fake.set_node("worker-1", ready=False)
    async with rollout_worker(time_skipping_env.client, fake, wf_task_queue):
        handle = await start(time_skipping_env, wf_task_queue, rollout_input(max_unavailable=1))
        s = await wait_status(handle, lambda s: s.phase == RolloutPhase.PAUSED)
        assert "no capacity" in s.paused_reason and "worker-1" in s.paused_reason
        assert fake.mutating_calls() == []
        fake.set_node("worker-1", ready=True)
        await handle.execute_update(MachineConfigRolloutWorkflow.resume, ControlInput(identity="bob"))
        result = await handle.result()
    assert result.outcome == "completed"
    assert fake.max_in_flight == 1


async def test_abort_after_drain_hand_off_completes_the_node(time_skipping_env, wf_task_queue):
    fake = FakeCluster({"worker": 2}, reboot_polls=15)
    async with rollout_worker(time_skipping_env.client, fake, wf_task_queue):
        handle = await start(time_skipping_env, wf_task_queue, rollout_input())
        await wait_status(handle, lambda s: phase_of(s, "worker-0") is not None and s.nodes["worker-0"].step == "wait-reboot")
        await request_abort(handle)
        result = await handle.result()
    assert result.outcome == "aborted"
    assert result.nodes["worker-0"].phase == NodePhase.DONE
    assert "after drain hand-off" in result.nodes["worker-0"].safe_point
    assert fake.at_target("worker-0") and not fake.nodes["worker-0"].unschedulable
    assert result.nodes["worker-1"].phase == NodePhase.ABORTED
    assert fake.nodes["worker-1"].desired_config == old_config("worker")


async def test_node_with_right_config_but_stale_desired_config_is_not_drained(time_skipping_env, wf_task_queue):
    """currentConfig already at target, only desiredConfig lagging (an interrupted manual fix, R1):
    lockkeeper sets desiredConfig and finishes without cordon, drain or reboot."""
    fake = FakeCluster({"worker": 1})
    fake.set_node("worker-0", current_config=new_config("worker"))
    async with rollout_worker(time_skipping_env.client, fake, wf_task_queue):
        result = await (await start(time_skipping_env, wf_task_queue, rollout_input())).result()
    assert result.outcome == "completed" and result.nodes["worker-0"].phase == NodePhase.DONE
    assert fake.at_target("worker-0") and fake.nodes["worker-0"].desired_config == new_config("worker")
    assert fake.called("cordon_node") == [] and fake.called("drain_node") == []


async def test_terminated_rollout_releases_its_lease_on_dev_server(temporal_client, wf_task_queue):
    """A rollout killed by an operator (terminate) does not leave a stale lease: the lease child
    closes with it (parent close policy TERMINATE) and the pool can be rolled again."""
    fake = FakeCluster({"worker": 1})
    cluster = f"lease-{uuid.uuid4().hex[:6]}"

    async def start_dev(**kw) -> WorkflowHandle:
        return await temporal_client.start_workflow(
            MachineConfigRolloutWorkflow.run,
            rollout_input(cluster=cluster, **kw),
            id=f"rollout-{uuid.uuid4().hex[:8]}",
            task_queue=wf_task_queue,
            result_type=MachineConfigRolloutResult,
        )

    async with rollout_worker(temporal_client, fake, wf_task_queue):
        first = await start_dev(approval=ApprovalPolicy.POOL)
        await wait_status(first, lambda s: waiting_gate(s, "pool/worker"))
        await first.terminate("operator gave up")
        lease = temporal_client.get_workflow_handle(f"lease/{cluster}/worker")
        for _ in range(200):
            if (await lease.describe()).status != WorkflowExecutionStatus.RUNNING:
                break
            await asyncio.sleep(0.05)
        assert (await lease.describe()).status == WorkflowExecutionStatus.TERMINATED
        again = await start_dev()
        assert (await again.result()).outcome == "completed"


async def test_preflight_pages_plan_every_node(time_skipping_env, wf_task_queue):
    """Pools larger than ``preflight_page_size`` come in pages (a preflight of every node passes
    Temporal's 2 MB payload limit at about 4,400 nodes): the plan and the rollout hold every node
    of every pool, each once, and the page calls read on from the previous page's last node."""
    fake = FakeCluster({"worker": 7, "master": 3, "infra": 2})
    async with rollout_worker(time_skipping_env.client, fake, wf_task_queue):
        handle = await start(time_skipping_env, wf_task_queue, rollout_input(max_unavailable=3, preflight_page_size=3))
        result = await handle.result()
        # Both reads list the cluster and beat while they do: a dead worker is seen at the heartbeat timeout.
        beats = await heartbeat_timeouts(handle, {"preflight_machineconfig_rollout", "list_pool_nodes"})
    assert all_within(beats, 30), beats
    (pre,) = fake.called("preflight_machineconfig_rollout")
    assert pre.page_size == 3
    # worker (7 nodes) takes two more pages after the first, master (3) and infra (2) none.
    pages = [(p.pool, p.after, p.limit) for p in fake.called("list_pool_nodes")]
    assert pages == [("worker", "worker-2", 3), ("worker", "worker-5", 3)]
    assert result.outcome == "completed" and result.summary.done == 12
    planned = {p.name: p.nodes for p in result.plan.pools}
    assert sorted(planned["worker"]) == [f"worker-{i}" for i in range(7)]
    assert sorted(planned["master"]) == ["master-0", "master-1", "master-2"]
    assert all(fake.at_target(n) for n in fake.nodes)
