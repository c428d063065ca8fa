"""The etcd restore and the drain on the kit's operator surface (time-skipping server, fake etcd
and cluster activities by name): pause and abort a restore, its declared gate timeout outcomes,
and leases refused across procedure types on overlapping scopes, naming the holder."""

from __future__ import annotations

import uuid

import pytest
from tests.support.etcd_fakes import FakeEtcd, etcd_members
from tests.support.kit_fakes import gate_waiting, poll, refused, start_probe
from tests.support.kit_probes import PROBES, AlphaLeaseProbeWorkflow, ProbeInput
from temporalio.client import WorkflowFailureError
from temporalio.exceptions import ApplicationError
from temporalio.worker import Worker
from tests.support.wf_fakes import FakeCluster, preflight_activity, r2_block_report

from workflows import WORKFLOWS
from workflows.drain import NodeDrainWorkflow
from workflows.drain.models import NodeDrainInput, NodeDrainResult
from workflows.etcd import EtcdQuorumRestoreWorkflow
from workflows.etcd.models import EtcdRestoreInput, EtcdRestoreResult
from workflows.kit.models import ApproveInput, ControlInput, GateTimeoutOutcome, NodeControlInput


def restore_input(**kw) -> EtcdRestoreInput:
    kw.setdefault("members", etcd_members(3))
    kw.setdefault("approvals", {"requested_by": "alice"})
    return EtcdRestoreInput(search_attributes=False, **kw)


async def start_restore(env, tq, inp: EtcdRestoreInput):
    return await env.client.start_workflow(EtcdQuorumRestoreWorkflow.run, inp, id=f"etcd-restore-{uuid.uuid4().hex[:8]}",
                                           task_queue=tq, result_type=EtcdRestoreResult)


def worker(env, tq, *activities):
    return Worker(env.client, task_queue=tq, workflows=[*WORKFLOWS, *PROBES], activities=[a for acts in activities for a in acts] + [preflight_activity()])


async def test_pause_then_resume_a_restore_between_steps(time_skipping_env, wf_task_queue):
    env, fake = time_skipping_env, FakeEtcd(etcd_members(3))
    async with worker(env, wf_task_queue, fake.activities()):
        h = await start_restore(env, wf_task_queue, restore_input())
        await poll(h, gate_waiting("stop-members"))
        res = await h.execute_update(EtcdQuorumRestoreWorkflow.pause, ControlInput(identity="bob", reason="wait for the DBA"))
        assert res.message == "restore paused by bob"
        await h.execute_update(EtcdQuorumRestoreWorkflow.approve, ApproveInput(identity="bob"))
        # Approved, but paused: the next step (stop every member) does not start.
        st = await poll(h, lambda s: s["phase"] == "paused" and not any(g["state"] == "waiting" for g in s["gates"]))
        assert st["waiting_for"] == "resume (paused: wait for the DBA)" and st["step"] == "preflight"
        assert not fake.called("etcd_stop_member")
        await h.execute_update(EtcdQuorumRestoreWorkflow.resume, ControlInput(identity="bob"))
        for gate in ("move-data/etcd-1", "move-data/etcd-2"):
            await poll(h, gate_waiting(gate))
            await h.execute_update(EtcdQuorumRestoreWorkflow.approve, ApproveInput(gate_id=gate, identity="bob"))
        result = await h.result()
    assert result.outcome == "completed" and len(fake.called("etcd_stop_member")) == 4  # 3 + the survivor's restart


async def test_abort_a_restore_stops_before_its_next_step(time_skipping_env, wf_task_queue):
    env, fake = time_skipping_env, FakeEtcd(etcd_members(3))
    async with worker(env, wf_task_queue, fake.activities()):
        h = await start_restore(env, wf_task_queue, restore_input())
        await poll(h, gate_waiting("stop-members"))
        await h.execute_update(EtcdQuorumRestoreWorkflow.approve, ApproveInput(identity="bob"))
        await poll(h, gate_waiting("move-data/etcd-1"))
        assert "restore is not paused" in await refused(
            h.execute_update(EtcdQuorumRestoreWorkflow.resume, ControlInput(identity="bob")))
        await h.execute_update(EtcdQuorumRestoreWorkflow.abort, ControlInput(identity="bob", reason="wrong snapshot"))
        result = await h.result()
    assert result.outcome == "aborted" and "wrong snapshot" in result.message
    assert [(r.gate_id, r.action) for r in result.gate_history][-1] == ("move-data/etcd-1", "cancelled")
    assert not fake.called("etcd_move_data_aside")  # nothing after the abort


@pytest.mark.parametrize(("outcome", "expected"), [(GateTimeoutOutcome.APPROVE, "completed"), (GateTimeoutOutcome.ABORT, "aborted"),
                                                   (GateTimeoutOutcome.REJECT, "rejected")])
async def test_restore_gate_timeout_applies_the_declared_outcome(time_skipping_env, wf_task_queue, outcome, expected):
    env, fake = time_skipping_env, FakeEtcd(etcd_members(3))
    async with worker(env, wf_task_queue, fake.activities()):
        h = await start_restore(env, wf_task_queue, restore_input(gates={"timeout_seconds": 300, "timeout_outcome": outcome}))
        result = await h.result()
    assert result.outcome == expected
    timeouts = [r for r in result.gate_history if r.action == "timeout"]
    assert timeouts and all(r.by == "timeout" and r.outcome == outcome for r in timeouts)
    assert not any(r.action == "approved" for r in result.gate_history)
    assert bool(fake.called("etcd_stop_member")) == (outcome == GateTimeoutOutcome.APPROVE)


async def test_leases_refused_across_procedure_types(time_skipping_env, wf_task_queue):
    """A cluster-wide procedure holds cluster/<c>: an etcd restore (etcd/<c>) and a drain
    (node/<c>/worker-0) of that cluster are refused naming it; then a drain holding node
    worker-0 refuses a cluster-wide procedure that covers that node."""
    env, c = time_skipping_env, f"c-{uuid.uuid4().hex[:6]}"
    cluster = FakeCluster({"worker": 1})
    # No time skipping: a holder waiting for nothing would otherwise be skipped to its timeout.
    async with worker(env, wf_task_queue, FakeEtcd(etcd_members(3)).activities(), cluster.activities()):
        with env.auto_time_skipping_disabled():
            holder = await start_probe(env, wf_task_queue, AlphaLeaseProbeWorkflow, ProbeInput(cluster=c, scopes=[f"cluster/{c}"], hold_seconds=None))
            await poll(holder, lambda s: bool(s["leases"]))
            restore = await start_restore(env, wf_task_queue, restore_input(cluster=c))
            with pytest.raises(WorkflowFailureError) as info:
                await restore.result()
            assert isinstance(info.value.cause, ApplicationError) and info.value.cause.type == "LeaseHeld"
            assert f"etcd on cluster {c} is held by procedure {holder.id}" in info.value.cause.message
            drain = await env.client.start_workflow(
                NodeDrainWorkflow.run, NodeDrainInput(node="worker-0", cluster=c, search_attributes=False),
                id=f"drain-{uuid.uuid4().hex[:8]}", task_queue=wf_task_queue, result_type=NodeDrainResult)
            with pytest.raises(WorkflowFailureError) as info:
                await drain.result()
            assert info.value.cause.message == f"cluster {c} is held by procedure {holder.id}"
            assert not cluster.called("cordon_node")  # refused before its first write
            await holder.terminate("test cleanup")

            c2 = f"{c}-b"
            cluster.drain_blocked["worker-0"] = r2_block_report("worker-0")  # the drain stays, holding its node
            drain = await env.client.start_workflow(
                NodeDrainWorkflow.run, NodeDrainInput(node="worker-0", cluster=c2, search_attributes=False),
                id=f"drain-{uuid.uuid4().hex[:8]}", task_queue=wf_task_queue, result_type=NodeDrainResult)
            await poll(drain, lambda s: bool(s["leases"]))
            assert "one node" in await refused(drain.execute_update(NodeDrainWorkflow.skip_node, NodeControlInput(node="worker-0", identity="bob")))
            wide = await start_probe(env, wf_task_queue, AlphaLeaseProbeWorkflow, ProbeInput(cluster=c2, scopes=[f"cluster/{c2}"], covers=[f"node/{c2}/worker-0"]))
            with pytest.raises(WorkflowFailureError) as info:
                await wide.result()
            assert info.value.cause.message == f"node worker-0 on cluster {c2} is held by drain {drain.id}"
            await drain.terminate("test cleanup")


