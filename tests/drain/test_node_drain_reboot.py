"""The standalone drain procedure with a reboot command, end to end (local backend against
clustersim): the command runs once after the drain; a command that fails, or one that exits 0
without rebooting the node, leaves the node cordoned. A real reboot of a simulated host, over SSH
and through a debug pod, is in test_node_drain_reboot_hosts.py."""

from __future__ import annotations

import sys
import uuid

import pytest
from temporalio.client import WorkflowFailureError

from activities.host.models import ExecBackend, HostAccess
from clustersim.scenario import generate_scenario
from workflows.drain.models import NodeDrainInput, NodeDrainResult

pytestmark = pytest.mark.e2e


def _scenario() -> object:
    return generate_scenario(nodes=2, pods=4, pools={"worker": 2}, name="drain", pod_start_seconds=1,
                             namespaces=1, pods_per_deployment=2)


async def _run(temporal_client, task_queue, node: str, argv: list[str], marker: str, **kw: object) -> object:
    handle = await temporal_client.start_workflow(
        "NodeDrainWorkflow",
        NodeDrainInput(
            node=node, approvals={"requested_by": "e2e"}, reboot_command=argv, uncordon_after=True,
            reboot_access=HostAccess(backend=ExecBackend.LOCAL), reboot_timeout_seconds=30,
            drain={"backoff_initial_seconds": 1, "wait_seconds": 5}, **kw,
        ),
        id=f"drain-e2e-{marker}-{uuid.uuid4().hex[:6]}", task_queue=task_queue, result_type=NodeDrainResult,
    )
    return handle


async def test_a_command_that_does_not_reboot_never_gets_the_node_uncordoned(
    sim_factory, worker_for, temporal_client, task_queue, tmp_path
) -> None:
    """The command exits 0, the node stays Ready, but its bootID never changes: the node has not
    rebooted (a real node stays Ready for the node monitor's grace period after its kubelet
    stops), so it is not uncordoned; the drain fails NodeNotRebooted, the command ran once."""
    sim = await sim_factory(_scenario(), time_scale=0.05)
    await worker_for(sim)
    node = sorted(n["metadata"]["name"] for n in sim.store.list("nodes"))[0]
    runs = tmp_path / "runs"
    argv = [sys.executable, "-c", f"open({str(runs)!r}, 'a').write('reboot\\n')"]
    handle = await _run(temporal_client, task_queue, node, argv, "noboot", ready_timeout_seconds=4)
    with pytest.raises(WorkflowFailureError) as info:
        await handle.result()
    cause = str(info.value.cause)
    assert "NodeNotRebooted" in cause and "bootID still" in cause, cause
    assert runs.read_text() == "reboot\n", "the reboot command ran exactly once"
    node_obj = sim.store.get("nodes", node)
    assert node_obj["spec"].get("unschedulable") is True and node_obj["metadata"]["annotations"]["lockkeeper.io/cordoned-by"] == handle.id
    evicted = {e.name for e in sim.requests.entries(verb="create", subresource="eviction") if e.code == 201}
    assert evicted, "the drain evicted the node's pods before the command ran"


async def test_failing_reboot_command_fails_and_leaves_the_node_cordoned(sim_factory, worker_for, temporal_client, task_queue) -> None:
    sim = await sim_factory(_scenario(), time_scale=0.05)
    await worker_for(sim)
    node = sorted(n["metadata"]["name"] for n in sim.store.list("nodes"))[0]
    handle = await _run(temporal_client, task_queue, node, [sys.executable, "-c", "import sys; sys.exit('disk busy')"], "fail")
    with pytest.raises(WorkflowFailureError) as info:
        await handle.result()
    assert "exited 1" in str(info.value.cause) and "disk busy" in str(info.value.cause)
    node_obj = sim.store.get("nodes", node)
    assert node_obj["spec"].get("unschedulable") is True, "a failed reboot leaves the node cordoned for a person"
    assert node_obj["metadata"]["annotations"]["lockkeeper.io/cordoned-by"] == handle.id
