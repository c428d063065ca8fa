"""Whether a run sends webhook notifications is decided once at its start and recorded in its
history (the marker ``kit-notify-on``), not read from the replaying
worker's process state (``workflows.kit.notify.wire``): a history recorded on a worker that
sends replays on a worker that does not (nor installs the ``NotifyInterceptor``), and the other
way round, with no nondeterminism error. Runs on the time-skipping server with the real
``notify`` activity posting to a real local HTTP receiver."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from tests.support.kit_fakes import KitFake
from tests.support.kit_probes import GateProbeWorkflow, ProbeInput, ProbeResult
from temporalio.client import WorkflowHistory
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.worker import Replayer, Worker

from activities.notify.webhook import Notifier
from tests.kit.test_notify import Receiver
from workflows import WORKFLOWS
from workflows.kit import notify as kit_notify
from workflows.kit.models import GateTimeoutOutcome


@contextmanager
def wired(on: bool, targets: bool = True) -> Iterator[None]:
    """The process-global switch the worker sets, restored afterwards."""
    before = dict(kit_notify._wired)
    kit_notify.wire(on, targets=targets)
    try:
        yield
    finally:
        kit_notify._wired.clear()
        kit_notify._wired.update(before)


def notify_activities(history: WorkflowHistory) -> list[str]:
    return [e.activity_task_scheduled_event_attributes.activity_type.name for e in history.events
            if e.HasField("activity_task_scheduled_event_attributes")
            and e.activity_task_scheduled_event_attributes.activity_type.name == "notify"]


def patch_markers(history: WorkflowHistory) -> list[str]:
    out = []
    for e in history.events:
        if e.HasField("marker_recorded_event_attributes") and e.marker_recorded_event_attributes.marker_name == "core_patch":
            out.append(json.loads(e.marker_recorded_event_attributes.details["patch-data"].payloads[0].data)["id"])
    return out


async def record(env: Any, task_queue: str, *, sending: bool, url: str) -> WorkflowHistory:
    """Run the gate probe (gate opens, times out, the run ends rejected) on a worker that sends
    (``sending``: wired, the notify activity and the interceptor, as workers/worker.py does) or
    not, and return its history."""
    activities: list[Any] = KitFake().activities()
    interceptors: list[Any] = []
    if sending:
        activities.append(Notifier([url]).notify)
        interceptors.append(kit_notify.NotifyInterceptor())
    with wired(sending):
        async with Worker(env.client, task_queue=task_queue, workflows=[GateProbeWorkflow, *WORKFLOWS],
                          activities=activities, interceptors=interceptors):
            handle = await env.client.start_workflow(
                GateProbeWorkflow.run, ProbeInput(timeout_seconds=600, timeout_outcome=GateTimeoutOutcome.REJECT),
                id=f"notify-replay-{uuid.uuid4().hex[:8]}", task_queue=task_queue, result_type=ProbeResult)
            result = await handle.result()
    assert result.outcome == "rejected" and result.gate_state == "timed-out"
    return await handle.fetch_history()


async def replay(history: WorkflowHistory, *, sending: bool, targets: bool = True) -> None:
    """Replay ``history`` on a replayer set up like a worker that sends (``sending``) or not."""
    interceptors = [kit_notify.NotifyInterceptor()] if sending else []
    with wired(sending, targets=targets):
        replayer = Replayer(workflows=[GateProbeWorkflow, *WORKFLOWS], data_converter=pydantic_data_converter,
                            interceptors=interceptors)
        result = await replayer.replay_workflow(history, raise_on_replay_failure=False)
    assert result.replay_failure is None, f"replay (sending={sending}, targets={targets}): {result.replay_failure!r}"


async def test_history_of_a_sending_worker_replays_on_one_that_does_not(time_skipping_env, wf_task_queue) -> None:
    receiver = Receiver()
    await receiver.start()
    try:
        history = await record(time_skipping_env, wf_task_queue, sending=True, url=receiver.url)
    finally:
        await receiver.stop()
    # The run did send (gate opened, timed out, the final "failed"), and recorded that it does.
    assert len(notify_activities(history)) >= 3, notify_activities(history)
    assert patch_markers(history) == ["kit-notify-on"], patch_markers(history)
    assert {b["event"] for _, b in receiver.events} >= {"gate-opened", "gate-timed-out"}, receiver.events
    await replay(history, sending=False)
    await replay(history, sending=True, targets=False)
    await replay(history, sending=True)


async def test_history_of_a_silent_worker_replays_on_one_that_sends(time_skipping_env, wf_task_queue) -> None:
    history = await record(time_skipping_env, wf_task_queue, sending=False, url="http://127.0.0.1:9/unused")
    assert notify_activities(history) == []
    markers = patch_markers(history)
    assert markers == [], markers
    await replay(history, sending=True)
    await replay(history, sending=False)


@pytest.mark.parametrize("targets", [False])
async def test_a_worker_without_urls_records_silence(time_skipping_env, wf_task_queue, targets: bool) -> None:
    """A worker wired without any URL (``LOCKKEEPER_NOTIFY_URL`` unset) decides "off" at the
    start: no notify activity in the history at all."""
    activities: list[Any] = [*KitFake().activities(), Notifier([]).notify]
    with wired(True, targets=targets):
        async with Worker(time_skipping_env.client, task_queue=wf_task_queue, workflows=[GateProbeWorkflow, *WORKFLOWS],
                          activities=activities, interceptors=[kit_notify.NotifyInterceptor()]):
            handle = await time_skipping_env.client.start_workflow(
                GateProbeWorkflow.run, ProbeInput(timeout_seconds=600), id=f"notify-nourl-{uuid.uuid4().hex[:8]}",
                task_queue=wf_task_queue, result_type=ProbeResult)
            await handle.result()
    history = await handle.fetch_history()
    assert notify_activities(history) == []
    await replay(history, sending=True)
