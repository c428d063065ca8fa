"""Kit gates and control through the uniform operator surface (time-skipping server, probes of
kit_probes.py, fake activities by name): four-eyes, allowed approvers, each declared timeout
outcome recorded as a timeout, pause / resume / abort and their validators."""

from __future__ import annotations

import pytest
from tests.support.kit_fakes import KitFake, gate_waiting, kit_worker, poll, refused, start_probe, status_of
from tests.support.kit_probes import GateProbeWorkflow, ProbeInput, StepsProbeWorkflow

from workflows.kit.models import ApprovalRules, ApproveInput, ControlInput, GateTimeoutOutcome, RejectInput
from workflows.kit.procedure import ProcedureWorkflow


async def test_four_eyes_and_allowed_approvers(time_skipping_env, wf_task_queue):
    env, fake = time_skipping_env, KitFake()
    rules = ApprovalRules(requested_by="alice", four_eyes=True, allowed_approvers=["alice", "bob"])
    async with kit_worker(env, fake, wf_task_queue):
        h = await start_probe(env, wf_task_queue, GateProbeWorkflow, ProbeInput(rules=rules))
        st = await poll(h, gate_waiting("step-1"))
        assert st["phase"] == "waiting-approval" and st["waiting_for"].startswith("approval of gate step-1")
        approve = ProcedureWorkflow.approve
        assert "four-eyes" in await refused(h.execute_update(approve, ApproveInput(identity="alice")))
        assert "not an allowed approver" in await refused(h.execute_update(approve, ApproveInput(identity="mallory")))
        assert "identity is required" in await refused(h.execute_update(approve, ApproveInput(identity=" ")))
        assert "unknown gate" in await refused(h.execute_update(approve, ApproveInput(gate_id="nope", identity="bob")))
        res = await h.execute_update(approve, ApproveInput(identity="bob", comment="looks fine"))
        assert res.message == "gate step-1 approved by bob"
        result = await h.result()
    assert result.outcome == "completed" and result.passed
    # The refused attempts never reached history: only opened and bob's approval are recorded.
    assert [(r.action, r.by) for r in result.gate_history] == [("opened", "lockkeeper"), ("approved", "bob")]


async def test_requester_may_reject_under_four_eyes(time_skipping_env, wf_task_queue):
    env, fake = time_skipping_env, KitFake()
    async with kit_worker(env, fake, wf_task_queue):
        h = await start_probe(env, wf_task_queue, GateProbeWorkflow, ProbeInput(rules=ApprovalRules(requested_by="alice", four_eyes=True)))
        await poll(h, gate_waiting("step-1"))
        res = await h.execute_update(ProcedureWorkflow.reject, RejectInput(identity="alice", comment="not today"))
        assert res.message == "gate step-1 rejected by alice; probe stops"
        result = await h.result()
    assert result.outcome == "rejected" and result.passed is False and result.gate_state == "rejected"


@pytest.mark.parametrize(
    ("outcome", "expected", "passed"),
    [(GateTimeoutOutcome.REJECT, "rejected", False), (GateTimeoutOutcome.APPROVE, "completed", True),
     (GateTimeoutOutcome.ABORT, "aborted", False)],
)
async def test_declared_timeout_outcome_is_recorded_as_timeout(time_skipping_env, wf_task_queue, outcome, expected, passed):
    env, fake = time_skipping_env, KitFake()
    async with kit_worker(env, fake, wf_task_queue):
        h = await start_probe(env, wf_task_queue, GateProbeWorkflow, ProbeInput(timeout_seconds=600, timeout_outcome=outcome))
        result = await h.result()  # the test server skips the 10 minutes
    assert result.outcome == expected and result.passed is passed and result.gate_state == "timed-out"
    timeout = [r for r in result.gate_history if r.action == "timeout"]
    assert len(timeout) == 1 and timeout[0].by == "timeout" and timeout[0].outcome == outcome
    assert not any(r.action == "approved" for r in result.gate_history)  # never an approval


async def test_pause_resume_and_validators(time_skipping_env, wf_task_queue):
    env, fake = time_skipping_env, KitFake()
    fake.step_release.clear()
    async with kit_worker(env, fake, wf_task_queue):
        h = await start_probe(env, wf_task_queue, StepsProbeWorkflow, ProbeInput(steps=3))
        await fake.step_started.wait()
        assert "not paused" in await refused(h.execute_update(ProcedureWorkflow.resume, ControlInput(identity="bob")))
        res = await h.execute_update(ProcedureWorkflow.pause, ControlInput(identity="bob", reason="change freeze"))
        assert res.message == "probe paused by bob" and res.status.phase == "paused"
        assert "already paused: change freeze" in await refused(h.execute_update(ProcedureWorkflow.pause, ControlInput(identity="bob")))
        fake.step_release.set()  # the step in flight finishes; no new one starts while paused
        st = await poll(h, lambda s: s["phase"] == "paused" and s["waiting_for"].startswith("resume (paused: change freeze)"))
        assert st["paused_reason"] == "change freeze"
        assert len(fake.called("kit_step")) == 1
        await h.execute_update(ProcedureWorkflow.resume, ControlInput(identity="carol"))
        result = await h.result()
    assert result.outcome == "completed" and result.done == ["0", "1", "2"]


async def test_abort_stops_at_the_next_safe_point(time_skipping_env, wf_task_queue):
    env, fake = time_skipping_env, KitFake()
    fake.step_release.clear()
    async with kit_worker(env, fake, wf_task_queue):
        h = await start_probe(env, wf_task_queue, StepsProbeWorkflow, ProbeInput(steps=3))
        await fake.step_started.wait()
        await h.execute_update(ProcedureWorkflow.pause, ControlInput(identity="bob"))
        res = await h.execute_update(ProcedureWorkflow.abort, ControlInput(identity="bob", reason="wrong cluster"))
        assert res.message == "abort requested by bob" and res.status.abort_requested
        assert "abort already requested" in await refused(h.execute_update(ProcedureWorkflow.abort, ControlInput(identity="bob")))
        fake.step_release.set()
        result = await h.result()
        st = await status_of(h)
    assert result.outcome == "aborted" and result.done == ["0"] and result.detail == "wrong cluster"
    assert st["phase"] == "aborted" and st["abort_requested"] is True


async def test_abort_while_a_gate_waits_cancels_it(time_skipping_env, wf_task_queue):
    env, fake = time_skipping_env, KitFake()
    async with kit_worker(env, fake, wf_task_queue):
        h = await start_probe(env, wf_task_queue, GateProbeWorkflow, ProbeInput())
        await poll(h, gate_waiting("step-1"))
        await h.execute_update(ProcedureWorkflow.abort, ControlInput(identity="bob"))
        result = await h.result()
    assert result.outcome == "aborted" and result.gate_state == "cancelled"
    assert [r.action for r in result.gate_history] == ["opened", "cancelled"]
