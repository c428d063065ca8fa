"""Scenario r1-sdn-to-ovn: a healthy 4.14 cluster on OpenShiftSDN, and R1's breakage with the
early-switch fault (ovnkube-node crash-looping on nodes whose currentConfig lacks the OVN files)."""

from __future__ import annotations

import asyncio
from typing import Any

from clustersim.scenario import load_scenario
from clustersim.sim import ClusterSim

MCP = "machineconfigpools.machineconfiguration.openshift.io"
NET_OP = "networks.operator.openshift.io"
NET_CFG = "networks.config.openshift.io"
MCO = "machineconfiguration.openshift.io/"


async def _until(pred: Any, timeout: float = 60.0) -> None:
    loop = asyncio.get_running_loop()
    end = loop.time() + timeout
    while not pred():
        if loop.time() > end:
            raise AssertionError("condition not reached in time")
        await asyncio.sleep(0.05)


def test_scenario_loads_with_controller_and_operator_sections() -> None:
    sc = load_scenario("r1-sdn-to-ovn")
    assert sc.network is not None and sc.network.spec_type == "OpenShiftSDN" and sc.network.switched_at is None
    assert sc.component_sections().keys() >= {"cno", "mcc", "hosts"}
    assert {p.name for p in sc.pools} == {"master", "infra", "worker"}


async def test_healthy_at_start() -> None:
    async with ClusterSim("r1-sdn-to-ovn", time_scale=0.02) as sim:
        for pool in sim.store.list(MCP):
            conds = {c["type"]: c["status"] for c in pool["status"]["conditions"]}
            assert (conds["Updated"], conds["Updating"], conds["Degraded"]) == ("True", "False", "False")
            assert pool["spec"]["paused"] is False
        assert sim.store.get(NET_CFG, "cluster")["status"]["networkType"] == "OpenShiftSDN"
        op = sim.store.get(NET_OP, "cluster")
        assert op["spec"]["defaultNetwork"]["openshiftSDNConfig"]["mode"] == "NetworkPolicy"
        assert "migration" not in op["spec"]
        assert len(sim.store.list("pods", "openshift-sdn")) == 8
        assert len(sim.store.list("pods", "openshift-multus")) == 8
        assert sim.components["mcc"].running
        await asyncio.sleep(0.3)
        assert all(p["status"]["conditions"][1]["status"] == "True" for p in sim.store.list("pods", "shop"))


async def test_early_switch_fault_reproduces_r1() -> None:
    async with ClusterSim("r1-sdn-to-ovn", time_scale=0.05, component_sections={"cno": {"early_switch": True}}) as sim:
        sim.store.mutate(NET_OP, "cluster", None, lambda o: o["spec"].__setitem__("migration", {"networkType": "OVNKubernetes"}))
        await _until(lambda: len(sim.components["mcc"].handed_out) >= 3)
        sim.store.mutate(NET_CFG, "cluster", None, lambda o: o["spec"].__setitem__("networkType", "OVNKubernetes"))
        cno = sim.components["cno"]
        await _until(lambda: bool(cno.switches))
        assert cno.switches[0]["pools_settled"] is False
        assert sim.agents is not None

        def crashlooping() -> set[str]:
            out = set()
            for p in sim.store.list("pods", "openshift-ovn-kubernetes"):
                for c in p["status"].get("containerStatuses") or []:
                    if (c.get("state") or {}).get("waiting", {}).get("reason") == "CrashLoopBackOff":
                        out.add(p["spec"]["nodeName"])
            return out

        await _until(lambda: bool(crashlooping()))
        without = {n["metadata"]["name"] for n in sim.store.list("nodes")
                   if n["metadata"]["annotations"][MCO + "currentConfig"] not in sim.agents.net.ovn_configs}
        assert without and crashlooping() <= without
        # Pods created on SDN keep pod IPs nothing routes any more: not Ready.
        await _until(lambda: any(p["status"]["conditions"][1]["status"] == "False" for p in sim.store.list("pods", "shop")))


async def test_admin_routes() -> None:
    import aiohttp

    async with ClusterSim("r1-sdn-to-ovn", time_scale=0.02) as sim, aiohttp.ClientSession() as http:
        async with http.post(f"{sim.url}/_sim/cno/faults", json={"early_switch": True}) as r:
            assert (await r.json())["early_switch"] is True
        async with http.post(f"{sim.url}/_sim/mcc/kill") as r:
            assert (await r.json())["running"] is False
        async with http.get(f"{sim.url}/_sim/mcc") as r:
            assert (await r.json())["running"] is False
        async with http.post(f"{sim.url}/_sim/mcc/revive") as r:
            assert (await r.json())["running"] is True
