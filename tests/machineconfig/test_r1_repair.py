"""R1 end to end: the interrupted SDN→OVN migration repaired by a MachineConfig rollout that
stands in for the machine-config-controller, then the gated delete of all pods."""

from __future__ import annotations

import pytest

from tests.support.harness import (
    APPROVER,
    ClusterObserver,
    drive,
    node_annotations,
    pools_updated,
    start_rollout,
    successful_evictions,
)

pytestmark = pytest.mark.e2e

SCALE = 0.02
FAST = dict(
    network_poll_initial_seconds=1,
    network_poll_max_seconds=3,
    drain={"backoff_initial_seconds": 1, "backoff_max_seconds": 5, "wait_seconds": 10},
    daemon={"drain_deadline_seconds": 3600 * SCALE, "uncordon_deadline_seconds": 600 * SCALE},
)


async def test_full_r1_repair(sim_factory, worker_for, temporal_client, task_queue) -> None:
    sim = await sim_factory("r1-ovn-interrupted", time_scale=SCALE)
    assert not any(pools_updated(sim.store).values()), "scenario starts with every pool Updating"
    await worker_for(sim)
    observer = ClusterObserver(sim.store)
    observer.start()

    handle = await start_rollout(
        temporal_client, task_queue, cluster="r1", approval="canary", repair_network=True, max_unavailable=1, **FAST
    )
    result = await drive(handle, timeout=300)
    observer.stop()

    assert result.outcome == "completed", result.message
    assert pools_updated(sim.store) == {name: True for name in pools_updated(sim.store)}
    # Every node at its pool's newest rendered config, Done, schedulable, handshake closed.
    for node in sim.store.list("nodes"):
        ann = node["metadata"]["annotations"]
        name = node["metadata"]["name"]
        assert ann["machineconfiguration.openshift.io/state"] == "Done", name
        assert ann["machineconfiguration.openshift.io/currentConfig"] == ann["machineconfiguration.openshift.io/desiredConfig"]
        assert ann["machineconfiguration.openshift.io/lastAppliedDrain"] == ann["machineconfiguration.openshift.io/desiredDrain"]
        assert ann["machineconfiguration.openshift.io/desiredDrain"].startswith("uncordon-")
        assert not (node.get("spec") or {}).get("unschedulable"), f"{name} left cordoned"
        assert "lockkeeper.io/cordoned-by" not in ann
    # OVN pods Ready on every node, and every workload pod Ready after the delete-all-pods step.
    for pod in sim.store.list("pods"):
        conds = {c["type"]: c["status"] for c in (pod.get("status") or {}).get("conditions") or []}
        assert conds.get("Ready") == "True", f"{pod['metadata']['namespace']}/{pod['metadata']['name']} not Ready"
    assert result.network_repair is not None and result.network_repair.workloads_ready
    assert result.network_repair.pods_deleted and result.network_repair.pods_deleted > 0

    # maxUnavailable=1 held throughout, each node cordoned exactly once, no pod evicted twice.
    assert observer.max_in_flight == 1
    assert set(observer.cordons.values()) == {1}
    assert max(successful_evictions(sim.requests).values()) == 1
    # Gates: a canary gate per pool and the delete-all-pods gate, all approved by a person.
    approved = {r.gate_id for r in result.gate_history if r.action == "approved"}
    assert "delete-all-pods" in approved
    assert {g for g in approved if g.startswith("canary/")} == {f"canary/{p}" for p in ("master", "infra", "app")}
    assert all(r.by == APPROVER for r in result.gate_history if r.action == "approved")
    assert node_annotations(sim.store, "qsu-app-01")["machineconfiguration.openshift.io/currentConfig"].startswith("rendered-app-")
