"""``diagnose_pool`` on R2 (clustersim): the facts R2's operator needed, with no write request."""

from __future__ import annotations

import asyncio

import pytest

from activities.machineconfig.diagnose import DiagnoseError, diagnose_pool
from activities.kube.gateway import KubeGateway
from clustersim import ClusterSim

MCO = "machineconfiguration.openshift.io/"
NODE = "okd-worker-01"


async def test_diagnose_worker_pool_on_r2_reads_only() -> None:
    # No agents: the state is frozen as R2's operator found it (worker cordoned, the daemon
    # degraded for the failed drain) instead of being reconciled away by the simulated daemon.
    async with ClusterSim("r2-pdb-blocked", time_scale=0.02, start_agents=False) as sim:
        node = sim.store.get("nodes", NODE)
        node["spec"]["unschedulable"] = True
        node["metadata"]["annotations"].update({
            MCO + "desiredConfig": "rendered-worker-5e4f3a2b1c0d9e8f7a6b5c4d3e2f1a0b",
            MCO + "state": "Degraded",
            MCO + "reason": "failed to drain node: okd-worker-01 after 1 hour",
        })
        sim.store.update("nodes", node)
        r2_message = ("0/4 nodes are available: 1 node(s) were unschedulable, 3 node(s) didn't match Pod's node "
                      "affinity/selector. preemption: 0/4 nodes are available: 4 Preemption is not helpful for scheduling.")
        sim.store.create("events", {
            "apiVersion": "v1", "kind": "Event",
            "metadata": {"name": "router-default-796df5847b-h8bm4.1", "namespace": "openshift-ingress"},
            "involvedObject": {"kind": "Pod", "namespace": "openshift-ingress", "name": "router-default-796df5847b-h8bm4"},
            "reason": "FailedScheduling", "message": r2_message, "type": "Warning",
            "lastTimestamp": "2030-01-01T00:00:00Z",
        })
        sim.requests.clear()
        gw = KubeGateway.from_kubeconfig(str(sim.kubeconfig_path))
        try:
            diag = await asyncio.to_thread(diagnose_pool, gw, "worker")
            with pytest.raises(DiagnoseError, match="known pools: master, worker"):
                await asyncio.to_thread(diagnose_pool, gw, "infra")
        finally:
            gw.close()
        writes = [e for e in sim.requests.entries() if e.verb not in ("get", "list", "watch")]
        assert writes == [], f"diagnose wrote: {writes}"
        assert sim.requests.entries(), "the diagnosis went through the API"

    assert diag.target_config == "rendered-worker-5e4f3a2b1c0d9e8f7a6b5c4d3e2f1a0b"
    (behind,) = diag.nodes_not_at_target
    assert behind.name == NODE and behind.current_config == "rendered-worker-0d3c9e8f7a6b5c4d3e2f1a0b9c8d7e6f"
    (degraded,) = diag.degraded
    assert degraded.reason == "failed to drain node: okd-worker-01 after 1 hour"
    (blocker,) = diag.drain_blockers
    assert (blocker.pdb.namespace, blocker.pdb.name, blocker.pdb.min_available, blocker.pdb.disruptions_allowed) == (
        "openshift-ingress", "router-default", 1, 0)
    assert blocker.pods == ["openshift-ingress/router-default-796df5847b-9hxzx"]
    (pending,) = diag.pending_pods
    assert pending.name == "router-default-796df5847b-h8bm4"
    assert pending.replaces == "openshift-ingress/router-default-796df5847b-9hxzx"
    assert pending.message == r2_message
    conds = {c.type: c.status for c in diag.conditions}
    assert conds["Updated"] == "False" and conds["Updating"] == "True"
