"""``GET /metrics``: the cluster's state in the Prometheus text format, with kube-state-metrics',
openshift-state-metrics', the node exporter's and gluster-prometheus' names, following the state
at scrape time; outside /api (never faulted, never recorded)."""

from __future__ import annotations

from typing import Any

import aiohttp
from prometheus_client.parser import text_string_to_metric_families
from tests.support.promserver import set_node_ready

from clustersim.sim import ClusterSim

NODE = "okd-worker-01"


async def scrape(sim: ClusterSim) -> tuple[str, dict[str, list[tuple[dict[str, str], float]]]]:
    """The content type and the samples by name (parsed with prometheus-client's own text parser,
    which refuses a body that breaks the format)."""
    async with aiohttp.ClientSession() as session:
        async with session.get(f"{sim.url}/metrics") as resp:
            assert resp.status == 200
            ctype, text = resp.headers["Content-Type"], await resp.text()
    samples: dict[str, list[tuple[dict[str, str], float]]] = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            samples.setdefault(s.name, []).append((dict(s.labels), s.value))
    return ctype, samples


def value(samples: dict[str, Any], name: str, **labels: str) -> float:
    got = [v for lbl, v in samples.get(name, []) if all(lbl.get(k) == x for k, x in labels.items())]
    assert len(got) == 1, f"{name}{labels}: {got}"
    return got[0]


async def test_nodes_pods_and_workloads_follow_the_state_at_scrape_time(sim_factory) -> None:
    sim = await sim_factory("r2-pdb-blocked", time_scale=0.01)
    ctype, m = await scrape(sim)
    assert ctype == "text/plain; version=0.0.4; charset=utf-8"
    nodes = {lbl["node"] for lbl, _ in m["kube_node_info"]}
    assert NODE in nodes and len(nodes) == 4
    for status, want in (("true", 1), ("false", 0), ("unknown", 0)):
        assert value(m, "kube_node_status_condition", node=NODE, condition="Ready", status=status) == want
    assert value(m, "kube_node_spec_unschedulable", node=NODE) == 0
    assert value(m, "up", job="node-exporter", instance=NODE) == 1
    info = next(lbl for lbl, _ in m["kube_node_info"] if lbl["node"] == NODE)
    assert set(info) >= {"kernel_version", "os_image", "container_runtime_version", "kubelet_version", "internal_ip"}
    # A Deployment's replicas and a PDB's health, as kube-state-metrics names them.
    assert value(m, "kube_deployment_spec_replicas", namespace="openshift-ingress", deployment="router-default") == 2
    # R2: one router replica runs on okd-worker-01, the other is Pending (nowhere to go).
    assert value(m, "kube_deployment_status_replicas_available", namespace="openshift-ingress", deployment="router-default") == 1
    pending = [lbl["pod"] for lbl, v in m["kube_pod_status_phase"] if lbl["phase"] == "Pending" and v == 1]
    assert len(pending) == 1 and pending[0].startswith("router-default-")
    pdbs = {lbl["poddisruptionbudget"] for lbl, _ in m["kube_poddisruptionbudget_status_current_healthy"]}
    assert pdbs and {lbl["poddisruptionbudget"] for lbl, _ in m["kube_poddisruptionbudget_status_desired_healthy"]} == pdbs
    # Every pod has one phase series per phase (1 for its own) and an owner.
    pod = next(lbl for lbl, _ in m["kube_pod_info"] if lbl["node"] == NODE and lbl["pod"].startswith("router-default-"))
    assert (pod["created_by_kind"], pod["namespace"]) == ("ReplicaSet", "openshift-ingress")
    phases = {lbl["phase"]: v for lbl, v in m["kube_pod_status_phase"] if lbl["pod"] == pod["pod"]}
    assert set(phases) == {"Pending", "Running", "Succeeded", "Failed", "Unknown"} and sum(phases.values()) == 1
    assert any(lbl["pod"] == pod["pod"] for lbl, _ in m["kube_pod_owner"])
    assert value(m, "kube_pod_status_ready", namespace=pod["namespace"], pod=pod["pod"], condition="true") == 1

    await set_node_ready(sim, NODE, False)
    async with aiohttp.ClientSession() as session:  # cordon, as kubectl does
        async with session.patch(f"{sim.url}/api/v1/nodes/{NODE}", data='{"spec":{"unschedulable":true}}',
                                 headers={"Content-Type": "application/strategic-merge-patch+json"}) as resp:
            assert resp.status == 200
    _, m = await scrape(sim)
    assert value(m, "kube_node_status_condition", node=NODE, condition="Ready", status="true") == 0
    assert value(m, "kube_node_status_condition", node=NODE, condition="Ready", status="false") == 1
    assert value(m, "kube_node_spec_unschedulable", node=NODE) == 1
    assert value(m, "up", job="node-exporter", instance=NODE) == 0
    # The kubelet agent takes the node's pods out of Ready (clustersim.agents.kubelet).
    for _ in range(100):
        _, m = await scrape(sim)
        if (value(m, "kube_pod_status_ready", namespace=pod["namespace"], pod=pod["pod"], condition="false") == 1 and
                value(m, "kube_deployment_status_replicas_available", namespace="openshift-ingress",
                      deployment="router-default") == 0):
            break
        await sim.clock.sleep(1)
    assert value(m, "kube_pod_status_ready", namespace=pod["namespace"], pod=pod["pod"], condition="false") == 1
    assert value(m, "kube_deployment_status_replicas_available", namespace="openshift-ingress", deployment="router-default") == 0

    await set_node_ready(sim, NODE, True)
    _, m = await scrape(sim)
    assert value(m, "kube_node_status_condition", node=NODE, condition="Ready", status="true") == 1


async def test_metrics_are_never_faulted_nor_recorded(sim_factory) -> None:
    sim = await sim_factory("r2-pdb-blocked", time_scale=0.01, start_agents=False)
    sim.faults.configure(error_500=1.0)
    sim.requests.clear()
    _, m = await scrape(sim)
    assert m["kube_node_info"]
    assert len(sim.requests) == 0
    async with aiohttp.ClientSession() as session:  # the API itself is faulted
        async with session.get(f"{sim.url}/api/v1/nodes") as resp:
            assert resp.status == 500
    assert len(sim.requests) == 1


async def test_gluster_bricks_as_gluster_prometheus_names_them(sim_factory) -> None:
    sim = await sim_factory("r3-okd310-upgrade", time_scale=0.01)
    _, m = await scrape(sim)
    vol = "vol_f92ea1839dc16d7396db358365da7066"
    bricks = [(lbl, v) for lbl, v in m["gluster_brick_up"] if lbl["volume"] == vol]
    assert len(bricks) == 3 and all(v == 1 for _, v in bricks)
    assert set(bricks[0][0]) == {"volume", "hostname", "brick_path", "peer_id", "pid"}
    # The scenario's symptom: the registry volume's brick on 10.0.0.12 is offline.
    down = [lbl for lbl, v in m["gluster_brick_up"] if v == 0]
    assert [(lbl["volume"], lbl["hostname"]) for lbl in down] == [("glusterfs-registry-volume", "10.0.0.12")]
    assert value(m, "gluster_volume_up", volume=vol) == 1
    assert all(v == 0 for lbl, v in m["gluster_volume_split_brain_heal_count"] if lbl["volume"] == vol)

    async with aiohttp.ClientSession() as session:
        for fault in ({"kind": "brick_start_failure", "volume": vol, "brick": "10.0.0.11", "sticky": True, "immediate": True},
                      {"kind": "split_brain", "volume": vol, "n": 2}):
            async with session.post(f"{sim.url}/_sim/gluster/fault", json=fault) as resp:
                assert resp.status == 200, await resp.text()
    _, m = await scrape(sim)
    assert value(m, "gluster_brick_up", volume=vol, hostname="10.0.0.11") == 0
    assert value(m, "gluster_brick_up", volume=vol, hostname="10.0.0.12") == 1
    assert all(v == 2 for lbl, v in m["gluster_volume_split_brain_heal_count"] if lbl["volume"] == vol)
    # The hosts component knows the hosts: node-exporter targets follow their state.
    assert {lbl["instance"] for lbl, v in m["up"] if v == 1} >= {"master01.example.com"}
