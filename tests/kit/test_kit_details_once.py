"""The UI's current details are rendered once per workflow activation, however many changes it
holds (workflows/kit/details.py): a render reads every node, and a 5,000-node rollout's
activation that took in 500 node-run completions rendered 500 times, 23 s, past the deadlock
detector, so its workflow task failed for good. The probe finishes 500 nodes (2,000 took the
activation itself past the 2 s deadlock detector on a loaded CI machine); the render count is the
check: without the once-per-activation flush it is 500."""

from __future__ import annotations

import asyncio
import uuid

from temporalio import workflow
from temporalio.api.sdk.v1 import WorkflowMetadata
from temporalio.worker import Worker

from workflows.kit.details import DetailsPublisher
from workflows.kit.models import NodePhase, NodeStatus, ProcedureStatus


class NodesStatus(ProcedureStatus):
    nodes: dict[str, NodeStatus] = {}


class CountingPublisher(DetailsPublisher):
    def __init__(self) -> None:
        super().__init__()
        self.renders = 0

    def flush(self) -> bool:
        if self._pending is not None:
            self.renders += 1
        return super().flush()


@workflow.defn(name="DetailsOnceProbe", sandboxed=False)
class DetailsOnceProbe:
    """Finishes 500 nodes in 500 tasks of one activation, each publishing after its change as
    the kit's ``touch`` does after a node run's completion; then waits for ``finish``."""

    def __init__(self) -> None:
        self.publisher = CountingPublisher()
        self.status = NodesStatus(procedure="probe", workflow_id="probe", cluster="c", nodes={
            f"n-{i}": NodeStatus(name=f"n-{i}", pool="p", phase=NodePhase.RUNNING) for i in range(500)})
        self.done = False

    @workflow.run
    async def run(self) -> int:
        async def finish_node(node: NodeStatus) -> None:  # as a node run's completion does
            node.phase = NodePhase.DONE
            self.publisher.publish(self.status, phase="running", gates=[], paused_reason=None, noun="probe")

        await asyncio.gather(*(asyncio.create_task(finish_node(n)) for n in self.status.nodes.values()))
        first = self.publisher.renders
        await workflow.wait_condition(lambda: self.done)
        return first

    @workflow.query
    def renders(self) -> int:
        return self.publisher.renders

    @workflow.signal
    def finish(self) -> None:
        self.done = True


async def test_many_changes_in_one_activation_render_once(time_skipping_env, wf_task_queue):
    env = time_skipping_env
    async with Worker(env.client, task_queue=wf_task_queue, workflows=[DetailsOnceProbe]):
        handle = await env.client.start_workflow(DetailsOnceProbe.run, id=f"details-{uuid.uuid4().hex[:8]}", task_queue=wf_task_queue)
        meta = await handle.query("__temporal_workflow_metadata", result_type=WorkflowMetadata)
        # The last state is what shows: every node done, none in flight.
        assert "done: 500" in meta.current_details and "running:" not in meta.current_details
        assert await handle.query(DetailsOnceProbe.renders) == 1
        await handle.signal(DetailsOnceProbe.finish)
        assert await handle.result() == 1
