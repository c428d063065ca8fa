"""machine-config-daemon handshake, deadlines, faults and MachineConfigPool status, driven through the Store."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from clustersim.agents import Agents
from clustersim.agents.logic import (
    ANN_CURRENT_CONFIG,
    ANN_DESIRED_CONFIG,
    ANN_DESIRED_DRAIN,
    ANN_LAST_APPLIED_DRAIN,
    ANN_REASON,
    ANN_STATE,
    condition,
)
from clustersim.clock import Clock
from clustersim.scenario import Scenario, load_scenario
from clustersim.store import Store

MCP = "machineconfigpools.machineconfiguration.openshift.io"
# 1 simulated hour = 0.36 s; reboot 30 s = 0.003 s.
SCALE = 0.0001


class Cluster:
    def __init__(self, scenario: Scenario, scale: float = SCALE) -> None:
        self.clock = Clock(scale)
        self.store = Store(self.clock)
        scenario.populate(self.store)
        self.agents = Agents(self.store, self.clock, scenario)

    def ann(self, node: str) -> dict[str, str]:
        return self.store.get("nodes", node)["metadata"]["annotations"]

    def annotate(self, node: str, **values: str) -> None:
        keys = {"desiredConfig": ANN_DESIRED_CONFIG, "lastAppliedDrain": ANN_LAST_APPLIED_DRAIN}
        self.store.mutate("nodes", node, None,
                          lambda o: o["metadata"]["annotations"].update({keys[k]: v for k, v in values.items()}))

    def cordon(self, node: str, on: bool = True) -> None:
        self.store.mutate("nodes", node, None, lambda o: o["spec"].__setitem__("unschedulable", on) if on
                          else o["spec"].pop("unschedulable", None))

    async def until(self, pred: Callable[[], Any], timeout: float = 10.0) -> Any:
        """Wait for pred() to hold, woken by store events (no sleeping poll)."""
        sub = self.store.subscribe()
        try:
            async with asyncio.timeout(timeout):
                while True:
                    got = pred()
                    if got:
                        return got
                    await sub.get()
        finally:
            sub.close()


@pytest.fixture
async def r2() -> AsyncIterator[Cluster]:
    c = Cluster(load_scenario("r2-pdb-blocked"))
    await c.agents.start()
    yield c
    await c.agents.stop()


def _target(c: Cluster, pool: str) -> str:
    return c.store.get(MCP, pool)["spec"]["configuration"]["name"]


async def test_handshake_completes_when_controller_answers(r2: Cluster) -> None:
    c, node = r2, "okd-worker-01"
    new = _target(c, "worker")
    c.annotate(node, desiredConfig=new)
    await c.until(lambda: c.ann(node)[ANN_DESIRED_DRAIN] == f"drain-{new}")
    assert c.ann(node)[ANN_STATE] == "Working"
    c.cordon(node)
    before = {p["metadata"]["uid"] for p in c.store.list("pods", field_selector=f"spec.nodeName={node}")}
    c.annotate(node, lastAppliedDrain=f"drain-{new}")
    await c.until(lambda: c.ann(node)[ANN_STATE] == "Rebooting")
    await c.until(lambda: c.ann(node)[ANN_DESIRED_DRAIN] == f"uncordon-{new}")
    assert condition(c.store.get("nodes", node), "Ready")["status"] == "True"
    # every container that was on the node before the reboot restarted once during it (pods
    # created since, e.g. a DaemonSet's replacement, may not have container statuses yet)
    pods = [p for p in c.store.list("pods", field_selector=f"spec.nodeName={node}") if p["metadata"]["uid"] in before]
    assert pods and all(p["status"]["containerStatuses"][0]["restartCount"] >= 1 for p in pods)
    c.cordon(node, False)
    c.annotate(node, lastAppliedDrain=f"uncordon-{new}")
    await c.until(lambda: c.ann(node)[ANN_CURRENT_CONFIG] == new)
    a = c.ann(node)
    assert (a[ANN_STATE], a[ANN_REASON]) == ("Done", "")
    st = await c.until(lambda: (s := c.store.get(MCP, "worker")["status"])["updatedMachineCount"] == 1 and s)
    assert st["readyMachineCount"] == 1 and st["configuration"]["name"] == new
    assert condition(c.store.get(MCP, "worker"), "Updated")["message"] == f"All nodes are updated with {new}"


async def test_unanswered_drain_degrades_after_scaled_hour(r2: Cluster) -> None:
    c, node = r2, "okd-worker-01"
    new = _target(c, "worker")
    c.annotate(node, desiredConfig=new)
    await c.until(lambda: c.ann(node)[ANN_STATE] == "Degraded", timeout=20)
    reason = ("failed to drain node: okd-worker-01 after 1 hour. "
              "Please see machine-config-controller logs for more information")
    assert c.ann(node)[ANN_REASON] == reason
    pool = await c.until(lambda: (p := c.store.get(MCP, "worker"))["status"]["degradedMachineCount"] == 1 and p)
    assert condition(pool, "Degraded")["status"] == "True"
    nd = condition(pool, "NodeDegraded")
    assert (nd["reason"], nd["message"]) == ("1 nodes are reporting degraded status on sync",
                                             f'Node okd-worker-01 is reporting: "{reason}"')
    # A late answer from the controller is picked up: the daemon retries and goes on.
    c.annotate(node, lastAppliedDrain=f"drain-{new}")
    await c.until(lambda: c.ann(node)[ANN_DESIRED_DRAIN] == f"uncordon-{new}")


async def test_rollback_while_waiting_for_drain_returns_to_done(r2: Cluster) -> None:
    c, node = r2, "okd-worker-01"
    old, new = c.ann(node)[ANN_CURRENT_CONFIG], _target(c, "worker")
    c.annotate(node, desiredConfig=new)
    await c.until(lambda: c.ann(node)[ANN_DESIRED_DRAIN] == f"drain-{new}")
    c.annotate(node, desiredConfig=old)
    await c.until(lambda: c.ann(node)[ANN_STATE] == "Done")
    assert c.ann(node)[ANN_DESIRED_DRAIN] == f"uncordon-{old}"


async def test_missing_rendered_config_degrades(r2: Cluster) -> None:
    c, node = r2, "okd-worker-01"
    c.annotate(node, desiredConfig="rendered-worker-00000000000000000000000000000000")
    await c.until(lambda: c.ann(node)[ANN_STATE] == "Degraded")
    assert c.ann(node)[ANN_REASON] == (
        'machineconfig.machineconfiguration.openshift.io "rendered-worker-00000000000000000000000000000000" not found')


async def test_faults_and_clear(r2: Cluster) -> None:
    c = r2
    new = _target(c, "worker")
    c.agents.inject_node_fault("okd-worker-01", "unreconcilable", "can't reconcile: kernel type change")
    c.annotate("okd-worker-01", desiredConfig=new)
    await c.until(lambda: c.ann("okd-worker-01")[ANN_STATE] == "Unreconcilable")
    assert c.ann("okd-worker-01")[ANN_REASON] == "can't reconcile: kernel type change"
    c.agents.clear_node_fault("okd-worker-01")
    await c.until(lambda: c.ann("okd-worker-01")[ANN_DESIRED_DRAIN] == f"drain-{new}")
    assert c.ann("okd-worker-01")[ANN_STATE] == "Working"


async def test_stuck_reboot_keeps_node_not_ready(r2: Cluster) -> None:
    c, node = r2, "okd-worker-01"
    new = _target(c, "worker")
    c.agents.inject_node_fault(node, "stuck_reboot")
    c.annotate(node, desiredConfig=new)
    await c.until(lambda: c.ann(node)[ANN_DESIRED_DRAIN] == f"drain-{new}")
    c.annotate(node, lastAppliedDrain=f"drain-{new}")
    await c.until(lambda: c.ann(node)[ANN_STATE] == "Rebooting")
    await c.until(lambda: condition(c.store.get("nodes", node), "Ready")["status"] == "False")
    await asyncio.sleep(c.clock.real(300))  # 10x the reboot time
    assert condition(c.store.get("nodes", node), "Ready")["status"] == "False"
    c.agents.clear_node_fault(node)
    await c.until(lambda: c.ann(node)[ANN_DESIRED_DRAIN] == f"uncordon-{new}")
