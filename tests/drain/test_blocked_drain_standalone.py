"""NodeDrainWorkflow (``lockkeeper start drain``) on the shared decision gate; its ``status`` is
the drain's own :class:`DrainStatus` (one ``node``), no longer a one-node rollout."""

from __future__ import annotations

import uuid

from temporalio.worker import Worker
from tests.support.kit_fakes import poll
from tests.machineconfig.test_blocked_drain import DecisionFake, update_error
from tests.support.wf_fakes import r2_block_report

from workflows import WORKFLOWS
from workflows.kit.models import DecideInput, DrainDecision, NodePhase
from workflows.drain.models import NodeDrainInput, NodeDrainResult
from workflows.drain import NodeDrainWorkflow


async def test_standalone_drain_blocked_then_delete_pod_and_uncordon(time_skipping_env, wf_task_queue):
    fake = DecisionFake({"worker": 1})
    fake.drain_blocked["worker-0"] = r2_block_report("worker-0")
    env = time_skipping_env
    async with Worker(env.client, task_queue=wf_task_queue, workflows=WORKFLOWS, activities=fake.activities()):
        handle = await env.client.start_workflow(
            NodeDrainWorkflow.run,
            NodeDrainInput(node="worker-0", approvals={"requested_by": "alice", "four_eyes": True}, uncordon_after=True,
                           drain={"decide_after_seconds": 60, "wait_seconds": 1}, search_attributes=False),
            id=f"drain-{uuid.uuid4().hex[:8]}", task_queue=wf_task_queue, result_type=NodeDrainResult,
        )
        await poll(handle, lambda s: s["node"]["phase"] == NodePhase.BLOCKED)
        await env.sleep(90)
        st = await poll(handle, lambda s: (s["node"].get("decision_gate") or {}).get("state") == "waiting")
        assert st["procedure"] == "drain" and "lockkeeper decide" in st["waiting_for"]
        upd = NodeDrainWorkflow.decide
        assert "four-eyes" in await update_error(handle.execute_update(
            upd, DecideInput(node="worker-0", decision=DrainDecision.DELETE_POD, identity="alice")))
        await handle.execute_update(upd, DecideInput(node="worker-0", decision=DrainDecision.DELETE_POD, identity="bob"))
        result = await handle.result()
    assert result.outcome == "completed" and result.drained and result.uncordoned
    assert [r.action for r in result.gate_history] == ["opened", "decided"]
    assert fake.called("delete_blocking_pods")[0].decided_by == "bob"
    assert not fake.nodes["worker-0"].unschedulable
