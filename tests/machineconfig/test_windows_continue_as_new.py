"""Maintenance windows across the rollout's continue-as-new (issue 40): the windows live in the
input, which the rollout hands to its next run, so a run after the boundary keeps them: the
window that closes mid-rollout stops new starts, the next run waits for the next opening and
goes on with the next nodes of the carried order. The fake node runs and the fake cluster of
test_scale_continue_as_new.py, on the time-skipping server."""

from __future__ import annotations

from datetime import timedelta

from tests.kit.test_kit_windows_wf import window_around
from tests.machineconfig.test_scale_continue_as_new import NODE_SECONDS, _input, _start, _status, _status_across_can, _worker
from tests.support.wf_fakes import FakeCluster


async def test_windows_cross_continue_as_new_boundaries(time_skipping_env, wf_task_queue):
    env = time_skipping_env
    fake = FakeCluster({"a": 10})
    spec, start, end = window_around(await env.get_current_time(), 4)  # room for about three pairs of nodes
    inp = _input("windows-can", max_unavailable=2, continue_as_new_after_events=60, windows=[spec])
    waited: list[str] = []
    async with _worker(env, wf_task_queue, fake):
        handle = await _start(env, wf_task_queue, inp)
        for _ in range(400):
            if (st := await _status_across_can(handle)) is None:
                continue
            if st.phase in ("done", "aborted", "failed"):
                break
            if st.waiting_for and st.waiting_for.startswith("the window from"):
                waited.append(st.waiting_for)
                assert st.deadline is not None
                await env.sleep(max((st.deadline - await env.get_current_time()).total_seconds() + 1, 1))
            else:
                await env.sleep(NODE_SECONDS / 2)
        result = await handle.result()
        st = await _status(handle)
    assert result.outcome == "completed" and result.summary.done == 10
    assert st.continued >= 1, st.continued
    assert waited and all(spec in w for w in waited)
    week = timedelta(days=7)
    for name, node in st.nodes.items():  # every node started inside an opening of the window
        k = (node.started_at - start) // week
        assert start + k * week <= node.started_at < end + k * week, (name, node.started_at, start, end)
    assert any(node.started_at >= start + week for node in st.nodes.values())  # some waited for the next week
