"""MachineConfigRolloutWorkflow against a fake cluster on the time-skipping test server.

Activities are the fakes of wf_fakes.py registered under the real names, so these tests check
the workflow's decisions (window, gates, updates, safe points) deterministically.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable

import pytest
from temporalio.client import WorkflowHandle, WorkflowUpdateFailedError, WorkflowUpdateStage
from temporalio.exceptions import ApplicationError
from temporalio.service import RPCError
from temporalio.testing import WorkflowEnvironment
from tests.support.replay import record
from temporalio.worker import Worker
from tests.support.wf_fakes import FakeCluster, new_config, old_config, preflight_activity, r2_block_report, rollout_worker

from activities.cluster.models import ANN_DESIRED_CONFIG
from activities.machineconfig.models import uncordon_value
from lockkeeper.live import client_of, merge_live_progress
from workflows import WORKFLOWS, MachineConfigRolloutWorkflow
from workflows.kit.models import (
    ApproveInput,
    ControlInput,
    GateState,
    GateTimeoutOutcome,
    NodeControlInput,
    NodePhase,
    RejectInput,
)
from workflows.kit.plan import ApprovalPolicy
from workflows.machineconfig.models import (
    MachineConfigRolloutInput,
    MachineConfigRolloutResult,
    RolloutPhase,
    RolloutStatus,
)



def rollout_input(**kw) -> MachineConfigRolloutInput:
    """Test defaults: no search attributes (the test server cannot register them), short knobs,
    and a cluster name of its own so no lease of another test's rollout gets in the way."""
    kw.setdefault("cluster", f"c-{uuid.uuid4().hex[:8]}")
    kw.setdefault("search_attributes", False)
    kw["approvals"] = {"requested_by": "alice", **kw.get("approvals", {})}
    kw["daemon"] = {"wait_activity_timeout_seconds": 5, **kw.get("daemon", {})}
    kw["drain"] = {"wait_seconds": 1, **kw.get("drain", {})}
    return MachineConfigRolloutInput(**kw)


async def start(env: WorkflowEnvironment, tq: str, inp: MachineConfigRolloutInput, wf_id: str | None = None) -> WorkflowHandle:
    return await env.client.start_workflow(
        MachineConfigRolloutWorkflow.run,
        inp,
        id=wf_id or f"rollout-{uuid.uuid4().hex[:8]}",
        task_queue=tq,
        result_type=MachineConfigRolloutResult,
    )


async def wait_status(handle: WorkflowHandle, pred: Callable[[RolloutStatus], bool], timeout: float = 20) -> RolloutStatus:
    """Poll the status query, with the running node runs' steps merged in as ``lockkeeper status``
    does, until ``pred`` holds (fails with the last status otherwise)."""
    loop = asyncio.get_running_loop()
    end = loop.time() + timeout
    status = None
    while loop.time() < end:
        status = await handle.query(MachineConfigRolloutWorkflow.status)
        await merge_live_progress(client_of(handle), status)
        if pred(status):
            return status
        await asyncio.sleep(0.05)
    raise AssertionError(f"condition not reached; last status: {status.model_dump_json(indent=1) if status else None}")


async def update_error(coro) -> str:
    """Run an update expected to be rejected by its validator; return the rejection message."""
    with pytest.raises(WorkflowUpdateFailedError) as info:
        await coro
    cause = info.value.cause
    assert isinstance(cause, ApplicationError)
    return cause.message


async def request_abort(handle: WorkflowHandle, identity: str = "bob", reason: str | None = None) -> None:
    """Send abort and wait only until it is accepted. When the abort closes the workflow in the
    same task that accepts it, the time-skipping test server forgets the update ("update ... not
    found"); the callers then check the abort through the workflow's result."""
    try:
        await handle.start_update(
            MachineConfigRolloutWorkflow.abort,
            ControlInput(identity=identity, reason=reason),
            wait_for_stage=WorkflowUpdateStage.ACCEPTED,
        )
    except RPCError as err:
        if "not found" not in str(err):
            raise


async def terminate_quietly(handle: WorkflowHandle) -> None:
    """Clean-up: terminate ``handle`` unless it already ended. A workflow that waits with no timer
    can end by its execution timeout on the time-skipping server, which skips time whenever the
    test waits on something else."""
    try:
        await handle.terminate("test cleanup")
    except RPCError as err:
        if "completed" not in str(err).lower():
            raise


def phase_of(s: RolloutStatus, node: str) -> NodePhase | None:
    return s.nodes[node].phase if node in s.nodes else None


def waiting_gate(s: RolloutStatus, gate_id: str) -> bool:
    return any(g.id == gate_id and g.state == GateState.WAITING for g in s.gates)


# --- full runs ------------------------------------------------------------------------------------


async def test_full_rollout_two_pools_honours_max_unavailable(time_skipping_env, wf_task_queue):
    fake = FakeCluster({"worker": 5, "master": 3})
    fake.slow_drain_request = True  # the daemon asks on its next reaction, as a real one
    async with rollout_worker(time_skipping_env.client, fake, wf_task_queue):
        # Local calls on (a large plan's node runs), so the recorded node run has that shape.
        handle = await start(time_skipping_env, wf_task_queue, rollout_input(max_unavailable=2), wf_id="rollout-full")
        result = await handle.result()
        await record(handle, "MachineConfigRolloutWorkflow.two-pools")
        await record(time_skipping_env.client.get_workflow_handle("rollout-full/node/worker-0/1"), "NodeRolloutWorkflow.full")
    assert result.outcome == "completed"
    assert result.summary.done == 8
    assert all(fake.at_target(n) for n in fake.nodes)
    assert all(not n.unschedulable and n.cordoned_by is None for n in fake.nodes.values())
    # The sliding window was used and never exceeded maxUnavailable.
    assert fake.max_in_flight == 2
    # master first: every master desiredConfig write precedes every worker one.
    order = [a.node for a in fake.called("set_node_annotations") if ANN_DESIRED_CONFIG in a.annotations]
    assert [n.split("-")[0] for n in order] == ["master"] * 3 + ["worker"] * 5
    # zone then oldest: worker-0,2,4 are zone a, worker-1,3 zone b; two start together, so only
    # the window's membership is deterministic, not the order inside it.
    assert result.plan.pools[1].nodes == ["worker-0", "worker-2", "worker-4", "worker-1", "worker-3"]
    assert set(order[3:5]) == {"worker-0", "worker-2"}
    assert [p.name for p in result.plan.pools] == ["master", "worker"]
    assert all(r.phase == NodePhase.DONE and r.attempts == 1 for r in result.nodes.values())


async def test_percent_max_unavailable_and_already_unavailable_nodes(time_skipping_env, wf_task_queue):
    """50% of 4 = 2, minus one node cordoned by somebody else = 1 in flight until that node is
    taken over; the foreign cordon survives the rollout; a node at target is skipped."""
    fake = FakeCluster({"worker": 4})
    fake.set_node("worker-1", current_config=new_config("worker"), desired_config=new_config("worker"),
                  desired_drain=uncordon_value(new_config("worker")), last_applied_drain=uncordon_value(new_config("worker")))
    fake.set_node("worker-3", unschedulable=True)  # cordoned by an admin, not at target
    async with rollout_worker(time_skipping_env.client, fake, wf_task_queue):
        handle = await start(time_skipping_env, wf_task_queue, rollout_input(max_unavailable="50%"))
        result = await handle.result()
    assert result.outcome == "completed"
    plan = result.plan.pools[0]
    assert (plan.max_unavailable, plan.capacity, plan.skipped, plan.unavailable) == (2, 1, ["worker-1"], ["worker-3"])
    assert result.nodes["worker-1"].phase == NodePhase.SKIPPED
    assert not [a for a in fake.called("set_node_annotations") if a.node == "worker-1"]
    assert fake.max_in_flight <= 2
    assert all(fake.at_target(n) for n in fake.nodes)
    assert fake.nodes["worker-3"].unschedulable and fake.nodes["worker-3"].cordoned_by is None
    assert not fake.nodes["worker-0"].unschedulable


async def test_dry_run_returns_plan_without_mutations(time_skipping_env, wf_task_queue):
    fake = FakeCluster({"worker": 3, "infra": 2})
    async with rollout_worker(time_skipping_env.client, fake, wf_task_queue):
        handle = await start(time_skipping_env, wf_task_queue,
                             rollout_input(dry_run=True, approval=ApprovalPolicy.CANARY, max_unavailable=2))
        result = await handle.result()
        plan = await handle.query(MachineConfigRolloutWorkflow.plan)
    assert result.outcome == "dry-run"
    assert fake.mutating_calls() == []
    assert [p.name for p in result.plan.pools] == ["infra", "worker"]
    worker = result.plan.pools[1]
    assert worker.nodes == ["worker-0", "worker-2", "worker-1"]
    assert worker.batches == [["worker-0", "worker-2"], ["worker-1"]]
    assert [g.id for g in worker.gates] == ["canary/worker"]
    assert plan == result.plan


async def test_preflight_refusal_is_a_failed_precondition(time_skipping_env, wf_task_queue):
    """Issue 39: a pool the cluster does not have is the operator's input, refused before any
    write with the preflight's words (outcome ``refused``, one problem line), not a failed run."""
    fake = FakeCluster({"worker": 1})
    async with rollout_worker(time_skipping_env.client, fake, wf_task_queue):
        handle = await start(time_skipping_env, wf_task_queue, rollout_input(pools=["nope"]))
        result = await handle.result()
        status = await handle.query(MachineConfigRolloutWorkflow.status)
    assert result.outcome == "refused", result.message
    assert len(result.problems) == 1 and "UnknownPool" in result.problems[0] and "nope" in result.problems[0]
    assert [(r.precondition.kind, r.state) for r in result.preconditions] == [("input", "failed")]
    assert status.preflight == "refused" and status.plan is None
    assert fake.mutating_calls() == []


async def test_dry_run_lists_preconditions_and_an_unknown_canary_is_refused(time_skipping_env, wf_task_queue):
    """Issue 39: the nodes ``node_order`` names (with ``approval`` canary the first of the pool is
    its canary) are a ``names-exist`` precondition: a dry run lists every check with its result
    (the pools' check included) and ends ``dry-run`` with the problem; a real start is refused
    before any write (no lease, no annotation), the same check named."""
    fake = FakeCluster({"worker": 2})
    checks = preflight_activity({"names-exist": "no Node named nosuch-node"})
    async with Worker(time_skipping_env.client, task_queue=wf_task_queue, workflows=WORKFLOWS,
                      activities=[*fake.activities(), checks]):
        order = ["nosuch-node", "worker-1"]
        dry = await (await start(time_skipping_env, wf_task_queue, rollout_input(
            dry_run=True, approval=ApprovalPolicy.CANARY, node_order=order))).result()
        real = await (await start(time_skipping_env, wf_task_queue, rollout_input(
            approval=ApprovalPolicy.CANARY, node_order=order))).result()
    assert dry.outcome == "dry-run" and "1 precondition(s) failed" in dry.message
    assert [(r.precondition.kind, r.state) for r in dry.preconditions] == [("input", "ok"), ("names-exist", "failed")]
    assert "worker → " in dry.preconditions[0].detail and "canary" in dry.preconditions[1].precondition.why
    assert dry.problems == [dry.preconditions[1].problem()] and "nosuch-node" in dry.problems[0]
    assert real.outcome == "refused" and real.problems == dry.problems
    assert [[p.names for p in c.preconditions] for c in checks.calls] == [[order], [order]]  # the input check is judged in the workflow
    assert fake.mutating_calls() == []


def test_flat_input_names_are_refused():
    """One name per concept (issue 36): the flat spellings of before are unknown fields."""
    for flat in ("requested_by", "gate_timeout_seconds", "drain_wait_seconds", "daemon_drain_deadline_seconds"):
        with pytest.raises(ValueError, match="Extra inputs are not permitted"):
            MachineConfigRolloutInput(**{flat: 1})
    assert MachineConfigRolloutInput(approvals={"requested_by": "alice"}, drain={"wait_seconds": 2}).drain.backoff_max_seconds == 60.0


# --- approvals ------------------------------------------------------------------------------------


async def test_approval_flow_validators_reject_resume_approve(time_skipping_env, wf_task_queue):
    fake = FakeCluster({"worker": 2, "master": 1})
    inp = rollout_input(approval=ApprovalPolicy.POOL, approvals={"four_eyes": True, "allowed_approvers": ["bob", "carol"]})
    async with rollout_worker(time_skipping_env.client, fake, wf_task_queue):
        handle = await start(time_skipping_env, wf_task_queue, inp)
        s = await wait_status(handle, lambda s: waiting_gate(s, "pool/master"))
        assert s.phase == RolloutPhase.WAITING_APPROVAL
        assert s.waiting_for == "approval of gate pool/master"
        assert fake.mutating_calls() == []

        msg = await update_error(handle.execute_update(MachineConfigRolloutWorkflow.approve, ApproveInput(gate_id="pool/nope", identity="bob")))
        assert "unknown gate 'pool/nope'" in msg and "pool/master" in msg
        msg = await update_error(handle.execute_update(MachineConfigRolloutWorkflow.approve, ApproveInput(identity="alice")))
        assert "four-eyes" in msg
        msg = await update_error(handle.execute_update(MachineConfigRolloutWorkflow.approve, ApproveInput(identity="mallory")))
        assert "mallory is not an allowed approver" in msg
        msg = await update_error(handle.execute_update(MachineConfigRolloutWorkflow.retry_node, NodeControlInput(node="ghost", identity="bob")))
        assert "unknown node 'ghost'" in msg

        res = await handle.execute_update(MachineConfigRolloutWorkflow.reject, RejectInput(identity="bob", comment="not now"))
        assert res.state == GateState.REJECTED
        s = await handle.query(MachineConfigRolloutWorkflow.status)
        assert s.phase == RolloutPhase.PAUSED and "rejected by bob: not now" in s.paused_reason
        msg = await update_error(handle.execute_update(MachineConfigRolloutWorkflow.approve, ApproveInput(gate_id="pool/master", identity="carol")))
        assert "not waiting" in msg

        await handle.execute_update(MachineConfigRolloutWorkflow.resume, ControlInput(identity="carol"))
        await wait_status(handle, lambda s: waiting_gate(s, "pool/master"))
        await handle.execute_update(MachineConfigRolloutWorkflow.approve, ApproveInput(gate_id="pool/master", identity="carol", comment="go"))
        s = await wait_status(handle, lambda s: waiting_gate(s, "pool/worker"))
        assert s.nodes["master-0"].phase == NodePhase.DONE
        assert s.nodes["worker-0"].phase == NodePhase.PENDING
        res = await handle.execute_update(MachineConfigRolloutWorkflow.approve, ApproveInput(identity="bob"))
        assert res.gate_id == "pool/worker"
        result = await handle.result()
    assert result.outcome == "completed"
    history = [(r.gate_id, r.action, r.by) for r in result.gate_history]
    assert history == [
        ("pool/master", "opened", "workflow"),
        ("pool/master", "rejected", "bob"),
        ("pool/master", "opened", "workflow"),
        ("pool/master", "approved", "carol"),
        ("pool/worker", "opened", "workflow"),
        ("pool/worker", "approved", "bob"),
    ]


async def test_canary_gate_after_first_node(time_skipping_env, wf_task_queue):
    fake = FakeCluster({"worker": 3})
    async with rollout_worker(time_skipping_env.client, fake, wf_task_queue):
        handle = await start(time_skipping_env, wf_task_queue, rollout_input(approval=ApprovalPolicy.CANARY, max_unavailable=3))
        s = await wait_status(handle, lambda s: waiting_gate(s, "canary/worker"))
        assert [n for n, ns in s.nodes.items() if ns.phase == NodePhase.DONE] == ["worker-0"]
        assert fake.at_target("worker-0") and not fake.at_target("worker-2")
        await handle.execute_update(MachineConfigRolloutWorkflow.approve, ApproveInput(identity="bob"))
        result = await handle.result()
    assert result.outcome == "completed" and result.summary.done == 3


@pytest.mark.parametrize(
    ("outcome", "expected"),
    [(GateTimeoutOutcome.APPROVE, "completed"), (GateTimeoutOutcome.ABORT, "aborted")],
)
async def test_gate_timeout_recorded_as_timeout_with_declared_outcome(time_skipping_env, wf_task_queue, outcome, expected):
    fake = FakeCluster({"worker": 2})
    inp = rollout_input(approval=ApprovalPolicy.POOL, gates={"timeout_seconds": 3600, "timeout_outcome": outcome})
    async with rollout_worker(time_skipping_env.client, fake, wf_task_queue):
        handle = await start(time_skipping_env, wf_task_queue, inp)
        result = await handle.result()  # the test server skips the hour
    assert result.outcome == expected
    timeouts = [r for r in result.gate_history if r.action == "timeout"]
    assert len(timeouts) == 1 and timeouts[0].by == "timeout" and timeouts[0].outcome == outcome
    assert not [r for r in result.gate_history if r.action == "approved"]
    if outcome == GateTimeoutOutcome.ABORT:
        assert fake.mutating_calls() == []
        assert all(r.phase == NodePhase.ABORTED for r in result.nodes.values())


async def test_gate_timeout_reject_pauses_and_resume_reopens(time_skipping_env, wf_task_queue):
    fake = FakeCluster({"worker": 1})
    inp = rollout_input(approval=ApprovalPolicy.NODE, gates={"timeout_seconds": 600})
    async with rollout_worker(time_skipping_env.client, fake, wf_task_queue):
        handle = await start(time_skipping_env, wf_task_queue, inp)
        s = await wait_status(handle, lambda s: waiting_gate(s, "node/worker-0"))
        assert s.nodes["worker-0"].phase == NodePhase.WAITING_APPROVAL
        assert s.deadline is not None and (s.deadline - s.since).total_seconds() == 600
        await time_skipping_env.sleep(700)
        s = await wait_status(handle, lambda s: s.phase == RolloutPhase.PAUSED)
        assert "timed out" in s.paused_reason and "reject" in s.paused_reason
        assert [g.state for g in s.gates] == [GateState.TIMED_OUT]
        await handle.execute_update(MachineConfigRolloutWorkflow.resume, ControlInput(identity="bob"))
        await wait_status(handle, lambda s: waiting_gate(s, "node/worker-0"))
        await handle.execute_update(MachineConfigRolloutWorkflow.approve, ApproveInput(identity="bob"))
        result = await handle.result()
    assert result.outcome == "completed"
    assert [r.action for r in result.gate_history] == ["opened", "timeout", "opened", "approved"]


# --- degraded, skip, retry, abort -------------------------------------------------------------------


async def test_degraded_pauses_then_retry_node_completes(time_skipping_env, wf_task_queue):
    fake = FakeCluster({"worker": 3})
    fake.degrade_on_config["worker-2"] = "failed to drain node: timeout"
    async with rollout_worker(time_skipping_env.client, fake, wf_task_queue):
        handle = await start(time_skipping_env, wf_task_queue, rollout_input())
        s = await wait_status(handle, lambda s: s.phase == RolloutPhase.PAUSED)
        assert s.paused_reason == "node worker-2 degraded: failed to drain node: timeout"
        assert s.nodes["worker-2"].phase == NodePhase.DEGRADED
        assert s.nodes["worker-1"].phase == NodePhase.PENDING  # nothing new starts while paused
        msg = await update_error(handle.execute_update(MachineConfigRolloutWorkflow.retry_node, NodeControlInput(node="worker-0", identity="bob")))
        assert "worker-0 is done" in msg
        del fake.degrade_on_config["worker-2"]
        await handle.execute_update(MachineConfigRolloutWorkflow.retry_node, NodeControlInput(node="worker-2", identity="bob"))
        result = await handle.result()
    assert result.outcome == "completed"
    assert result.nodes["worker-2"].attempts == 2 and result.nodes["worker-2"].phase == NodePhase.DONE
    assert all(fake.at_target(n) for n in fake.nodes)


async def test_skip_degraded_node_rolls_it_back(time_skipping_env, wf_task_queue):
    fake = FakeCluster({"worker": 3})
    fake.degrade_on_config["worker-0"] = "unexpected on-disk state"
    async with rollout_worker(time_skipping_env.client, fake, wf_task_queue):
        handle = await start(time_skipping_env, wf_task_queue, rollout_input())
        await wait_status(handle, lambda s: s.phase == RolloutPhase.PAUSED)
        await handle.execute_update(MachineConfigRolloutWorkflow.skip_node, NodeControlInput(node="worker-0", identity="bob", comment="hw"))
        result = await handle.result()
    assert result.outcome == "completed"
    assert result.nodes["worker-0"].phase == NodePhase.SKIPPED
    assert result.nodes["worker-0"].reason == "skipped by bob: hw"
    assert fake.nodes["worker-0"].desired_config == old_config("worker")
    assert fake.at_target("worker-1") and fake.at_target("worker-2")


async def test_skip_pending_node(time_skipping_env, wf_task_queue):
    fake = FakeCluster({"worker": 2})
    async with rollout_worker(time_skipping_env.client, fake, wf_task_queue):
        handle = await start(time_skipping_env, wf_task_queue, rollout_input(approval=ApprovalPolicy.NODE))
        await wait_status(handle, lambda s: waiting_gate(s, "node/worker-0"))
        await handle.execute_update(MachineConfigRolloutWorkflow.skip_node, NodeControlInput(node="worker-1", identity="bob"))
        await handle.execute_update(MachineConfigRolloutWorkflow.skip_node, NodeControlInput(node="worker-0", identity="bob"))
        result = await handle.result()
    assert result.outcome == "completed"
    assert {n: r.phase for n, r in result.nodes.items()} == {"worker-0": NodePhase.SKIPPED, "worker-1": NodePhase.SKIPPED}
    assert fake.mutating_calls() == []
    assert ("node/worker-0", "cancelled") in [(r.gate_id, r.action) for r in result.gate_history]


async def test_blocked_drain_status_warning_then_abort_rolls_back(time_skipping_env, wf_task_queue):
    """R2: a PDB blocks the drain. The status names the pod, budget and Pending replacement, an
    Event is recorded once, a deadline warning appears, and abort rolls the node back."""
    fake = FakeCluster({"worker": 2})
    fake.drain_blocked["worker-0"] = r2_block_report("worker-0")
    inp = rollout_input(daemon={"drain_deadline_seconds": 40, "warn_fraction": 0.5})
    async with rollout_worker(time_skipping_env.client, fake, wf_task_queue):
        handle = await start(time_skipping_env, wf_task_queue, inp)
        s = await wait_status(handle, lambda s: phase_of(s, "worker-0") == NodePhase.BLOCKED)
        ns = s.nodes["worker-0"]
        assert ns.step == "drain" and ns.since is not None and ns.deadline is not None
        assert "evictable" in ns.waiting_for
        assert ns.drain_report.blocked_pods[0].pdbs[0].disruptions_allowed == 0
        assert "didn't match node selector" in ns.drain_report.pending_replacements[0].message
        assert ns.cordoned_by_us and fake.nodes["worker-0"].unschedulable
        assert s.waiting_for.startswith("node worker-0: drain")
        await time_skipping_env.sleep(30)
        s = await wait_status(handle, lambda s: s.nodes["worker-0"].warning is not None)
        assert "drain hand-off pending" in s.nodes["worker-0"].warning
        assert any("worker-0" in w for w in s.warnings)
        await request_abort(handle, reason="PDB")
        result = await handle.result()
    assert result.outcome == "aborted"
    assert len(fake.events) == 1 and fake.events[0].reason == "DrainBlocked"
    w0 = fake.nodes["worker-0"]
    assert w0.desired_config == old_config("worker") and not w0.unschedulable
    assert result.nodes["worker-0"].phase == NodePhase.ABORTED
    assert "before drain hand-off" in result.nodes["worker-0"].safe_point
    assert result.nodes["worker-1"].phase == NodePhase.ABORTED
    assert not [a for a in fake.called("set_node_annotations") if a.node == "worker-1"]


async def test_blocked_drain_skip_in_flight_node_then_continue(time_skipping_env, wf_task_queue):
    fake = FakeCluster({"worker": 2})
    fake.drain_blocked["worker-0"] = r2_block_report("worker-0")
    async with rollout_worker(time_skipping_env.client, fake, wf_task_queue):
        handle = await start(time_skipping_env, wf_task_queue, rollout_input())
        await wait_status(handle, lambda s: phase_of(s, "worker-0") == NodePhase.BLOCKED)
        await handle.execute_update(MachineConfigRolloutWorkflow.skip_node, NodeControlInput(node="worker-0", identity="bob"))
        result = await handle.result()
    assert result.outcome == "completed"
    assert result.nodes["worker-0"].phase == NodePhase.SKIPPED
    assert not fake.nodes["worker-0"].unschedulable
    assert fake.at_target("worker-1")


# --- lease ---------------------------------------------------------------------------------------
