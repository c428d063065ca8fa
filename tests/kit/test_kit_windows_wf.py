"""Maintenance windows in the kit's node window (issue 40, workflows/kit/windows.py): the window
probe (kit_window_probes.py) on the time-skipping server. A window that closes with nodes in
flight lets them finish and starts nothing more; a week later the next window starts the next
nodes in order, and the run replays. A run without windows is covered by the stored histories' replay
(no new timer, no new command)."""

from __future__ import annotations

import uuid
from datetime import datetime, timedelta, timezone

from tests.support.kit_window_probes import ProbeNodeWorkflow, WindowProbeInput, WindowProbeResult, WindowProbeWorkflow
from temporalio import activity
from temporalio.common import WorkflowIDReusePolicy
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.worker import Replayer, Worker
from tests.kit.test_kit_holds import details
from tests.kit.test_kit_window import wait_status
from tests.kit.test_notify_replay import wired

from activities.notify.models import NotifyEvent, NotifyResult
from workflows.kit.lease import LeaseWorkflow
from workflows.kit.models import NodePhase

PROBES = [WindowProbeWorkflow, ProbeNodeWorkflow, LeaseWorkflow]
DAYS = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")


def window_around(now: datetime, minutes: int) -> tuple[str, datetime, datetime]:
    """A weekly UTC window that opened a minute before ``now`` and lasts ``minutes``: its spec,
    start and end (over midnight when it must be)."""
    start = now.astimezone(timezone.utc).replace(second=0, microsecond=0) - timedelta(minutes=1)
    end = start + timedelta(minutes=minutes)
    return f"{DAYS[start.weekday()]} {start:%H:%M}-{end:%H:%M} UTC", start, end


async def test_a_window_that_closes_lets_nodes_in_flight_finish_and_the_next_window_starts_the_next_node(
        time_skipping_env, wf_task_queue):
    env = time_skipping_env
    sent: list[NotifyEvent] = []

    @activity.defn(name="notify")
    async def notify(ev: NotifyEvent) -> NotifyResult:
        sent.append(ev)
        return NotifyResult(sent=["http://hooks.example"])

    spec, start, end = window_around(await env.get_current_time(), 4)
    reopen = start + timedelta(days=7)
    with wired(True):
        async with Worker(env.client, task_queue=wf_task_queue, workflows=PROBES, activities=[notify]):
            handle = await env.client.start_workflow(
                WindowProbeWorkflow.run,
                WindowProbeInput(nodes=["n0", "n1", "n2", "n3"], max_unavailable=2, work_seconds=300, windows=[spec]),
                id=f"windows-{uuid.uuid4().hex[:8]}", task_queue=wf_task_queue, result_type=WindowProbeResult,
                id_reuse_policy=WorkflowIDReusePolicy.ALLOW_DUPLICATE,
            )
            await wait_status(handle, lambda s: s.nodes["n1"].phase == NodePhase.RUNNING)
            await env.sleep(400)  # the window closed at `end` while n0 and n1 ran; they finished after it
            s = await wait_status(handle, lambda s: s.nodes["n1"].phase == NodePhase.DONE)
            assert s.nodes["n2"].phase == NodePhase.PENDING and s.nodes["n3"].phase == NodePhase.PENDING
            assert s.phase == "running"
            assert s.waiting_for == f"the window from {reopen.isoformat(timespec='seconds')} ({spec})", s.waiting_for
            assert s.deadline == reopen
            assert f"Waiting for the window from {reopen.isoformat(timespec='seconds')}" in await details(handle)
            result = await handle.result()
            s = await handle.query(WindowProbeWorkflow.status)
            history = await handle.fetch_history()
    assert result.phases == dict.fromkeys(["n0", "n1", "n2", "n3"], NodePhase.DONE)
    # The week's wait is a timer in the history: a replay (a worker restart) decides the same.
    await Replayer(workflows=PROBES, data_converter=pydantic_data_converter).replay_workflow(history)
    timers = [e for e in history.events if e.HasField("timer_started_event_attributes")]
    assert any(e.timer_started_event_attributes.start_to_fire_timeout.ToSeconds() > 6 * 86400 for e in timers)
    assert all(s.nodes[n].finished_at > end for n in ("n0", "n1"))  # in flight at the close: finished normally
    assert all(s.nodes[n].started_at >= reopen for n in ("n2", "n3"))  # nothing started while closed
    assert all(start <= s.nodes[n].started_at < end or reopen <= s.nodes[n].started_at < reopen + timedelta(minutes=4)
               for n in s.nodes)
    waits = [e for e in sent if e.event == "window-wait"]
    assert len(waits) == 1 and reopen.isoformat(timespec="seconds") in waits[0].text


async def test_a_run_outside_every_window_starts_nothing_until_the_window_opens_and_gates_are_answered_meanwhile(
        time_skipping_env, wf_task_queue):
    from workflows.kit.models import ApproveInput
    from workflows.kit.plan import ApprovalPolicy

    env = time_skipping_env
    now = await env.get_current_time()
    spec, start, end = window_around(now + timedelta(hours=2), 30)  # opens in about two hours
    async with Worker(env.client, task_queue=wf_task_queue, workflows=PROBES):
        handle = await env.client.start_workflow(
            WindowProbeWorkflow.run,
            WindowProbeInput(nodes=["n0", "n1"], max_unavailable=1, work_seconds=60, windows=[spec], approval=ApprovalPolicy.POOL),
            id=f"windows-{uuid.uuid4().hex[:8]}", task_queue=wf_task_queue, result_type=WindowProbeResult,
            id_reuse_policy=WorkflowIDReusePolicy.ALLOW_DUPLICATE,
        )
        s = await wait_status(handle, lambda s: any(g.state == "waiting" for g in s.gates))
        gate = next(g for g in s.gates if g.state == "waiting")
        await handle.execute_update(WindowProbeWorkflow.approve, ApproveInput(gate_id=gate.id, identity="alice"))
        s = await wait_status(handle, lambda s: s.waiting_for.startswith("the window from"))
        assert s.nodes["n0"].phase == NodePhase.PENDING and s.deadline == start
        result = await handle.result()
        s = await handle.query(WindowProbeWorkflow.status)
    assert result.phases == {"n0": NodePhase.DONE, "n1": NodePhase.DONE}
    assert all(start <= s.nodes[n].started_at < end for n in s.nodes)


async def test_a_run_without_windows_starts_no_timer(time_skipping_env, wf_task_queue):
    """History safety: no --window, no window command (the parent's history has no timer at all)."""
    env = time_skipping_env
    async with Worker(env.client, task_queue=wf_task_queue, workflows=PROBES):
        handle = await env.client.start_workflow(
            WindowProbeWorkflow.run, WindowProbeInput(nodes=["n0", "n1"], max_unavailable=1, work_seconds=30),
            id=f"windows-{uuid.uuid4().hex[:8]}", task_queue=wf_task_queue, result_type=WindowProbeResult,
            id_reuse_policy=WorkflowIDReusePolicy.ALLOW_DUPLICATE,
        )
        await handle.result()
        history = await handle.fetch_history()
    assert not [e for e in history.events if e.HasField("timer_started_event_attributes")]
