"""Graceful shutdown: SIGTERM while activities run (a node rebooting, the worker's watch on it
heartbeating), as a rolling update or ``docker stop`` would send it.

The worker stops polling, lets the running activities heartbeat and finish (or cancels them
after ``LOCKKEEPER_GRACEFUL_SHUTDOWN_SECONDS``), and exits 0 before the supervisor's own kill
deadline (:class:`lockkeeper.procs.WorkerProcess` SIGKILLs after ``stop_timeout``, which makes
the exit code -9). A second worker then takes over and the rollout completes without redoing
a node.
"""

from __future__ import annotations

import asyncio
import json
import time

import pytest

from clustersim.scenario import generate_scenario
from tests.support.harness import ClusterObserver, drive, start_rollout, status

pytestmark = pytest.mark.e2e

SCALE = 0.05
GRACEFUL_SECONDS = 4
FAST = dict(
    drain={"backoff_initial_seconds": 1, "backoff_max_seconds": 3, "wait_seconds": 5},
    daemon={"drain_deadline_seconds": 3600 * SCALE, "uncordon_deadline_seconds": 600 * SCALE},
)


def _scenario(reboot_seconds: float) -> object:
    return generate_scenario(
        nodes=2, pods=4, pools={"worker": 2}, name="shutdown", reboot_seconds=reboot_seconds, pod_start_seconds=1,
        namespaces=1, pods_per_deployment=2,
    )


def _events(log_text: str) -> list[str]:
    out = []
    for line in log_text.splitlines():
        try:
            out.append(json.loads(line).get("event", ""))
        except ValueError:
            continue
    return out


async def _wait_for_node_attempts(client, workflow_id: str) -> list[tuple[int, str]]:
    """(attempt, worker identity) of every wait_for_node / wait_for_node_done activity the node run completed.
    History records an activity's Started event (last attempt, identity) when it closes."""
    scheduled: dict[int, str] = {}
    started: dict[int, tuple[int, str]] = {}
    completed: list[tuple[int, str]] = []
    async for ev in client.get_workflow_handle(workflow_id).fetch_history_events():
        if ev.HasField("activity_task_scheduled_event_attributes"):
            scheduled[ev.event_id] = ev.activity_task_scheduled_event_attributes.activity_type.name
        elif ev.HasField("activity_task_started_event_attributes"):
            a = ev.activity_task_started_event_attributes
            started[a.scheduled_event_id] = (a.attempt, a.identity)
        elif ev.HasField("activity_task_completed_event_attributes"):
            sid = ev.activity_task_completed_event_attributes.scheduled_event_id
            if scheduled.get(sid) in ("wait_for_node", "wait_for_node_done"):
                completed.append(started[sid])
    return completed


@pytest.mark.parametrize(
    ("reboot_seconds", "finishes_in_grace"),
    [
        # A 3 s reboot ends inside the 4 s grace: the running watch finishes on the old worker.
        pytest.param(60, True, id="activity-finishes-within-grace"),
        # An 8 s reboot outlasts it: the activity is cancelled at its next heartbeat, the worker
        # still exits 0, and the new worker's retry (attempt 2) sees the node come back.
        pytest.param(160, False, id="activity-cancelled-after-grace"),
    ],
)
async def test_sigterm_mid_activity_exits_zero_and_the_next_worker_finishes(
    sim_factory, worker_process_factory, dev_server, temporal_client, task_queue, reboot_seconds, finishes_in_grace
) -> None:
    sim = await sim_factory(_scenario(reboot_seconds), time_scale=SCALE)
    env = {"LOCKKEEPER_GRACEFUL_SHUTDOWN_SECONDS": str(GRACEFUL_SECONDS)}
    first = worker_process_factory(
        address=dev_server.address, kubeconfig=sim.kubeconfig_path, task_queue=task_queue, env=env,
        stop_timeout=GRACEFUL_SECONDS + 10,
    )
    await first.start()
    first_identity = f"lockkeeper-worker-{first.pid}@"
    observer = ClusterObserver(sim.store)
    observer.start()
    handle = await start_rollout(temporal_client, task_queue, cluster="shutdown", max_unavailable=1, **FAST)

    # Wait for a node in its reboot, with the worker's wait_for_node activity running.
    deadline = time.monotonic() + 60
    while True:
        st = await status(handle)
        rebooting = [name for name, n in st.nodes.items() if n.step == "wait-reboot"]
        if rebooting:
            break
        assert time.monotonic() < deadline, f"no node reached its reboot: {st.model_dump_json(indent=1)}"
        await asyncio.sleep(0.1)
    await asyncio.sleep(0.5)  # the activity is polled and watching
    node = rebooting[0]
    done_before = st.totals.done

    t0 = time.monotonic()
    code = await first.stop()  # SIGTERM; SIGKILL (-9) only after GRACEFUL_SECONDS + 10 s
    print(f"worker stopped {time.monotonic() - t0:.1f} s after SIGTERM (grace {GRACEFUL_SECONDS} s)")
    assert code == 0, f"worker exit code {code}:\n{first.log_tail()}"
    events = _events(first.log_path.read_text())
    assert "worker stopping" in events and events[-1] == "worker stopped", events[-5:]

    second = worker_process_factory(address=dev_server.address, kubeconfig=sim.kubeconfig_path, task_queue=task_queue)
    await second.start()
    t1 = time.monotonic()
    result = await drive(handle, timeout=120)
    print(f"rollout finished {time.monotonic() - t1:.1f} s after the second worker started")
    observer.stop()
    assert result.outcome == "completed", result.message
    assert result.summary.done == 2 and done_before < 2
    # The handover redid nothing: every node was cordoned once and only one was in flight.
    assert set(observer.cordons.values()) == {1} and len(observer.cordons) == 2
    assert observer.max_in_flight == 1

    attempts = await _wait_for_node_attempts(temporal_client, f"{handle.id}/node/{node}/1")
    retried = [(att, who) for att, who in attempts if att >= 2]
    if finishes_in_grace:
        assert not retried, f"the watch running at SIGTERM should have finished on the old worker: {attempts}"
    else:
        assert retried and not any(who.startswith(first_identity) for _, who in retried), attempts
