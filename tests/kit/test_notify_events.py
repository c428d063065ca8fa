"""Webhook notifications for the events beyond gate opened/decided and completed, on the
simulator over real HTTP, a real worker process and a real local HTTP receiver (aiohttp):

- R2 (a PodDisruptionBudget blocks the drain): ``drain-blocked`` with the report (the blocking
  pod and its budget), ``gate-opened`` for the node's decision gate with the ``lockkeeper decide``
  command, ``gate-timed-out`` when nobody decides, and the run's end (``failed``: aborted);
- a node whose daemon degrades: ``node-degraded`` (the daemon's reason, the retry-node command)
  and ``paused`` (the resume command);
- an approval gate nobody answers: ``gate-timed-out`` and ``paused`` with the resume command;
- a rollout whose preflight refuses the input: ``failed`` with the error.

Every body names the procedure, the run and the cluster and carries a Slack-compatible ``text``.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from clustersim.scenario import generate_scenario
from tests.support.harness import start_rollout, status
from tests.kit.test_notify import Receiver
from workflows.kit.models import ControlInput, NodePhase
from workflows.machineconfig.models import RolloutPhase

pytestmark = pytest.mark.e2e

PROCEDURE = "machineconfig-rollout"


async def event(receiver: Receiver, name: str, timeout: float = 60.0) -> dict[str, Any]:
    """The first body of ``name`` the receiver got, waiting up to ``timeout`` s for it."""
    deadline = time.monotonic() + timeout
    while not receiver.of(name):
        assert time.monotonic() < deadline, f"no {name!r} notification; got {[b['event'] for _, b in receiver.events]}"
        await asyncio.sleep(0.1)
    return receiver.of(name)[0][1]


def check_common(body: dict[str, Any], handle: Any, cluster: str) -> None:
    """What every notification carries: procedure, run, cluster, and a Slack ``text`` naming them."""
    assert body["procedure"] == PROCEDURE and body["workflow_id"] == handle.id and body["cluster"] == cluster, body
    assert isinstance(body["text"], str) and handle.id in body["text"] and cluster in body["text"], body
    assert body["at"], body


@pytest.fixture
async def receiver() -> Any:
    r = Receiver()
    await r.start()
    try:
        yield r
    finally:
        await r.stop()


R2_SCALE = 0.02
R2_NODE = "okd-worker-01"
R2_BLOCKING = "openshift-ingress/router-default-796df5847b-9hxzx"


async def test_r2_drain_blocked_with_report_decision_gate_then_timeout(
    sim_factory: Any, worker_for: Any, temporal_client: Any, task_queue: str, receiver: Receiver
) -> None:
    sim = await sim_factory("r2-pdb-blocked", time_scale=R2_SCALE)
    await worker_for(sim, env={"LOCKKEEPER_NOTIFY_URL": receiver.url})
    handle = await start_rollout(
        temporal_client, task_queue, cluster="notify-r2", pools=["worker"],
        drain={"backoff_initial_seconds": 0.5, "backoff_max_seconds": 1, "wait_seconds": 2, "decide_after_seconds": 3,
               "decision_timeout_seconds": 4, "decision_timeout_outcome": "abort"},
        daemon={"drain_deadline_seconds": 3600 * R2_SCALE, "uncordon_deadline_seconds": 600 * R2_SCALE},
    )

    blocked = await event(receiver, "drain-blocked")
    check_common(blocked, handle, "notify-r2")
    assert blocked["node"] == R2_NODE and R2_NODE in blocked["text"] and R2_BLOCKING in blocked["text"], blocked
    (pod,) = blocked["report"]["blocked_pods"]
    assert f"{pod['namespace']}/{pod['name']}" == R2_BLOCKING and "disruption budget" in pod["message"]
    assert [p["name"] for p in pod["pdbs"]] == ["router-default"]
    assert blocked["command"] == f"lockkeeper decide {handle.id} {R2_NODE} wait|skip|delete-pod|abort"

    opened = await event(receiver, "gate-opened")
    check_common(opened, handle, "notify-r2")
    gate = f"drain/{R2_NODE}"
    assert opened["gate"] == gate and opened["command"].startswith(f"lockkeeper decide {handle.id} {R2_NODE} ")
    assert "delete-pod" in opened["command"] and opened["command"] in opened["text"] and gate in opened["text"]
    st = await status(handle)
    assert st.nodes[R2_NODE].decision_gate is not None and st.nodes[R2_NODE].decision_gate.id == gate

    # Nobody decides: the gate times out with its declared outcome (abort), the run ends.
    timed_out = await event(receiver, "gate-timed-out")
    check_common(timed_out, handle, "notify-r2")
    assert timed_out["gate"] == gate and timed_out["by"] == "timeout" and timed_out["outcome"] == "abort", timed_out
    assert gate in timed_out["text"] and "timed out" in timed_out["text"]
    result = await asyncio.wait_for(handle.result(), 120)
    assert result.outcome == "aborted", result.message
    failed = await event(receiver, "failed", timeout=10)
    check_common(failed, handle, "notify-r2")
    assert failed["outcome"] == "aborted" and "aborted" in failed["text"]
    assert not receiver.of("completed")


SCALE = 0.05
FAST = dict(
    drain={"backoff_initial_seconds": 1, "backoff_max_seconds": 3, "wait_seconds": 5},
    daemon={"drain_deadline_seconds": 3600 * SCALE, "uncordon_deadline_seconds": 600 * SCALE},
)


async def test_degraded_node_and_pause(
    sim_factory: Any, worker_for: Any, temporal_client: Any, task_queue: str, receiver: Receiver
) -> None:
    sim = await sim_factory(generate_scenario(nodes=2, pods=4, pools={"worker": 2}, name="notify-degraded", reboot_seconds=20,
                                              pod_start_seconds=1, namespaces=1, pods_per_deployment=2), time_scale=SCALE)
    await worker_for(sim, env={"LOCKKEEPER_NOTIFY_URL": receiver.url})
    bad = min(n["metadata"]["name"] for n in sim.store.list("nodes"))
    sim.agents.inject_node_fault(bad, "degrade", reason="failed to write /etc/worker-update.conf: read-only file system")
    handle = await start_rollout(temporal_client, task_queue, cluster="notify-degraded", max_unavailable=1, **FAST)

    degraded = await event(receiver, "node-degraded", timeout=120)
    check_common(degraded, handle, "notify-degraded")
    assert degraded["node"] == bad and "read-only file system" in degraded["text"] and bad in degraded["text"]
    assert degraded["command"] == f"lockkeeper retry-node {handle.id} {bad}"
    paused = await event(receiver, "paused")
    check_common(paused, handle, "notify-degraded")
    assert paused["command"] == f"lockkeeper resume {handle.id}" and "read-only file system" in paused["text"]
    st = await status(handle)
    assert st.phase == RolloutPhase.PAUSED and st.nodes[bad].phase == NodePhase.DEGRADED
    assert len(receiver.of("paused")) == 1 and len(receiver.of("node-degraded")) == 1  # once per change, not per poll

    await handle.execute_update("abort", ControlInput(identity="notify-operator", reason="disk is read-only"))
    result = await asyncio.wait_for(handle.result(), 120)
    assert result.outcome == "aborted"
    failed = await event(receiver, "failed", timeout=10)
    check_common(failed, handle, "notify-degraded")
    assert failed["outcome"] == "aborted"


async def test_approval_gate_timed_out_pauses(
    sim_factory: Any, worker_for: Any, temporal_client: Any, task_queue: str, receiver: Receiver
) -> None:
    sim = await sim_factory("r1-ovn-interrupted", time_scale=SCALE)
    await worker_for(sim, env={"LOCKKEEPER_NOTIFY_URL": receiver.url})
    handle = await start_rollout(temporal_client, task_queue, pools=["infra"], approval="pool", cluster="notify-timeout",
                                 gates={"timeout_seconds": 3, "timeout_outcome": "reject"}, **FAST)
    opened = await event(receiver, "gate-opened")
    gate = opened["gate"]
    assert opened["command"] == f"lockkeeper approve {handle.id} {gate} -m REASON"

    timed_out = await event(receiver, "gate-timed-out")
    check_common(timed_out, handle, "notify-timeout")
    assert timed_out["gate"] == gate and timed_out["by"] == "timeout" and timed_out["outcome"] == "reject"
    assert timed_out["command"] == f"lockkeeper resume {handle.id}" and timed_out["command"] in timed_out["text"]
    paused = await event(receiver, "paused")
    check_common(paused, handle, "notify-timeout")
    assert gate in paused["text"] and "timed out" in paused["text"]
    assert paused["command"] == f"lockkeeper resume {handle.id}"
    # The gate-decided event is for decisions by people only.
    assert not receiver.of("gate-decided")
    await handle.execute_update("abort", ControlInput(identity="notify-operator", reason="not tonight"))
    result = await asyncio.wait_for(handle.result(), 120)
    assert result.outcome == "aborted"
    await event(receiver, "failed", timeout=10)


async def test_refused_input_sends_failed(
    sim_factory: Any, worker_for: Any, temporal_client: Any, task_queue: str, receiver: Receiver
) -> None:
    sim = await sim_factory(generate_scenario(nodes=2, pods=0, pools={"worker": 2}, name="notify-bad"), time_scale=SCALE)
    await worker_for(sim, env={"LOCKKEEPER_NOTIFY_URL": receiver.url})
    handle = await start_rollout(temporal_client, task_queue, cluster="notify-bad", pools=["nope"])
    result = await handle.result()  # refused before any change (issue 39): a failed precondition, not a failed run
    assert result.outcome == "refused" and "nope" in result.problems[0], result
    failed = await event(receiver, "failed", timeout=10)
    check_common(failed, handle, "notify-bad")
    assert failed["outcome"] == "refused" and "refused" in failed["text"]
    assert [b["event"] for _, b in receiver.events] == ["failed"]  # nothing else happened


async def test_standalone_drain_blocked_with_report(
    sim_factory: Any, worker_for: Any, temporal_client: Any, task_queue: str, receiver: Receiver
) -> None:
    """The standalone drain (one node, its row in ``status.node``) sends the same events."""
    import uuid

    from workflows.drain.models import NodeDrainInput, NodeDrainResult

    sim = await sim_factory("r2-pdb-blocked", time_scale=R2_SCALE)
    await worker_for(sim, env={"LOCKKEEPER_NOTIFY_URL": receiver.url})
    handle = await temporal_client.start_workflow(
        "NodeDrainWorkflow",
        NodeDrainInput(node=R2_NODE, cluster="notify-drain", approvals={"requested_by": "e2e"},
                       drain={"backoff_initial_seconds": 0.5, "backoff_max_seconds": 1, "wait_seconds": 2, "decide_after_seconds": 3,
                              "decision_timeout_seconds": 4, "decision_timeout_outcome": "abort"}),
        id=f"drain-notify-{uuid.uuid4().hex[:6]}", task_queue=task_queue, result_type=NodeDrainResult,
    )
    blocked = await event(receiver, "drain-blocked")
    assert blocked["procedure"] == "drain" and blocked["workflow_id"] == handle.id and blocked["cluster"] == "notify-drain"
    assert blocked["node"] == R2_NODE and R2_BLOCKING in blocked["text"] and handle.id in blocked["text"]
    assert [f"{p['namespace']}/{p['name']}" for p in blocked["report"]["blocked_pods"]] == [R2_BLOCKING]
    opened = await event(receiver, "gate-opened")
    assert opened["gate"] == f"drain/{R2_NODE}" and opened["command"].startswith(f"lockkeeper decide {handle.id} {R2_NODE} ")
    timed_out = await event(receiver, "gate-timed-out")
    assert timed_out["gate"] == f"drain/{R2_NODE}" and timed_out["outcome"] == "abort"
    result = await asyncio.wait_for(handle.result(), 120)
    failed = await event(receiver, "failed", timeout=10)
    assert failed["workflow_id"] == handle.id and failed["outcome"] == result.outcome != "completed"
