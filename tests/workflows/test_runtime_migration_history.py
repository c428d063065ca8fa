"""The run that produces the runtime migration's stored histories (test_replay.py replays them),
on the time-skipping server with the in-memory world of test_runtime_migration_wf.py.

The run takes the branches the migration records: preflight, the record ConfigMap
(``runtime-migration-record-configmap``), every host step, a lost reboot confirmed by the new
boot_id, the Node delete, a scale-up that fails, its rejected gate, the hold gate and a
retry-node (``runtime-migration-node-control``) whose child repeats only the scale-up, the
rejoin, the GlusterFS gates, and the post-check per node group (``runtime-migration-postcheck-groups``)
with its install gate. With ``LOCKKEEPER_WRITE_HISTORY=1 pytest
tests/workflows/test_runtime_migration_history.py`` it writes the parent's history and both runs
of the retried child, never over an existing file: after a deliberate, patched change record under a
new name and keep the old files.
"""

from __future__ import annotations

import json
import os

import pytest
from replay import HISTORIES
from temporalio.client import WorkflowHandle
from temporalio.worker import Worker
from test_runtime_migration_wf import World, _approve, _input, _status, _waiting

from workflows import WORKFLOWS
from workflows.kit.models import NodeControlInput, RejectInput
from workflows.runtime_migration import RuntimeMigrationWorkflow
from workflows.runtime_migration.models import RuntimeMigrationResult

pytestmark = pytest.mark.timeout(180)

HISTORY_ID = "runtime-migration-history"
#: file → workflow ID (the retried child's latest run; its first run is runtime_migration_node_first.json).
FILES = {"runtime_migration_full.json": HISTORY_ID, "runtime_migration_node_retry.json": f"{HISTORY_ID}/node/g1"}


async def test_migration_with_a_retried_node_records_its_histories(time_skipping_env, wf_task_queue) -> None:
    env, world = time_skipping_env, World(lose={"reboot"})
    world.fail_scaleup = 1
    async with Worker(env.client, task_queue=wf_task_queue, workflows=WORKFLOWS, activities=world.activities()):
        h: WorkflowHandle = await env.client.start_workflow(RuntimeMigrationWorkflow.run, _input(), id=HISTORY_ID, task_queue=wf_task_queue,
                                                            result_type=RuntimeMigrationResult)
        await _approve(env, h, "g1/destructive/approve-migration")
        await _approve(env, h, "g1/destructive/approve-delete")
        await _status(env, h, _waiting("g1/failed/scale-up"))
        await h.execute_update("reject", RejectInput(gate_id="g1/failed/scale-up", identity="bob", comment="repo down"))
        await _status(env, h, _waiting("g1/stopped/1"))
        first = await env.client.get_workflow_handle(f"{HISTORY_ID}/node/g1").fetch_history()  # the failed attempt, closed
        await h.execute_update("retry_node", NodeControlInput(node="g1", identity="bob", comment="repo fixed"))
        await _approve(env, h, "post-check/install")
        result = await h.result()
        histories = {name: await env.client.get_workflow_handle(wid).fetch_history() for name, wid in FILES.items()}
        histories["runtime_migration_node_first.json"] = first
    for name, history in histories.items():
        if os.environ.get("LOCKKEEPER_WRITE_HISTORY") and not (HISTORIES / name).exists():
            (HISTORIES / name).write_text(history.to_json())
    assert result.outcome == "completed" and result.nodes[0].status.attempt == 2, result.message
    markers = {json.loads(e.marker_recorded_event_attributes.details["patch-data"].payloads[0].data)["id"]
               for h in histories.values() for e in h.events if e.HasField("marker_recorded_event_attributes")}
    assert {"runtime-migration-node-control", "runtime-migration-postcheck-groups", "runtime-migration-record-configmap"} <= markers, markers
    children = [e for e in histories["runtime_migration_full.json"].events
                if e.HasField("start_child_workflow_execution_initiated_event_attributes")
                and e.start_child_workflow_execution_initiated_event_attributes.workflow_type.name == "RuntimeMigrationNodeWorkflow"]
    assert len(children) == 2, "the first attempt and the retry"
