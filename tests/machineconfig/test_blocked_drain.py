"""R2 decisions on a blocked drain, on the time-skipping server with the fake cluster.

The fake's ``drain_blocked`` makes every eviction of a node refused (429) until removed; the
``delete_blocking_pods`` fake clears it, as deleting the router pod does on a real cluster.
"""

from __future__ import annotations

import uuid

import pytest
from temporalio import activity
from temporalio.worker import Worker
from tests.machineconfig.test_machineconfig_rollout import rollout_input, start, update_error, wait_status
from tests.support.wf_fakes import FakeCluster, old_config, r2_block_report

from activities.cluster.models import DeleteBlockingPodsInput, DeleteBlockingPodsResult
from workflows import WORKFLOWS, MachineConfigRolloutWorkflow
from workflows.kit.models import DecideInput, DrainDecision, GateState, NodePhase
from workflows.machineconfig.models import RolloutStatus


class DecisionFake(FakeCluster):
    """The fake cluster plus ``delete_blocking_pods`` (deleting the pods unblocks the drain)."""

    def activities(self):
        fake = self

        @activity.defn(name="delete_blocking_pods")
        async def delete_blocking_pods(inp: DeleteBlockingPodsInput) -> DeleteBlockingPodsResult:
            fake.calls.append(("delete_blocking_pods", inp))
            fake.drain_blocked.pop(inp.node, None)
            return DeleteBlockingPodsResult(deleted=list(inp.pods))

        return [*super().activities(), delete_blocking_pods]


def gate_open(node: str):
    def check(s: RolloutStatus) -> bool:
        g = s.nodes[node].decision_gate if node in s.nodes else None
        return g is not None and g.state == GateState.WAITING

    return check


async def until_gate(env, handle, node: str = "worker-0", skip: float = 130) -> RolloutStatus:
    """Wait until ``node`` is blocked, skip ``skip`` seconds of workflow time, then wait for its
    decision gate (the test server skips time only while a result is awaited or on ``sleep``)."""
    await wait_status(handle, lambda s: node in s.nodes and s.nodes[node].phase == NodePhase.BLOCKED)
    await env.sleep(skip)
    return await wait_status(handle, gate_open(node))


async def blocked_rollout(env, tq, fake, **kw):
    fake.drain_blocked["worker-0"] = r2_block_report("worker-0")
    kw["drain"] = {"decide_after_seconds": 120, **kw.get("drain", {})}
    return await start(env, tq, rollout_input(pools=["worker"], **kw))


async def skipped_at_gate(env, tq, fake):
    """A blocked rollout whose worker-0 gate carol answers ``skip``: (handle, result)."""
    handle = await blocked_rollout(env, tq, fake)
    await until_gate(env, handle)
    await handle.execute_update(MachineConfigRolloutWorkflow.decide, decide("worker-0", "skip", "carol", "not now"))
    return handle, await handle.result()


def decide(node: str, decision: str, identity: str, comment: str = "") -> DecideInput:
    return DecideInput(node=node, decision=DrainDecision(decision), identity=identity, comment=comment)


async def test_gate_opens_after_decide_after_and_wait_asks_again(time_skipping_env, wf_task_queue):
    fake = DecisionFake({"worker": 2})
    async with Worker(time_skipping_env.client, task_queue=wf_task_queue, workflows=WORKFLOWS, activities=fake.activities()):
        handle = await blocked_rollout(time_skipping_env, wf_task_queue, fake)
        st = await until_gate(time_skipping_env, handle)
        ns = st.nodes["worker-0"]
        assert ns.phase == NodePhase.BLOCKED and ns.blocked_since is not None
        assert (ns.decision_gate.opened_at - ns.blocked_since).total_seconds() >= 120
        assert ns.drain_report.blocked_pods[0].pdbs[0].name == "router-default"
        assert "lockkeeper decide" in st.waiting_for and "worker-0" in st.waiting_for
        # Nobody but the gate's node, and no decision without an identity.
        assert "unknown node" in await update_error(handle.execute_update(MachineConfigRolloutWorkflow.decide, decide("nope", "wait", "bob")))
        assert "identity" in await update_error(handle.execute_update(MachineConfigRolloutWorkflow.decide, decide("worker-0", "wait", " ")))
        await handle.execute_update(MachineConfigRolloutWorkflow.decide, decide("worker-0", "wait", "bob", "router owner paged"))
        # The same gate cannot be answered twice; then it asks again after another decide_after.
        assert "no drain decision waiting" in await update_error(
            handle.execute_update(MachineConfigRolloutWorkflow.decide, decide("worker-0", "skip", "bob")))
        await time_skipping_env.sleep(130)
        st = await wait_status(handle, lambda s: sum(
            1 for r in s.gate_history if r.gate_id == "drain/worker-0" and r.action == "opened") == 2)
        decided = [r for r in st.gate_history if r.action == "decided"]
        assert [(r.by, r.decision, r.comment) for r in decided] == [("bob", DrainDecision.WAIT, "router owner paged")]
        assert gate_open("worker-0")(st)
        # Events on transitions only: one DrainBlocked, a DrainDecisionRequired per question, one DrainDecision.
        reasons = [e.reason for e in fake.events]
        assert reasons.count("DrainBlocked") == 1 and reasons.count("DrainDecisionRequired") == 2
        assert reasons.count("DrainDecision") == 1
        assert "router-default" in fake.events[0].message and "0/4 nodes are available" in fake.events[0].message
        await handle.execute_update(MachineConfigRolloutWorkflow.decide, decide("worker-0", "abort", "bob", "later"))
        result = await handle.result()
    assert result.outcome == "aborted"
    assert result.nodes["worker-0"].phase == NodePhase.ABORTED
    assert fake.nodes["worker-0"].desired_config == old_config("worker") and not fake.nodes["worker-0"].unschedulable
    assert fake.nodes["worker-1"].current_config == old_config("worker"), "no node started after the abort"
    assert not fake.called("delete_blocking_pods")


async def test_skip_decision_resets_the_node_and_the_rollout_continues(time_skipping_env, wf_task_queue):
    fake = DecisionFake({"worker": 2})
    async with Worker(time_skipping_env.client, task_queue=wf_task_queue, workflows=WORKFLOWS, activities=fake.activities()):
        _, result = await skipped_at_gate(time_skipping_env, wf_task_queue, fake)
    assert result.outcome == "completed"
    assert result.nodes["worker-0"].phase == NodePhase.SKIPPED and "carol" in result.nodes["worker-0"].reason
    assert result.nodes["worker-1"].phase == NodePhase.DONE
    n0 = fake.nodes["worker-0"]
    assert n0.desired_config == n0.current_config == old_config("worker") and not n0.unschedulable
    assert n0.state == "Done", "the daemon is not left waiting for a drain"
    assert any(r.action == "decided" and r.decision == DrainDecision.SKIP and r.by == "carol" for r in result.gate_history)


async def test_delete_pod_needs_another_allowed_person_then_completes(time_skipping_env, wf_task_queue):
    fake = DecisionFake({"worker": 1})
    async with Worker(time_skipping_env.client, task_queue=wf_task_queue, workflows=WORKFLOWS, activities=fake.activities()):
        handle = await blocked_rollout(
            time_skipping_env, wf_task_queue, fake, approvals={"four_eyes": True, "allowed_approvers": ["alice", "dave"]}
        )
        await until_gate(time_skipping_env, handle)
        upd = MachineConfigRolloutWorkflow.decide
        assert "four-eyes" in await update_error(handle.execute_update(upd, decide("worker-0", "delete-pod", "alice")))
        assert "not an allowed approver" in await update_error(handle.execute_update(upd, decide("worker-0", "delete-pod", "mallory")))
        assert not fake.called("delete_blocking_pods"), "no pod deleted without a recorded delete-pod decision"
        await handle.execute_update(upd, decide("worker-0", "delete-pod", "dave", "router has a spare"))
        result = await handle.result()
    assert result.outcome == "completed" and result.nodes["worker-0"].phase == NodePhase.DONE
    (deleted,) = fake.called("delete_blocking_pods")
    assert deleted.pods == ["openshift-ingress/router-default-worker-0"] and deleted.decided_by == "dave"
    decided = [r for r in result.gate_history if r.action == "decided"]
    assert [(r.by, r.decision) for r in decided] == [("dave", DrainDecision.DELETE_POD)]
    # The delete came after the decision in the activity order.
    names = [n for n, _ in fake.calls]
    assert names.index("delete_blocking_pods") > names.index("drain_node")


@pytest.mark.parametrize(
    ("outcome", "rollout", "phase"),
    [("skip", "completed", NodePhase.SKIPPED), ("abort", "aborted", NodePhase.ABORTED)],
)
async def test_decision_timeout_applies_declared_default_recorded_as_timeout(time_skipping_env, wf_task_queue, outcome, rollout, phase):
    fake = DecisionFake({"worker": 1})
    async with Worker(time_skipping_env.client, task_queue=wf_task_queue, workflows=WORKFLOWS, activities=fake.activities()):
        handle = await blocked_rollout(
            time_skipping_env, wf_task_queue, fake, drain={"decision_timeout_seconds": 300, "decision_timeout_outcome": outcome}
        )
        result = await handle.result()
    assert result.outcome == rollout and result.nodes["worker-0"].phase == phase
    (timeout,) = [r for r in result.gate_history if r.gate_id == "drain/worker-0" and r.action == "timeout"]
    assert timeout.by == "timeout" and timeout.decision == DrainDecision(outcome)
    assert not any(r.action == "decided" for r in result.gate_history)
    assert not fake.nodes["worker-0"].unschedulable


async def test_default_timeout_outcome_is_wait_and_asks_again(time_skipping_env, wf_task_queue):
    fake = DecisionFake({"worker": 1})
    async with Worker(time_skipping_env.client, task_queue=wf_task_queue, workflows=WORKFLOWS, activities=fake.activities()):
        handle = await blocked_rollout(time_skipping_env, wf_task_queue, fake, drain={"decision_timeout_seconds": 60})
        await until_gate(time_skipping_env, handle)
        await time_skipping_env.sleep(70)
        await wait_status(handle, lambda s: any(r.action == "timeout" for r in s.gate_history))
        await time_skipping_env.sleep(130)
        st = await wait_status(handle, gate_open("worker-0"))
        (timeout,) = [r for r in st.gate_history if r.action == "timeout"][:1]
        assert timeout.decision == DrainDecision.WAIT and timeout.by == "timeout"
        fake.drain_blocked.clear()  # the budget recovers: the drain goes through, the open gate is cancelled
        result = await handle.result()
    assert result.outcome == "completed"
    actions = [r.action for r in result.gate_history]
    assert actions[:3] == ["opened", "timeout", "opened"]
    assert all(r.decision == DrainDecision.WAIT for r in result.gate_history if r.action == "timeout")
    assert not fake.called("delete_blocking_pods")


def test_timeout_outcome_delete_pod_is_refused():
    with pytest.raises(ValueError, match="delete-pod needs a person"):
        rollout_input(drain={"decision_timeout_outcome": "delete-pod"})


async def test_decide_refused_when_no_gate_is_open(time_skipping_env, wf_task_queue):
    fake = DecisionFake({"worker": 1})
    async with Worker(time_skipping_env.client, task_queue=wf_task_queue, workflows=WORKFLOWS, activities=fake.activities()):
        handle = await blocked_rollout(time_skipping_env, wf_task_queue, fake, drain={"decide_after_seconds": 10_000})
        await wait_status(handle, lambda s: "worker-0" in s.nodes and s.nodes["worker-0"].phase == NodePhase.BLOCKED)
        msg = await update_error(handle.execute_update(MachineConfigRolloutWorkflow.decide, decide("worker-0", "delete-pod", "bob")))
        assert "no drain decision waiting" in msg
        await handle.execute_update(MachineConfigRolloutWorkflow.abort, _abort())
        await handle.result()
    assert not fake.called("delete_blocking_pods")


def _abort():
    from workflows.kit.models import ControlInput

    return ControlInput(identity="bob", reason=f"test {uuid.uuid4().hex[:4]}")
