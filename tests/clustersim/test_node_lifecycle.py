"""Node DELETE with pod GC, re-registration with a new uid, DaemonSets with OnDelete and
controller-revision-hash, with the agents running."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

from clustersim.agents.nodelifecycle import LEASE, LEASE_NAMESPACE
from clustersim.scenario import DaemonSetSpec, Scenario, TolerationSpec, load_scenario
from clustersim.sim import ClusterSim
from tests.support.smallcluster import kubectl_binary

KUBECTL = kubectl_binary()  # next to the interpreter, else on PATH
NODE = "okd-worker-01"


async def until(pred: Callable[[], Any], timeout: float = 30) -> Any:
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        got = pred()
        if got:
            return got
        assert asyncio.get_running_loop().time() < deadline, "condition not reached"
        await asyncio.sleep(0.02)


def scenario(**options: Any) -> Scenario:
    """r2-pdb-blocked plus an OnDelete DaemonSet (as the 3.11 sdn/ovs DaemonSets are)."""
    sc = load_scenario("r2-pdb-blocked")
    sc.daemonsets.append(DaemonSetSpec(name="sdn", namespace="openshift-sdn", labels={"app": "sdn"},
                                       image="registry.example.com/node:v3.11", update_strategy="OnDelete",
                                       tolerations=[TolerationSpec(operator="Exists")]))
    for k, v in options.items():
        setattr(sc.options, k, v)
    return sc


def pods_on(sim: ClusterSim, node: str) -> list[dict[str, Any]]:
    return sim.store.list("pods", field_selector=f"spec.nodeName={node}")


async def kubectl(sim: ClusterSim, *args: str) -> str:
    proc = await asyncio.create_subprocess_exec(KUBECTL, "--kubeconfig", str(sim.kubeconfig_path), *args,
                                                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode == 0, err.decode()
    return out.decode()


async def test_node_delete_gc_and_reregistration(tmp_path: Path) -> None:
    # pod_gc_seconds 200 simulated = 2 real seconds: long enough to see the pods linger.
    async with ClusterSim(scenario(pod_gc_seconds=200), time_scale=0.01,
                          kubeconfig_path=tmp_path / "kubeconfig") as sim:
        await until(lambda: len([p for p in pods_on(sim, NODE) if p["metadata"]["labels"].get("app") == "sdn"]) == 1)
        old = sim.store.get("nodes", NODE)
        old_uid = old["metadata"]["uid"]
        assert sim.store.get(LEASE, NODE, LEASE_NAMESPACE)["metadata"]["ownerReferences"][0]["uid"] == old_uid
        before = {p["metadata"]["name"] for p in pods_on(sim, NODE)}
        assert len(before) == 4  # dns, mcd, sdn, router

        assert f'node "{NODE}" deleted' in await kubectl(sim, "delete", "node", NODE)
        assert sim.store.try_get("nodes", NODE) is None
        await until(lambda: sim.store.try_get(LEASE, NODE, LEASE_NAMESPACE) is None)
        await asyncio.sleep(0.2)
        # Orphans stay until the pod GC runs; the DaemonSet controller leaves them alone.
        assert {p["metadata"]["name"] for p in pods_on(sim, NODE)} == before
        await until(lambda: not pods_on(sim, NODE))
        sdn = sim.store.get("daemonsets.apps", "sdn", "openshift-sdn")["status"]
        assert (sdn["desiredNumberScheduled"], sdn["currentNumberScheduled"], sdn["numberMisscheduled"]) == (3, 3, 0)
        # The router's ReplicaSet replaced its pod (nowhere to go: Pending).
        await until(lambda: len(sim.store.list("pods", "openshift-ingress")) == 2)

        node, created = sim.store.register_node(old)
        assert created and node["metadata"]["uid"] != old_uid
        assert node["metadata"]["creationTimestamp"] >= old["metadata"]["creationTimestamp"]
        again, created_again = sim.store.register_node(old)
        assert not created_again and again["metadata"]["uid"] == node["metadata"]["uid"]
        # DaemonSet pods come back on the re-registered node, with the current revision hash.
        back = await until(lambda: [p for p in pods_on(sim, NODE) if p["metadata"]["labels"].get("app") == "sdn"])
        ds = sim.store.get("daemonsets.apps", "sdn", "openshift-sdn")
        hash_ = ds["metadata"]["annotations"]["clustersim.lockkeeper.io/template-hash"]
        assert back[0]["metadata"]["labels"]["controller-revision-hash"] == hash_
        lease = await until(lambda: sim.store.try_get(LEASE, NODE, LEASE_NAMESPACE))
        assert lease["metadata"]["ownerReferences"][0]["uid"] == node["metadata"]["uid"]


async def test_reregistration_before_gc_keeps_pods(tmp_path: Path) -> None:
    async with ClusterSim(scenario(pod_gc_seconds=100), time_scale=0.01,
                          kubeconfig_path=tmp_path / "kubeconfig") as sim:
        await until(lambda: len(pods_on(sim, NODE)) == 4)
        old = sim.store.get("nodes", NODE)
        sim.store.delete("nodes", NODE)
        sim.store.register_node(old)
        await asyncio.sleep(2.0)  # twice the GC delay
        assert len(pods_on(sim, NODE)) == 4


async def test_daemonset_on_delete_replaces_only_deleted_pods() -> None:
    async with ClusterSim(scenario(), time_scale=0.01) as sim:
        def sdn_pods() -> list[dict[str, Any]]:
            return [p for p in sim.store.list("pods", "openshift-sdn") if not p["metadata"].get("deletionTimestamp")]

        await until(lambda: len(sdn_pods()) == 4)
        old_hash = sdn_pods()[0]["metadata"]["labels"]["controller-revision-hash"]
        sim.store.mutate("daemonsets.apps", "sdn", "openshift-sdn", lambda d: d["spec"]["template"]["spec"]
                         ["containers"][0].__setitem__("image", "registry.example.com/custom-node:v3.11"))
        await until(lambda: sim.store.get("daemonsets.apps", "sdn", "openshift-sdn")["status"]["observedGeneration"]
                    == 2)
        await asyncio.sleep(0.3)
        assert {p["metadata"]["labels"]["controller-revision-hash"] for p in sdn_pods()} == {old_hash}
        st = sim.store.get("daemonsets.apps", "sdn", "openshift-sdn")["status"]
        assert (st["updatedNumberScheduled"], st["numberReady"]) == (0, 4)

        victim = next(p for p in sdn_pods() if p["spec"]["nodeName"] == NODE)
        sim.store.delete("pods", victim["metadata"]["name"], "openshift-sdn", grace_period_seconds=0)
        fresh = await until(lambda: [p for p in sdn_pods() if p["spec"]["nodeName"] == NODE and
                                     p["metadata"]["labels"]["controller-revision-hash"] != old_hash])
        assert fresh[0]["spec"]["containers"][0]["image"] == "registry.example.com/custom-node:v3.11"
        await until(lambda: sim.store.get("daemonsets.apps", "sdn", "openshift-sdn")["status"]
                    ["updatedNumberScheduled"] == 1)
        others = [p for p in sdn_pods() if p["spec"]["nodeName"] != NODE]
        assert {p["metadata"]["labels"]["controller-revision-hash"] for p in others} == {old_hash}


async def test_daemonset_rolling_update_replaces_pods() -> None:
    async with ClusterSim(scenario(), time_scale=0.01) as sim:
        def dns() -> list[dict[str, Any]]:
            return [p for p in sim.store.list("pods", "openshift-dns") if not p["metadata"].get("deletionTimestamp")]

        await until(lambda: len(dns()) == 4)
        old = {p["metadata"]["labels"]["controller-revision-hash"] for p in dns()}
        sim.store.mutate("daemonsets.apps", "dns-default", "openshift-dns", lambda d: d["spec"]["template"]
                         ["metadata"]["labels"].__setitem__("rev", "2"))
        await until(lambda: len(dns()) == 4 and not old & {p["metadata"]["labels"]["controller-revision-hash"]
                                                           for p in dns()})
