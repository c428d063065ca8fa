"""R5 crash tests: the worker SIGKILLed during the fan-out, and between the ClusterNetwork delete
and the controllers restart. The simulator records what really happened (each node's port
history, ClusterNetwork events), the workflow's result what it reports."""

from __future__ import annotations

import asyncio
import os
import signal
from typing import Any

import pytest

from clustersim.openshift.kinds import CLUSTERNETWORK
from tests.vxlan_port.test_e2e_run import NEW, admin, drive, ready_sim, start, vxlan_input
from workflows.vxlan_port.models import VxlanPortChangeResult

pytestmark = pytest.mark.e2e


def restart_later(worker: Any, tasks: list[asyncio.Task[Any]], delay: float = 0.5) -> None:
    """Reap the killed worker and start a fresh one after ``delay`` s (in the background)."""
    async def go() -> None:
        await worker.kill()
        await asyncio.sleep(delay)
        await worker.start()

    tasks.append(asyncio.get_running_loop().create_task(go()))


@pytest.mark.timeout(420)
async def test_worker_killed_during_the_fanout_rerun_checks_first_and_reports_the_window(
        sim_factory, worker_for, temporal_client, task_queue) -> None:
    sim = await ready_sim(sim_factory)
    worker = await worker_for(sim, env=sim.components["hosts"].client_env())
    sdn = sim.components["sdn"]
    original = sdn.set_port
    killed: list[str] = []
    tasks: list[asyncio.Task[Any]] = []

    def set_port(node: str, port: int, why: str = "ovs-vsctl set") -> None:
        original(node, port, why)
        if port == NEW and not killed and worker.pid:
            # SIGKILL right after the first node switched: the fan-out activity dies mid-way.
            os.kill(worker.pid, signal.SIGKILL)
            killed.append(node)
            restart_later(worker, tasks)

    sdn.set_port = set_port
    try:
        handle = await start(temporal_client, task_queue, vxlan_input(sim))
        result = await drive(handle, timeout=300)
    finally:
        sdn.set_port = original
        for t in tasks:
            await t
    assert killed, "the fan-out never reached the simulator"
    assert isinstance(result, VxlanPortChangeResult) and result.outcome == "completed", result.message
    # Each node was set to the new port exactly once: the re-run checked first and switched
    # only the nodes still on the old port.
    for name, node in sdn.nodes.items():
        sets = [h for h in node.history if h[2] == "ovs-vsctl set" and h[1] == NEW]
        assert len(sets) == 1, (name, node.history)
        assert node.dst_port == NEW
    assert result.fanout is not None and result.fanout.failed == []
    switched_now = [r for r in result.fanout.nodes if r.applied]
    assert any(r.attempt >= 2 for r in result.fanout.nodes), "the fan-out was not re-run"
    assert switched_now and result.outage_window_seconds is not None and result.outage_window_seconds > 0
    # Nodes the dead attempt switched without a heartbeat are bounded, and the window says so.
    assert result.fanout.window_exact == (not any(r.lost_attempt for r in result.fanout.nodes))
    probe = await admin(sim, "network/probe")
    assert probe["failing_now"] == [] and set(probe["rebuilds"].values()) == {0}


@pytest.mark.timeout(420)
async def test_worker_killed_between_cluster_network_delete_and_controllers_restart(
        sim_factory, worker_for, temporal_client, task_queue) -> None:
    sim = await ready_sim(sim_factory)
    worker = await worker_for(sim, env=sim.components["hosts"].client_env())
    events: list[tuple[str, Any]] = []
    tasks: list[asyncio.Task[Any]] = []
    sub = sim.store.subscribe([CLUSTERNETWORK])
    restarts_at_delete: dict[str, int] = {}

    async def watch() -> None:
        async for ev in sub:
            events.append((ev.type, ev.object.get("vxlanPort")))
            if ev.type == "DELETED" and worker.pid:
                os.kill(worker.pid, signal.SIGKILL)
                avail = sim.components["masters"].availability()["masters"]
                restarts_at_delete.update({m: s["controllers_restarts"] for m, s in avail.items()})
                restart_later(worker, tasks)

    watcher = asyncio.get_running_loop().create_task(watch())
    try:
        handle = await start(temporal_client, task_queue, vxlan_input(sim))
        result = await drive(handle, timeout=300)
    finally:
        watcher.cancel()
        sub.close()
        for t in tasks:
            await t
    assert isinstance(result, VxlanPortChangeResult) and result.outcome == "completed", result.message
    assert restarts_at_delete and set(restarts_at_delete.values()) == {0}, "killed before any controllers restart"
    # Deleted once, created once, with the new port.
    assert [t for t, _ in events] == ["DELETED", "ADDED"], events
    assert events[1][1] == NEW
    assert sim.store.get(CLUSTERNETWORK, "default")["vxlanPort"] == NEW
    avail = await admin(sim, "api/availability")
    assert avail["zero_masters_up"] == []
