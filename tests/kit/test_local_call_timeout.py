"""A node run's short call that outlives its start-to-close as a local activity (issue 40).

At 5,000 nodes the simulator answered a PATCH in more than the short call's 10 s (the gateway's
read timeout is 30 s): the local ``set_node_annotations`` of a node run timed out, the run
failed with "Activity timed out" and the rollout paused on that node, and no node started again
(the 5,000-node run that "did not finish"). A local attempt that times out must fall back to a
regular activity, as one that fails with a retryable error does, and the node run complete.
"""

from __future__ import annotations

import asyncio
from typing import Any

from temporalio import activity
from temporalio.worker import Worker
from tests.kit.test_node_local_calls import _by_kind, _replace
from tests.machineconfig.test_machineconfig_rollout import rollout_input, start
from tests.support.wf_fakes import FakeCluster

from activities.cluster.models import ANN_LAST_APPLIED_DRAIN, SetNodeAnnotationsInput
from workflows import WORKFLOWS
from workflows.kit.models import NodePhase

SHORT_CALL = 1.0


async def test_a_local_call_that_times_out_falls_back_to_an_activity(time_skipping_env, wf_task_queue):
    fake = FakeCluster({"worker": 1})
    original = {activity._Definition.must_from_callable(fn).name: fn for fn in fake.activities()}["set_node_annotations"]
    slow = {"left": 2}  # the drain hand-off's first two calls outlive the short call (local, then the first regular one)

    @activity.defn(name="set_node_annotations")
    async def slow_then_fine(inp: SetNodeAnnotationsInput) -> Any:
        if ANN_LAST_APPLIED_DRAIN in inp.annotations and slow["left"] > 0:
            slow["left"] -= 1
            fake.calls.append(("set_node_annotations (slow)", inp))
            await asyncio.sleep(SHORT_CALL * 3)  # a PATCH the API server answers late: written, no answer in time
        return await original(inp)

    activities = _replace(fake, set_node_annotations=slow_then_fine)
    inp = rollout_input(calls={"short_call_seconds": SHORT_CALL})
    async with Worker(time_skipping_env.client, task_queue=wf_task_queue, workflows=WORKFLOWS, activities=activities):
        handle = await start(time_skipping_env, wf_task_queue, inp)
        result = await handle.result()
        child = await time_skipping_env.client.get_workflow_handle(f"{handle.id}/node/worker-0/1").fetch_history()

    node = result.nodes["worker-0"]
    assert slow["left"] == 0  # the slow calls were made
    assert node.phase == NodePhase.DONE, (node.phase, node.reason)
    assert result.outcome == "completed"
    scheduled, local = _by_kind(child)
    assert scheduled["set_node_annotations"] >= 1, scheduled  # the hand-off went on as a regular activity
    assert fake.at_target("worker-0")
