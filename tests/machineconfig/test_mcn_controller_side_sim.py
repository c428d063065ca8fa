"""``report_machine_config_node`` against clustersim over real HTTP (issue 41): on OpenShift 4.21
(r1-ocp421) it writes the controller's side of a node's MachineConfigNode through the status
subresource, conditional on the resourceVersion it read (a write racing the daemon's is retried
from a fresh read), and writes nothing the second time; where MachineConfigNodes are not served
(r2) it writes nothing and raises nothing."""

from __future__ import annotations

import asyncio

import pytest
from temporalio.testing import ActivityEnvironment

from activities.kube.gateway import KubeGateway
from activities.machineconfig.activities import MachineConfigActivities
from activities.machineconfig.models import ReportMachineConfigNodeInput
from clustersim import ClusterSim

pytestmark = pytest.mark.timeout(120)

MCN = "machineconfignodes.machineconfiguration.openshift.io"


def conditions(sim: ClusterSim, node: str) -> dict[str, tuple[str, str]]:
    obj = sim.store.get(MCN, node)
    return {c["type"]: (c["status"], c["reason"]) for c in obj["status"]["conditions"]}


async def test_writes_the_controller_side_once_and_retries_a_conflict() -> None:
    async with ClusterSim("r1-ocp421", time_scale=0.01, start_agents=False) as sim:
        gw = KubeGateway.from_kubeconfig(sim.kubeconfig_path)
        try:
            acts = MachineConfigActivities(lambda: gw)
            env = ActivityEnvironment()

            def report(step: str) -> bool:
                return env.run(acts.report_machine_config_node, ReportMachineConfigNodeInput(
                    node="qsu-worker-01", step=step, drain="drain-rendered-x"))  # type: ignore[arg-type]

            daemon_before = conditions(sim, "qsu-worker-01").get("UpdatePrepared")
            assert await asyncio.to_thread(report, "cordoned") is True
            assert conditions(sim, "qsu-worker-01")["Cordoned"] == ("True", "UpdateExecutedCordoned")
            assert await asyncio.to_thread(report, "cordoned") is False  # already says so: no write
            writes = sim.requests.count(verb="patch", resource="machineconfignodes")

            # The daemon writes between our read and our patch: the first patch gets 409 and is redone.
            real_list = gw.list_machine_config_nodes
            raced = []

            def racing_list(name=None):  # type: ignore[no-untyped-def]
                got = real_list(name)
                if not raced:
                    raced.append(True)
                    sim.store.mutate(MCN, "qsu-worker-01", None, lambda o: o["metadata"].setdefault("labels", {}).__setitem__("x", "1"))
                return got

            gw.list_machine_config_nodes = racing_list  # type: ignore[method-assign]
            assert await asyncio.to_thread(report, "drained") is True
            assert sim.requests.count(verb="patch", resource="machineconfignodes") == writes + 2
            c = conditions(sim, "qsu-worker-01")
            assert c["Drained"] == ("True", "UpdateExecutedDrained") and c["Cordoned"] == ("True", "UpdateExecutedCordoned")
            assert c.get("UpdatePrepared") == daemon_before
        finally:
            gw.close()


async def test_not_served_writes_nothing() -> None:
    async with ClusterSim("r2-pdb-blocked", time_scale=0.01, start_agents=False) as sim:
        gw = KubeGateway.from_kubeconfig(sim.kubeconfig_path)
        try:
            acts = MachineConfigActivities(lambda: gw)
            ok = await asyncio.to_thread(ActivityEnvironment().run, acts.report_machine_config_node,
                                         ReportMachineConfigNodeInput(node="okd-worker-01", step="uncordoned"))
            assert ok is False
            assert sim.requests.count(verb="patch") == 0
        finally:
            gw.close()
