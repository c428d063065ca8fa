"""An abort in the middle of a rollout leaves every node whole: nothing half-done, unreported.

A generated pool of 24 nodes rolls 6 at a time on clustersim, whose API server answers every node
PATCH 0.4 s late (a slow API server). Once a few nodes are done, the rollout is aborted at a moment
when a node run is in its first ``drain_when_asked`` call and its desiredConfig write has not
landed yet; the other runs are in every other step. That call learns of the cancel only with its
next heartbeat, so its write lands after the abort: the node run must roll back once the call has
ended (feature ``stop-settles-call``), not read the node before the write lands.

When the rollout has returned and the daemons have settled, every node is either updated (Done at
the new config) or at its old one with no update pending (desiredConfig == currentConfig), and
none is left cordoned by the rollout. Each node's result says which (done, or aborted: rolled
back or never started)."""

from __future__ import annotations

import asyncio
import time
import uuid
from typing import Any

import pytest

from activities.cluster.models import ANN_CORDONED_BY, ANN_CURRENT_CONFIG, ANN_DESIRED_CONFIG, ANN_STATE
from tests.support.harness import fast_timings, node_annotations, start_rollout, status, worker_pool_scenario
from workflows.kit.models import ControlInput

pytestmark = pytest.mark.e2e

SCALE = 0.05
NODES, WINDOW = 24, 6
LATENCY = 0.4


def _whole(store: Any, name: str, owner_prefix: str) -> str | None:
    """Why node ``name`` is not whole, or None."""
    node = store.get("nodes", name)
    ann = node_annotations(store, name)
    if ann.get(ANN_DESIRED_CONFIG) != ann.get(ANN_CURRENT_CONFIG):
        return f"update pending: desired {ann.get(ANN_DESIRED_CONFIG)} current {ann.get(ANN_CURRENT_CONFIG)}"
    if ann.get(ANN_STATE) != "Done":
        return f"daemon state {ann.get(ANN_STATE)}"
    if node["spec"].get("unschedulable") or (ann.get(ANN_CORDONED_BY) or "").startswith(owner_prefix):
        return f"cordoned ({ann.get(ANN_CORDONED_BY)})"
    return None


@pytest.mark.timeout(600)
async def test_an_abort_mid_rollout_leaves_every_node_done_or_as_it_was(
    sim_factory: Any, worker_for: Any, task_queue: str, temporal_client: Any
) -> None:
    scenario = worker_pool_scenario(NODES, "abort-whole")
    sim = await sim_factory(scenario, time_scale=SCALE)
    await worker_for(sim)
    old = {n["metadata"]["name"]: node_annotations(sim.store, n["metadata"]["name"])[ANN_CURRENT_CONFIG]
           for n in sim.store.list("nodes")}
    sim.faults.configure(latency_seconds=LATENCY, verbs=["patch"], resources=["nodes"])
    handle = await start_rollout(temporal_client, task_queue, cluster=f"abortwhole-{uuid.uuid4().hex[:6]}", pools=["worker"],
                                 max_unavailable=WINDOW, **fast_timings(SCALE))
    deadline = time.monotonic() + 300
    caught = None
    while caught is None:  # abort once nodes are done and a run's first write is still in flight
        st = await status(handle)
        done = sum(1 for ns in st.nodes.values() if ns.phase == "done")
        first_call = [n for n, ns in st.nodes.items() if ns.phase == "running" and ns.step == "wait-drain-request"
                      and node_annotations(sim.store, n)[ANN_DESIRED_CONFIG] == old[n]]
        if done >= 2 and first_call:
            caught = first_call[0]
        assert time.monotonic() < deadline, st
        await asyncio.sleep(0.02)
    await handle.execute_update("abort", ControlInput(identity="e2e-operator", reason="stop mid-rollout"))
    result = await handle.result()
    assert result.outcome == "aborted", result.message
    sim.faults.clear()
    phases = {n: r.phase for n, r in result.nodes.items()}
    assert set(phases.values()) <= {"done", "aborted"}, phases
    assert "aborted" in phases.values() and "done" in phases.values(), phases

    owner_prefix = f"{handle.id}/node/"
    for _ in range(200):  # a rolled-back node's daemon goes back to Done on its own reaction
        broken = {n: why for n in phases if (why := _whole(sim.store, n, owner_prefix))}
        if not broken:
            break
        await asyncio.sleep(0.05)
    assert not broken, (caught, broken)
    for name, phase in phases.items():
        current = node_annotations(sim.store, name)[ANN_CURRENT_CONFIG]
        if phase == "aborted":
            assert current == old[name], (name, current)  # rolled back or never started
        else:
            assert current != old[name], (name, current)
