"""The kit's run template (ProcedureWorkflow.kit_run), gate steps with choices and the kit's
revert, through the uniform operator surface (time-skipping server, TemplateProbeWorkflow of
kit_probes.py, the in-memory API of kit_fakes.py): an abort before the point of no return
restores and reads back, past it the outcome names what stays changed; a revert pre-empts a
waiting gate; a failed precondition refuses; a failure names what it leaves changed."""

from __future__ import annotations

import uuid

import pytest
from tests.support.kit_fakes import KitFake, gate_waiting, kit_worker, poll, refused
from tests.support.kit_probes import ProbeResult, TemplateProbeInput, TemplateProbeWorkflow
from temporalio.client import WorkflowFailureError

from activities.cluster.models import ObjectRef
from workflows.kit.models import ApproveInput, ControlInput, DecideInput, RevertInput
from workflows.kit.procedure import ProcedureWorkflow

REF = ObjectRef(kind="DaemonSet", name="sdn", namespace="openshift-sdn")
IMAGE = "/spec/template/spec/containers/0/image"
TRIGGERS = "/metadata/annotations/image.openshift.io~1triggers"


def _fake() -> KitFake:
    fake = KitFake()
    fake.objects[REF.describe()] = {
        "metadata": {"name": "sdn", "resourceVersion": "1", "annotations": {"image.openshift.io/triggers": "[...]"}},
        "spec": {"template": {"spec": {"containers": [{"image": "openshift/node:v3.11"}]}}},
    }
    return fake


def _input(**kw) -> TemplateProbeInput:
    return TemplateProbeInput(search_attributes=False, record=REF,
                              record_values={IMAGE: "registry.example/custom-node:1", TRIGGERS: None}, **kw)


async def _start(env, tq: str, inp: TemplateProbeInput):
    return await env.client.start_workflow(TemplateProbeWorkflow.run, inp, id=f"tpl-{uuid.uuid4().hex[:8]}", task_queue=tq,
                                           result_type=ProbeResult)


def _image(fake: KitFake) -> str:
    return fake.objects[REF.describe()]["spec"]["template"]["spec"]["containers"][0]["image"]


async def test_abort_before_the_point_of_no_return_restores_and_reads_back(time_skipping_env, wf_task_queue):
    env, fake = time_skipping_env, _fake()
    async with kit_worker(env, fake, wf_task_queue):
        h = await _start(env, wf_task_queue, _input())
        await poll(h, gate_waiting("go"))
        assert _image(fake) == "registry.example/custom-node:1"
        await h.execute_update(ProcedureWorkflow.abort, ControlInput(identity="bob", reason="test over"))
        result = await h.result()
    assert result.outcome == "aborted" and result.message.startswith("aborted, restored and read back: test over")
    assert result.restored and "DaemonSet openshift-sdn/sdn" in result.restored[0] and not result.left_changed
    assert _image(fake) == "openshift/node:v3.11"
    assert fake.objects[REF.describe()]["metadata"]["annotations"] == {"image.openshift.io/triggers": "[...]"}
    assert [r.action for r in result.gate_history] == ["opened", "cancelled"]
    assert result.open_records == []  # nothing holds a change any more


async def test_abort_past_the_point_of_no_return_names_what_stays_changed(time_skipping_env, wf_task_queue):
    env, fake = time_skipping_env, _fake()
    async with kit_worker(env, fake, wf_task_queue):
        h = await _start(env, wf_task_queue, _input(pnr=True))
        st = await poll(h, gate_waiting("go"))
        assert st["point_of_no_return"] == "the probe's change went out"
        msg = await refused(h.execute_update(ProcedureWorkflow.revert, RevertInput(identity="bob")))
        assert "past the point of no return (the probe's change went out)" in msg and "--full" in msg
        await h.execute_update(ProcedureWorkflow.abort, ControlInput(identity="bob", reason="stop here"))
        result = await h.result()
    assert result.outcome == "aborted" and "past the point of no return" in result.message
    assert _image(fake) == "registry.example/custom-node:1"  # nothing restored
    (item,) = result.left_changed
    assert item.target == "DaemonSet openshift-sdn/sdn" and IMAGE in item.what
    assert item.undo == f"lockkeeper revert {h.id} --full" and result.next_commands == [item.undo]
    assert [e.name for e in result.open_records] == ["obj"]  # a reverse run can take these over


async def test_revert_preempts_a_waiting_gate_and_restores(time_skipping_env, wf_task_queue):
    env, fake = time_skipping_env, _fake()
    async with kit_worker(env, fake, wf_task_queue):
        h = await _start(env, wf_task_queue, _input())
        await poll(h, gate_waiting("go"))
        answer = await h.execute_update(ProcedureWorkflow.revert, RevertInput(identity="carol", reason="wrong image"))
        assert answer.mode == "in-run"
        assert "already requested" in await refused(h.execute_update(ProcedureWorkflow.revert, RevertInput(identity="carol")))
        result = await h.result()
    assert result.outcome == "reverted" and "wrong image" in result.message and result.restored
    assert _image(fake) == "openshift/node:v3.11"
    cancelled = [r for r in result.gate_history if r.action == "cancelled"]
    assert cancelled and cancelled[0].comment == "revert requested by carol"


async def test_revert_with_nothing_changed_is_refused(time_skipping_env, wf_task_queue):
    env, fake = time_skipping_env, _fake()
    async with kit_worker(env, fake, wf_task_queue):
        h = await _start(env, wf_task_queue, TemplateProbeInput(search_attributes=False))
        await poll(h, gate_waiting("go"))
        assert "nothing has been changed yet" in await refused(h.execute_update(ProcedureWorkflow.revert, RevertInput(identity="x")))
        await h.execute_update(ProcedureWorkflow.abort, ControlInput(identity="x"))
        result = await h.result()
    assert result.outcome == "aborted" and result.message.endswith("nothing was changed") and not result.left_changed


async def test_a_restore_that_does_not_read_back_says_so(time_skipping_env, wf_task_queue):
    env, fake = time_skipping_env, _fake()
    async with kit_worker(env, fake, wf_task_queue):
        h = await _start(env, wf_task_queue, _input())
        await poll(h, gate_waiting("go"))
        fake.sticky[REF.describe()] = {IMAGE: "registry.example/custom-node:1"}  # a controller puts it back
        await h.execute_update(ProcedureWorkflow.abort, ControlInput(identity="bob"))
        result = await h.result()
    assert result.outcome == "aborted" and "NOT fully restored" in result.message
    assert not result.restored and "read back after the restore" in result.message
    (item,) = result.left_changed
    assert "revert differs" in item.what


async def test_gate_choices_are_explicit_values(time_skipping_env, wf_task_queue):
    env, fake = time_skipping_env, _fake()
    async with kit_worker(env, fake, wf_task_queue):
        h = await _start(env, wf_task_queue, TemplateProbeInput(search_attributes=False, choices=["continue", "restart"]))
        st = await poll(h, gate_waiting("go"))
        assert [g["choices"] for g in st["gates"]] == [["continue", "restart"]]
        msg = await refused(h.execute_update(ProcedureWorkflow.decide, DecideInput(node="go", decision="rerun", identity="bob")))
        assert "'rerun' is not one of its choices (continue, restart)" in msg
        res = await h.execute_update(ProcedureWorkflow.decide, DecideInput(node="go", decision="restart", identity="bob",
                                                                           comment="api hung"))
        assert res.gate_id == "go" and res.decision == "restart"
        result = await h.result()
    assert result.outcome == "completed" and result.message == "choice restart"
    decided = [r for r in result.gate_history if r.action == "decided"]
    assert [(r.by, r.decision, r.comment) for r in decided] == [("bob", "restart", "api hung")]


async def test_approve_on_a_gate_with_choices_takes_the_first(time_skipping_env, wf_task_queue):
    env, fake = time_skipping_env, _fake()
    async with kit_worker(env, fake, wf_task_queue):
        h = await _start(env, wf_task_queue, TemplateProbeInput(search_attributes=False, choices=["continue", "restart"]))
        await poll(h, gate_waiting("go"))
        await h.execute_update(ProcedureWorkflow.approve, ApproveInput(identity="bob"))
        result = await h.result()
    assert result.message == "choice continue"
    assert [r.decision for r in result.gate_history if r.action == "approved"] == ["continue"]


async def test_a_failed_precondition_refuses_with_one_line_per_problem(time_skipping_env, wf_task_queue):
    env, fake = time_skipping_env, _fake()
    async with kit_worker(env, fake, wf_task_queue):
        h = await _start(env, wf_task_queue, _input(problems=["ansible-playbook: not found on the worker's PATH",
                                                             "node nosuch-node: no such Node"]))
        result = await h.result()
    assert result.outcome == "refused"
    assert result.problems == ["ansible-playbook: not found on the worker's PATH", "node nosuch-node: no such Node"]
    assert not fake.called("patch_object") and not fake.called("snapshot_fields")


async def test_a_failure_names_what_it_leaves_changed(time_skipping_env, wf_task_queue):
    env, fake = time_skipping_env, _fake()
    async with kit_worker(env, fake, wf_task_queue):
        h = await _start(env, wf_task_queue, _input(fail="the pods did not come back"))
        await poll(h, gate_waiting("go"))
        await h.execute_update(ProcedureWorkflow.approve, ApproveInput(identity="bob"))
        with pytest.raises(WorkflowFailureError) as info:
            await h.result()
        st = await h.query("status", result_type=dict)
    msg = str(info.value.cause)
    assert "the pods did not come back; left changed: DaemonSet openshift-sdn/sdn" in msg and f"revert {h.id} --full" in msg
    assert st["phase"] == "failed" and st["left_changed"][0]["target"] == "DaemonSet openshift-sdn/sdn"


async def test_a_failed_activity_the_body_does_not_handle_ends_failed_naming_what_stays_changed(time_skipping_env, wf_task_queue):
    """An ActivityError escaping the body fails the run as an ApplicationError does: status phase
    failed with the activity's own message as ``error``, and the failure (of the activity's error
    type) names what stays changed."""
    env, fake = time_skipping_env, _fake()
    fake.target_fail["master-0"] = "port 4789 still open"
    async with kit_worker(env, fake, wf_task_queue):
        h = await _start(env, wf_task_queue, _input(step_target="master-0"))
        await poll(h, gate_waiting("go"))
        await h.execute_update(ProcedureWorkflow.approve, ApproveInput(identity="bob"))
        with pytest.raises(WorkflowFailureError) as info:
            await h.result()
        st = await h.query("status", result_type=dict)
    cause = info.value.cause
    assert "port 4789 still open; left changed: DaemonSet openshift-sdn/sdn" in str(cause), str(cause)
    assert getattr(cause, "type", None) == "StepFailed"
    assert st["phase"] == "failed" and st["error"] == "port 4789 still open"
    assert st["left_changed"][0]["target"] == "DaemonSet openshift-sdn/sdn"


async def test_a_rejected_required_gate_ends_as_an_abort_and_restores(time_skipping_env, wf_task_queue):
    env, fake = time_skipping_env, _fake()
    async with kit_worker(env, fake, wf_task_queue):
        h = await _start(env, wf_task_queue, _input())
        await poll(h, gate_waiting("go"))
        from workflows.kit.models import RejectInput

        await h.execute_update(ProcedureWorkflow.reject, RejectInput(identity="bob", comment="not now"))
        result = await h.result()
    assert result.outcome == "aborted" and "gate go rejected by bob: not now" in result.message and result.restored
    assert _image(fake) == "openshift/node:v3.11"


async def test_a_reverse_run_restores_an_ended_runs_records_and_reads_them_back(time_skipping_env, wf_task_queue):
    """``revert --full`` of an ended run without a reverse of its own: RevertRecordsWorkflow takes
    the records the run left in its result, gates once, restores each read back."""
    from tests.support.replay import record

    from workflows.kit.reverse import RevertRecordsInput, RevertRecordsResult, RevertRecordsWorkflow

    env, fake = time_skipping_env, _fake()
    async with kit_worker(env, fake, wf_task_queue):
        h = await _start(env, wf_task_queue, _input(pnr=True))
        await poll(h, gate_waiting("go"))
        await h.execute_update(ProcedureWorkflow.abort, ControlInput(identity="bob", reason="stop here"))
        ended = await h.result()
        assert _image(fake) == "registry.example/custom-node:1" and ended.open_records
        rev = await env.client.start_workflow(
            RevertRecordsWorkflow.run, RevertRecordsInput(of_workflow=h.id, records=ended.open_records, search_attributes=False),
            id="revert-records-history", task_queue=wf_task_queue, result_type=RevertRecordsResult)
        st = await poll(rev, gate_waiting("revert"))
        assert "restore DaemonSet openshift-sdn/sdn" in st["gates"][0]["comment"]
        await rev.execute_update(ProcedureWorkflow.approve, ApproveInput(identity="carol"))
        result = await rev.result()
        await record(rev, "RevertRecordsWorkflow.one-record")
    assert result.outcome == "reverted" and result.of_workflow == h.id and result.restored
    assert _image(fake) == "openshift/node:v3.11"


async def test_a_reverse_run_refuses_to_overwrite_what_somebody_changed_since(time_skipping_env, wf_task_queue):
    from workflows.kit.reverse import RevertRecordsInput, RevertRecordsResult, RevertRecordsWorkflow

    env, fake = time_skipping_env, _fake()
    async with kit_worker(env, fake, wf_task_queue):
        h = await _start(env, wf_task_queue, _input(pnr=True))
        await poll(h, gate_waiting("go"))
        await h.execute_update(ProcedureWorkflow.abort, ControlInput(identity="bob"))
        ended = await h.result()
        obj = fake.objects[REF.describe()]
        obj["spec"]["template"]["spec"]["containers"][0]["image"] = "someone/else:2"  # changed since
        rev = await env.client.start_workflow(
            RevertRecordsWorkflow.run,
            RevertRecordsInput(of_workflow=h.id, records=ended.open_records, approve=False, search_attributes=False),
            id=f"revert-{uuid.uuid4().hex[:6]}", task_queue=wf_task_queue, result_type=RevertRecordsResult)
        result = await rev.result()
    assert result.outcome == "stopped" and not result.restored and "changed since" in result.message
    assert _image(fake) == "someone/else:2"  # nothing of theirs overwritten
    assert [i.target for i in result.left_changed] == ["DaemonSet openshift-sdn/sdn"]


async def test_a_procedures_own_stop_ends_through_the_template_naming_what_stays_changed(time_skipping_env, wf_task_queue):
    """A body that stops by its own rule raises the kit's ProcedureStopped (GlusterFS recovery's
    Stop, the network migration's refusals): the template ends it with that outcome, the reason
    with what stays changed appended and listed, the commands to go on and the body's fields."""
    env, fake = time_skipping_env, _fake()
    async with kit_worker(env, fake, wf_task_queue):
        h = await _start(env, wf_task_queue, _input(stop="volume vol1 is down"))
        result = await h.result()
        st = await h.query("status", result_type=dict)
    assert result.outcome == "stopped" and result.detail == "by the probe's rule"
    assert result.message.startswith("volume vol1 is down; left changed: DaemonSet openshift-sdn/sdn"), result.message
    (item,) = result.left_changed
    assert item.target == "DaemonSet openshift-sdn/sdn" and result.next_commands == [f"lockkeeper revert {h.id} --full"]
    assert [i["target"] for i in st["left_changed"]] == ["DaemonSet openshift-sdn/sdn"] and st["phase"] == "failed"
    assert _image(fake) == "registry.example/custom-node:1" and not result.gate_history  # stopped before the gate
