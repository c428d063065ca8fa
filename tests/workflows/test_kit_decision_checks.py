"""The kit's first check of every operator update (issue 18, workflows.kit.control.check_in_time)
on the time-skipping server with the gate probe: an approve or pause whose deadline passed is
refused and nothing is decided; identities that disagree are refused; an approve in time is
recorded with both identities."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from kit_fakes import KitFake, gate_waiting, kit_worker, poll, refused, start_probe
from kit_probes import GateProbeWorkflow, ProbeInput

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
