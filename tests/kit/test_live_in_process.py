"""Issue 39: ``lockkeeper status`` merges the live step of running node runs (:mod:`lockkeeper.live`),
but a node step that runs inside the procedure's own workflow (a :class:`workflows.kit.batches.
LocalRun`: a control-plane master, a port change's master) is no workflow. The window marks its
row ``in_process`` and the merge asks no workflow for it; a child run is still asked."""

from __future__ import annotations

from typing import Any

from temporalio.worker import Worker

from lockkeeper.live import merge_live_progress
from tests.kit.test_kit_window import PROBES, start, wait_status
from tests.support.kit_window_probes import WindowProbeInput, WindowProbeWorkflow
from workflows.kit.models import NodeControlInput, NodePhase


class AskedClient:
    """The real client, recording each workflow ID a handle is asked for."""

    def __init__(self, client: Any) -> None:
        self.client = client
        self.asked: list[str] = []

    def get_workflow_handle(self, workflow_id: str, **kw: Any) -> Any:
        self.asked.append(workflow_id)
        return self.client.get_workflow_handle(workflow_id, **kw)


async def test_an_in_process_step_is_marked_and_not_queried_as_a_workflow(time_skipping_env, wf_task_queue):
    env = time_skipping_env
    async with Worker(env.client, task_queue=wf_task_queue, workflows=PROBES):
        handle = await start(env, wf_task_queue, WindowProbeInput(nodes=["m1"], in_process=True, work_seconds=3600))
        st = await wait_status(handle, lambda s: s.nodes["m1"].step == "work")
        row = st.nodes["m1"]
        assert row.phase == NodePhase.RUNNING and row.in_process and row.run_id == f"{handle.id}/local/m1/1", row
        asked = AskedClient(env.client)
        assert await merge_live_progress(asked, st) == 0
        assert asked.asked == [], asked.asked
        await handle.execute_update(WindowProbeWorkflow.skip_node, NodeControlInput(node="m1", identity="bob"))
        await handle.result()


async def test_a_child_node_run_is_still_asked_for_its_step(time_skipping_env, wf_task_queue):
    env = time_skipping_env
    async with Worker(env.client, task_queue=wf_task_queue, workflows=PROBES):
        handle = await start(env, wf_task_queue, WindowProbeInput(nodes=["n0"], work_seconds=3600))
        st = await wait_status(handle, lambda s: s.nodes["n0"].phase == NodePhase.RUNNING and s.nodes["n0"].run_id is not None)
        row = st.nodes["n0"]
        assert not row.in_process, row
        asked = AskedClient(env.client)
        await merge_live_progress(asked, st)
        assert asked.asked == [row.run_id], asked.asked
        await handle.execute_update(WindowProbeWorkflow.skip_node, NodeControlInput(node="n0", identity="bob"))
        await handle.result()
