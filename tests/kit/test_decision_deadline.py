"""Decisions are confirmed or never happen (issue 18, "Ghost approvals"), through the real
console script, a dev server, worker processes and clustersim r1:

- worker down: ``approve`` exits 3 within its wait, saying nothing was decided, and withdraws
  it (a ``withdraw_decision`` signal in history says who and why); a worker started afterwards
  refuses the queued approve (its log says so), the gate is still waiting, no approve was
  accepted in history, and an approve sent now passes as usual;
- worker down, Ctrl-C long before the approve's deadline: exit 130, "nothing was decided", the
  approve withdrawn; a worker back well before that deadline still refuses it;
- the race of the field report: a gate with timeout outcome ``abort`` times out while the worker
  is down and an approve is waiting for it; when the worker comes back (before the approve's
  deadline) the approve is refused and the declared outcome applies: the rollout aborts.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from tests.support.harness import fast_timings, start_rollout, status

pytestmark = pytest.mark.e2e

LOCKKEEPER = str(Path(sys.executable).parent / "lockkeeper")
SCALE = 0.05
FAST = fast_timings(SCALE)


def cli_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TEMPORAL_", "LOCKKEEPER_"))}
    env.update(extra)
    return env


async def lk(address: str, task_queue: str, *args: str, env: dict[str, str] | None = None) -> tuple[int, str, str]:
    proc = await asyncio.create_subprocess_exec(
        LOCKKEEPER, "--address", address, "--task-queue", task_queue, *args,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, env=env or cli_env(),
    )
    out, err = await asyncio.wait_for(proc.communicate(), 180)
    return proc.returncode or 0, out.decode(), err.decode()


async def gate_with_worker_down(sim_factory: Any, worker_for: Any, client: Any, task_queue: str, cluster: str,
                                **fields: Any) -> tuple[Any, Any, Any, Any]:
    """R1's infra pool rolled with a pool approval gate (``fields`` added to the input), the gate
    waiting, then the worker killed: returns (sim, worker, handle, gate)."""
    sim = await sim_factory("r1-ovn-interrupted", time_scale=SCALE)
    worker = await worker_for(sim)
    handle = await start_rollout(client, task_queue, pools=["infra"], approval="pool", cluster=cluster, **fields, **FAST)
    gate = await wait_gate(handle)
    await worker.kill()
    return sim, worker, handle, gate


async def wait_gate(handle: Any, timeout: float = 120.0) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        st = await status(handle)
        waiting = [g for g in st.gates if g.state == "waiting"]
        if waiting:
            return waiting[0]
        assert time.monotonic() < deadline, st
        await asyncio.sleep(0.1)


async def wait_log(path: Path, needle: str, offset: int, timeout: float = 90.0) -> str:
    """The worker log's text after ``offset`` once it contains ``needle``."""
    deadline = time.monotonic() + timeout
    text = ""
    while time.monotonic() < deadline:
        text = path.read_bytes()[offset:].decode(errors="replace")
        if needle in text:
            return text
        await asyncio.sleep(0.2)
    raise AssertionError(f"{needle!r} not in the worker log after {timeout}s:\n{text[-3000:]}")


async def withdrawals(handle: Any) -> list[dict[str, Any]]:
    """The ``withdraw_decision`` signals in the history (decoded JSON payloads), in order."""
    import json

    found = []
    async for ev in handle.fetch_history_events():
        if ev.HasField("workflow_execution_signaled_event_attributes"):
            attrs = ev.workflow_execution_signaled_event_attributes
            if attrs.signal_name == "withdraw_decision":
                found.append(json.loads(attrs.input.payloads[0].data))
    return found


async def accepted_updates(handle: Any) -> list[str]:
    """Names of the updates the workflow accepted (history events), in order."""
    names = []
    async for ev in handle.fetch_history_events():
        if ev.HasField("workflow_execution_update_accepted_event_attributes"):
            names.append(ev.workflow_execution_update_accepted_event_attributes.accepted_request.input.name)
    return names


@pytest.mark.timeout(400)
async def test_worker_down_approve_exits_3_and_the_late_approve_is_refused(
    dev_server: Any, sim_factory: Any, worker_for: Any, temporal_client: Any, task_queue: str
) -> None:
    sim, worker, handle, gate = await gate_with_worker_down(sim_factory, worker_for, temporal_client, task_queue, "deadline-a")

    wait = 6.0
    code, out, err = await lk(dev_server.address, task_queue, "approve", handle.id, gate.id, "--identity", "late-approver",
                              env=cli_env(LOCKKEEPER_DECISION_TIMEOUT=str(wait)))
    assert code == 3, (code, out, err)
    assert "nothing was decided" in err and f"task queue {task_queue!r}" in err, err
    assert len(err.strip().splitlines()) == 1, err
    assert "withdrawn (request lk-" in err, err
    [w] = await withdrawals(handle)
    assert w["update"] == "approve" and w["identity"] == "late-approver" and "no worker answered" in w["reason"], w

    # A worker comes back: the queued approve reaches it after its deadline and is refused.
    offset = worker.log_path.stat().st_size
    await worker.start()
    log = await wait_log(worker.log_path, "refused, nothing was decided", offset)
    assert "late-approver" in log
    st = await status(handle)
    g = next(x for x in st.gates if x.id == gate.id)
    assert g.state == "waiting" and g.decided_by is None, g
    assert not [r for r in st.gate_history if r.by == "late-approver"], st.gate_history
    assert "approve" not in await accepted_updates(handle)

    # The gate still works: an approve sent now is answered and recorded.
    code, out, err = await lk(dev_server.address, task_queue, "approve", handle.id, gate.id, "--identity", "on-time")
    assert code == 0, (code, out, err)
    st = await status(handle)
    g = next(x for x in st.gates if x.id == gate.id)
    assert g.state == "approved" and g.decided_by == "on-time" and g.connection_identity is None, g
    assert [r.by for r in st.gate_history if r.action == "approved"] == ["on-time"]
    await handle.execute_update("abort", {"identity": "test", "comment": "done"})


@pytest.mark.timeout(400)
async def test_gate_timing_out_while_the_worker_is_down_wins_over_a_waiting_approve(
    dev_server: Any, sim_factory: Any, worker_for: Any, temporal_client: Any, task_queue: str
) -> None:
    sim, worker, handle, gate = await gate_with_worker_down(sim_factory, worker_for, temporal_client, task_queue, "deadline-b",
                                                            gates={"timeout_seconds": 8, "timeout_outcome": "abort"})
    assert gate.timeout_at is not None

    # The approve waits (its deadline ~40 s away); the gate times out meanwhile; then a worker.
    approve = asyncio.ensure_future(lk(dev_server.address, task_queue, "approve", handle.id, gate.id,
                                       "--identity", "slow-approver", env=cli_env(LOCKKEEPER_DECISION_TIMEOUT="40")))
    await asyncio.sleep(max(0.0, (gate.timeout_at - datetime.now(UTC)).total_seconds()) + 1.0)
    assert not approve.done()
    await worker.start()
    code, out, err = await approve
    assert code != 0 and "timed out" in err and "nothing was decided" in err, (code, out, err)

    result = await asyncio.wait_for(handle.result(), 120)
    assert result.outcome == "aborted", result
    actions = [(r.action, r.by) for r in result.gate_history if r.gate_id == gate.id]
    assert ("timeout", "timeout") in actions and not [a for a in actions if a[0] == "approved"], actions
    assert "approve" not in await accepted_updates(handle)
    # Nothing was drained: the rollout aborted at its gate.
    nodes = sim.store.list("nodes")
    assert nodes and all(not (n.get("spec") or {}).get("unschedulable") for n in nodes), nodes


@pytest.mark.timeout(400)
async def test_ctrl_c_withdraws_the_approve_so_a_worker_back_before_its_deadline_refuses_it(
    dev_server: Any, sim_factory: Any, worker_for: Any, temporal_client: Any, task_queue: str
) -> None:
    sim, worker, handle, gate = await gate_with_worker_down(sim_factory, worker_for, temporal_client, task_queue, "deadline-c")

    # The approve may wait 120 s; the operator gives up after a few seconds with Ctrl-C.
    proc = await asyncio.create_subprocess_exec(
        LOCKKEEPER, "--address", dev_server.address, "--task-queue", task_queue, "approve", handle.id, gate.id,
        "--identity", "impatient", stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        env=cli_env(LOCKKEEPER_DECISION_TIMEOUT="120"),
    )
    # Long enough for the CLI to have started and sent the update even on a loaded machine (its
    # imports alone took over 5 s in a loaded suite run, and a Ctrl-C before the send has
    # nothing to withdraw); the approve waits up to 120 s.
    await asyncio.sleep(12)
    assert proc.returncode is None
    proc.send_signal(signal.SIGINT)
    _, errb = await asyncio.wait_for(proc.communicate(), 30)
    err = errb.decode()
    assert proc.returncode == 130, (proc.returncode, err)
    assert err.startswith("interrupted; nothing was decided") and "withdrawn" in err and len(err.strip().splitlines()) == 1, err
    [w] = await withdrawals(handle)
    assert w["identity"] == "impatient" and "Ctrl-C" in w["reason"] and w["request_id"] in err, (w, err)

    # A worker comes back long before the approve's deadline: the withdrawal refuses it.
    offset = worker.log_path.stat().st_size
    await worker.start()
    log = await wait_log(worker.log_path, "refused, nothing was decided", offset)
    assert "impatient" in log and "withdrawn" in log, log[-2000:]
    st = await status(handle)
    g = next(x for x in st.gates if x.id == gate.id)
    assert g.state == "waiting" and g.decided_by is None, g
    assert "approve" not in await accepted_updates(handle)
    nodes = sim.store.list("nodes")
    assert nodes and all(not (n.get("spec") or {}).get("unschedulable") for n in nodes), nodes
    await handle.execute_update("abort", {"identity": "test", "comment": "done"})
