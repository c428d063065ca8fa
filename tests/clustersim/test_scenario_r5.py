"""Scenario r5-vxlan-port: the symptoms of procedures-spec §8.9 (r5), shown at simulator level.

Commands go through the simulated hosts (the same interpreter SSH uses) and through real kubectl
exec into an SDN pod; DaemonSet patches through the HTTP API.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import aiohttp
import pytest

from clustersim.openshift.kinds import CLUSTERNETWORK
from clustersim.sim import ClusterSim
from tests.clustersim.test_openshift_dc import kubectl, wait_for

SCALE = 0.05
STOCK = "registry.redhat.io/openshift3/ose-node:v3.11"
CUSTOM = "registry.example.com/default/ose-node:v3.11-custom"
NODES = ["ocp-master-01", "ocp-master-02", "ocp-master-03", "ocp-node-01", "ocp-node-02", "ocp-node-03", "ocp-node-04"]
RULE = ["-p", "udp", "-m", "state", "--state", "NEW", "-m", "udp", "--dport", "4889", "-j", "ACCEPT"]


async def run(sim: ClusterSim, node: str, *argv: str) -> tuple[str, str, int]:
    return await sim.components["hosts"].run(node, list(argv))  # type: ignore[attr-defined]


async def switch(sim: ClusterSim, node: str, port: int) -> None:
    out = await run(sim, node, "ovs-vsctl", "set", "interface", "vxlan0", f"options:dst_port={port}")
    assert out == ("", "", 0)


def sdn_pod(sim: ClusterSim, node: str) -> dict[str, Any]:
    pods = [p for p in sim.store.list("pods", "openshift-sdn", label_selector="app=sdn",
                                      field_selector=f"spec.nodeName={node}") if not p["metadata"].get("deletionTimestamp")]
    assert len(pods) == 1, pods
    return pods[0]


def restarts(pod: dict[str, Any]) -> int:
    return max([c.get("restartCount", 0) for c in pod.get("status", {}).get("containerStatuses") or []] + [0])


def ready_image(pod: dict[str, Any]) -> str | None:
    st = pod.get("status", {})
    ok = any(c["type"] == "Ready" and c["status"] == "True" for c in st.get("conditions") or [])
    return next((c["image"] for c in st.get("containerStatuses") or [] if c["name"] == "sdn"), None) if ok else None


async def patch_ds(sim: ClusterSim, ops: list[dict[str, Any]]) -> dict[str, Any]:
    async with aiohttp.ClientSession() as s, s.patch(
            f"{sim.url}/apis/apps/v1/namespaces/openshift-sdn/daemonsets/sdn", data=json.dumps(ops),
            headers={"Content-Type": "application/json-patch+json"}) as r:
        body = await r.json()
        assert r.status == 200, (r.status, body.get("message"), body.get("reason"))
        return body  # type: ignore[no-any-return]


async def started(sim: ClusterSim) -> Any:
    sdn = sim.components["sdn"]
    await wait_for(lambda: all(n.sdn == "running" for n in sdn.nodes.values()), what="SDN pods running")  # type: ignore[attr-defined]
    return sdn


async def roll_sdn(sim: ClusterSim, image: str) -> None:
    """OnDelete: delete each node's sdn pod, wait for its replacement Ready with ``image``."""
    for node in NODES:
        old = sdn_pod(sim, node)["metadata"]["name"]
        sim.store.delete("pods", old, "openshift-sdn")
        await wait_for(lambda node=node, old=old: any(
            p["metadata"]["name"] != old and p["spec"].get("nodeName") == node and ready_image(p) == image
            for p in sim.store.list("pods", "openshift-sdn", label_selector="app=sdn")), what=f"new sdn on {node}")


async def to_custom_image(sim: ClusterSim, prepull: bool = True) -> None:
    if prepull:
        results = await asyncio.gather(*(run(sim, n, "docker", "pull", CUSTOM) for n in NODES))
        assert all(code == 0 for _, _, code in results), results
    # Read the DaemonSet once its controller has caught up with its spec: the status sync after an
    # image revert (test_b) otherwise bumps the resourceVersion between this read and the patch,
    # and the patch's `test` op then fails with 422 (seen under CI load).
    def settled() -> dict[str, Any] | None:
        ds = sim.store.get("daemonsets.apps", "sdn", "openshift-sdn")
        gen = ds["metadata"].get("generation", 1)
        return ds if (ds.get("status") or {}).get("observedGeneration") == gen else None

    ds = await wait_for(settled, what="DaemonSet status caught up")
    await patch_ds(sim, [
        {"op": "test", "path": "/metadata/resourceVersion", "value": ds["metadata"]["resourceVersion"]},
        {"op": "remove", "path": "/metadata/annotations/image.openshift.io~1triggers"},
        {"op": "test", "path": "/spec/template/spec/containers/0/name", "value": "sdn"},
        {"op": "replace", "path": "/spec/template/spec/containers/0/image", "value": CUSTOM}])


@pytest.mark.timeout(180)
async def test_a_stock_image_rebuilds_a_switched_node_and_restarts_its_pods() -> None:
    async with ClusterSim("r5-vxlan-port", time_scale=SCALE) as sim:
        sdn = await started(sim)
        # Real kubectl exec into an SDN pod reaches the OVS model (quoted value, as OVS prints it).
        got = await kubectl(sim, "exec", "-n", "openshift-sdn", sdn_pod(sim, "ocp-node-02")["metadata"]["name"],
                            "-c", "sdn", "--", "ovs-vsctl", "get", "interface", "vxlan0", "options:dst_port")
        assert (got.returncode, got.stdout) == (0, '"4789"\n'), got.stderr
        node = "ocp-node-01"
        workload = [p for p in sim.store.list("pods", field_selector=f"spec.nodeName={node}")
                    if not p["spec"].get("hostNetwork")]
        assert workload  # netprobe and hello-openshift pods run there
        before = {p["metadata"]["uid"]: restarts(p) for p in workload}
        sdn_before = restarts(sdn_pod(sim, node))

        await switch(sim, node, 4889)
        rep = sdn.probe_report()
        assert f"{node}->ocp-node-02" in rep["failing_now"] and "ocp-node-02->ocp-node-03" not in rep["failing_now"]
        await wait_for(lambda: sdn.nodes[node].rebuilds == 1, timeout=60, what="rebuild")
        assert sdn.get_port(node) == 4789  # reverted to the ClusterNetwork's port
        assert [h[1:] for h in sdn.nodes[node].history] == [(4789, "initial"), (4889, "ovs-vsctl set"),
                                                          (4789, "full SDN setup")]
        assert restarts(sdn_pod(sim, node)) == sdn_before + 1
        for p in sim.store.list("pods", field_selector=f"spec.nodeName={node}"):
            if p["metadata"]["uid"] in before:
                assert restarts(p) == before[p["metadata"]["uid"]] + 1, p["metadata"]["name"]
        messages = [e["message"] for e in sim.store.list("events", "openshift-sdn")]
        assert any(m.startswith("SDN healthcheck detected unhealthy OVS server, restarting") for m in messages)
        assert "full SDN setup required" in messages
        rep = await wait_for(lambda: (r := sdn.probe_report()) and not r["failing_now"] and r, what="mesh healthy")
        (outage,) = rep["pairs"][f"ocp-node-02->{node}"]
        assert outage["end"] - outage["start"] >= 5.0  # until the health check, plus the rebuild
        assert rep["rebuilds"] == {n: int(n == node) for n in NODES}
        # Only that node's pairs failed.
        assert all(node in pair for pair in rep["pairs"])


@pytest.mark.timeout(240)
async def test_custom_image_and_rule_everywhere_leave_only_a_short_outage_then_masters_and_restore() -> None:
    async with ClusterSim("r5-vxlan-port", time_scale=SCALE) as sim:
        sdn = await started(sim)
        await to_custom_image(sim)
        await roll_sdn(sim, CUSTOM)
        assert sdn.probe_report()["total_outage_seconds"] == 0.0  # pre-pulled: no gap
        for n in NODES:
            assert await run(sim, n, "iptables", "-A", "OS_FIREWALL_ALLOW", *RULE) == ("", "", 0)
        for n in NODES:
            await switch(sim, n, 4889)
        rep = sdn.probe_report()
        assert rep["failing_now"] == []
        # Only while the switch loop runs (in simulated time; generous for a loaded machine).
        assert 0.0 < rep["total_outage_seconds"] < 10.0, rep["total_outage_seconds"]
        await asyncio.sleep(SCALE * 65)  # two health-check periods
        rep = sdn.probe_report()
        assert rep["failing_now"] == [] and set(rep["rebuilds"].values()) == {0}
        assert {n: sdn.get_port(n) for n in NODES} == dict.fromkeys(NODES, 4889)

        # Masters: edit every master-config first, delete the ClusterNetwork, restart the
        # leader last; the ClusterNetwork comes back with 4889.
        hosts, masters = sim.components["hosts"], sim.components["masters"]
        path = "/etc/origin/master/master-config.yaml"
        for m in ("ocp-master-01", "ocp-master-02", "ocp-master-03"):
            h = hosts.host(m)  # type: ignore[attr-defined]
            h.files[path] = h.files[path].replace("  networkPluginName:", "  vxlanPort: 4889\n  networkPluginName:")
        sim.store.delete(CLUSTERNETWORK, "default")
        for m in ("ocp-master-01", "ocp-master-03", "ocp-master-02"):
            for what in ("api", "controllers"):
                assert (await run(sim, m, "/usr/local/bin/master-restart", what))[2] == 0
                await asyncio.wait_for(masters.restart(m, what), 30)  # type: ignore[attr-defined]
        cn = sim.store.get(CLUSTERNETWORK, "default")
        assert cn["vxlanPort"] == 4889
        assert masters.availability()["zero_masters_up"] == []  # type: ignore[attr-defined]

        # Restore the stock image and the triggers: AlreadySetUp(4889) holds, no rebuild.
        ds = sim.store.get("daemonsets.apps", "sdn", "openshift-sdn")
        trig = ('[{"from":{"kind":"ImageStreamTag","name":"node:v3.11"},'
                '"fieldPath":"spec.template.spec.containers[?(@.name==\\"sdn\\")].image"}]')
        await patch_ds(sim, [
            {"op": "test", "path": "/metadata/resourceVersion", "value": ds["metadata"]["resourceVersion"]},
            {"op": "replace", "path": "/spec/template/spec/containers/0/image", "value": STOCK},
            {"op": "add", "path": "/metadata/annotations/image.openshift.io~1triggers", "value": trig}])
        await roll_sdn(sim, STOCK)
        await asyncio.sleep(SCALE * 35)
        rep = sdn.probe_report()
        assert rep["failing_now"] == [] and set(rep["rebuilds"].values()) == {0}
        assert {n["image"] for n in rep["nodes"].values()} == {"stock"}
        assert {n["port_at_start"] for n in rep["nodes"].values()} == {4889}


@pytest.mark.timeout(120)
async def test_b_kept_triggers_annotation_reverts_the_custom_image() -> None:
    async with ClusterSim("r5-vxlan-port", time_scale=SCALE) as sim:
        await started(sim)
        await patch_ds(sim, [{"op": "replace", "path": "/spec/template/spec/containers/0/image", "value": CUSTOM}])
        assert sim.store.get("daemonsets.apps", "sdn", "openshift-sdn")["spec"]["template"]["spec"]["containers"][0]["image"] == CUSTOM
        await wait_for(lambda: sim.store.get("daemonsets.apps", "sdn", "openshift-sdn")["spec"]["template"]["spec"]
                       ["containers"][0]["image"] == STOCK, what="image put back")
        # Without the annotation the custom image stays.
        await to_custom_image(sim, prepull=False)
        await asyncio.sleep(SCALE * 6)
        assert sim.store.get("daemonsets.apps", "sdn", "openshift-sdn")["spec"]["template"]["spec"]["containers"][0]["image"] == CUSTOM


@pytest.mark.timeout(180)
async def test_c_node_without_the_new_rule_loses_inbound_traffic() -> None:
    async with ClusterSim("r5-vxlan-port", time_scale=SCALE) as sim:
        sdn = await started(sim)
        await to_custom_image(sim)
        await roll_sdn(sim, CUSTOM)
        forgotten = "ocp-node-03"
        for n in NODES:
            if n != forgotten:
                assert (await run(sim, n, "iptables", "-A", "OS_FIREWALL_ALLOW", *RULE))[2] == 0
        # The seed's way on one node: find the SDN container and docker exec ovs-vsctl in it.
        ids, _, code = await run(sim, "ocp-node-01", "docker", "ps", "--filter", "name=k8s_sdn_sdn", "-q")
        assert code == 0 and len(ids.split()) == 1
        assert await run(sim, "ocp-node-01", "docker", "exec", ids.split()[0], "ovs-vsctl", "set", "interface",
                         "vxlan0", "options:dst_port=4889") == ("", "", 0)
        for n in NODES:
            await switch(sim, n, 4889)
        await asyncio.sleep(SCALE * 10)
        rep = sdn.probe_report()
        assert rep["failing_now"] == sorted(f"{n}->{forgotten}" for n in NODES if n != forgotten)
        # Adding the rule late (as the seed's warning says) ends the outage at the next probe.
        assert (await run(sim, forgotten, "iptables", "-A", "OS_FIREWALL_ALLOW", *RULE))[2] == 0
        await wait_for(lambda: not sdn.probe_report()["failing_now"], what="inbound back")


@pytest.mark.timeout(180)
async def test_d_image_not_prepulled_keeps_the_node_down_while_pulling_and_f_underlay_block() -> None:
    async with ClusterSim("r5-vxlan-port", time_scale=SCALE) as sim:
        sdn = await started(sim)
        await to_custom_image(sim, prepull=False)
        node = "ocp-node-04"
        sim.store.delete("pods", sdn_pod(sim, node)["metadata"]["name"], "openshift-sdn")
        await wait_for(lambda: sdn.nodes[node].sdn == "pulling", what="pulling")
        assert f"ocp-node-01->{node}" in sdn.probe_report()["failing_now"]
        await wait_for(lambda: sdn.nodes[node].sdn == "running", timeout=60, what="pulled and started")
        assert CUSTOM in sim.components["hosts"].host(node).images  # type: ignore[attr-defined]
        rep = sdn.probe_report()
        assert rep["failing_now"] == []
        (outage,) = rep["pairs"][f"ocp-node-01->{node}"]
        assert outage["end"] - outage["start"] >= 19.0  # pull_seconds

        # (f) NSX starts dropping VXLAN to 4789: every pair fails.
        async with aiohttp.ClientSession() as s, s.post(f"{sim.url}/_sim/network/fault",
                                                          json={"underlay_blocks": {"port": 4789}}) as r:
            assert r.status == 200
        assert len(sdn.probe_report()["failing_now"]) == len(NODES) * (len(NODES) - 1)
        # The admin document over HTTP: per-pair intervals, totals, per-node history and rebuilds.
        async with aiohttp.ClientSession() as s, s.get(f"{sim.url}/_sim/network/probe") as r:
            doc = await r.json()
        assert r.status == 200 and doc["cluster_network_port"] == 4789
        assert doc["pairs"][f"ocp-node-01->{node}"][0]["end"] is not None
        assert doc["pairs"][f"ocp-node-01->{node}"][-1]["end"] is None  # the underlay block, ongoing
        assert doc["total_outage_seconds"] >= 19.0 and doc["first_failure"] is not None
        assert doc["nodes"][node]["image"] == "custom" and doc["nodes"][node]["port_history"][0]["port"] == 4789
        assert doc["rebuilds"] == dict.fromkeys(NODES, 0)
        assert doc["underlay_blocks"][0]["port"] == 4789


@pytest.mark.timeout(120)
async def test_e_next_leader_on_the_old_master_config_recreates_clusternetwork_with_4789() -> None:
    async with ClusterSim("r5-vxlan-port", time_scale=SCALE) as sim:
        hosts, masters = sim.components["hosts"], sim.components["masters"]
        path = "/etc/origin/master/master-config.yaml"
        # Only ocp-master-01 edited (and restarted) so far; ocp-master-02 leads, 03 is next in line.
        h = hosts.host("ocp-master-01")  # type: ignore[attr-defined]
        h.files[path] = h.files[path].replace("  networkPluginName:", "  vxlanPort: 4889\n  networkPluginName:")
        await asyncio.wait_for(masters.restart("ocp-master-01", "controllers"), 30)  # type: ignore[attr-defined]
        assert masters.leader == "ocp-master-02"  # type: ignore[attr-defined]
        sim.store.delete(CLUSTERNETWORK, "default")
        assert (await run(sim, "ocp-master-02", "master-restart", "controllers"))[2] == 0
        cn = await wait_for(lambda: sim.store.try_get(CLUSTERNETWORK, "default"), what="re-created")
        assert masters.leader == "ocp-master-03" and cn["vxlanPort"] == 4789  # type: ignore[attr-defined]
        logs, _, _ = await run(sim, "ocp-master-03", "master-logs", "controllers", "controllers", "--tail=1")
        assert logs.startswith("I") and 'Created ClusterNetwork default (network: "10.128.0.0/14", hostSubnetBits: 9' in logs
