"""Issue 18 item 4 end to end on R1 at time scale 0.05: the API server is down for longer than the
daemon's uncordon deadline right after a reboot, and a node whose daemon failed after its reboot
is retried. The simulator's machine-config-daemon behaves as MCO pkg/daemon does after a missed
uncordon deadline (Degraded, retried, never a new drain request: clustersim/agents/mcd.py)."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from clustersim import ClusterSim
from tests.support.harness import MCO, drive, node_annotations, start_rollout, status
from workflows import MachineConfigRolloutWorkflow
from workflows.kit.models import NodeControlInput, NodePhase
from workflows.machineconfig.models import RolloutPhase

pytestmark = pytest.mark.e2e

SCALE = 0.05
UNCORDON_DEADLINE = 600 * SCALE  # real seconds
FAST = dict(
    drain={"backoff_initial_seconds": 1, "backoff_max_seconds": 3, "wait_seconds": 5},
    daemon={"drain_deadline_seconds": 3600 * SCALE, "uncordon_deadline_seconds": UNCORDON_DEADLINE},
)


class DrainLog:
    """Every desiredDrain / lastAppliedDrain / state value each node went through (the simulator's
    own record, read from its store's event stream)."""

    def __init__(self, sim: ClusterSim) -> None:
        self.sim = sim
        self.values: dict[str, list[tuple[str, str, str]]] = {}
        self._sub = sim.store.subscribe(["nodes"])
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def _run(self) -> None:
        async for ev in self._sub:
            ann = ev.object["metadata"].get("annotations") or {}
            row = (ann.get(MCO + "desiredDrain", ""), ann.get(MCO + "lastAppliedDrain", ""), ann.get(MCO + "state", ""))
            rows = self.values.setdefault(ev.object["metadata"]["name"], [])
            if not rows or rows[-1] != row:
                rows.append(row)

    async def first_rebooting(self, timeout: float = 120) -> str:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            for name, rows in self.values.items():
                if rows and rows[-1][2] == "Rebooting":
                    return name
            await asyncio.sleep(0.01)
        raise TimeoutError(f"no node rebooted; seen {self.values}")

    def stop(self) -> None:
        self._sub.close()
        self._task.cancel()


async def until(pred: Any, timeout: float, what: str) -> None:
    end = time.monotonic() + timeout
    while not pred():
        if time.monotonic() > end:
            raise TimeoutError(what)
        await asyncio.sleep(0.05)


async def test_api_down_past_the_uncordon_deadline_after_a_reboot_completes_the_node(
    sim_factory, worker_for, temporal_client, task_queue
) -> None:
    sim = await sim_factory("r1-ovn-interrupted", time_scale=SCALE)
    await worker_for(sim)
    log = DrainLog(sim)
    handle = await start_rollout(temporal_client, task_queue, cluster="r1-outage", pools=["app"], max_unavailable=1, **FAST)

    async def outage() -> str:
        node = await log.first_rebooting()
        sim.faults.configure(error_503=1.0)
        sim.faults.drop_watches()
        # Down until the daemon has given up on the uncordon (its deadline passed without us).
        await until(
            lambda: node_annotations(sim.store, node).get(MCO + "reason", "").startswith("failed to uncordon node"),
            UNCORDON_DEADLINE * 3, "the daemon never missed its uncordon deadline",
        )
        await asyncio.sleep(2)
        sim.faults.clear()
        return node

    outage_task = asyncio.ensure_future(outage())
    try:
        result = await drive(handle, timeout=UNCORDON_DEADLINE * 2 + 200)
    finally:
        log.stop()
        sim.faults.clear()
    # The API was down past the deadline: the outage ended only once the daemon reported it had
    # failed to uncordon (the Degraded rows below), not after a measured time.
    node = await outage_task

    assert result.outcome == "completed", result.message
    nr = result.nodes[node]
    assert nr.phase == NodePhase.DONE and nr.attempts == 1, nr
    for name in ("qsu-app-01", "qsu-app-02"):
        ann = node_annotations(sim.store, name)
        assert ann[MCO + "state"] == "Done" and ann[MCO + "reason"] == ""
        assert ann[MCO + "currentConfig"] == ann[MCO + "desiredConfig"] == "rendered-app-c2144a20e3d0e37e96785165ba81f4e8"
        assert ann[MCO + "lastAppliedDrain"] == ann[MCO + "desiredDrain"] == "uncordon-rendered-app-c2144a20e3d0e37e96785165ba81f4e8"
        assert not (sim.store.get("nodes", name).get("spec") or {}).get("unschedulable"), f"{name} left cordoned"
    rows = log.values[node]
    target = "rendered-app-c2144a20e3d0e37e96785165ba81f4e8"
    degraded = [r for r in rows if r[2] == "Degraded"]
    assert degraded and all(r[0] == f"uncordon-{target}" for r in degraded), rows  # the daemon did miss it
    first_uncordon = next(i for i, r in enumerate(rows) if r[0] == f"uncordon-{target}")
    assert all(r[0] == f"uncordon-{target}" for r in rows[first_uncordon:]), rows  # never drain-X again


async def test_retry_node_completes_a_node_whose_daemon_degraded_after_its_reboot(
    sim_factory, worker_for, temporal_client, task_queue
) -> None:
    sim = await sim_factory("r1-ovn-interrupted", time_scale=SCALE)
    await worker_for(sim)
    log = DrainLog(sim)
    handle = await start_rollout(temporal_client, task_queue, cluster="r1-retry", pools=["app"], max_unavailable=1, **FAST)
    try:
        node = await log.first_rebooting()
        # The node comes back with a file the daemon cannot validate: Degraded after the reboot.
        reason = "unexpected on-disk state validating against rendered-app: /etc/app-node.conf content mismatch"
        sim.agents.inject_node_fault(node, "degrade", reason)
        end = time.monotonic() + 120
        st = await status(handle)
        while st.phase != RolloutPhase.PAUSED and time.monotonic() < end:
            await asyncio.sleep(0.2)
            st = await status(handle)
        assert st.phase == RolloutPhase.PAUSED, st
        assert st.nodes[node].phase == NodePhase.DEGRADED and reason in (st.nodes[node].reason or "")
        ann = node_annotations(sim.store, node)
        assert ann[MCO + "desiredDrain"] == ann[MCO + "lastAppliedDrain"] and ann[MCO + "desiredDrain"].startswith("drain-")

        # Retry while the daemon still reports Degraded, then fix the node: the retry does not
        # degrade again at once, it gives the daemon its retry window and answers its uncordon.
        await handle.execute_update(
            MachineConfigRolloutWorkflow.retry_node, NodeControlInput(node=node, identity="e2e-approver")
        )
        await asyncio.sleep(2)
        assert (await status(handle)).nodes[node].phase != NodePhase.DEGRADED
        sim.agents.clear_node_fault(node)
        result = await drive(handle, timeout=200)
    finally:
        log.stop()
    assert result.outcome == "completed", result.message
    assert result.nodes[node].phase == NodePhase.DONE and result.nodes[node].attempts == 2
    ann = node_annotations(sim.store, node)
    assert ann[MCO + "state"] == "Done" and ann[MCO + "currentConfig"] == ann[MCO + "desiredConfig"]
    assert not (sim.store.get("nodes", node).get("spec") or {}).get("unschedulable")
