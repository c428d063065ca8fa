"""Rollouts that outlive a Temporal server restart, a degraded node and bad input."""

from __future__ import annotations

import asyncio
import time

import pytest

from clustersim.scenario import generate_scenario
from workers.client import connect
from workers.settings import Settings
from tests.support.harness import drive, start_rollout, status, write_requests
from workflows.kit.models import NodeControlInput, NodePhase
from workflows.machineconfig.models import RolloutPhase

pytestmark = pytest.mark.e2e

SCALE = 0.05
FAST = dict(
    drain={"backoff_initial_seconds": 1, "backoff_max_seconds": 3, "wait_seconds": 5},
    daemon={"drain_deadline_seconds": 3600 * SCALE, "uncordon_deadline_seconds": 600 * SCALE},
)


def _small(nodes: int = 4, name: str = "small") -> object:
    return generate_scenario(
        nodes=nodes, pods=8, pools={"worker": nodes}, name=name, reboot_seconds=20, pod_start_seconds=1,
        namespaces=1, pods_per_deployment=4,
    )


async def test_temporal_server_killed_and_restarted_mid_rollout(
    sim_factory, dev_server_factory, worker_process_factory, task_queue
) -> None:
    sim = await sim_factory(_small(name="server-restart"), time_scale=SCALE)
    server = await dev_server_factory()
    worker = worker_process_factory(address=server.address, kubeconfig=sim.kubeconfig_path, task_queue=task_queue)
    await worker.start()
    client = await connect(Settings(temporal_address=server.address))
    handle = await start_rollout(client, task_queue, cluster="restart", max_unavailable=1, **FAST)

    # Wait until the first node is past its drain hand-off, then take the server away.
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        st = await status(handle)
        if st.totals.done >= 1 or any(n.step in ("wait-reboot", "hand-off-drain") for n in st.nodes.values()):
            break
        await asyncio.sleep(0.2)
    await server.kill()
    await asyncio.sleep(3)  # the daemon goes on rebooting the node while Temporal is down
    await server.start()

    client = await connect(Settings(temporal_address=server.address))
    handle = client.get_workflow_handle(handle.id, result_type=handle._result_type)
    result = await drive(handle, timeout=240)
    assert result.outcome == "completed", result.message
    for node in sim.store.list("nodes"):
        ann = node["metadata"]["annotations"]
        assert ann["machineconfiguration.openshift.io/state"] == "Done"
        assert not (node.get("spec") or {}).get("unschedulable")


async def test_degraded_node_pauses_then_retry_completes(sim_factory, worker_for, temporal_client, task_queue) -> None:
    sim = await sim_factory(_small(nodes=3, name="degraded"), time_scale=SCALE)
    await worker_for(sim)
    bad = sorted(n["metadata"]["name"] for n in sim.store.list("nodes"))[0]
    sim.agents.inject_node_fault(bad, "degrade", reason="failed to write /etc/worker-update.conf: read-only file system")
    handle = await start_rollout(temporal_client, task_queue, cluster="degraded", max_unavailable=1, **FAST)

    deadline = time.monotonic() + 120
    st = await status(handle)
    while st.phase != RolloutPhase.PAUSED and time.monotonic() < deadline:
        await asyncio.sleep(0.2)
        st = await status(handle)
    assert st.phase == RolloutPhase.PAUSED
    assert "read-only file system" in (st.paused_reason or "")
    assert st.nodes[bad].phase == NodePhase.DEGRADED
    # No further node started while paused.
    await asyncio.sleep(1.0)
    st = await status(handle)
    assert [n for n, s in st.nodes.items() if s.phase in (NodePhase.RUNNING, NodePhase.DONE)] == []

    sim.agents.clear_node_fault(bad)
    await handle.execute_update("retry_node", NodeControlInput(node=bad, identity="e2e-operator", comment="disk fixed"))
    result = await drive(handle, timeout=180)
    assert result.outcome == "completed", result.message
    assert result.nodes[bad].phase == NodePhase.DONE and result.nodes[bad].attempts >= 2
    for node in sim.store.list("nodes"):
        assert node["metadata"]["annotations"]["machineconfiguration.openshift.io/state"] == "Done"


@pytest.mark.parametrize(
    "fields, error",
    [
        ({"pools": ["nope"]}, "nope"),
        ({"pools": ["worker"], "target_configs": {"worker": "rendered-worker-doesnotexist"}}, "rendered-worker-doesnotexist"),
        ({"pools": ["worker"], "target_configs": {"worker": "__MASTER__"}}, "master"),
    ],
    ids=["unknown-pool", "missing-config", "config-of-another-pool"],
)
async def test_bad_input_changes_nothing(sim_factory, worker_for, temporal_client, task_queue, fields, error) -> None:
    sim = await sim_factory(generate_scenario(nodes=4, pods=0, pools={"master": 1, "worker": 3}, name="bad"), time_scale=SCALE)
    if fields.get("target_configs", {}).get("worker") == "__MASTER__":
        master = [m["metadata"]["name"] for m in sim.store.list("machineconfigs.machineconfiguration.openshift.io")
                  if m["metadata"]["name"].startswith("rendered-master-")][0]
        fields = {**fields, "target_configs": {"worker": master}}
        error = master
    await worker_for(sim)
    sim.requests.clear()
    handle = await start_rollout(temporal_client, task_queue, cluster="bad", **fields)
    result = await handle.result()  # refused before any change (issue 39): a failed precondition, not a failed run
    assert result.outcome == "refused" and len(result.problems) == 1 and error in result.problems[0], result
    assert write_requests(sim.requests) == [], "preflight must not write to the cluster"
