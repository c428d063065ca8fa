"""The kit's node window on its own (kit/plan, kit/batches, kit/board, kit/noderun): a probe
procedure with fake node-run children on the time-skipping server (kit_window_probes.py)."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable

from tests.support.kit_window_probes import (
    ProbeNodeWorkflow,
    WindowProbeInput,
    WindowProbeResult,
    WindowProbeStatus,
    WindowProbeWorkflow,
)
from temporalio.client import WorkflowHandle
from temporalio.worker import Worker

from workflows.kit.lease import LeaseWorkflow
from workflows.kit.models import ApproveInput, GateState, NodeControlInput, NodePhase, RejectInput
from workflows.kit.plan import ApprovalPolicy

PROBES = [WindowProbeWorkflow, ProbeNodeWorkflow, LeaseWorkflow]


async def start(env, tq: str, inp: WindowProbeInput) -> WorkflowHandle:
    return await env.client.start_workflow(
        WindowProbeWorkflow.run, inp, id=f"window-{uuid.uuid4().hex[:8]}", task_queue=tq, result_type=WindowProbeResult
    )


async def wait_status(handle: WorkflowHandle, pred: Callable[[WindowProbeStatus], bool], timeout: float = 20) -> WindowProbeStatus:
    loop = asyncio.get_running_loop()
    end = loop.time() + timeout
    status = None
    while loop.time() < end:
        status = await handle.query(WindowProbeWorkflow.status)
        if pred(status):
            return status
        await asyncio.sleep(0.05)
    raise AssertionError(f"condition not reached; last status: {status.model_dump_json(indent=1) if status else None}")


# Children work on a timer: 30 s (the default) where the test only waits for the result (the
# server skips the time), 0.5 s of real time where it polls ``status`` meanwhile.


def waiting(s: WindowProbeStatus, gate_id: str) -> bool:
    return any(g.id == gate_id and g.state == GateState.WAITING for g in s.gates)


async def test_window_never_counts_an_unavailable_node_as_free(time_skipping_env, wf_task_queue):
    env = time_skipping_env
    async with Worker(env.client, task_queue=wf_task_queue, workflows=PROBES):
        handle = await start(env, wf_task_queue, WindowProbeInput(nodes=["n0", "n1", "n2", "n3"], max_unavailable=2,
                                                                  unavailable=["x9"]))
        result = await handle.result()
    assert result.phases == dict.fromkeys(["n0", "n1", "n2", "n3"], NodePhase.DONE)
    assert result.max_in_flight == 1  # maxUnavailable 2 minus the one node already unavailable


async def test_window_fills_to_max_unavailable(time_skipping_env, wf_task_queue):
    env = time_skipping_env
    async with Worker(env.client, task_queue=wf_task_queue, workflows=PROBES):
        handle = await start(env, wf_task_queue, WindowProbeInput(nodes=["n0", "n1", "n2", "n3", "n4"], max_unavailable=2))
        result = await handle.result()
    assert result.max_in_flight == 2 and set(result.phases.values()) == {NodePhase.DONE}


async def test_no_capacity_pauses_naming_the_unavailable_nodes_then_resumes_when_they_are_back(time_skipping_env, wf_task_queue):
    env = time_skipping_env
    async with Worker(env.client, task_queue=wf_task_queue, workflows=PROBES):
        handle = await start(env, wf_task_queue, WindowProbeInput(nodes=["n0"], max_unavailable=1, unavailable=["x9"],
                                                                  comes_back_after=2))
        s = await wait_status(handle, lambda s: s.phase == "paused")
        assert "pool pool has no capacity" in (s.paused_reason or "") and "x9" in (s.paused_reason or "")
        assert s.nodes["n0"].phase == NodePhase.PENDING
        await handle.execute_update(WindowProbeWorkflow.resume, _control("bob"))
        result = await handle.result()
    assert result.phases == {"n0": NodePhase.DONE} and result.rechecks == 2


async def test_canary_gate_degraded_node_pauses_and_retry_runs_a_second_attempt(time_skipping_env, wf_task_queue):
    env = time_skipping_env
    async with Worker(env.client, task_queue=wf_task_queue, workflows=PROBES):
        handle = await start(env, wf_task_queue, WindowProbeInput(nodes=["n0", "n1", "n2"], approval=ApprovalPolicy.CANARY,
                                                                  fail_first=["n1"], work_seconds=0.5))
        s = await wait_status(handle, lambda s: waiting(s, "canary/pool"))
        assert s.nodes["n0"].phase == NodePhase.DONE and s.nodes["n1"].phase == NodePhase.PENDING
        await handle.execute_update(WindowProbeWorkflow.approve, ApproveInput(identity="bob"))
        s = await wait_status(handle, lambda s: s.phase == "paused")
        assert s.nodes["n1"].phase == NodePhase.DEGRADED and "n1 degraded" in (s.paused_reason or "")
        assert s.nodes["n2"].phase == NodePhase.PENDING
        await handle.execute_update(WindowProbeWorkflow.retry_node, NodeControlInput(node="n1", identity="bob"))
        result = await handle.result()
    assert result.phases == dict.fromkeys(["n0", "n1", "n2"], NodePhase.DONE)
    assert result.attempts == {"n0": 1, "n1": 2, "n2": 1}
    assert result.gate_actions == ["canary/pool:opened", "canary/pool:approved"]


async def test_skipping_a_node_whose_gate_waits_cancels_the_gate(time_skipping_env, wf_task_queue):
    env = time_skipping_env
    async with Worker(env.client, task_queue=wf_task_queue, workflows=PROBES):
        handle = await start(env, wf_task_queue, WindowProbeInput(nodes=["n0", "n1"], approval=ApprovalPolicy.NODE))
        s = await wait_status(handle, lambda s: waiting(s, "node/n0"))
        assert s.nodes["n0"].phase == NodePhase.WAITING_APPROVAL
        await handle.execute_update(WindowProbeWorkflow.skip_node, NodeControlInput(node="n0", identity="bob", comment="hw"))
        await wait_status(handle, lambda s: waiting(s, "node/n1"))
        await handle.execute_update(WindowProbeWorkflow.approve, ApproveInput(identity="bob"))
        result = await handle.result()
    assert result.phases == {"n0": NodePhase.SKIPPED, "n1": NodePhase.DONE}
    assert result.rolled_back == []  # never started: nothing to undo
    assert result.gate_actions == ["node/n0:opened", "node/n0:cancelled", "node/n1:opened", "node/n1:approved"]


def _control(identity: str):
    from workflows.kit.models import ControlInput

    return ControlInput(identity=identity)


async def test_in_process_steps_run_in_the_window_one_at_a_time(time_skipping_env, wf_task_queue):
    """The masters' loop of a control-plane upgrade or a port change: in-process steps
    (LocalRun), maxUnavailable 1, with the window's retry and skip."""
    env = time_skipping_env
    async with Worker(env.client, task_queue=wf_task_queue, workflows=PROBES):
        handle = await start(env, wf_task_queue, WindowProbeInput(nodes=["m1", "m2", "m3"], in_process=True, fail_first=["m2"],
                                                                  work_seconds=1))
        s = await wait_status(handle, lambda s: s.phase == "paused")
        assert s.nodes["m1"].phase == NodePhase.DONE and s.nodes["m2"].phase == NodePhase.FAILED
        assert "told to fail" in (s.nodes["m2"].reason or "") and s.nodes["m3"].phase == NodePhase.PENDING
        await handle.execute_update(WindowProbeWorkflow.retry_node, NodeControlInput(node="m2", identity="bob"))
        result = await handle.result()
    assert result.phases == dict.fromkeys(["m1", "m2", "m3"], NodePhase.DONE)
    assert result.attempts == {"m1": 1, "m2": 2, "m3": 1} and result.max_in_flight == 1


async def test_an_in_process_step_stops_at_its_safe_point_on_skip(time_skipping_env, wf_task_queue):
    env = time_skipping_env
    async with Worker(env.client, task_queue=wf_task_queue, workflows=PROBES):
        handle = await start(env, wf_task_queue, WindowProbeInput(nodes=["m1", "m2"], in_process=True, work_seconds=3600))
        await wait_status(handle, lambda s: s.nodes["m1"].step == "work")
        await handle.execute_update(WindowProbeWorkflow.skip_node, NodeControlInput(node="m1", identity="bob"))
        await wait_status(handle, lambda s: s.nodes["m1"].phase == NodePhase.SKIPPED)
        await handle.execute_update(WindowProbeWorkflow.skip_node, NodeControlInput(node="m2", identity="bob"))
        result = await handle.result()
    assert result.phases == {"m1": NodePhase.SKIPPED, "m2": NodePhase.SKIPPED}


async def test_no_node_starts_while_an_alert_fires(time_skipping_env, wf_task_queue):
    """The window asks the alert gate before it starts a node (issue 37): the first node waits
    while the scripted Prometheus answers firing, then both run."""
    from tests.kit.test_kit_alerts import CLEAR, FIRING, URL, AlertsFake

    from workflows.kit.inputs import AlertGatePolicy

    env, fake = time_skipping_env, AlertsFake(FIRING, FIRING, CLEAR)
    async with Worker(env.client, task_queue=wf_task_queue, workflows=PROBES, activities=[fake.activity()]):
        handle = await start(env, wf_task_queue, WindowProbeInput(nodes=["n0", "n1"], alerts=AlertGatePolicy(url=URL)))
        result = await handle.result()
        st = await handle.query(WindowProbeWorkflow.status)
    assert result.phases == {"n0": NodePhase.DONE, "n1": NodePhase.DONE}
    assert len(fake.calls) == 4  # n0: firing, firing, clear; n1: clear
    board = st.health["alerts/pool/n0"]
    assert board.state == "ok" and board.polls == 3, board
    assert [g.id for g in st.gates] == ["alerts/pool/n0/1"] and st.gates[0].state == GateState.CANCELLED


async def test_stop_gate_approve_retries_skip_rolls_back_and_goes_on(time_skipping_env, wf_task_queue):
    """With a StopGate a failed node holds the window at ``<node>/stopped/<attempt>`` (no pause,
    the next node waits): approve runs it again, skip-node rolls it back and goes on."""
    env = time_skipping_env
    async with Worker(env.client, task_queue=wf_task_queue, workflows=PROBES):
        handle = await start(env, wf_task_queue, WindowProbeInput(nodes=["n0", "n1", "n2"], fail_first=["n0", "n1"],
                                                                  stop_gate=True, work_seconds=0.5))
        s = await wait_status(handle, lambda s: waiting(s, "n0/stopped/1"))
        assert s.phase != "paused" and s.nodes["n0"].phase == NodePhase.FAILED and s.nodes["n1"].phase == NodePhase.PENDING
        assert "n0 stopped: told to fail; approve retries" in next(g.comment for g in s.gates if g.id == "n0/stopped/1")
        await handle.execute_update(WindowProbeWorkflow.approve, ApproveInput(gate_id="n0/stopped/1", identity="bob"))
        await wait_status(handle, lambda s: waiting(s, "n1/stopped/1"))
        await handle.execute_update(WindowProbeWorkflow.skip_node, NodeControlInput(node="n1", identity="bob", comment="by hand"))
        result = await handle.result()
    assert result.phases == {"n0": NodePhase.DONE, "n1": NodePhase.SKIPPED, "n2": NodePhase.DONE}
    assert result.attempts == {"n0": 2, "n1": 1, "n2": 1} and result.rolled_back == ["n1"] and result.stopped is None
    assert result.gate_actions == ["n0/stopped/1:opened", "n0/stopped/1:approved", "n1/stopped/1:opened", "n1/stopped/1:approved"]


async def test_stop_gate_reject_stops_the_window_and_a_refused_retry_is_refused(time_skipping_env, wf_task_queue):
    """retry-node answers the stop gate (only while it waits, not when the procedure refuses the
    retry); reject stops the window: the nodes after it never start."""
    env = time_skipping_env
    async with Worker(env.client, task_queue=wf_task_queue, workflows=PROBES):
        handle = await start(env, wf_task_queue, WindowProbeInput(nodes=["n0", "n1", "n2"], fail_first=["n0", "n1"],
                                                                  refuse_retry=["n1"], stop_gate=True, work_seconds=0.5))
        await wait_status(handle, lambda s: waiting(s, "n0/stopped/1"))
        await handle.execute_update(WindowProbeWorkflow.retry_node, NodeControlInput(node="n0", identity="bob", comment="fixed"))
        s = await wait_status(handle, lambda s: waiting(s, "n1/stopped/1"))
        assert "told so" in next(g.comment for g in s.gates if g.id == "n1/stopped/1")
        for node, why in (("n1", "cannot be retried: told so"), ("n0", "n0 is done; only aborted, degraded, failed nodes")):
            try:
                await handle.execute_update(WindowProbeWorkflow.retry_node, NodeControlInput(node=node, identity="bob"))
            except Exception as err:  # noqa: BLE001 - the update's rejection
                assert why in str(err.__cause__ or err), err
            else:
                raise AssertionError(f"retry of {node} was accepted")
        await handle.execute_update(WindowProbeWorkflow.reject, RejectInput(gate_id="n1/stopped/1", identity="bob", comment="no"))
        result = await handle.result()
    assert result.stopped == "n1" and result.attempts == {"n0": 2, "n1": 1}
    assert result.phases == {"n0": NodePhase.DONE, "n1": NodePhase.FAILED, "n2": NodePhase.PENDING}
    assert result.gate_actions == ["n0/stopped/1:opened", "n0/stopped/1:approved", "n1/stopped/1:opened", "n1/stopped/1:rejected"]


async def test_past_its_point_of_no_return_a_node_is_not_skipped_while_it_runs_and_left_as_it_is_when_stopped(
    time_skipping_env, wf_task_queue
):
    """A node step marks the node past its point of no return (NodeRun.past_no_return): skip-node
    is refused while it runs; once it stopped, skip-node leaves it as it is (``leave``, not
    ``rollback``) and its reason says so. A node stopped before that point is rolled back."""
    env = time_skipping_env
    async with Worker(env.client, task_queue=wf_task_queue, workflows=PROBES):
        handle = await start(env, wf_task_queue, WindowProbeInput(nodes=["n0", "n1", "n2"], fail_first=["n0", "n1"], no_return=["n0"],
                                                                  stop_gate=True, work_seconds=3))
        s = await wait_status(handle, lambda s: s.nodes["n0"].past_no_return == "work")
        assert s.nodes["n0"].phase == NodePhase.RUNNING and s.nodes["n1"].past_no_return is None
        try:
            await handle.execute_update(WindowProbeWorkflow.skip_node, NodeControlInput(node="n0", identity="bob"))
        except Exception as err:  # noqa: BLE001 - the update's rejection
            assert "n0 is past its point of no return (work, now at work)" in str(err.__cause__ or err), err
        else:
            raise AssertionError("skip of a node past its point of no return was accepted while it ran")
        await wait_status(handle, lambda s: waiting(s, "n0/stopped/1"))
        await handle.execute_update(WindowProbeWorkflow.skip_node, NodeControlInput(node="n0", identity="bob"))
        s = await wait_status(handle, lambda s: waiting(s, "n1/stopped/1"))
        assert s.nodes["n0"].phase == NodePhase.SKIPPED
        assert s.nodes["n0"].reason == "skipped by bob; left as it is, past its point of no return (work)"
        await handle.execute_update(WindowProbeWorkflow.skip_node, NodeControlInput(node="n1", identity="bob"))
        result = await handle.result()
    assert result.phases == {"n0": NodePhase.SKIPPED, "n1": NodePhase.SKIPPED, "n2": NodePhase.DONE}
    assert result.left == ["n0"] and result.rolled_back == ["n1"]
