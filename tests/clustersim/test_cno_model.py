"""The cluster-network-operator model: rendering rules (pure), rendering per pool, the switch
(SDN pods replaced by ovnkube-node, multus rolled), refusal without the migration field, the
wait for settled pools and the early-switch fault, and the switch back."""

from __future__ import annotations

import asyncio
from typing import Any

from clustersim.cno.model import ovn_machineconfig, rendered_name, wanted_sources
from clustersim.sim import ClusterSim

MCP = "machineconfigpools.machineconfiguration.openshift.io"
MC = "machineconfigs.machineconfiguration.openshift.io"
NET_OP = "networks.operator.openshift.io"
NET_CFG = "networks.config.openshift.io"
OLD_MASTER = "rendered-master-8e1d0f2a7c3b4d5e6f708192a3b4c5d6"


def test_rendering_rules() -> None:
    assert ovn_machineconfig("master") == "99-master-ovn"
    assert ovn_machineconfig("infra") == "99-worker-ovn"
    assert wanted_sources("worker", ["00-worker", "01-x"], True) == ["00-worker", "01-x", "99-worker-ovn"]
    assert wanted_sources("worker", ["00-worker", "99-worker-ovn", "01-x"], False) == ["00-worker", "01-x"]
    assert rendered_name("worker", ["b", "a"]) == rendered_name("worker", ["a", "b"])
    assert rendered_name("worker", ["a"]).startswith("rendered-worker-") and len(rendered_name("worker", ["a"])) == len("rendered-worker-") + 32


async def _until(pred: Any, timeout: float = 60.0) -> None:
    loop = asyncio.get_running_loop()
    end = loop.time() + timeout
    while not pred():
        if loop.time() > end:
            raise AssertionError("condition not reached in time")
        await asyncio.sleep(0.05)


def _set_migration(sim: ClusterSim, value: str | None) -> None:
    def fn(o: dict[str, Any]) -> None:
        if value is None:
            o["spec"].pop("migration", None)
        else:
            o["spec"]["migration"] = {"networkType": value}
    sim.store.mutate(NET_OP, "cluster", None, fn)


def _set_type(sim: ClusterSim, value: str) -> None:
    sim.store.mutate(NET_CFG, "cluster", None, lambda o: o["spec"].__setitem__("networkType", value))


def _settled(sim: ClusterSim) -> bool:
    for pool in sim.store.list(MCP):
        conds = {c["type"]: c["status"] for c in pool["status"]["conditions"]}
        if conds.get("Updated") != "True" or pool["status"]["configuration"]["name"] != pool["spec"]["configuration"]["name"]:
            return False
    return True


async def test_migration_field_renders_ovn_configs_per_pool() -> None:
    async with ClusterSim("r1-sdn-to-ovn", time_scale=0.02, component_sections={"mcc": {"running": False}}) as sim:
        _set_migration(sim, "OVNKubernetes")
        await _until(lambda: sim.store.get(MCP, "master")["spec"]["configuration"]["name"] != OLD_MASTER)
        await _until(lambda: sim.store.get(MCP, "worker")["spec"]["configuration"]["name"] != "rendered-worker-412d8b3f0e6a9c1d7b5e2f4a8c0d6e3b")
        for pool in ("master", "infra", "worker"):
            name = sim.store.get(MCP, pool)["spec"]["configuration"]["name"]
            mc = sim.store.get(MC, name)
            paths = [f["path"] for f in mc["spec"]["config"]["storage"]["files"]]
            assert "/etc/ovn-kubernetes/ovnkube-node.conf" in paths
            assert mc["metadata"]["annotations"]["clustersim.lockkeeper.io/carries-ovn"] == "true"
            assert mc["metadata"]["ownerReferences"][0]["name"] == pool
        assert sim.store.get(MC, "99-master-ovn")["metadata"]["labels"]["machineconfiguration.openshift.io/role"] == "master"
        await _until(lambda: sim.store.get(NET_CFG, "cluster")["status"].get("migration") == {"networkType": "OVNKubernetes"})
        # Going back renders the old configs again (same sources, same name).
        _set_migration(sim, None)
        await _until(lambda: sim.store.get(MCP, "master")["spec"]["configuration"]["name"] == OLD_MASTER)
        await _until(lambda: "migration" not in sim.store.get(NET_CFG, "cluster")["status"])


async def test_switch_without_migration_field_is_refused() -> None:
    async with ClusterSim("r1-sdn-to-ovn", time_scale=0.02) as sim:
        _set_type(sim, "OVNKubernetes")
        def degraded() -> bool:
            conds = {c["type"]: c for c in (sim.store.get(NET_OP, "cluster").get("status") or {}).get("conditions") or []}
            return conds.get("Degraded", {}).get("status") == "True"
        await _until(degraded)
        assert sim.components["cno"].switches == []
        assert sim.store.get(NET_CFG, "cluster")["status"]["networkType"] == "OpenShiftSDN"


async def test_switch_waits_for_pools_then_replaces_sdn_with_ovn() -> None:
    async with ClusterSim("r1-sdn-to-ovn", time_scale=0.02) as sim:
        _set_migration(sim, "OVNKubernetes")
        await _until(lambda: sim.store.get(MCP, "master")["spec"]["configuration"]["name"] != OLD_MASTER)
        _set_type(sim, "OVNKubernetes")  # too early: the model holds it until every pool is Updated
        await asyncio.sleep(0.2)
        cno = sim.components["cno"]
        assert cno.switches == [] or cno.switches[0]["pools_settled"]
        await _until(lambda: bool(cno.switches))
        assert cno.switches[0]["pools_settled"] is True and cno.switches[0]["to"] == "OVNKubernetes"
        assert sim.store.list("pods", "openshift-sdn") == []
        assert sim.store.try_get("daemonsets.apps", "sdn", "openshift-sdn") is None
        await _until(lambda: len(sim.store.list("pods", "openshift-ovn-kubernetes")) == 8)
        def ovn_ready() -> bool:
            pods = sim.store.list("pods", "openshift-ovn-kubernetes")
            return len(pods) == 8 and all(p["status"].get("containerStatuses", [{}])[0].get("ready") for p in pods)
        await _until(ovn_ready)
        multus = sim.store.get("daemonsets.apps", "multus", "openshift-multus")
        assert multus["spec"]["template"]["metadata"]["annotations"]["clustersim.lockkeeper.io/network-type"] == "OVNKubernetes"
        await _until(lambda: sim.store.get("daemonsets.apps", "multus", "openshift-multus")["status"].get("updatedNumberScheduled") == 8)
        assert sim.store.get(NET_CFG, "cluster")["status"]["networkType"] == "OVNKubernetes"
        assert sim.store.get(NET_OP, "cluster")["spec"]["defaultNetwork"]["type"] == "OVNKubernetes"


async def test_switch_back_restores_sdn() -> None:
    async with ClusterSim("r1-sdn-to-ovn", time_scale=0.02) as sim:
        _set_migration(sim, "OVNKubernetes")
        await _until(lambda: sim.store.get(MCP, "master")["spec"]["configuration"]["name"] != OLD_MASTER)
        await _until(lambda: _settled(sim))
        _set_type(sim, "OVNKubernetes")
        await _until(lambda: bool(sim.components["cno"].switches))
        _set_migration(sim, "OpenShiftSDN")
        _set_type(sim, "OpenShiftSDN")
        await _until(lambda: len(sim.components["cno"].switches) == 2)
        await _until(lambda: len(sim.store.list("pods", "openshift-sdn")) == 8)
        assert sim.store.list("pods", "openshift-ovn-kubernetes") == []
        assert sim.store.get(NET_CFG, "cluster")["status"]["networkType"] == "OpenShiftSDN"
        await _until(lambda: sim.store.get(MCP, "master")["spec"]["configuration"]["name"] == OLD_MASTER)
        assert sim.agents is not None and not sim.agents.net.enabled
