"""Issue 16: per-node progress does not cost the parent a signal per step.

A node rollout signals its parent only on a blocked drain, a warning or a decision (under
``node-steps-by-query``; before it, also once when the node was in the daemon's hands); the
parent learns the outcome from the child's result. The child's own ``progress`` query names
every step, and ``status`` merges the running runs' steps in (:mod:`lockkeeper.live`).
"""

from __future__ import annotations

import asyncio
import uuid

from temporalio.api.enums.v1 import EventType
from tests.support.wf_fakes import FakeCluster, rollout_worker

from lockkeeper.live import merge_live_progress
from workflows import MachineConfigRolloutWorkflow
from workflows.kit.models import NodePhase
from workflows.machineconfig.models import MachineConfigRolloutInput, MachineConfigRolloutResult
from workflows.machineconfig.node import NodeRolloutWorkflow


def _input(**kw) -> MachineConfigRolloutInput:
    kw.setdefault("cluster", f"c-{uuid.uuid4().hex[:8]}")
    return MachineConfigRolloutInput(
        search_attributes=False, approvals={"requested_by": "alice"}, daemon={"wait_activity_timeout_seconds": 5},
        drain={"wait_seconds": 1}, **kw
    )


def _count(history, kind: int) -> int:
    return sum(1 for e in history.events if e.event_type == kind)


async def test_parent_gets_no_progress_signal_on_the_normal_path(time_skipping_env, wf_task_queue):
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
    # No step is signalled (the first protocol sent about ten per node, the next one).
    assert _count(history, EventType.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED) == 0
    assert _count(child_history, EventType.EVENT_TYPE_SIGNAL_EXTERNAL_WORKFLOW_EXECUTION_INITIATED) == 0
    # The child keeps the whole story for a live view: its last step is the end of the handshake.
    assert progress.phase == NodePhase.DONE and progress.step == "finished"


async def test_status_shows_the_running_nodes_steps_from_their_runs(time_skipping_env, wf_task_queue):
    """The parent's own status has no step for a rebooting node; the live merge asks its run."""
    fake = FakeCluster({"worker": 2}, reboot_polls=40)
    async with rollout_worker(time_skipping_env.client, fake, wf_task_queue):
        handle = await time_skipping_env.client.start_workflow(
            MachineConfigRolloutWorkflow.run, _input(max_unavailable=2), id=f"rollout-{uuid.uuid4().hex[:8]}",
            task_queue=wf_task_queue, result_type=MachineConfigRolloutResult,
        )
        seen = None
        for _ in range(400):
            own = await handle.query(MachineConfigRolloutWorkflow.status)
            live = own.model_copy(deep=True)
            merged = await merge_live_progress(time_skipping_env.client, live)
            steps = {n: s.step for n, s in live.nodes.items()}
            if merged and "wait-reboot" in steps.values():
                seen = (own, live)
                break
            await asyncio.sleep(0.05)
        assert seen is not None, "no node was seen rebooting through the live merge"
        own, live = seen
        rebooting = [n for n, s in live.nodes.items() if s.step == "wait-reboot"]
        for n in rebooting:
            assert own.nodes[n].phase == NodePhase.RUNNING and own.nodes[n].step is None
            assert own.nodes[n].run_id == f"{handle.id}/node/{n}/1"
            assert "desiredDrain=uncordon-" in (live.nodes[n].waiting_for or "")
            assert live.nodes[n].since is not None and live.nodes[n].since >= own.nodes[n].since
        result = await handle.result()
    assert result.outcome == "completed"
