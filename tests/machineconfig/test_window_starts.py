"""Issue 16: the rollout's window starts every free place in one workflow task
(``window-starts-together``), never more than maxUnavailable, and still stops at a gate."""

from __future__ import annotations

from temporalio.api.enums.v1 import EventType
from tests.machineconfig.test_machineconfig_rollout import rollout_input, start
from tests.support.wf_fakes import FakeCluster, rollout_worker

from workflows.kit.plan import ApprovalPolicy


def _starts_per_task(history) -> list[int]:
    """Node-run starts commanded by each workflow task, in order (tasks that start none omitted)."""
    out, current = [], 0
    for e in history.events:
        if e.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED:
            if current:
                out.append(current)
            current = 0
        elif e.event_type == EventType.EVENT_TYPE_START_CHILD_WORKFLOW_EXECUTION_INITIATED:
            if "/node/" in e.start_child_workflow_execution_initiated_event_attributes.workflow_id:
                current += 1
    return out + ([current] if current else [])


async def test_free_places_start_in_one_task_within_max_unavailable(time_skipping_env, wf_task_queue):
    fake = FakeCluster({"worker": 12}, reboot_polls=4)
    async with rollout_worker(time_skipping_env.client, fake, wf_task_queue):
        handle = await start(time_skipping_env, wf_task_queue, rollout_input(max_unavailable=4))
        result = await handle.result()
        history = await handle.fetch_history()
    assert result.outcome == "completed" and result.summary.done == 12
    assert fake.max_in_flight == 4
    starts = _starts_per_task(history)
    assert starts[0] == 4, starts  # the whole window at once, not one node per task
    assert sum(starts) == 12 and max(starts) <= 4, starts


async def test_a_canary_gate_still_holds_the_rest(time_skipping_env, wf_task_queue):
    fake = FakeCluster({"worker": 6})
    inp = rollout_input(max_unavailable=3, approval=ApprovalPolicy.CANARY)
    async with rollout_worker(time_skipping_env.client, fake, wf_task_queue):
        handle = await start(time_skipping_env, wf_task_queue, inp)
        from tests.machineconfig.test_machineconfig_rollout import wait_status

        s = await wait_status(handle, lambda s: any(g.state == "waiting" for g in s.gates), timeout=30)
        assert fake.max_in_flight == 1, "only the canary ran before its gate"
        gate = next(g for g in s.gates if g.state == "waiting")
        from workflows import MachineConfigRolloutWorkflow
        from workflows.kit.models import ApproveInput

        await handle.execute_update(MachineConfigRolloutWorkflow.approve, ApproveInput(gate_id=gate.id, identity="bob"))
        result = await handle.result()
        history = await handle.fetch_history()
    assert result.outcome == "completed" and fake.max_in_flight == 3
    starts = _starts_per_task(history)
    assert starts[0] == 1 and starts[1] == 3, starts


async def test_a_wide_window_opens_in_tasks_of_bounded_size(time_skipping_env, wf_task_queue):
    from workflows.kit.batches import MAX_STARTS_PER_TASK

    fake = FakeCluster({"worker": 40}, reboot_polls=6)
    async with rollout_worker(time_skipping_env.client, fake, wf_task_queue):
        handle = await start(time_skipping_env, wf_task_queue, rollout_input(max_unavailable=30))
        result = await handle.result()
        history = await handle.fetch_history()
    assert result.outcome == "completed" and result.summary.done == 40
    assert fake.max_in_flight <= 30
    starts = _starts_per_task(history)
    assert starts[0] == MAX_STARTS_PER_TASK and max(starts) == MAX_STARTS_PER_TASK, starts
    assert sum(starts) == 40, starts
