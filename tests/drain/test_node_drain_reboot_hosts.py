"""The drain procedure's reboot command on a simulated host for real, over SSH and through a
debug pod: ``systemctl reboot`` takes its own session down (no exit status over SSH; the debug
pod's exec ends with the container gone), and the drain must read that as what a reboot does,
then judge the reboot by the node's boot, not fail with "exited None"."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import pytest

from activities.host.models import ExecBackend, HostAccess
from clustersim.hosts import HostsComponent
from tests.clustersim.test_hosts_interp import SECTION
from tests.drain.test_node_drain_reboot import _scenario
from workflows.drain.models import NodeDrainInput, NodeDrainResult

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]


@pytest.mark.parametrize("via", ["ssh", "debug-pod"])
async def test_a_real_reboot_drops_its_session_and_the_node_comes_back_uncordoned(
    sim_factory: Any, worker_process_factory: Any, dev_server: Any, temporal_client: Any, task_queue: str, via: str
) -> None:
    section = {k: v for k, v in SECTION.items() if k != "hosts"}
    sim = await sim_factory(_scenario(), time_scale=0.05, component_sections={"hosts": section})
    if sim.store.try_get("namespaces", "default") is None:
        sim.store.create("namespaces", {"metadata": {"name": "default"}})
    hosts = sim.components["hosts"]
    assert isinstance(hosts, HostsComponent)
    env = hosts.client_env()
    worker = worker_process_factory(address=dev_server.address, kubeconfig=sim.kubeconfig_path, task_queue=task_queue, env=env)
    await worker.start()
    node = sorted(n["metadata"]["name"] for n in sim.store.list("nodes"))[0]
    if via == "ssh":
        address, port = json.loads(Path(env["CLUSTERSIM_SSH_MAP"]).read_text())[node].split(":")
        access = HostAccess(backend=ExecBackend.SSH, host=address, port=int(port))
    else:
        access = HostAccess(backend=ExecBackend.DEBUG_POD, node=node, namespace="default")
    boots = hosts.host(node).boot_count
    handle = await temporal_client.start_workflow(
        "NodeDrainWorkflow",
        NodeDrainInput(node=node, approvals={"requested_by": "e2e"}, reboot_command=["systemctl", "reboot"], uncordon_after=True,
                       reboot_access=access, reboot_timeout_seconds=30, drain={"backoff_initial_seconds": 1, "wait_seconds": 5}),
        id=f"drain-reboot-{via}-{uuid.uuid4().hex[:6]}", task_queue=task_queue, result_type=NodeDrainResult,
    )
    result = await handle.result()
    assert result.outcome == "completed" and result.drained and result.uncordoned, result.message
    assert hosts.host(node).boot_count == boots + 1, "rebooted exactly once"
    reboots = [rec for rec in hosts.host(node).log if rec.argv == ["systemctl", "reboot"]]
    assert len(reboots) == 1 and reboots[0].exit is None  # the session went down with the host
    assert not (sim.store.get("nodes", node).get("spec") or {}).get("unschedulable")
