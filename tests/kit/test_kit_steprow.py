"""The kit's StepRow (:mod:`workflows.kit.steprow`) in a small procedure (time-skipping server,
steprow_probe.py, the kit fakes' scripted ``run_node_command``): a run-once step whose failure
asks before it runs again, a lost outcome answered with mark-done or rerun, a step the row has
done is not repeated, a health wait whose timeout asks a person, a reboot confirmed by a new
boot ID."""

from __future__ import annotations

import uuid

from tests.support.kit_fakes import KitFake, gate_waiting, poll
from tests.support.steprow_probe import StepRowProbeInput, StepRowProbeResult, StepRowProbeWorkflow
from temporalio.worker import Worker

from workflows.kit.host import HostStep
from workflows.kit.models import ApproveInput, DecideInput, RejectInput
from workflows.kit.procedure import ProcedureWorkflow

SCALEUP = HostStep(name="scale-up", argv=["ansible-playbook", "scaleup.yml"], timeout_seconds=600)


async def run_probe(env, tq, fake, inp, answer=None):
    """Start the probe, let ``answer(handle, status)`` act on the first waiting gate, return the result."""
    async with Worker(env.client, task_queue=tq, workflows=[StepRowProbeWorkflow], activities=fake.activities()):
        h = await env.client.start_workflow(StepRowProbeWorkflow.run, inp, id=f"probe-{uuid.uuid4().hex[:8]}", task_queue=tq,
                                            result_type=StepRowProbeResult)
        if answer is not None:
            await answer(h, await poll(h, lambda s: any(g["state"] == "waiting" for g in s["gates"])))
        return await h.result()


def ran(fake):
    return [c.argv[0] for c in fake.called("run_node_command")]


async def test_a_failed_run_once_step_asks_and_runs_again_only_when_approved(time_skipping_env, wf_task_queue):
    fake = KitFake()
    fake.host_script = {"ansible-playbook": [2, 0]}

    async def approve(h, st):
        assert gate_waiting("n1/failed/scale-up")(st)
        assert "ansible-playbook scaleup.yml exited 2" in st["waiting_for"]
        await h.execute_update(ProcedureWorkflow.approve, ApproveInput(identity="bob", gate_id="n1/failed/scale-up"))

    result = await run_probe(time_skipping_env, wf_task_queue, fake, StepRowProbeInput(host_steps=[SCALEUP]), approve)
    assert result.outcome == "completed" and result.row.done_steps == ["scale-up"]
    assert ran(fake) == ["ansible-playbook", "ansible-playbook"]
    assert result.row.last_command.exit_code == 0 and result.row.last_command.where == "worker"


async def test_a_rejected_failure_stops_the_row_where_it_is(time_skipping_env, wf_task_queue):
    fake = KitFake()
    fake.host_script = {"ansible-playbook": [2]}

    async def reject(h, st):
        await h.execute_update(ProcedureWorkflow.reject, RejectInput(identity="bob", gate_id="n1/failed/scale-up"))

    result = await run_probe(time_skipping_env, wf_task_queue, fake, StepRowProbeInput(host_steps=[SCALEUP]), reject)
    assert result.outcome == "failed" and not result.aborted
    assert result.stopped == "scale-up: ansible-playbook exited 2: boom"
    assert result.row.done_steps == [] and result.row.step == "scale-up" and ran(fake) == ["ansible-playbook"]


async def test_a_lost_outcome_marked_done_is_not_run_again(time_skipping_env, wf_task_queue):
    fake = KitFake()
    fake.host_script = {"ansible-playbook": ["timeout"]}

    async def mark_done(h, st):
        gate = next(g for g in st["gates"] if g["state"] == "waiting")
        assert gate["id"] == "n1/unknown/scale-up" and gate["choices"] == ["mark-done", "rerun"]
        await h.execute_update(ProcedureWorkflow.decide, DecideInput(node="n1/unknown/scale-up", decision="mark-done", identity="bob",
                                                                     comment="the node is in the inventory"))

    result = await run_probe(time_skipping_env, wf_task_queue, fake, StepRowProbeInput(host_steps=[SCALEUP]), mark_done)
    assert result.outcome == "completed" and result.row.done_steps == ["scale-up"]
    assert ran(fake) == ["ansible-playbook"]
    assert result.row.last_command.tail.startswith("outcome unknown")


async def test_a_lost_outcome_rerun_runs_it_once_more(time_skipping_env, wf_task_queue):
    fake = KitFake()
    fake.host_script = {"ansible-playbook": ["lost", 0]}

    async def rerun(h, st):
        await h.execute_update(ProcedureWorkflow.decide, DecideInput(node="n1/unknown/scale-up", decision="rerun", identity="bob"))

    result = await run_probe(time_skipping_env, wf_task_queue, fake, StepRowProbeInput(host_steps=[SCALEUP]), rerun)
    assert result.outcome == "completed" and ran(fake) == ["ansible-playbook", "ansible-playbook"]
    assert result.row.last_command.exit_code == 0


async def test_a_step_the_row_has_done_is_not_run_again(time_skipping_env, wf_task_queue):
    fake = KitFake()
    other = HostStep(name="inventory", argv=["inventory-hook", "{node}"])
    result = await run_probe(time_skipping_env, wf_task_queue, fake, StepRowProbeInput(host_steps=[SCALEUP, other], done=["scale-up"]))
    assert result.outcome == "completed" and result.row.done_steps == ["scale-up", "inventory"]
    assert ran(fake) == ["inventory-hook"]


async def test_a_health_wait_that_times_out_asks_and_waits_again_when_approved(time_skipping_env, wf_task_queue):
    fake = KitFake()

    async def approve(h, st):
        assert gate_waiting("n1/health/ready")(st)
        assert "the probe ready: not reached within 5s (poll" in st["waiting_for"]
        await h.execute_update(ProcedureWorkflow.approve, ApproveInput(identity="bob", gate_id="n1/health/ready"))

    inp = StepRowProbeInput(health_polls=8, wait_seconds=5)
    result = await run_probe(time_skipping_env, wf_task_queue, fake, inp, approve)
    assert result.outcome == "completed" and result.row.done_steps == ["ready"]
    assert [r.gate_id for r in result.gate_history if r.action == "approved"] == ["n1/health/ready"]


async def test_a_reboot_step_is_confirmed_by_a_new_boot_id(time_skipping_env, wf_task_queue):
    fake = KitFake()
    fake.boot_ids = ["b1", "b1", None, "b2"]  # before the command, then still up, then down, then booted again
    result = await run_probe(time_skipping_env, wf_task_queue, fake, StepRowProbeInput(reboot_from="b1"))
    assert result.outcome == "completed" and result.boot_id == "b2" and result.row.done_steps == ["reboot"]
    assert ran(fake).count("systemctl") == 1  # the reboot command runs once
