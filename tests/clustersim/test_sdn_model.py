"""SDN model pieces: ovs-vsctl emulation, the probe mesh bookkeeping, and the component's reaction
to a missing ClusterNetwork, host reboots and OVS pod loss (r5-vxlan-port)."""

from __future__ import annotations

import asyncio

import pytest

from clustersim.openshift.kinds import CLUSTERNETWORK
from clustersim.sdn.ovs import DB_DOWN, ovs_vsctl
from clustersim.sdn.probe import Endpoint, ProbeMesh
from clustersim.sim import ClusterSim
from tests.clustersim.test_openshift_dc import wait_for
from tests.clustersim.test_scenario_r5 import NODES, SCALE, sdn_pod, started


def _ovs(*args: str, port: list[int] | None = None, available: bool = True) -> tuple[str, str, int]:
    state = port if port is not None else [4789]
    return ovs_vsctl(["ovs-vsctl", *args], get_port=lambda: state[0],
                     set_port=lambda p: state.__setitem__(0, p), available=available)


def test_ovs_vsctl_get_set_and_errors() -> None:
    assert _ovs("get", "interface", "vxlan0", "options:dst_port") == ('"4789"\n', "", 0)
    assert _ovs("--timeout=5", "get", "Interface", "vxlan0", "options") == (
        '{dst_port="4789", key=flow, remote_ip=flow}\n', "", 0)
    port = [4789]
    assert _ovs("set", "interface", "vxlan0", "options:dst_port=4889", port=port) == ("", "", 0)
    assert port == [4889]
    assert _ovs("set", "interface", "vxlan0", 'options:dst_port="4990"', port=port) == ("", "", 0)
    assert port == [4990]
    assert _ovs("get", "interface", "tun0", "options:dst_port") == (
        "", 'ovs-vsctl: no row "tun0" in table Interface\n', 1)
    assert _ovs("get", "interface", "vxlan0", "mtu")[2] == 1
    assert _ovs("frobnicate")[1] == "ovs-vsctl: unknown command 'frobnicate'; use --help for help\n"
    assert _ovs("get", "interface", "vxlan0", "options:dst_port", available=False) == ("", DB_DOWN, 1)
    assert _ovs("list-br") == ("br0\n", "", 0)


def test_probe_mesh_records_outages_per_pair_and_only_touches_changed_pairs() -> None:
    mesh = ProbeMesh()
    for n in ("a", "b", "c"):
        mesh.nodes[n] = Endpoint()
    mesh.update_all(0.0)
    assert mesh.failing == {} and mesh.evaluations == 6
    mesh.nodes["a"].port = 4889  # a switched, b and c not yet
    mesh.update_node("a", 1.0)
    assert mesh.evaluations == 10  # 2(N-1) pairs, not N²
    assert sorted(mesh.failing) == [("a", "b"), ("a", "c"), ("b", "a"), ("c", "a")]
    mesh.nodes["b"].port = mesh.nodes["c"].port = 4889
    mesh.nodes["c"].allows = False  # c's firewall lacks the new rule
    mesh.update_node("b", 1.5)
    mesh.update_node("c", 1.5)
    assert sorted(mesh.failing) == [("a", "c"), ("b", "c")]
    mesh.nodes["c"].allows = True
    mesh.update_node("c", 4.0)
    rep = mesh.report(5.0)
    assert rep["failing_now"] == [] and rep["total_outage_seconds"] == 3.0
    assert rep["pairs"]["a->c"] == [{"start": 1.0, "end": 4.0}]
    assert rep["pairs"]["b->a"] == [{"start": 1.0, "end": 1.5}]
    # a->b, b->a, c->a: 0.5 each; a->c: 3.0; b->c: 2.5
    assert rep["pair_outage_seconds"] == 7.0
    assert rep["first_failure"] == 1.0 and rep["last_failure"] == 4.0


@pytest.mark.timeout(180)
async def test_sdn_crashloops_without_clusternetwork_until_the_leader_recreates_it() -> None:
    async with ClusterSim("r5-vxlan-port", time_scale=SCALE) as sim:
        sdn = await started(sim)
        masters = sim.components["masters"]
        sim.store.delete(CLUSTERNETWORK, "default")
        node = "ocp-node-02"
        sim.store.delete("pods", sdn_pod(sim, node)["metadata"]["name"], "openshift-sdn")
        await wait_for(lambda: sdn.nodes[node].sdn == "crashloop", what="crashloop")
        pod = sdn_pod(sim, node)
        (cs,) = pod["status"]["containerStatuses"]
        assert cs["state"]["waiting"]["reason"] == "CrashLoopBackOff" and not cs["ready"]
        # OVS keeps forwarding with the flows it has: no outage from the crashloop itself.
        assert sdn.probe_report()["failing_now"] == []
        await asyncio.wait_for(masters.restart("ocp-master-02", "controllers"), 30)  # type: ignore[attr-defined]
        assert sim.store.get(CLUSTERNETWORK, "default")["vxlanPort"] == 4789
        await wait_for(lambda: sdn.nodes[node].sdn == "running", what="recovered")
        (cs,) = sdn_pod(sim, node)["status"]["containerStatuses"]
        assert cs["ready"] and cs["restartCount"] == 1 and sdn.nodes[node].rebuilds == 0


@pytest.mark.timeout(180)
async def test_reboot_and_ovs_pod_loss_take_the_node_out_of_the_mesh() -> None:
    async with ClusterSim("r5-vxlan-port", time_scale=SCALE) as sim:
        sdn = await started(sim)
        hosts = sim.components["hosts"]
        node = "ocp-node-03"
        hosts.request_reboot(hosts.host(node))  # type: ignore[attr-defined]
        await wait_for(lambda: f"ocp-node-01->{node}" in sdn.probe_report()["failing_now"], what="down in reboot")
        await wait_for(lambda: not sdn.probe_report()["failing_now"], timeout=60, what="back after reboot")
        ovs = [p for p in sim.store.list("pods", "openshift-sdn", label_selector="app=ovs",
                                         field_selector="spec.nodeName=ocp-node-04")]
        sim.store.delete("pods", ovs[0]["metadata"]["name"], "openshift-sdn")
        await wait_for(lambda: "ocp-node-04->ocp-node-01" in sdn.probe_report()["failing_now"], what="ovs gone")
        out = await hosts.run("ocp-node-04", ["ovs-vsctl", "get", "interface", "vxlan0", "options:dst_port"])  # type: ignore[attr-defined]
        assert out[2] == 1 and "database connection failed" in out[1]
        await wait_for(lambda: not sdn.probe_report()["failing_now"], what="ovs back")
        rep = sdn.probe_report()
        assert set(rep["rebuilds"].values()) == {0}
        assert {p.split("->")[0] for p in rep["pairs"]} == set(NODES)
