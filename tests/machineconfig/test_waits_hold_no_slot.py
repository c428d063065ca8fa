"""Issue 40, "no slot held for a wait": a rollout's reboot waits hold none of the worker's
activity slots. Six nodes reboot at once (maxUnavailable 6, reboots of 200 simulated seconds);
the worker's own Prometheus endpoint says how many activity slots are in use
(``temporal_worker_task_slots_used{worker_type="ActivityWorker"}``, the SDK's metric) while the
simulator shows the nodes rebooting. Handed off to the shared node watch (the default), at most
two slots are in use whenever four or more nodes reboot; with ``LOCKKEEPER_HAND_OFF_WAITS=false``
(each wait watches in its activity) the same measure sees one slot per rebooting node, which
shows the measure can see slots held. Counts only, no wall time."""

from __future__ import annotations

import asyncio
import re
import urllib.request
import uuid
from typing import Any

import pytest

from clustersim.scenario import generate_scenario
from lockkeeper.devserver import free_port
from tests.support.harness import fast_timings
from workflows.machineconfig.models import (
    MachineConfigRolloutInput,
    MachineConfigRolloutResult,
)

pytestmark = pytest.mark.e2e

SCALE = 0.05
NODES = 6
SLOTS = re.compile(r'^temporal_worker_task_slots_used\{[^}]*worker_type="ActivityWorker"[^}]*\}\s+([0-9.e+]+)', re.M)


def slots_used(port: int) -> float | None:
    """The activity worker's slots in use, from the worker's /metrics (None when unreadable)."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2) as r:
            found = SLOTS.findall(r.read().decode())
    except OSError:
        return None
    return sum(float(v) for v in found) if found else None


async def start_slot_rollout(name: str, reboot_seconds: int, hand_off: bool, dev_server: Any, sim_factory: Any,
                             worker_process_factory: Any, temporal_client: Any, task_queue: str,
                             before_start: Any = None) -> tuple[Any, int, Any]:
    """A simulated pool of :data:`NODES` nodes, a worker with its metrics on a free port and
    ``LOCKKEEPER_HAND_OFF_WAITS`` set by ``hand_off``, and a rollout of every node at once:
    ``(sim, metrics port, handle)``. ``before_start``: awaited with the sim before the rollout
    starts (e.g. stopping the daemons)."""
    scenario = generate_scenario(nodes=NODES, pods=NODES, pools={"worker": NODES}, name=name, reboot_seconds=reboot_seconds,
                                 write_files_seconds=1, pod_start_seconds=1, namespaces=2, pods_per_deployment=1)
    sim = await sim_factory(scenario, time_scale=SCALE)
    port = free_port()
    worker = worker_process_factory(
        address=dev_server.address, kubeconfig=sim.kubeconfig_path, task_queue=task_queue,
        env={"LOCKKEEPER_METRICS_PORT": str(port), "LOCKKEEPER_HAND_OFF_WAITS": "true" if hand_off else "false"},
    )
    await worker.start()
    if before_start is not None:
        await before_start(sim)
    handle = await temporal_client.start_workflow(
        "MachineConfigRolloutWorkflow",
        MachineConfigRolloutInput(cluster=f"{name}-{uuid.uuid4().hex[:6]}", pools=["worker"], max_unavailable=NODES,
                                  approvals={"requested_by": "test"}, **fast_timings(SCALE)),
        id=f"{name}-{uuid.uuid4().hex[:8]}", task_queue=task_queue, result_type=MachineConfigRolloutResult,
    )
    return sim, port, handle


def rebooting(sim: Any) -> int:
    """Nodes the simulated daemon is rebooting now (Ready False, "node is rebooting")."""
    count = 0
    for n in sim.store.list("nodes"):
        for c in (n.get("status") or {}).get("conditions") or []:
            if c.get("type") == "Ready" and c.get("status") == "False" and "rebooting" in (c.get("message") or ""):
                count += 1
    return count


@pytest.mark.timeout(240)
@pytest.mark.parametrize("hand_off", [True, False], ids=["handed-off", "in-activity"])
async def test_reboot_waits_hold_no_activity_slot(dev_server: Any, sim_factory: Any, worker_process_factory: Any,
                                                  temporal_client: Any, task_queue: str, hand_off: bool) -> None:
    sim, port, handle = await start_slot_rollout("slots", 200, hand_off, dev_server, sim_factory, worker_process_factory,
                                                 temporal_client, task_queue)
    samples: list[tuple[int, float]] = []
    result_task = asyncio.ensure_future(handle.result())
    while not result_task.done():
        used = slots_used(port)
        if used is not None:
            samples.append((rebooting(sim), used))
        await asyncio.sleep(0.25)
    result = result_task.result()
    assert result.outcome == "completed", result.message
    busy = [used for n, used in samples if n >= 4]
    print(f"hand_off={hand_off}: {len(busy)} samples with >= 4 nodes rebooting, slots in use max {max(busy, default=None)}")
    assert busy, f"never four nodes rebooting at once: the test proves nothing ({samples[-20:]})"
    if hand_off:
        assert max(busy) <= 2, f"slots in use while >= 4 nodes rebooted: {busy}"
    else:
        assert max(busy) >= 4, f"with the waits in their activities each rebooting node holds a slot: {busy}"
