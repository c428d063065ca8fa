"""A node run's short API calls run as local activities first (patch ``node-run-local-calls``,
:func:`workflows.kit.calls.call`; rollouts of more than ``local_calls_above`` nodes, 0 here): a marker each in the history, a regular activity only when the
local attempts fail with a retryable error, and no second try at all for a non-retryable one.
"""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

from temporalio import activity
from temporalio.api.enums.v1 import EventType
from temporalio.client import WorkflowHistory
from temporalio.exceptions import ApplicationError
from temporalio.worker import Worker
from tests.support.wf_fakes import FakeCluster

from activities.cluster.models import ANN_LAST_APPLIED_DRAIN, CordonInput, CordonResult, SetNodeAnnotationsInput
from tests.machineconfig.test_machineconfig_rollout import rollout_input, start
from workflows import WORKFLOWS
from workflows.kit import calls as acts
from workflows.kit.models import NodePhase


def _replace(fake: FakeCluster, **replacements: Any) -> list[Any]:
    """``fake``'s activities with those named in ``replacements`` swapped for the given ones."""
    out = []
    for fn in fake.activities():
        name = activity._Definition.must_from_callable(fn).name
        out.append(replacements.get(name, fn))
    return out


def _by_kind(history: WorkflowHistory) -> tuple[Counter[str], Counter[str]]:
    """(regular activities scheduled by name, local activity markers by activity type)."""
    scheduled: Counter[str] = Counter()
    local: Counter[str] = Counter()
    for ev in history.events:
        if ev.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
            scheduled[ev.activity_task_scheduled_event_attributes.activity_type.name] += 1
        elif ev.event_type == EventType.EVENT_TYPE_MARKER_RECORDED:
            attrs = ev.marker_recorded_event_attributes
            if attrs.marker_name == "core_local_activity":
                data = json.loads(attrs.details["data"].payloads[0].data)
                local[data["activity_type"]] += 1
    return scheduled, local


async def test_short_calls_are_local_and_a_failing_one_falls_back_to_an_activity(time_skipping_env, wf_task_queue):
    fake = FakeCluster({"worker": 1})
    failures = {"left": acts.LOCAL_ATTEMPTS + 1}  # both local attempts and the first activity attempt

    @activity.defn(name="cordon_node")
    async def flaky_cordon(inp: CordonInput) -> CordonResult:
        fake.calls.append(("cordon_node", inp))
        if failures["left"] > 0:
            failures["left"] -= 1
            raise ApplicationError("503 Service Unavailable: etcdserver: leader changed", type="ApiUnavailable")
        fake.set_node(inp.node, unschedulable=True, cordoned_by=inp.owner)
        return CordonResult(cordoned_by_us=True, was_unschedulable=False)

    activities = _replace(fake, cordon_node=flaky_cordon)
    async with Worker(time_skipping_env.client, task_queue=wf_task_queue, workflows=WORKFLOWS, activities=activities):
        handle = await start(time_skipping_env, wf_task_queue, rollout_input())
        result = await handle.result()
        child = await time_skipping_env.client.get_workflow_handle(f"{handle.id}/node/worker-0/1").fetch_history()

    assert result.outcome == "completed" and result.nodes["worker-0"].phase == NodePhase.DONE
    assert fake.at_target("worker-0") and not fake.nodes["worker-0"].unschedulable
    assert len(fake.called("cordon_node")) == acts.LOCAL_ATTEMPTS + 2
    scheduled, local = _by_kind(child)
    # The cordon went to the server once its local attempts failed; the drain and the wait to Done
    # (which answers the uncordon itself) are activities anyway; every other short call is a
    # local activity marker.
    assert scheduled["cordon_node"] == 1, scheduled
    assert scheduled["drain_node"] >= 1 and scheduled["wait_for_node_done"] >= 1, scheduled
    assert scheduled["set_node_annotations"] == 0 and scheduled["uncordon_node"] == 0, scheduled
    assert sum(local.values()) >= 2, local  # desiredConfig, the drain hand-off


async def test_a_non_retryable_failure_is_not_tried_again_as_an_activity(time_skipping_env, wf_task_queue):
    fake = FakeCluster({"worker": 1})

    @activity.defn(name="set_node_annotations")
    async def gone(inp: SetNodeAnnotationsInput) -> Any:
        fake.calls.append(("set_node_annotations", inp))
        raise ApplicationError(f"node {inp.node} not found", type="NodeNotFound", non_retryable=True)

    activities = _replace(fake, set_node_annotations=gone)
    async with Worker(time_skipping_env.client, task_queue=wf_task_queue, workflows=WORKFLOWS, activities=activities):
        handle = await start(time_skipping_env, wf_task_queue, rollout_input())
        result = await handle.result()
        child = await time_skipping_env.client.get_workflow_handle(f"{handle.id}/node/worker-0/1").fetch_history()

    node = result.nodes["worker-0"]
    assert node.phase == NodePhase.FAILED and "not found" in (node.reason or ""), node
    # desiredConfig went with the first drain_when_asked call; the first local call is the drain
    # hand-off (the fake daemon asks for the drain at once, so the kit's loop hands off).
    refused = [a for a in fake.called("set_node_annotations") if ANN_LAST_APPLIED_DRAIN in a.annotations]
    assert len(refused) == 1, refused
    scheduled, _ = _by_kind(child)
    assert scheduled["set_node_annotations"] == 0, scheduled
    assert fake.mutating_calls()[-1] == "set_node_annotations"  # the one refused write, nothing after it
