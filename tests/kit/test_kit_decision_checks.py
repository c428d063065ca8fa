"""The kit's first check of every operator update (issue 18, workflows.kit.control.check_in_time)
on the time-skipping server with the gate probe: an approve or pause whose deadline passed is
refused and nothing is decided; identities that disagree are refused; an approve in time is
recorded with both identities."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from tests.support.kit_fakes import KitFake, gate_waiting, kit_worker, poll, refused, start_probe
from tests.support.kit_probes import GateProbeWorkflow, ProbeInput

from workflows.kit.decisions import WITHDRAW_SIGNAL, WithdrawInput
from workflows.kit.models import ApproveInput, ControlInput
from workflows.kit.procedure import ProcedureWorkflow


async def test_late_and_mismatched_decisions_are_refused_and_a_timely_one_records_both_identities(
    time_skipping_env, wf_task_queue
):
    env, fake = time_skipping_env, KitFake()
    async with kit_worker(env, fake, wf_task_queue):
        h = await start_probe(env, wf_task_queue, GateProbeWorkflow, ProbeInput())
        await poll(h, gate_waiting("step-1"))
        approve = ProcedureWorkflow.approve
        now = datetime.now(UTC)
        late = ApproveInput(identity="bob", sent_at=now - timedelta(hours=2), deadline=now - timedelta(hours=1))
        msg = await refused(h.execute_update(approve, late))
        assert "refused, nothing was decided" in msg and "deadline" in msg and "sent at" in msg, msg
        paused = await refused(h.execute_update(ProcedureWorkflow.pause, ControlInput(identity="bob", deadline=now - timedelta(hours=1))))
        assert "nothing was decided" in paused
        mismatch = ApproveInput(identity="mallory", connection_identity="bob", deadline=now + timedelta(hours=1))
        assert "differs from the connection's identity" in await refused(h.execute_update(approve, mismatch))
        st = await poll(h, gate_waiting("step-1"))  # still waiting, not paused
        assert st["phase"] == "waiting-approval", st
        ok = ApproveInput(identity="bob", connection_identity="bob", sent_at=now, deadline=now + timedelta(hours=1))
        res = await h.execute_update(approve, ok)
        assert res.message == "gate step-1 approved by bob"
        result = await h.result()
    assert result.outcome == "completed"
    assert [(r.action, r.by, r.connection_identity) for r in result.gate_history] == [
        ("opened", "lockkeeper", None), ("approved", "bob", "bob")
    ]


async def test_a_withdrawn_request_is_refused_and_another_request_id_still_decides(time_skipping_env, wf_task_queue):
    """The CLI withdraws an update it gave up on (workflows.kit.decisions): the same request ID
    arriving later is refused, however far its deadline; the withdrawal names only that request."""
    env, fake = time_skipping_env, KitFake()
    async with kit_worker(env, fake, wf_task_queue):
        h = await start_probe(env, wf_task_queue, GateProbeWorkflow, ProbeInput())
        await poll(h, gate_waiting("step-1"))
        now = datetime.now(UTC)
        await h.signal(WITHDRAW_SIGNAL, WithdrawInput(request_id="lk-1", update="approve", identity="bob",
                                                      reason="interrupted at the CLI (Ctrl-C)", sent_at=now))
        gone = ApproveInput(identity="bob", deadline=now + timedelta(hours=1), request_id="lk-1")
        msg = await refused(h.execute_update(ProcedureWorkflow.approve, gone, id="lk-1"))
        assert "withdrawn by bob" in msg and "Ctrl-C" in msg and "nothing was decided" in msg, msg
        st = await poll(h, gate_waiting("step-1"))
        assert st["phase"] == "waiting-approval", st
        ok = ApproveInput(identity="bob", deadline=now + timedelta(hours=1), request_id="lk-2")
        assert (await h.execute_update(ProcedureWorkflow.approve, ok, id="lk-2")).message == "gate step-1 approved by bob"
        result = await h.result()
    assert result.outcome == "completed"
    assert [(r.action, r.by) for r in result.gate_history if r.action == "approved"] == [("approved", "bob")]
