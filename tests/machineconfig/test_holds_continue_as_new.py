"""Holds across the rollout's continue-as-new (issue 40): the handover carries the holds in force
and their history (workflows/kit/batches.py, NodeBatches.hand_over), the next run starts the expiry timers
again, and the held nodes start only after their expiry or release. The fake node runs and the
fake cluster of test_scale_continue_as_new.py, on the time-skipping server."""

from __future__ import annotations

import asyncio

from tests.machineconfig.test_scale_continue_as_new import NODE_SECONDS, _input, _start, _status, _status_across_can, _worker
from tests.support.wf_fakes import FakeCluster

from workflows import MachineConfigRolloutWorkflow
from workflows.kit.models import HoldInput, NodePhase, ReleaseInput
from workflows.kit.batches import pack, unpack
from workflows.machineconfig.workflow import RolloutCarry
from workflows.machineconfig.models import RolloutPlan


async def test_holds_cross_continue_as_new_boundaries(time_skipping_env, wf_task_queue):
    env = time_skipping_env
    fake = FakeCluster({"a": 10})
    inp = _input("holds-can", max_unavailable=2, continue_as_new_after_events=60)
    async with _worker(env, wf_task_queue, fake):
        handle = await _start(env, wf_task_queue, inp)
        for _ in range(200):
            st = await _status(handle)
            if st.phase == "running":
                break
            await asyncio.sleep(0.05)
        await handle.execute_update(MachineConfigRolloutWorkflow.hold_node,
                                    HoldInput(node="a-9", identity="bob", reason="disk swap", for_seconds=4 * 3600))
        await handle.execute_update(MachineConfigRolloutWorkflow.hold_node, HoldInput(node="a-8", identity="bob", reason="until told"))
        for _ in range(60):  # the eight other nodes, across boundaries; then only the held ones are left
            st = await _status(handle)
            if st.totals.done == 8:
                break
            await env.sleep(NODE_SECONDS)
        assert st.continued >= 1, st.continued
        assert sorted(st.holds) == ["a-8", "a-9"] and [r.action for r in st.hold_history] == ["held", "held"]
        assert st.phase == "running" and "hold on a-9 until " in st.waiting_for and "hold on a-8 until released" in st.waiting_for
        assert st.nodes["a-9"].phase == NodePhase.PENDING and st.nodes["a-8"].phase == NodePhase.PENDING
        await env.sleep(4 * 3600)  # a-9's hold expires on a timer the next run started again
        for _ in range(200):
            st = await _status(handle)
            if st.nodes["a-9"].phase == NodePhase.DONE:
                break
            await env.sleep(NODE_SECONDS / 2)
        assert st.nodes["a-8"].phase == NodePhase.PENDING and list(st.holds) == ["a-8"]
        await handle.execute_update(MachineConfigRolloutWorkflow.release_node, ReleaseInput(node="a-8", identity="carol"))
        for _ in range(200):  # polled to the end, as test_scale_continue_as_new does, before asking for the result
            if (st := await _status_across_can(handle)) is None:
                continue
            if st.phase in ("done", "aborted", "failed"):
                break
            await env.sleep(NODE_SECONDS / 2)
        result = await handle.result()
    assert result.outcome == "completed" and result.summary.done == 10
    history = [(r["node"], r["action"], r["by"]) for r in result.hold_history]  # type: ignore[attr-defined]
    assert history == [("a-9", "held", "bob"), ("a-8", "held", "bob"), ("a-9", "expired", "timer"), ("a-8", "released", "carol")]


def test_a_carry_without_holds_packs_as_before_and_one_with_holds_keeps_them():
    """A run that never held a node hands over exactly the text it did before holds existed."""
    import base64
    import zlib
    from datetime import UTC, datetime

    from workflows.kit.models import HoldRecord, NodeHold

    assert b"hold" not in zlib.decompress(base64.b64decode(pack(RolloutCarry(plan=RolloutPlan()))))
    at = datetime(2026, 11, 29, tzinfo=UTC)
    carry = RolloutCarry(plan=RolloutPlan(), holds={"a-1": NodeHold(node="a-1", by="bob", reason="r", since=at)},
                         hold_history=[HoldRecord(node="a-1", action="held", by="bob", at=at, reason="r")])
    assert unpack(pack(carry), RolloutCarry) == carry
