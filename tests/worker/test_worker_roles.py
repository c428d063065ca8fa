"""Issue 16: the workflows and the activities in two worker processes on one task queue
(``LOCKKEEPER_WORKER_ROLE`` ``workflows`` and ``activities``), so that the workflow code keeps a
Python interpreter of its own. A 6-node rollout on the simulator completes, and the histories
show who did what: every workflow task (the rollout's, its node runs', the leases') was completed
by the ``workflows`` process, every activity task (the preflight, the watches, the drains) was
started by the ``activities`` process, and the node runs' local calls (markers) ran in the
``workflows`` process, which polls no activity task. On the normal path a node run makes no
local call (desiredConfig and the drain hand-off go with its watching activities); one node here
starts with the daemon's drain request already pending, so its run drains in the kit's loop,
whose cordon and hand-off are local calls. A worker with an unknown role is refused before it
connects (exit 2)."""

from __future__ import annotations

import asyncio
import os
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest

from tests.support.harness import drive, fast_timings, start_rollout, worker_pool_scenario

pytestmark = pytest.mark.e2e

SCALE = 0.05
NODES = 6


async def _identities(client: Any, workflow_id: str) -> tuple[set[str], set[str], int]:
    """(identities completing workflow tasks, identities starting activity tasks, local-call markers)
    of every run of ``workflow_id``."""
    wf_ids: set[str] = set()
    act_ids: set[str] = set()
    markers = 0
    async for ev in client.get_workflow_handle(workflow_id).fetch_history_events():
        if ev.HasField("workflow_task_completed_event_attributes"):
            wf_ids.add(ev.workflow_task_completed_event_attributes.identity)
        elif ev.HasField("activity_task_started_event_attributes"):
            act_ids.add(ev.activity_task_started_event_attributes.identity)
        elif ev.HasField("marker_recorded_event_attributes") and ev.marker_recorded_event_attributes.marker_name == "core_local_activity":
            markers += 1
    return wf_ids, act_ids, markers


@pytest.mark.timeout(300)
async def test_a_workflows_and_an_activities_worker_share_the_work(
    sim_factory: Any, worker_process_factory: Any, dev_server: Any, temporal_client: Any
) -> None:
    scenario = worker_pool_scenario(NODES, "roles")
    sim = await sim_factory(scenario, time_scale=SCALE)
    pool = sim.store.get("machineconfigpools.machineconfiguration.openshift.io", "worker")
    target = pool["spec"]["configuration"]["name"]
    early = sorted(n["metadata"]["name"] for n in sim.store.list("nodes"))[0]
    sim.store.mutate("nodes", early, None, lambda o: o["metadata"]["annotations"].update(
        {"machineconfiguration.openshift.io/desiredDrain": f"drain-{target}"}))
    queue = f"lk-roles-{uuid.uuid4().hex[:6]}"
    procs = {
        role: worker_process_factory(address=dev_server.address, kubeconfig=sim.kubeconfig_path, task_queue=queue,
                                     env={"LOCKKEEPER_WORKER_ROLE": role})
        for role in ("workflows", "activities")
    }
    await asyncio.gather(*(p.start() for p in procs.values()))
    ident = {role: f"lockkeeper-worker-{p.pid}@" for role, p in procs.items()}
    handle = await start_rollout(temporal_client, queue, cluster=f"roles-{uuid.uuid4().hex[:6]}", pools=["worker"],
                                 max_unavailable=2, **fast_timings(SCALE))
    result = await drive(handle, timeout=240)
    assert result.outcome == "completed", result.message
    assert result.summary.done == NODES

    def only(ids: set[str], role: str) -> bool:
        return bool(ids) and all(i.startswith(ident[role]) for i in ids)

    wf_ids, act_ids, _ = await _identities(temporal_client, handle.id)
    assert only(wf_ids, "workflows"), (wf_ids, ident)
    assert only(act_ids, "activities"), (act_ids, ident)  # the preflight at least
    local_calls: dict[str, int] = {}
    for node in result.nodes:
        wf_ids, act_ids, markers = await _identities(temporal_client, f"{handle.id}/node/{node}/1")
        assert only(wf_ids, "workflows"), (node, wf_ids, ident)
        assert only(act_ids, "activities"), (node, act_ids, ident)  # the watch and the drain
        local_calls[node] = markers
    # The kit's cordon and drain hand-off ran as local calls, in the workflows process (its task
    # completions above); the other runs made none.
    assert local_calls[early] >= 2 and not any(n for node, n in local_calls.items() if node != early), local_calls
    await asyncio.gather(*(p.stop() for p in procs.values()))


async def test_an_unknown_role_is_refused_before_connecting(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TEMPORAL_", "LOCKKEEPER_", "KUBE"))}
    env.update(LOCKKEEPER_WORKER_ROLE="both", TEMPORAL_ADDRESS="127.0.0.1:1", KUBECONFIG=str(tmp_path / "none"))
    proc = await asyncio.create_subprocess_exec(
        str(Path(sys.executable).parent / "lockkeeper"), "worker", env=env,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode == 2, (proc.returncode, out, err)
    assert b"LOCKKEEPER_WORKER_ROLE" in err and b"workflows" in err, err
