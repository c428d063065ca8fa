"""Issue 40, "no slot held for a wait", before the drain: a node run's wait for the daemon's
drain request (``drain_when_asked``) holds none of the worker's activity slots.

Six nodes start at once (maxUnavailable 6) on a simulator whose agents (the machine-config
daemons among them) are stopped, so each node run sets desiredConfig and then waits for a drain
request that does not come. The worker's own Prometheus endpoint says how many activity slots
are in use (``temporal_worker_task_slots_used{worker_type="ActivityWorker"}``) while all six
wait. Handed off to the shared node watch (the default), at most two are; with
``LOCKKEEPER_HAND_OFF_WAITS=false`` (each wait watches in its activity) one slot per waiting
node, which shows the measure can see slots held. Then the agents start again and the rollout
must complete: the handed-off waits see the requests, cordon, drain and hand off. Counts only,
no wall time."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from tests.machineconfig.test_waits_hold_no_slot import NODES, slots_used, start_slot_rollout

pytestmark = pytest.mark.e2e

DESIRED = "machineconfiguration.openshift.io/desiredConfig"
CURRENT = "machineconfiguration.openshift.io/currentConfig"


def waiting_for_request(sim: Any) -> int:
    """Nodes asked for a new config (desiredConfig != currentConfig) whose daemon has not asked
    for a drain yet: the ones a ``drain_when_asked`` call waits on."""
    count = 0
    for n in sim.store.list("nodes"):
        ann = n["metadata"].get("annotations") or {}
        if ann.get(DESIRED) and ann.get(DESIRED) != ann.get(CURRENT) and not ann.get(
                "machineconfiguration.openshift.io/desiredDrain", "").endswith(ann.get(DESIRED, "")):
            count += 1
    return count


@pytest.mark.timeout(240)
@pytest.mark.parametrize("hand_off", [True, False], ids=["handed-off", "in-activity"])
async def test_drain_request_waits_hold_no_activity_slot(dev_server: Any, sim_factory: Any, worker_process_factory: Any,
                                                          temporal_client: Any, task_queue: str, hand_off: bool) -> None:
    async def no_daemons(sim: Any) -> None:
        await sim.agents.stop()  # no daemon: every node run waits for a drain request

    sim, port, handle = await start_slot_rollout("drainslots", 20, hand_off, dev_server, sim_factory, worker_process_factory,
                                                 temporal_client, task_queue, before_start=no_daemons)
    samples: list[tuple[int, float]] = []
    for _ in range(240):  # until 12 samples with all six waiting (at most a minute)
        used = slots_used(port)
        if used is not None:
            samples.append((waiting_for_request(sim), used))
        if sum(1 for n, _ in samples if n == NODES) >= 12:
            break
        await asyncio.sleep(0.25)
    await sim.agents.start()  # the daemons ask now; the rollout must go through
    result = await asyncio.wait_for(handle.result(), timeout=180)
    assert result.outcome == "completed", result.message
    busy = [used for n, used in samples if n == NODES]
    print(f"hand_off={hand_off}: {len(busy)} samples with {NODES} nodes waiting for a drain request, slots in use max {max(busy, default=None)}")
    assert len(busy) >= 12, f"never all {NODES} nodes waiting for a drain request long enough: the test proves nothing ({samples[-20:]})"
    settled = busy[4:]  # the first samples may still see the calls that set desiredConfig
    if hand_off:
        assert max(settled) <= 2, f"slots in use while {NODES} nodes waited for a drain request: {busy}"
    else:
        assert max(settled) >= 4, f"with the waits in their activities each waiting node holds a slot: {busy}"
