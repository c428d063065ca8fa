"""Real kubectl against the simulated API server (contract: ``k8s-api-contract.md`` of the design notes)."""

from __future__ import annotations

import asyncio
import json

from clustersim.sim import ClusterSim
from typing import Any


async def test_get_nodes_cordon_uncordon(sim: ClusterSim, kubectl: Any) -> None:
    rc, out, err = await kubectl(sim, "get", "nodes")
    assert rc == 0, err
    assert [line.split()[0] for line in out.splitlines()[1:]] == ["node1", "node2", "node3"]

    rc, out, err = await kubectl(sim, "cordon", "node1")
    assert rc == 0, err
    assert "node/node1 cordoned" in out
    assert sim.store.get("nodes", "node1")["spec"]["unschedulable"] is True
    assert sim.requests.count(verb="patch", resource="nodes", name="node1", code=200) == 1

    rc, out, err = await kubectl(sim, "uncordon", "node1")
    assert rc == 0, err
    assert "node/node1 uncordoned" in out
    assert not sim.store.get("nodes", "node1")["spec"].get("unschedulable")


async def test_drain_free_node_evicts_and_ignores_daemonset(sim: ClusterSim, kubectl: Any) -> None:
    rc, out, err = await kubectl(sim, "drain", "node1", "--ignore-daemonsets", "--delete-emptydir-data",
                                     "--timeout=30s")
    assert rc == 0, err + out
    assert "node/node1 drained" in out
    assert "ignoring DaemonSet-managed Pods: app/agent-node1" in err
    remaining = [p["metadata"]["name"] for p in sim.store.list("pods", field_selector="spec.nodeName=node1")]
    assert remaining == ["agent-node1"]
    assert sim.store.get("nodes", "node1")["spec"]["unschedulable"] is True
    evicted = sorted(e.name for e in sim.requests.entries(verb="create", subresource="eviction", code=201))
    assert evicted == ["web-1", "web-2"]


async def test_drain_blocked_by_pdb(sim: ClusterSim, kubectl: Any) -> None:
    rc, out, err = await kubectl(sim, "drain", "node2", "--ignore-daemonsets", "--delete-emptydir-data",
                                     "--timeout=5s")
    assert rc != 0
    assert "Cannot evict pod as it would violate the pod's disruption budget" in err
    assert sim.store.try_get("pods", "db-1", "app") is not None
    assert sim.requests.count(verb="create", subresource="eviction", name="db-1", code=429) >= 1


async def test_annotate_with_stale_resource_version_conflicts(sim: ClusterSim, kubectl: Any) -> None:
    stale = sim.store.get("nodes", "node3")["metadata"]["resourceVersion"]
    sim.store.mutate("nodes", "node3", None, lambda n: n["metadata"]["labels"].update(changed="yes"))
    rc, out, err = await kubectl(sim, "annotate", "node/node3", "x=1", f"--resource-version={stale}")
    assert rc != 0
    assert "Conflict" in err and "the object has been modified" in err
    fresh = sim.store.get("nodes", "node3")["metadata"]["resourceVersion"]
    rc, out, err = await kubectl(sim, "annotate", "node/node3", "x=1", f"--resource-version={fresh}")
    assert rc == 0, err
    assert sim.store.get("nodes", "node3")["metadata"]["annotations"]["x"] == "1"


async def test_patch_daemonset_image_three_patch_types(sim: ClusterSim, kubectl: Any) -> None:
    def images() -> dict[str, str]:
        ds = sim.store.get("daemonsets.apps", "agent", "app")
        return {c["name"]: c["image"] for c in ds["spec"]["template"]["spec"]["containers"]}

    gen0 = sim.store.get("daemonsets.apps", "agent", "app")["metadata"]["generation"]
    patches = [
        ("strategic", {"spec": {"template": {"spec": {"containers": [{"name": "agent", "image": "agent:2"}]}}}}),
        ("json", [{"op": "replace", "path": "/spec/template/spec/containers/0/image", "value": "agent:3"}]),
        ("merge", None),
    ]
    for ptype, body in patches:
        if ptype == "merge":
            # A merge patch replaces the whole list: send both containers, change one.
            body = {"spec": {"template": {"spec": {"containers": [
                {"name": "agent", "image": "agent:4"}, {"name": "sidecar", "image": "side:1"}]}}}}
        rc, out, err = await kubectl(sim, "-n", "app", "patch", "ds", "agent", "--type", ptype,
                                         "-p", json.dumps(body))
        assert rc == 0, err
    assert images() == {"agent": "agent:4", "sidecar": "side:1"}
    assert sim.store.get("daemonsets.apps", "agent", "app")["metadata"]["generation"] == gen0 + 3
    rc, out, err = await kubectl(sim, "-n", "app", "patch", "ds", "agent", "--type", "json",
                                     "-p", '[{"op":"test","path":"/spec/template/spec/containers/0/image",'
                                           '"value":"nope"}]')
    assert rc != 0
    assert sim.requests.count(verb="patch", resource="daemonsets", code=422) == 1


async def test_wait_for_node_ready(sim: ClusterSim, kubectl: Any) -> None:
    rc, out, err = await kubectl(sim, "wait", "--for=condition=Ready", "node/node2", "--timeout=10s")
    assert rc == 0, err
    assert "node/node2 condition met" in out


async def test_delete_all_pods(sim: ClusterSim, kubectl: Any) -> None:
    rc, out, err = await kubectl(sim, "delete", "pod", "--all", "-A", "--timeout=30s")
    assert rc == 0, err
    assert out.count("deleted") == 6
    assert sim.store.list("pods") == []


async def test_get_nodes_watch_sees_annotation(sim: ClusterSim, kubectl_path: str) -> None:
    proc = await asyncio.create_subprocess_exec(
        kubectl_path, "--kubeconfig", str(sim.kubeconfig_path), "get", "nodes", "-w",
        "--output-watch-events", "-o", "json", "--request-timeout=20s",
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    assert proc.stdout is not None
    try:
        # Wait until kubectl's watch is open, then change an annotation.
        for _ in range(200):
            if sim.faults.open_watches:
                break
            await asyncio.sleep(0.05)
        sim.store.mutate("nodes", "node2", None,
                         lambda n: n["metadata"]["annotations"].update({"example.com/seen": "yes"}))
        buf = ""
        while '"example.com/seen"' not in buf:
            chunk = await asyncio.wait_for(proc.stdout.read(4096), 15)
            assert chunk, "kubectl ended before the change arrived"
            buf += chunk.decode()
        assert '"MODIFIED"' in buf
    finally:
        proc.kill()
        await proc.wait()


async def test_rollout_status_daemonset_with_agents(tmp_path: Any, kubectl: Any) -> None:
    # DaemonSet status is driven by H2's DaemonSet agent in a real scenario.
    async with ClusterSim("r2-pdb-blocked", time_scale=0.01, kubeconfig_path=tmp_path / "kc") as sim:
        ds = sim.store.get("daemonsets.apps", "dns-default", "openshift-dns")
        container = ds["spec"]["template"]["spec"]["containers"][0]["name"]
        rc, out, err = await kubectl(sim, "-n", "openshift-dns", "set", "image", "ds/dns-default",
                                     f"{container}=quay.io/example/dns:2")
        assert rc == 0, err
        rc, out, err = await kubectl(sim, "-n", "openshift-dns", "rollout", "status", "ds/dns-default",
                                     "--timeout=60s")
        assert rc == 0, err
        assert 'daemon set "dns-default" successfully rolled out' in out
        status = sim.store.get("daemonsets.apps", "dns-default", "openshift-dns")["status"]
        assert status["observedGeneration"] == ds["metadata"]["generation"] + 1
        assert status["updatedNumberScheduled"] == status["desiredNumberScheduled"]
