"""Issue 41 on R2 (the router's PodDisruptionBudget blocks the only worker's drain), controller
down, the simulator's clock scaled: the status view's health insight names the pod, the budget
and the daemon's drain deadline; and the deadline guard: with no ``decide_after`` at all, a
drain that stays blocked opens its decision gate at ``daemon.escalate_after_seconds`` (its
default, 45 of the daemon's 60 minutes, scaled), before the machine-config-daemon's drain
deadline, and the node never goes Degraded. Facts come from clustersim's store."""

from __future__ import annotations

import asyncio
import time
from datetime import UTC, datetime, timedelta

import pytest

from lockkeeper.upgrade_status import upgrade_view
from tests.support.harness import APPROVER, merged, node_annotations, start_rollout, status
from tests.machineconfig.test_r2_blocked_drain import BLOCKING, NODE, gate_open, until
from workflows.kit.models import DecideInput, NodePhase
from workflows.machineconfig.models import DaemonPolicy

pytestmark = pytest.mark.e2e

SCALE = 0.01  # the daemon's hour is 36 s
MCO = "machineconfiguration.openshift.io/"
FAST = dict(
    pools=["worker"], drain={"backoff_initial_seconds": 0.5, "backoff_max_seconds": 1, "wait_seconds": 2},
    daemon={"drain_deadline_seconds": 3600 * SCALE, "uncordon_deadline_seconds": 600 * SCALE},
)
DEFAULT_ESCALATION = DaemonPolicy.model_fields["escalate_after_seconds"].default


async def test_the_insight_names_pod_budget_and_deadline(sim_factory, worker_for, temporal_client, task_queue) -> None:
    sim = await sim_factory("r2-pdb-blocked", time_scale=0.02)
    await worker_for(sim)
    handle = await start_rollout(temporal_client, task_queue, **merged(FAST, cluster="r2-view", drain={"decide_after_seconds": 3},
                                                                         daemon={"drain_deadline_seconds": 72.0, "uncordon_deadline_seconds": 12.0}))
    st = await until(handle, lambda s: s.nodes.get(NODE) and s.nodes[NODE].phase == NodePhase.BLOCKED
                     and s.nodes[NODE].drain_report is not None and s.nodes[NODE].drain_report.blocked_pods)
    view = upgrade_view(st, datetime.now(UTC))
    (pool,) = view["pools"]
    assert pool["assessment"] == "Progressing" and pool["draining"] == 1 and pool["progressing"] == 1
    (insight,) = [i for i in view["insights"] if NODE in i["message"]]
    kinds = {(r["kind"], f"{r['namespace']}/{r['name']}" if r["namespace"] else r["name"]) for r in insight["resources"]}
    assert ("Pod", BLOCKING) in kinds and ("PodDisruptionBudget", "openshift-ingress/router-default") in kinds, kinds
    assert f"pod {BLOCKING} cannot be evicted" in insight["message"]
    assert f"machine-config-daemon degrades node {NODE} at" in insight["message"]
    assert insight["deadline"] == st.nodes[NODE].deadline.isoformat()
    (row,) = [r for r in view["nodes"] if r["name"] == NODE]
    assert row["message"].startswith("Drain blocked") and BLOCKING in row["message"] and "router-default" in row["message"]
    await until(handle, gate_open)
    await handle.execute_update("decide", DecideInput(node=NODE, decision="delete-pod", identity=APPROVER))
    result = await asyncio.wait_for(handle.result(), 60)
    assert result.outcome == "completed", result.message


async def test_blocked_drain_escalates_before_the_daemon_deadline(sim_factory, worker_for, temporal_client, task_queue) -> None:
    assert DEFAULT_ESCALATION == 2700.0
    sim = await sim_factory("r2-pdb-blocked", time_scale=SCALE)
    await worker_for(sim)
    states: list[str] = []
    stop = asyncio.Event()

    async def sample() -> None:  # the daemon's state on the node, every 0.1 s, for the whole run
        while not stop.is_set():
            states.append(node_annotations(sim.store, NODE).get(MCO + "state", ""))
            await asyncio.sleep(0.1)

    sampler = asyncio.create_task(sample())
    handle = await start_rollout(temporal_client, task_queue, **merged(
        FAST, cluster="r2-guard", drain={"decide_after_seconds": None}, daemon={"escalate_after_seconds": DEFAULT_ESCALATION * SCALE}))
    try:
        st = await until(handle, lambda s: s.nodes.get(NODE) and s.nodes[NODE].phase == NodePhase.BLOCKED)
        started = time.monotonic()
        deadline = st.nodes[NODE].deadline
        assert deadline is not None
        st = await until(handle, gate_open, timeout=60)
        gate = st.nodes[NODE].decision_gate
        waited = time.monotonic() - started
        # Opened by the escalation (no decide_after), about 27 s after the request, before the daemon's 36 s.
        assert waited >= DEFAULT_ESCALATION * SCALE - 4, waited
        assert gate.opened_at < deadline - timedelta(seconds=(3600 - DEFAULT_ESCALATION) * SCALE * 0.5), (gate.opened_at, deadline)
        (opened,) = [r for r in st.gate_history if r.action == "opened"]
        assert "escalated before the daemon's drain deadline" in opened.comment
        assert "Degraded" not in states, states[-5:]
        assert node_annotations(sim.store, NODE)[MCO + "state"] == "Working"
        await handle.execute_update("decide", DecideInput(node=NODE, decision="delete-pod", identity=APPROVER, comment="spare"))
        result = await asyncio.wait_for(handle.result(), 60)
    finally:
        stop.set()
        await sampler
    assert result.outcome == "completed", result.message
    assert result.nodes[NODE].phase == NodePhase.DONE
    assert "Degraded" not in states and states, "the daemon degraded the node"


async def test_without_the_guard_the_daemon_degrades_the_node(sim_factory, worker_for, temporal_client, task_queue) -> None:
    """The same run with the escalation off (and no decide_after) opens no gate and the daemon's
    deadline degrades the node: what the guard prevents."""
    sim = await sim_factory("r2-pdb-blocked", time_scale=SCALE)
    await worker_for(sim)
    handle = await start_rollout(temporal_client, task_queue, **merged(
        FAST, cluster="r2-noguard", drain={"decide_after_seconds": None}, daemon={"escalate_after_seconds": None}))
    end = time.monotonic() + 90
    while time.monotonic() < end and node_annotations(sim.store, NODE).get(MCO + "state") != "Degraded":
        await asyncio.sleep(0.2)
    assert node_annotations(sim.store, NODE).get(MCO + "state") == "Degraded"
    st = await status(handle)
    assert not any(r.action == "opened" for r in st.gate_history)
    await handle.terminate("test over")
