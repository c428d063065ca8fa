"""The run that produces the runtime migration's stored histories (test_replay.py replays them),
on the time-skipping server with the in-memory world of test_runtime_migration_wf.py.

The run takes the branches the migration records: preflight, the record ConfigMap, every host
step, a lost reboot confirmed by the new boot_id, the Node delete, a scale-up that fails, its
rejected gate, the hold gate and a retry-node whose child repeats only the scale-up, the rejoin,
the GlusterFS gates, and the post-check per node group with its install gate. With
``LOCKKEEPER_WRITE_HISTORY=1`` it stores the parent's history and both runs of the retried child
(tests/support/replay.py).
"""

from __future__ import annotations


import pytest
from tests.support.replay import recording, store
from temporalio.client import WorkflowHandle
from temporalio.worker import Worker
from tests.runtime_migration.test_runtime_migration_wf import World, _approve, _input, _status, _update, _waiting

from workflows import WORKFLOWS
from workflows.kit.models import NodeControlInput, RejectInput
from workflows.runtime_migration import RuntimeMigrationWorkflow
from workflows.runtime_migration.models import RuntimeMigrationResult

pytestmark = pytest.mark.timeout(180)

HISTORY_ID = "runtime-migration-history"
#: stored name → workflow ID (the retried child's latest run; its first run is stored too).
FILES = {"RuntimeMigrationWorkflow.retried-node": HISTORY_ID, "RuntimeMigrationNodeWorkflow.retry": f"{HISTORY_ID}/node/g1"}


async def test_migration_with_a_retried_node_records_its_histories(time_skipping_env, wf_task_queue) -> None:
    env, world = time_skipping_env, World(lose={"reboot"})
    world.fail_scaleup = 1
    async with Worker(env.client, task_queue=wf_task_queue, workflows=WORKFLOWS, activities=world.activities()):
        h: WorkflowHandle = await env.client.start_workflow(RuntimeMigrationWorkflow.run, _input(), id=HISTORY_ID, task_queue=wf_task_queue,
                                                            result_type=RuntimeMigrationResult)
        await _approve(env, h, "g1/destructive/approve-migration")
        await _approve(env, h, "g1/destructive/approve-delete")
        await _status(env, h, _waiting("g1/failed/scale-up"))
        await _update(env, h, "reject", RejectInput(gate_id="g1/failed/scale-up", identity="bob", comment="repo down"))
        await _status(env, h, _waiting("g1/stopped/1"))
        first = await env.client.get_workflow_handle(f"{HISTORY_ID}/node/g1").fetch_history()  # the failed attempt, closed
        await h.execute_update("retry_node", NodeControlInput(node="g1", identity="bob", comment="repo fixed"))
        await _approve(env, h, "post-check/install")
        result = await h.result()
        histories = {name: await env.client.get_workflow_handle(wid).fetch_history() for name, wid in FILES.items()}
        histories["RuntimeMigrationNodeWorkflow.failed-attempt"] = first
    for name, history in histories.items():
        if recording():
            await store(history, name)
    assert result.outcome == "completed" and result.nodes[0].status.attempt == 2, result.message
    children = [e for e in histories["RuntimeMigrationWorkflow.retried-node"].events
                if e.HasField("start_child_workflow_execution_initiated_event_attributes")
                and e.start_child_workflow_execution_initiated_event_attributes.workflow_type.name == "RuntimeMigrationNodeWorkflow"]
    assert len(children) == 2, "the first attempt and the retry"
