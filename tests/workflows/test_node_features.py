"""Node runs started by the rollout take their patches as given (``NodeRolloutInput.features``,
:mod:`workflows.kit.features`): no ``core_patch`` marker and no ``TemporalChangeVersion`` upsert in
their histories, yet the same handshake, decision gate included. A node run started without the
field (as before it existed) still asks ``workflow.patched`` and records the markers.
"""

from __future__ import annotations

import json

from temporalio.api.enums.v1 import EventType
from temporalio.client import WorkflowHistory
from temporalio.worker import Worker
from test_blocked_drain import DecisionFake, skipped_at_gate
from test_machineconfig_rollout import rollout_input, start
from wf_fakes import FakeCluster, new_config

from workflows import WORKFLOWS
from workflows.kit.drain import PATCH_DECISION_GATE
from workflows.kit.models import NodePhase
from workflows.machineconfig.models import NodeRolloutInput
from workflows.machineconfig.node import NODE_RUN_FEATURES, NodeRolloutWorkflow


def _patches(history: WorkflowHistory) -> tuple[list[str], int]:
    """(patch IDs recorded as markers, search attribute upserts) of ``history``."""
    ids: list[str] = []
    upserts = 0
    for ev in history.events:
        if ev.event_type == EventType.EVENT_TYPE_MARKER_RECORDED:
            attrs = ev.marker_recorded_event_attributes
            if attrs.marker_name == "core_patch":
                ids.append(json.loads(attrs.details["patch-data"].payloads[0].data)["id"])
        elif ev.event_type == EventType.EVENT_TYPE_UPSERT_WORKFLOW_SEARCH_ATTRIBUTES:
            upserts += 1
    return ids, upserts


async def test_rollout_node_runs_record_no_patch_markers(time_skipping_env, wf_task_queue):
    fake = FakeCluster({"worker": 2})
    async with Worker(time_skipping_env.client, task_queue=wf_task_queue, workflows=WORKFLOWS, activities=fake.activities()):
        handle = await start(time_skipping_env, wf_task_queue, rollout_input(local_calls_above=0))
        result = await handle.result()
        histories = [
            await time_skipping_env.client.get_workflow_handle(f"{handle.id}/node/worker-{i}/1").fetch_history() for i in (0, 1)
        ]
    assert result.outcome == "completed" and all(fake.at_target(n) for n in fake.nodes)
    for h in histories:
        assert _patches(h) == ([], 0), _patches(h)
        # The shortened handshake (follow-daemon, set desiredConfig first, local calls) still ran.
        assert "core_local_activity" in h.to_json()


async def test_blocked_drain_gate_opens_without_its_patch_marker(time_skipping_env, wf_task_queue):
    fake = DecisionFake({"worker": 2})
    async with Worker(time_skipping_env.client, task_queue=wf_task_queue, workflows=WORKFLOWS, activities=fake.activities()):
        handle, result = await skipped_at_gate(time_skipping_env, wf_task_queue, fake)
        child = await time_skipping_env.client.get_workflow_handle(f"{handle.id}/node/worker-0/1").fetch_history()
    assert result.nodes["worker-0"].phase == NodePhase.SKIPPED and result.nodes["worker-1"].phase == NodePhase.DONE
    assert _patches(child) == ([], 0)
    assert PATCH_DECISION_GATE in NODE_RUN_FEATURES


async def test_a_node_run_without_features_asks_the_patches(time_skipping_env, wf_task_queue):
    fake = FakeCluster({"worker": 1})
    inp = NodeRolloutInput(
        node="worker-0", pool="worker", target=new_config("worker"), parent_id="no-parent",
        owner="no-parent/node/worker-0", local_calls=False,
    )
    assert inp.features is None
    async with Worker(time_skipping_env.client, task_queue=wf_task_queue, workflows=WORKFLOWS, activities=fake.activities()):
        out = await time_skipping_env.client.execute_workflow(
            NodeRolloutWorkflow.run, inp, id="no-parent/node/worker-0/1", task_queue=wf_task_queue
        )
        history = await time_skipping_env.client.get_workflow_handle("no-parent/node/worker-0/1").fetch_history()
    assert out.outcome == "done" and fake.at_target("worker-0")
    ids, upserts = _patches(history)
    # local_calls=False never asks its patch; the handshake and progress patches are asked (the
    # async-progress one only when a signal goes out: none does on the normal path any more). The
    # fake daemon asks for the drain in the answer to desiredConfig, so the first call comes back
    # at its first look and the kit's drain loop hands off (no tail hand-off asked).
    assert set(ids) == {
        "node-steps-by-query", "set-desired-config-first", "desired-config-in-drain-call", "handshake-follows-daemon",
        "drain-when-asked", "milestone-progress-signals", "handshake-tail-in-one-call", "stop-settles-call",
    }, ids
    assert upserts == len(ids)
