"""Issue 16: a node run waits for the daemon's drain request, cordons and makes its first drain
pass in one ``drain_when_asked`` activity (feature ``drain-when-asked``); a pass that does not
empty the node goes on in the kit's drain loop. The fake daemon here asks for the drain only on
its next reaction after the desiredConfig write, as a real daemon does."""

from __future__ import annotations

import asyncio
from collections import Counter

from temporalio.api.enums.v1 import EventType
from tests.machineconfig.test_machineconfig_rollout import rollout_input, start
from tests.support.wf_fakes import FakeCluster, new_config, r2_block_report, rollout_worker

from activities.machineconfig.models import drain_value, uncordon_value
from workflows.kit.models import NodePhase


def _scheduled(history) -> Counter[str]:
    return Counter(
        e.activity_task_scheduled_event_attributes.activity_type.name
        for e in history.events
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
    )


async def test_drain_request_cordon_and_first_pass_in_one_activity(time_skipping_env, wf_task_queue):
    fake = FakeCluster({"worker": 2})
    fake.slow_drain_request = True
    async with rollout_worker(time_skipping_env.client, fake, wf_task_queue):
        handle = await start(time_skipping_env, wf_task_queue, rollout_input(max_unavailable=1))
        result = await handle.result()
        child = await time_skipping_env.client.get_workflow_handle(f"{handle.id}/node/worker-0/1").fetch_history()
    assert result.outcome == "completed" and all(fake.at_target(n) for n in fake.nodes)
    assert all(not n.unschedulable and n.cordoned_by is None for n in fake.nodes.values())
    scheduled = _scheduled(child)
    assert scheduled["drain_when_asked"] >= 1 and scheduled["drain_node"] == 0 and scheduled["wait_for_node"] == 0, scheduled
    # desiredConfig went with drain_when_asked, the drain hand-off with wait_for_node_done: no
    # local call keeps a workflow task open on the normal path.
    markers = [e for e in child.events if e.event_type == EventType.EVENT_TYPE_MARKER_RECORDED]
    assert markers == [] and scheduled["set_node_annotations"] == 0, (markers, scheduled)
    assert [a.set_desired_config for a in fake.called("drain_when_asked") if a.node == "worker-0"][:1] == [True]
    assert [a.hand_off_drain for a in fake.called("wait_for_node_done") if a.node == "worker-0"][:1] == [True]
    target = new_config("worker")
    for node in fake.nodes:
        assert fake.hand_offs(node) == [drain_value(target), uncordon_value(target)]
        assert len([a for a in fake.called("cordon_node") if a.node == node]) == 1
        assert len([a for a in fake.called("drain_node") if a.node == node]) == 1


async def test_a_blocked_first_pass_goes_on_in_the_drain_loop(time_skipping_env, wf_task_queue):
    fake = FakeCluster({"worker": 1})
    fake.slow_drain_request = True
    fake.drain_blocked["worker-0"] = r2_block_report("worker-0")
    async with rollout_worker(time_skipping_env.client, fake, wf_task_queue):
        inp = rollout_input(max_unavailable=1, drain={"backoff_initial_seconds": 1, "backoff_max_seconds": 1})
        handle = await start(time_skipping_env, wf_task_queue, inp)
        for _ in range(400):
            if len(fake.called("drain_node")) >= 3:
                break
            await asyncio.sleep(0.02)
        assert not fake.hand_offs("worker-0"), "no hand-off while the drain is blocked"
        del fake.drain_blocked["worker-0"]
        result = await handle.result()
    assert result.outcome == "completed" and result.nodes["worker-0"].phase == NodePhase.DONE
    assert fake.called("drain_when_asked") and len(fake.called("drain_node")) >= 3
    assert fake.hand_offs("worker-0") == [drain_value(new_config("worker")), uncordon_value(new_config("worker"))]
    assert not fake.nodes["worker-0"].unschedulable
