"""Read-only planning fails fast in more procedures than the rollout (issue 18, "Failures are
visible and stoppable"), with a real dev server, a real worker process and the simulator over
real HTTP:

- the standalone drain against an unreachable API (a kubeconfig pointing at a closed port) fails
  at once (its first read tried once, not retried) with ``ApiUnreachable``, the message naming
  the API server, and the CLI maps the failure to exit 3; with 100 % 503 it gives up after a
  bounded number of node reads with a bounded back-off (``ApiUnavailable``) and writes nothing
  (no cordon);
- the node upgrade, the nodeSelector migration, the network migration (dry runs) and the
  GlusterFS check fail the same way (``ApiUnreachable`` at once, the API server named) at
  their first read of the API.
"""

from __future__ import annotations

import asyncio
import os
import socket
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest
from temporalio.client import WorkflowFailureError
from temporalio.exceptions import ApplicationError

from clustersim.kubeconfig import write_kubeconfig
from clustersim.scenario import generate_scenario
from tests.support.harness import activity_runs, assert_failed_at_once, listed, write_requests
from workflows.drain.models import NodeDrainInput, NodeDrainResult
from workflows.gluster.models import GlusterRecoveryInput
from workflows.network_migration.models import NetworkMigrationInput
from workflows.node_selectors.models import NodeSelectorMigrationInput
from workflows.node_upgrade.models import NodeAction, NodeSelection, NodeUpgradeInput

#: (workflow type, input, the start of the failure's message) of procedures whose first step
#: reads the cluster's API.
FIRST_READS = [
    ("NodeUpgradeWorkflow", NodeUpgradeInput(selection=NodeSelection(), action=NodeAction(argv=["true", "{node}"]), dry_run=True,
                                             search_attributes=False), "planning could not use the cluster's API"),
    ("NodeSelectorMigrationWorkflow", NodeSelectorMigrationInput(mapping={"region=infra": {"node-role.kubernetes.io/infra": "true"}}, dry_run=True,
                                                                 search_attributes=False), "the scan could not use the cluster's API"),
    ("NetworkMigrationWorkflow", NetworkMigrationInput(dry_run=True, search_attributes=False), "preflight could not use the cluster's API"),
    ("GlusterRecoveryWorkflow", GlusterRecoveryInput(mode="check", search_attributes=False),
     "the first GlusterFS read could not use the cluster's API"),
]

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(240)]

LOCKKEEPER = str(Path(sys.executable).parent / "lockkeeper")


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def _start_drain(client: Any, task_queue: str, node: str, cluster: str) -> Any:
    return await client.start_workflow(
        "NodeDrainWorkflow",
        NodeDrainInput(node=node, cluster=cluster, approvals={"requested_by": "e2e"}, drain={"backoff_initial_seconds": 1, "wait_seconds": 5}),
        id=f"drain-fast-{cluster}-{uuid.uuid4().hex[:6]}", task_queue=task_queue, result_type=NodeDrainResult,
    )


async def _failure(handle: Any, timeout: float) -> ApplicationError:
    """Wait (up to ``timeout`` s) for the workflow to fail; its ApplicationError."""
    with pytest.raises(WorkflowFailureError) as info:
        await asyncio.wait_for(handle.result(), timeout)
    cause = info.value.cause
    assert isinstance(cause, ApplicationError), repr(cause)
    return cause


async def test_drain_against_an_unreachable_api_fails_fast_and_the_cli_exits_3(
    tmp_path: Path, dev_server: Any, worker_process_factory: Any, temporal_client: Any, task_queue: str
) -> None:
    url = f"https://127.0.0.1:{_closed_port()}"
    kubeconfig = write_kubeconfig(tmp_path / "kubeconfig", url)
    worker = worker_process_factory(address=dev_server.address, kubeconfig=kubeconfig, task_queue=task_queue)
    await worker.start()

    handle = await _start_drain(temporal_client, task_queue, "worker-0", "drain-unreachable")
    err = await _failure(handle, timeout=60)
    assert err.type == "ApiUnreachable"
    await assert_failed_at_once(handle, "read_node")
    assert "the drain of worker-0 could not use the cluster's API" in err.message, err.message
    assert url in err.message and "Connection refused" in err.message, err.message
    types = []
    async for ev in handle.fetch_history_events():
        if ev.HasField("activity_task_scheduled_event_attributes"):
            types.append(ev.activity_task_scheduled_event_attributes.activity_type.name)
    assert types[0] == "read_node" and "cordon_node" not in types and "drain_node" not in types, types  # nothing written

    # The operator's view: `lockkeeper start drain` waits for its end and exits 3 on one line.
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TEMPORAL_", "LOCKKEEPER_", "KUBE"))}
    env["LOCKKEEPER_TASK_QUEUE"] = task_queue
    proc = await asyncio.create_subprocess_exec(
        LOCKKEEPER, "--address", dev_server.address, "start", "drain", "--node", "worker-1", "--cluster", "drain-unreachable-cli",
        "--wait", env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )
    _out, cli_err = await asyncio.wait_for(proc.communicate(), 90)
    lines = [line for line in cli_err.decode().splitlines() if line.strip() and not line.startswith("started ")]
    assert proc.returncode == 3, (proc.returncode, cli_err.decode())
    assert len(lines) == 1 and url in lines[0], lines
    # ...as soon as the drain it started failed, at once as above.
    cli_runs = await listed(temporal_client, f'TaskQueue = "{task_queue}" AND WorkflowType = "NodeDrainWorkflow" '
                                             f'AND WorkflowId != "{handle.id}"')
    assert len(cli_runs) == 1, cli_runs
    await assert_failed_at_once(temporal_client.get_workflow_handle(cli_runs[0].id, run_id=cli_runs[0].run_id), "read_node")


async def test_drain_under_503_gives_up_after_bounded_reads_and_writes_nothing(
    sim_factory: Any, worker_for: Any, temporal_client: Any, task_queue: str
) -> None:
    sim = await sim_factory(generate_scenario(nodes=2, pods=4, pools={"worker": 2}, name="drain-503", pod_start_seconds=1,
                                              namespaces=1, pods_per_deployment=2), time_scale=0.05)
    await worker_for(sim)
    node = min(n["metadata"]["name"] for n in sim.store.list("nodes"))
    sim.faults.configure(error_503=1.0)
    handle = await _start_drain(temporal_client, task_queue, node, "drain-503")

    err = await _failure(handle, timeout=90)
    assert err.type == "ApiUnavailable"
    assert "503" in err.message and "gave up after 5 attempts" in err.message, err.message
    reads = [e for e in sim.requests.entries(resource="nodes") if e.code == 503]
    assert len(reads) == 5, reads  # one GET per attempt, no more
    # The give-up is bounded in time by the read's retry policy: 5 attempts, back-off 1 s
    # doubling up to 8 s.
    runs = await activity_runs(handle)
    assert [(r.name, r.attempts, r.ended) for r in runs] == [("read_node", 5, "failed")], runs
    retry = runs[0].retry
    assert (retry.maximum_attempts, retry.initial_interval.ToSeconds(), retry.backoff_coefficient,
            retry.maximum_interval.ToSeconds()) == (5, 1, 2.0, 8), retry
    assert not write_requests(sim.requests)
    sim.faults.configure(error_503=0.0)
    assert not (sim.store.get("nodes", node).get("spec") or {}).get("unschedulable")


async def test_other_procedures_fail_fast_at_their_first_read_of_an_unreachable_api(
    tmp_path: Path, dev_server: Any, worker_process_factory: Any, temporal_client: Any, task_queue: str
) -> None:
    url = f"https://127.0.0.1:{_closed_port()}"
    kubeconfig = write_kubeconfig(tmp_path / "kubeconfig", url)
    worker = worker_process_factory(address=dev_server.address, kubeconfig=kubeconfig, task_queue=task_queue)
    await worker.start()
    handles = [await temporal_client.start_workflow(wf, inp, id=f"fast-{wf}-{uuid.uuid4().hex[:6]}", task_queue=task_queue)
               for wf, inp, _ in FIRST_READS]
    for (wf, _, words), handle in zip(FIRST_READS, handles, strict=True):
        err = await _failure(handle, timeout=60)
        assert err.type == "ApiUnreachable", (wf, err.type, err.message)
        await assert_failed_at_once(handle)
        assert words in err.message and url in err.message, (wf, err.message)
