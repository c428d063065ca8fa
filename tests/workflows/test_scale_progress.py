"""Issue 16, step 1: per-node progress does not cost the parent a signal per step.

A node rollout signals its parent only when the node is in the daemon's hands (wait-reboot), on a
blocked drain, a warning or a decision; the parent learns the outcome from the child's result.
The child's own ``progress`` query still names every step.
"""

from __future__ import annotations

import uuid

from temporalio.api.enums.v1 import EventType
from wf_fakes import FakeCluster, rollout_worker

from workflows import MachineConfigRolloutWorkflow
from workflows.kit.models import NodePhase
from workflows.machineconfig.models import MachineConfigRolloutInput, MachineConfigRolloutResult
from workflows.machineconfig.node import NodeRolloutWorkflow


def _input(**kw) -> MachineConfigRolloutInput:
    kw.setdefault("cluster", f"c-{uuid.uuid4().hex[:8]}")
    return MachineConfigRolloutInput(
        search_attributes=False, requested_by="alice", wait_activity_timeout_seconds=5, drain_wait_seconds=1, **kw
    )


def _count(history, kind: int) -> int:
    return sum(1 for e in history.events if e.event_type == kind)


async def test_parent_gets_at_most_one_progress_signal_per_node(time_skipping_env, wf_task_queue):
    nodes = 12
    fake = FakeCluster({"worker": nodes}, reboot_polls=3)
    async with rollout_worker(time_skipping_env.client, fake, wf_task_queue):
        handle = await time_skipping_env.client.start_workflow(
            MachineConfigRolloutWorkflow.run, _input(max_unavailable=4), id=f"rollout-{uuid.uuid4().hex[:8]}",
            task_queue=wf_task_queue, result_type=MachineConfigRolloutResult,
        )
        result = await handle.result()
        history = await handle.fetch_history()
        child = time_skipping_env.client.get_workflow_handle(f"{handle.id}/node/worker-0/1")
        progress = await child.query(NodeRolloutWorkflow.progress)
        child_history = await child.fetch_history()
    assert result.outcome == "completed" and result.summary.done == nodes
    assert all(r.phase == NodePhase.DONE for r in result.nodes.values())
    signals = _count(history, EventType.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED)
    # One wait-reboot milestone per node at most (the old protocol sent about ten).
    assert signals <= nodes, f"{signals} signals for {nodes} nodes"
    sent = _count(child_history, EventType.EVENT_TYPE_SIGNAL_EXTERNAL_WORKFLOW_EXECUTION_INITIATED)
    assert sent == 1
    # The child keeps the whole story for a live view: its last step is the end of the handshake.
    assert progress.phase == NodePhase.DONE and progress.step == "finished"
