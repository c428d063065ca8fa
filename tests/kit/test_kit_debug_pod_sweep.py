"""The kit's end-of-run sweep of debug pods (workflows/kit/host.py ``sweep_debug_pods``, called
by ``ProcedureWorkflow.kit_run`` at every ending): a run that sent debug-pod commands asks for its
own run's pods to be deleted, lists what was deleted in its warnings and names a pod that stays
in ``left_changed`` with its ``oc delete pod`` command; a run without debug pods asks nothing.
Time-skipping server, the probe of tests/support/kit_probes.py, fake activities by name."""

from __future__ import annotations

import pytest
from temporalio import activity
from temporalio.client import WorkflowFailureError

from activities.host.models import SweepDebugPodsInput, SweepDebugPodsResult
from tests.support.kit_fakes import KitFake, kit_worker
from tests.support.kit_probes import DebugPodProbeInput, DebugPodProbeWorkflow, ProbeResult
from workflows.kit.host import HostStep
from workflows.kit.models import ApprovalRules


class Sweeps:
    """A ``sweep_debug_pods`` stand-in: records each call and answers ``deleted`` / ``remaining``."""

    def __init__(self, deleted: list[str], remaining: list[str]) -> None:
        self.calls: list[SweepDebugPodsInput] = []
        self.deleted, self.remaining = deleted, remaining

    def activity(self):  # noqa: ANN201 - an activity definition
        @activity.defn(name="sweep_debug_pods")
        async def sweep_debug_pods(inp: SweepDebugPodsInput) -> SweepDebugPodsResult:
            self.calls.append(inp)
            return SweepDebugPodsResult(deleted=list(self.deleted), remaining=list(self.remaining))

        return sweep_debug_pods


async def start(env, task_queue: str, inp: DebugPodProbeInput):  # noqa: ANN001, ANN201
    return await env.client.start_workflow(DebugPodProbeWorkflow.run, inp, id=f"dbg-{task_queue}", task_queue=task_queue,
                                           result_type=ProbeResult)


def probe_input(**kw) -> DebugPodProbeInput:  # noqa: ANN003
    kw.setdefault("steps", [HostStep(name="probe", argv=["true"])])
    return DebugPodProbeInput(approvals=ApprovalRules(requested_by="alice"), search_attributes=False, **kw)


async def test_a_run_with_debug_pods_sweeps_them_and_names_what_stays(time_skipping_env, wf_task_queue) -> None:
    env, fake = time_skipping_env, KitFake()
    sweeps = Sweeps(deleted=["lk-debug/n1-lockkeeper-debug-aaaa"], remaining=["lk-debug/n1-lockkeeper-debug-bbbb"])
    async with kit_worker(env, fake, wf_task_queue, extra=[sweeps.activity()]):
        h = await start(env, wf_task_queue, probe_input())
        result = await h.result()
        st = await h.query("status", result_type=dict)
    run_id = (await h.describe()).run_id
    assert [(c.run_id, c.namespaces) for c in sweeps.calls] == [(run_id, ["lk-debug"])]
    assert result.outcome == "completed"
    assert [(i.target, i.undo) for i in result.left_changed] == [
        ("Pod lk-debug/n1-lockkeeper-debug-bbbb", "oc delete pod -n lk-debug n1-lockkeeper-debug-bbbb")]
    assert result.next_commands == ["oc delete pod -n lk-debug n1-lockkeeper-debug-bbbb"]
    assert "left changed: Pod lk-debug/n1-lockkeeper-debug-bbbb" in result.message
    assert st["warnings"] == ["deleted 1 debug pod(s) this run's commands left: lk-debug/n1-lockkeeper-debug-aaaa"]


async def test_a_failed_run_sweeps_too_and_its_error_names_the_pod_left(time_skipping_env, wf_task_queue) -> None:
    env, fake = time_skipping_env, KitFake()
    fake.host_script = {"false": [1]}
    sweeps = Sweeps(deleted=[], remaining=["lk-debug/n1-lockkeeper-debug-cccc"])
    async with kit_worker(env, fake, wf_task_queue, extra=[sweeps.activity()]):
        h = await start(env, wf_task_queue, probe_input(steps=[HostStep(name="bad", argv=["false"])]))
        with pytest.raises(WorkflowFailureError) as err:
            await h.result()
    assert len(sweeps.calls) == 1
    assert "left changed: Pod lk-debug/n1-lockkeeper-debug-cccc" in str(err.value.cause)


async def test_a_run_without_debug_pods_sweeps_nothing(time_skipping_env, wf_task_queue) -> None:
    env, fake = time_skipping_env, KitFake()
    sweeps = Sweeps(deleted=[], remaining=[])
    async with kit_worker(env, fake, wf_task_queue, extra=[sweeps.activity()]):
        result = await (await start(env, wf_task_queue, probe_input(backend="local"))).result()
    assert result.outcome == "completed" and result.left_changed == [] and sweeps.calls == []
