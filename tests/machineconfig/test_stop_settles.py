"""A skip or abort while a node run's first ``drain_when_asked`` call runs rolls back only what that
call did once it has ended (node-run feature ``stop-settles-call``).

The call sets desiredConfig, then cordons and drains when the daemon asks. A cancel reaches a
running activity only with its next heartbeat, so a call can still write after the workflow
asked it to stop. A roll-back that read the node before that write left the node with the new
desiredConfig (and our cordon, had the daemon asked in time) and reported it skipped. The fake call here is slow to its
first write and sees no cancel, as a real one between heartbeats."""

from __future__ import annotations

import asyncio
import uuid

import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.client import WorkflowHistory
from tests.support.replay import recording, store
from tests.machineconfig.test_machineconfig_rollout import rollout_input, start
from tests.support.wf_fakes import FakeCluster, new_config, old_config, rollout_worker

from workflows import MachineConfigRolloutWorkflow
from workflows.kit.models import ControlInput, NodeControlInput, NodePhase


HISTORY_ID = "rollout-stop-settles"


async def _until(pred, what: str, timeout: float = 20.0) -> None:
    for _ in range(int(timeout / 0.02)):
        if pred():
            return
        await asyncio.sleep(0.02)
    raise AssertionError(f"timed out waiting for {what}")


@pytest.mark.parametrize("stop", ["skip", "abort"])
async def test_a_stop_during_the_first_call_rolls_back_what_the_call_wrote_after_it(time_skipping_env, wf_task_queue, stop):
    fake = FakeCluster({"worker": 2})
    fake.drain_call_go["worker-0"] = asyncio.Event()
    async with rollout_worker(time_skipping_env.client, fake, wf_task_queue):
        wf_id = f"{HISTORY_ID}-{stop}" if recording() else f"rollout-{uuid.uuid4().hex[:8]}"
        handle = await start(time_skipping_env, wf_task_queue, rollout_input(max_unavailable=1), wf_id=wf_id)
        await _until(lambda: "worker-0" in fake.drain_call_started, "worker-0's first drain_when_asked")
        if stop == "skip":
            await handle.execute_update(MachineConfigRolloutWorkflow.skip_node, NodeControlInput(node="worker-0", identity="bob"))
        else:
            await handle.execute_update(MachineConfigRolloutWorkflow.abort, ControlInput(identity="bob", reason="stop"))
        await asyncio.sleep(1.0)  # the node run has the stop and has asked its call to stop
        assert fake.nodes["worker-0"].desired_config == old_config("worker"), "nothing written yet"
        fake.drain_call_go["worker-0"].set()  # the call goes on: desiredConfig, then cordon and drain when asked
        result = await handle.result()
        run = time_skipping_env.client.get_workflow_handle(f"{wf_id}/node/worker-0/1")
        history = await run.fetch_history()
        if stop == "skip":
            await store_if_recording(history)
    node = fake.nodes["worker-0"]
    assert [a.set_desired_config for a in fake.called("drain_when_asked") if a.node == "worker-0"] == [True]
    # What the call wrote after the stop was rolled back, not left behind.
    assert node.desired_config == node.current_config == old_config("worker"), node
    assert not node.unschedulable and node.cordoned_by is None, node
    if stop == "skip":
        assert result.nodes["worker-0"].phase == NodePhase.SKIPPED, result.nodes["worker-0"]
        assert fake.at_target("worker-1") and result.nodes["worker-1"].phase == NodePhase.DONE
    else:
        assert result.outcome == "aborted" and result.nodes["worker-0"].phase == NodePhase.ABORTED, result
        assert fake.nodes["worker-1"].desired_config == old_config("worker"), "nothing started after the abort"
    assert new_config("worker") not in (node.desired_config, node.current_config)
    kinds = [EventType.Name(e.event_type).removeprefix("EVENT_TYPE_") for e in history.events]
    # The stop, the cancel, the call's own end, and only then the roll-back's calls (local: markers).
    order = [kinds.index(k) for k in ("WORKFLOW_EXECUTION_SIGNALED", "ACTIVITY_TASK_CANCEL_REQUESTED",
                                      "ACTIVITY_TASK_COMPLETED", "MARKER_RECORDED", "WORKFLOW_EXECUTION_COMPLETED")]
    assert order == sorted(order), kinds


async def store_if_recording(history: WorkflowHistory) -> None:
    """The skipped node run is the stored history of a node run stopped mid-call."""
    if recording():
        await store(history, "NodeRolloutWorkflow.skip-mid-call")
