"""Failures are visible and stoppable (issue 18): a real dev server, a real worker process, the
simulator over real HTTP.

- An unreachable API (a kubeconfig pointing at a closed port) fails the rollout's dry run at
  once (its preflight tried once, not retried) with ``ApiUnreachable`` and a message naming the
  API server; 100 % 503 in planning gives up after a bounded number of attempts with a bounded
  back-off (``ApiUnavailable``).
- ``abort`` during planning (the API hanging, or answering 503) ends the rollout aborted at once,
  with nothing written to the cluster.
- A 100 % 503 window in the middle of a rollout shows in ``describe()``: a pending activity with
  attempt > 1 and a last failure naming the 503; the rollout completes once the window closes.
"""

from __future__ import annotations

import asyncio
import socket
import time
from pathlib import Path
from typing import Any

import pytest
from temporalio.client import WorkflowFailureError
from temporalio.exceptions import ApplicationError

from clustersim.kubeconfig import write_kubeconfig
from clustersim.scenario import generate_scenario
from tests.support.harness import activity_runs, assert_failed_at_once, drive, listed, start_rollout, status, write_requests
from workflows.kit.calls import PLANNING_ATTEMPTS
from workflows.kit.models import ControlInput
from workflows.machineconfig.models import RolloutPhase

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(240)]

SCALE = 0.05
PREFLIGHT = "preflight_machineconfig_rollout"
FAST = dict(
    drain={"backoff_initial_seconds": 1, "backoff_max_seconds": 3, "wait_seconds": 5},
    daemon={"drain_deadline_seconds": 3600 * SCALE, "uncordon_deadline_seconds": 600 * SCALE},
)


def _small(name: str, nodes: int = 2, reboot_seconds: int = 60) -> object:
    return generate_scenario(
        nodes=nodes, pods=4, pools={"worker": nodes}, name=name, reboot_seconds=reboot_seconds, pod_start_seconds=1,
        namespaces=1, pods_per_deployment=2,
    )


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def _failure(handle: Any, timeout: float) -> ApplicationError:
    """Wait (up to ``timeout`` s) for the workflow to fail; its ApplicationError."""
    with pytest.raises(WorkflowFailureError) as info:
        await asyncio.wait_for(handle.result(), timeout)
    cause = info.value.cause
    assert isinstance(cause, ApplicationError), repr(cause)
    return cause


async def _pending_preflight(handle: Any, timeout: float = 20.0) -> Any:
    """The rollout's pending preflight activity once it exists (describe's raw description)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        desc = await handle.describe()
        for act in desc.raw_description.pending_activities:
            if act.activity_type.name == "preflight_machineconfig_rollout":
                return act
        await asyncio.sleep(0.2)
    raise AssertionError("the preflight never showed as pending")


async def _node_runs(handle: Any, timeout: float = 0.0) -> list[str]:
    """Workflow IDs of the rollout's running node runs (NodeRolloutWorkflow children), waiting up
    to ``timeout`` seconds for at least one."""
    deadline = time.monotonic() + timeout
    while True:
        desc = await handle.describe()
        runs = [c.workflow_id for c in desc.raw_description.pending_children if c.workflow_type_name == "NodeRolloutWorkflow"]
        if runs or time.monotonic() >= deadline:
            return runs
        await asyncio.sleep(0.2)


async def test_unreachable_api_fails_the_dry_run_fast_naming_the_api(
    tmp_path: Path, dev_server: Any, worker_process_factory: Any, temporal_client: Any, task_queue: str
) -> None:
    url = f"https://127.0.0.1:{_closed_port()}"
    kubeconfig = write_kubeconfig(tmp_path / "kubeconfig", url)
    worker = worker_process_factory(address=dev_server.address, kubeconfig=kubeconfig, task_queue=task_queue)
    await worker.start()
    handle = await start_rollout(temporal_client, task_queue, cluster="unreachable", dry_run=True)

    err = await _failure(handle, timeout=60)
    assert err.type == "ApiUnreachable" and err.non_retryable
    await assert_failed_at_once(handle, PREFLIGHT)
    assert url in err.message and "Connection refused" in err.message, err.message
    # status says why, not just "planning"
    st = await status(handle)
    assert st.phase == RolloutPhase.FAILED
    assert url in (st.error or "")


async def test_cli_dry_run_against_an_unreachable_api_exits_3_at_once(
    tmp_path: Path, dev_server: Any, worker_process_factory: Any, temporal_client: Any, task_queue: str
) -> None:
    """The operator's view of the same failure: the CLI's dry run ends with the workflow (whose
    preflight was tried once), exit 3 (no connection), on one line naming the API server."""
    import os
    import sys

    url = f"https://127.0.0.1:{_closed_port()}"
    kubeconfig = write_kubeconfig(tmp_path / "kubeconfig", url)
    worker = worker_process_factory(address=dev_server.address, kubeconfig=kubeconfig, task_queue=task_queue)
    await worker.start()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TEMPORAL_", "LOCKKEEPER_", "KUBE"))}
    env["LOCKKEEPER_TASK_QUEUE"] = task_queue
    proc = await asyncio.create_subprocess_exec(
        str(Path(sys.executable).parent / "lockkeeper"), "--address", dev_server.address, "start", "machineconfig-rollout",
        "--pool", "worker", "--cluster", "unreachable-cli", "--dry-run", env=env,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )
    _out, err = await asyncio.wait_for(proc.communicate(), 90)
    lines = [line for line in err.decode().splitlines() if line.strip() and not line.startswith("started ")]
    assert proc.returncode == 3, (proc.returncode, err.decode())
    assert len(lines) == 1 and url in lines[0], lines
    started = await listed(temporal_client, f'TaskQueue = "{task_queue}" AND WorkflowType = "MachineConfigRolloutWorkflow"')
    assert len(started) == 1, started
    await assert_failed_at_once(temporal_client.get_workflow_handle(started[0].id, run_id=started[0].run_id), PREFLIGHT)


async def test_503_in_planning_gives_up_after_bounded_attempts(sim_factory, worker_for, temporal_client, task_queue) -> None:
    sim = await sim_factory(_small("planning-503"), time_scale=SCALE)
    await worker_for(sim)
    sim.faults.configure(error_503=1.0)
    handle = await start_rollout(temporal_client, task_queue, cluster="planning-503", dry_run=True)

    err = await _failure(handle, timeout=90)
    assert err.type == "ApiUnavailable"
    assert "503" in err.message and "gave up after 5 attempts" in err.message, err.message
    preflights = [e for e in sim.requests.entries(resource="machineconfigpools") if e.code == 503]
    assert len(preflights) == 5  # one LIST per attempt, no more
    # The give-up is bounded in time by the preflight's retry policy: 5 attempts, back-off 1 s
    # doubling up to 8 s (at most 1 + 2 + 4 + 8 s between them).
    pre = [r for r in await activity_runs(handle) if r.name == PREFLIGHT]
    assert len(pre) == 1 and pre[0].attempts == PLANNING_ATTEMPTS == 5 and pre[0].ended == "failed", pre
    retry = pre[0].retry
    assert (retry.maximum_attempts, retry.initial_interval.ToSeconds(), retry.backoff_coefficient,
            retry.maximum_interval.ToSeconds()) == (5, 1, 2.0, 8), retry
    assert not write_requests(sim.requests)


@pytest.mark.parametrize("fault", ["hang", "503"])
async def test_abort_during_planning_ends_the_rollout_aborted(
    fault: str, sim_factory, worker_for, temporal_client, task_queue
) -> None:
    sim = await sim_factory(_small(f"abort-planning-{fault}"), time_scale=SCALE)
    await worker_for(sim)
    if fault == "hang":
        sim.faults.configure(timeout=1.0, timeout_seconds=8)  # every request hangs, then drops
    else:
        sim.faults.configure(error_503=1.0)
    handle = await start_rollout(temporal_client, task_queue, cluster=f"abort-{fault}")
    pending = await _pending_preflight(handle)
    if fault == "503":  # let it fail at least once so the abort meets it between attempts
        deadline = time.monotonic() + 15
        while pending.attempt < 2 and time.monotonic() < deadline:
            await asyncio.sleep(0.2)
            pending = await _pending_preflight(handle)
        assert pending.attempt >= 2
    assert (await status(handle)).phase == RolloutPhase.PLANNING

    await handle.execute_update("abort", ControlInput(identity="e2e-operator", reason="wrong cluster"))
    result = await asyncio.wait_for(handle.result(), 20)
    # At once: the run ended without waiting for the preflight's attempt (hanging, or between
    # two 503s) to end or to confirm its cancellation; the preflight is the only activity it ran.
    runs = await activity_runs(handle)
    assert [(r.name, r.ended) for r in runs] == [(PREFLIGHT, "open")], runs
    assert result.outcome == "aborted"
    assert "wrong cluster" in result.message and "nothing was changed" in result.message
    assert result.plan.pools == []
    st = await status(handle)
    assert st.phase == RolloutPhase.ABORTED
    history = await handle.fetch_history()
    assert any(e.HasField("activity_task_cancel_requested_event_attributes") for e in history.events)
    sim.faults.clear()
    assert not write_requests(sim.requests)


async def test_503_window_mid_rollout_shows_attempts_and_last_failure(
    sim_factory, worker_for, temporal_client, task_queue
) -> None:
    sim = await sim_factory(_small("mid-503", nodes=2, reboot_seconds=200), time_scale=SCALE)
    await worker_for(sim)
    handle = await start_rollout(temporal_client, task_queue, cluster="mid-503", max_unavailable=1, **FAST)

    # Wait until a node run is in flight (its child workflow exists), then fail every API call.
    assert await _node_runs(handle, timeout=60), "no node run started"
    sim.faults.configure(error_503=1.0)

    seen: Any = None
    deadline = time.monotonic() + 40
    while seen is None and time.monotonic() < deadline:
        for wf_id in [handle.id, *await _node_runs(handle)]:
            desc = await temporal_client.get_workflow_handle(wf_id).describe()
            for act in desc.raw_description.pending_activities:
                if act.attempt > 1 and "503" in act.last_failure.message:
                    seen = (wf_id, act)
        await asyncio.sleep(0.5)
    assert seen is not None, "no pending activity showed the 503 window"
    wf_id, act = seen
    assert "unable to handle the request" in act.last_failure.message

    sim.faults.clear()
    result = await drive(handle, timeout=180)
    assert result.outcome == "completed", result.message
