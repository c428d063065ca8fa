"""Holds on nodes (issue 40, workflows/kit/holds.py): the kit's window probe
(kit_window_probes.py) on the time-skipping server, its node runs working on a timer.

The test server skips time only while the test waits for a result or sleeps (``env.sleep``), so
an update sent right after the start reaches the run while its first node is still in flight."""

from __future__ import annotations

import uuid
from datetime import timedelta

import pytest
from tests.support.kit_fakes import refused
from tests.support.kit_window_probes import ProbeNodeWorkflow, WindowProbeInput, WindowProbeResult, WindowProbeWorkflow
from temporalio import activity
from temporalio.client import WorkflowHandle
from temporalio.common import WorkflowIDReusePolicy
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.worker import Replayer, Worker
from tests.kit.test_kit_window import wait_status
from tests.kit.test_notify_replay import wired

from activities.notify.models import NotifyEvent, NotifyResult

from workflows.kit.holds import NOT_SUPPORTED
from workflows.kit.lease import LeaseWorkflow
from workflows.kit.models import ApproveInput, ControlInput, GateState, HoldInput, NodeControlInput, NodePhase, ReleaseInput
from workflows.kit.plan import ApprovalPolicy

PROBES = [WindowProbeWorkflow, ProbeNodeWorkflow, LeaseWorkflow]


async def start(env, tq: str, inp: WindowProbeInput) -> WorkflowHandle:
    return await env.client.start_workflow(
        WindowProbeWorkflow.run, inp, id=f"holds-{uuid.uuid4().hex[:8]}", task_queue=tq, result_type=WindowProbeResult,
        id_reuse_policy=WorkflowIDReusePolicy.ALLOW_DUPLICATE,
    )


def hold(node: str, *, until=None, for_seconds: float | None = None, reason: str = "vendor firmware check", who: str = "bob"):
    return HoldInput(node=node, identity=who, reason=reason, until=until, for_seconds=for_seconds)


async def details(handle: WorkflowHandle) -> str:
    from temporalio.api.sdk.v1 import WorkflowMetadata

    meta = await handle.query("__temporal_workflow_metadata", result_type=WorkflowMetadata)
    return meta.current_details


async def test_a_hold_that_expires_lets_the_next_node_go_first_and_the_held_one_start_after_expiry(time_skipping_env, wf_task_queue):
    env = time_skipping_env
    sent: list[NotifyEvent] = []

    @activity.defn(name="notify")
    async def notify(ev: NotifyEvent) -> NotifyResult:
        sent.append(ev)
        return NotifyResult(sent=["http://hooks.example"])

    with wired(True):
        async with Worker(env.client, task_queue=wf_task_queue, workflows=PROBES, activities=[notify]):
            handle, s, result, until = await _expiring_hold(env, wf_task_queue)
    assert result.phases == dict.fromkeys(["n0", "n1", "n2"], NodePhase.DONE)
    assert s.nodes["n2"].started_at < s.nodes["n1"].started_at
    assert s.nodes["n1"].started_at >= until
    assert [(r.node, r.action, r.by) for r in s.hold_history] == [("n1", "held", "bob"), ("n1", "expired", "timer")]
    assert s.hold_history[-1].line().startswith("hold on n1 expired") and s.holds == {}
    held = [(e.event, e.node, e.by) for e in sent if e.event in ("node-held", "node-released", "hold-expired")]
    assert held == [("node-held", "n1", "bob"), ("hold-expired", "n1", "timer")]
    assert sent[0].command == f"lockkeeper release {handle.id} n1 -m REASON"
    assert "hold on n1 held by bob until" in sent[0].text


async def _expiring_hold(env, wf_task_queue):
    """n1 held for 10 minutes while n0 runs: n2 goes first, then the run waits for n1's hold,
    visibly, until it expires. Returns the handle, the last status, the result and the end."""
    handle = await start(env, wf_task_queue, WindowProbeInput(nodes=["n0", "n1", "n2"], max_unavailable=1))
    await wait_status(handle, lambda s: s.nodes["n0"].phase == NodePhase.RUNNING)
    answer = await handle.execute_update(WindowProbeWorkflow.hold_node, hold("n1", for_seconds=600))
    assert "node n1 held by bob until " in answer.message
    # n0 (30 s) and n2 (30 s) run; then only n1 is left, and the run waits for its hold, visibly.
    await env.sleep(120)
    s = await wait_status(handle, lambda s: s.nodes["n2"].phase == NodePhase.DONE)
    until = s.holds["n1"].until
    assert s.nodes["n1"].phase == NodePhase.PENDING and s.phase == "running"
    assert s.waiting_for.startswith(f"hold on n1 until {until.isoformat(timespec='seconds')}"), s.waiting_for
    assert s.deadline == until
    assert f"Waiting for hold on n1 until {until.isoformat(timespec='seconds')}" in await details(handle)
    assert "lockkeeper release" in await details(handle)
    result = await handle.result()
    s = await handle.query(WindowProbeWorkflow.status)
    return handle, s, result, until


async def test_a_hold_on_the_last_node_waits_until_released_by_hand(time_skipping_env, wf_task_queue):
    env = time_skipping_env
    async with Worker(env.client, task_queue=wf_task_queue, workflows=PROBES):
        handle = await start(env, wf_task_queue, WindowProbeInput(nodes=["n0", "n1"], max_unavailable=1))
        await wait_status(handle, lambda s: s.nodes["n0"].phase == NodePhase.RUNNING)
        await handle.execute_update(WindowProbeWorkflow.hold_node, hold("n1", reason="app team asked"))
        await env.sleep(3600)  # an hour later: n0 is long done; n1 still waits, the run has not failed
        s = await wait_status(handle, lambda s: s.nodes["n0"].phase == NodePhase.DONE)
        assert s.phase == "running" and s.nodes["n1"].phase == NodePhase.PENDING
        assert s.waiting_for == "hold on n1 until released (by bob: app team asked)" and s.deadline is None
        assert "until released" in await details(handle)
        msg = await refused(handle.execute_update(WindowProbeWorkflow.release_node, ReleaseInput(node="n0", identity="carol")))
        assert msg == "node n0 is not held (held nodes: n1)"
        answer = await handle.execute_update(WindowProbeWorkflow.release_node, ReleaseInput(node="n1", identity="carol", reason="ok now"))
        assert answer.message == "node n1 released by carol: ok now"
        result = await handle.result()
        s = await handle.query(WindowProbeWorkflow.status)
    assert result.phases == {"n0": NodePhase.DONE, "n1": NodePhase.DONE}
    assert [(r.action, r.by, r.reason) for r in s.hold_history] == [("held", "bob", "app team asked"), ("released", "carol", "ok now")]


async def test_the_validator_refuses_bad_holds_before_anything_changes(time_skipping_env, wf_task_queue):
    env = time_skipping_env
    async with Worker(env.client, task_queue=wf_task_queue, workflows=PROBES):
        handle = await start(env, wf_task_queue, WindowProbeInput(nodes=["n0", "n1", "n2"], max_unavailable=1, work_seconds=5))
        await wait_status(handle, lambda s: s.nodes["n0"].phase == NodePhase.RUNNING)
        now = await env.get_current_time()
        update = WindowProbeWorkflow.hold_node
        assert (await refused(handle.execute_update(update, hold("n9")))).startswith("unknown node 'n9'; nodes of this procedure: n0, n1, n2")
        assert "is in the past" in await refused(handle.execute_update(update, hold("n1", until=now - timedelta(minutes=5))))
        assert await refused(handle.execute_update(update, hold("n1", until=now + timedelta(hours=1), for_seconds=60))) == (
            "give --until or --for, not both")
        assert "a reason is required" in await refused(handle.execute_update(update, hold("n1", reason="  ")))
        assert "positive" in await refused(handle.execute_update(update, hold("n1", for_seconds=0)))
        await handle.execute_update(update, hold("n2"))
        assert "already held by bob" in await refused(handle.execute_update(update, hold("n2")))
        await handle.execute_update(WindowProbeWorkflow.skip_node, NodeControlInput(node="n1", identity="bob"))
        await wait_status(handle, lambda s: s.nodes["n1"].phase == NodePhase.SKIPPED)
        assert await refused(handle.execute_update(update, hold("n1"))) == "node n1 is already skipped: nothing to hold"
        s = await handle.query(WindowProbeWorkflow.status)
        assert list(s.holds) == ["n2"] and [r.action for r in s.hold_history] == ["held"]  # the refusals changed nothing
        await handle.execute_update(WindowProbeWorkflow.skip_node, NodeControlInput(node="n2", identity="bob"))
        result = await handle.result()
        s = await handle.query(WindowProbeWorkflow.status)
    assert result.phases == {"n0": NodePhase.DONE, "n1": NodePhase.SKIPPED, "n2": NodePhase.SKIPPED}
    # Skipping a held node ends its hold.
    assert [(r.node, r.action) for r in s.hold_history] == [("n2", "held"), ("n2", "ended")] and s.holds == {}


async def test_holds_survive_a_worker_restart_and_replay(time_skipping_env, wf_task_queue):
    """Holds are workflow state: a new worker (no cache: it replays the history) still holds the
    node, its expiry timer still fires; the finished history replays without a difference."""
    env = time_skipping_env
    # No cache (so no sticky queue the test server would keep sending to after the worker is gone):
    # every workflow task of either worker replays the whole history, holds included.
    async with Worker(env.client, task_queue=wf_task_queue, workflows=PROBES, max_cached_workflows=0):
        handle = await start(env, wf_task_queue, WindowProbeInput(nodes=["n0", "n1", "n2"], max_unavailable=1))
        await wait_status(handle, lambda s: s.nodes["n0"].phase == NodePhase.RUNNING)
        await handle.execute_update(WindowProbeWorkflow.hold_node, hold("n1", for_seconds=3600))
        await handle.execute_update(WindowProbeWorkflow.hold_node, hold("n2", reason="until told"))
    # The worker is gone; the next one must rebuild the holds from the history.
    async with Worker(env.client, task_queue=wf_task_queue, workflows=PROBES, max_cached_workflows=0):
        s = await handle.query(WindowProbeWorkflow.status)
        assert sorted(s.holds) == ["n1", "n2"] and s.holds["n2"].until is None and s.holds["n1"].by == "bob"
        await env.sleep(600)
        s = await wait_status(handle, lambda s: s.nodes["n0"].phase == NodePhase.DONE)
        assert s.waiting_for.startswith("hold on n1 until ") and "hold on n2 until released" in s.waiting_for
        await env.sleep(3600)  # n1's hold expires on the timer the first worker started
        s = await wait_status(handle, lambda s: s.nodes["n1"].phase == NodePhase.DONE)
        assert s.waiting_for == "hold on n2 until released (by bob: until told)"
        await handle.execute_update(WindowProbeWorkflow.release_node, ReleaseInput(node="n2", identity="carol"))
        result = await handle.result()
        history = await handle.fetch_history()
    assert result.phases == dict.fromkeys(["n0", "n1", "n2"], NodePhase.DONE)
    await Replayer(workflows=PROBES, data_converter=pydantic_data_converter).replay_workflow(history)


async def test_the_pool_gate_stands_before_the_node_that_starts_first_when_the_first_is_held(time_skipping_env, wf_task_queue):
    """The plan's pool gate is planned before the pool's first node; with that node held, the
    next one waits for the gate instead of starting past it."""
    env = time_skipping_env
    async with Worker(env.client, task_queue=wf_task_queue, workflows=PROBES):
        # No capacity at first (x9 unavailable): the window pauses before any gate opens.
        handle = await start(env, wf_task_queue, WindowProbeInput(nodes=["n0", "n1"], max_unavailable=1, unavailable=["x9"],
                                                                  comes_back_after=2, approval=ApprovalPolicy.POOL, work_seconds=1))
        await wait_status(handle, lambda s: s.phase == "paused")
        await handle.execute_update(WindowProbeWorkflow.hold_node, hold("n0", reason="first one later"))
        await handle.execute_update(WindowProbeWorkflow.resume, ControlInput(identity="bob"))
        s = await wait_status(handle, lambda s: any(g.id == "pool/pool" and g.state == GateState.WAITING for g in s.gates))
        assert s.nodes["n1"].phase == NodePhase.PENDING and s.nodes["n0"].phase == NodePhase.PENDING
        await handle.execute_update(WindowProbeWorkflow.approve, ApproveInput(identity="carol"))
        await env.sleep(10)
        s = await wait_status(handle, lambda s: s.nodes["n1"].phase == NodePhase.DONE)
        assert s.nodes["n0"].phase == NodePhase.PENDING and s.waiting_for.startswith("hold on n0 until released")
        await handle.execute_update(WindowProbeWorkflow.release_node, ReleaseInput(node="n0", identity="bob"))
        result = await handle.result()
    assert result.phases == {"n0": NodePhase.DONE, "n1": NodePhase.DONE}
    assert result.gate_actions == ["pool/pool:opened", "pool/pool:approved"]


async def test_a_window_that_keeps_its_order_waits_at_the_held_node(time_skipping_env, wf_task_queue):
    """The VXLAN port change restarts its masters in order (the controllers' leader last): a held
    master keeps the ones after it waiting."""
    env = time_skipping_env
    async with Worker(env.client, task_queue=wf_task_queue, workflows=PROBES):
        handle = await start(env, wf_task_queue, WindowProbeInput(nodes=["m1", "m2", "m3"], in_process=True, holds_keep_order=True))
        await wait_status(handle, lambda s: s.nodes["m1"].phase == NodePhase.RUNNING)
        await handle.execute_update(WindowProbeWorkflow.hold_node, hold("m2", for_seconds=600))
        await env.sleep(120)
        s = await wait_status(handle, lambda s: s.nodes["m1"].phase == NodePhase.DONE)
        assert s.nodes["m3"].phase == NodePhase.PENDING and s.waiting_for.startswith("hold on m2 until ")
        result = await handle.result()
        s = await handle.query(WindowProbeWorkflow.status)
    assert result.phases == dict.fromkeys(["m1", "m2", "m3"], NodePhase.DONE)
    assert s.nodes["m2"].started_at < s.nodes["m3"].started_at


def test_a_procedure_without_the_kit_window_refuses_holds():
    """The standalone drain (one node, no window) refuses holds; the runtime migration has its
    own (test_runtime_migration_control_wf.py)."""
    from workflows.kit.procedure import NodeProcedureWorkflow

    class OwnLoop(NodeProcedureWorkflow):
        pass

    with pytest.raises(ValueError, match=NOT_SUPPORTED):
        OwnLoop().check_hold_node(hold("n1"))
    with pytest.raises(ValueError, match=NOT_SUPPORTED):
        OwnLoop().check_release_node(ReleaseInput(node="n1", identity="bob"))
