"""The crash matrix: SIGKILL the worker at distinct points of the node handshake, restart it, and
check from clustersim's own record that the rollout still finished cleanly.

Assertions come from the simulator (its store's node events and its request record), never from
lockkeeper's logs: no pod evicted twice, no node cordoned (so drained) twice, no node left
cordoned, never more than maxUnavailable nodes in flight.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest

from clustersim.scenario import generate_scenario
from tests.support.harness import ClusterObserver, drive, forget_dead_worker, start_rollout, successful_evictions

pytestmark = pytest.mark.e2e

# Kill recovery (activity heartbeat/start-to-close timeouts) costs seconds of real time per
# kill; at 0.1 the daemon's scaled 10-minute uncordon deadline (60 s) leaves room for two kills
# on the same node even on a loaded machine.
SCALE = 0.1
MCO = "machineconfiguration.openshift.io/"


def _ann(obj: dict[str, Any] | None, key: str) -> str | None:
    return ((obj or {}).get("metadata") or {}).get("annotations", {}).get(MCO + key)


def _changed_to(key: str, pred: Callable[[str], bool]) -> Callable[[Any], bool]:
    def check(ev: Any) -> bool:
        new, old = _ann(ev.object, key), _ann(ev.old, key)
        return new != old and new is not None and pred(new)

    return check


def _unschedulable_became(value: bool) -> Callable[[Any], bool]:
    def check(ev: Any) -> bool:
        new = bool((ev.object.get("spec") or {}).get("unschedulable"))
        old = bool(((ev.old or {}).get("spec") or {}).get("unschedulable"))
        return ev.old is not None and new == value and old != value

    return check


# (name, node index the point is taken on, predicate on that node's events). Every handshake
# step of DESIGN.md appears at least once; several are hit on different nodes.
NODE_POINTS: list[tuple[str, int, Callable[[Any], bool]]] = [
    ("desiredConfig set", 0, _changed_to("desiredConfig", lambda v: v.startswith("rendered-"))),
    ("daemon asked for drain", 0, _changed_to("desiredDrain", lambda v: v.startswith("drain-"))),
    ("cordoned", 1, _unschedulable_became(True)),
    ("lastAppliedDrain=drain", 1, _changed_to("lastAppliedDrain", lambda v: v.startswith("drain-"))),
    ("rebooting", 2, _changed_to("state", lambda v: v == "Rebooting")),
    ("daemon asked for uncordon", 2, _changed_to("desiredDrain", lambda v: v.startswith("uncordon-"))),
    ("uncordoned", 3, _unschedulable_became(False)),
    ("lastAppliedDrain=uncordon", 3, _changed_to("lastAppliedDrain", lambda v: v.startswith("uncordon-"))),
    ("node done", 4, _changed_to("state", lambda v: v == "Done")),
    ("daemon working", 5, _changed_to("state", lambda v: v == "Working")),
]


@pytest.mark.timeout(540)
async def test_worker_killed_at_every_handshake_step(sim_factory, worker_for, temporal_client, task_queue) -> None:
    scenario = generate_scenario(
        nodes=6, pods=24, pools={"worker": 6}, name="crash-matrix", reboot_seconds=20, pod_start_seconds=1,
        namespaces=2, pods_per_deployment=4,
    )
    sim = await sim_factory(scenario, time_scale=SCALE)
    nodes = sorted(n["metadata"]["name"] for n in sim.store.list("nodes"))
    worker = await worker_for(sim)
    observer = ClusterObserver(sim.store)
    observer.start()

    kills: list[str] = []
    pending = {i: (name, nodes[idx], pred) for i, (name, idx, pred) in enumerate(NODE_POINTS)}
    first_eviction_seen = False
    lock = asyncio.Lock()

    async def kill_and_restart(point: str) -> None:
        async with lock:
            await worker.kill()
            kills.append(point)
            await forget_dead_worker(temporal_client, task_queue)
            await worker.start()

    sub = sim.store.subscribe(["nodes"])

    async def watch_points() -> None:
        async for ev in sub:
            name = ev.object["metadata"]["name"]
            for key, (point, node, pred) in list(pending.items()):
                if node == name and pred(ev):
                    del pending[key]
                    asyncio.get_running_loop().create_task(kill_and_restart(f"{point} on {node}"))

    async def watch_evictions(status: Any) -> None:
        nonlocal first_eviction_seen
        if not first_eviction_seen and successful_evictions(sim.requests):
            first_eviction_seen = True
            await kill_and_restart("mid-drain, after the first eviction")

    watcher = asyncio.get_running_loop().create_task(watch_points())
    handle = await start_rollout(
        temporal_client, task_queue, cluster="crash", pools=["worker"], max_unavailable=2,
        drain={"backoff_initial_seconds": 1, "backoff_max_seconds": 3, "wait_seconds": 5},
        daemon={"drain_deadline_seconds": 3600 * SCALE, "uncordon_deadline_seconds": 600 * SCALE},
        # A killed worker's activities are retried after these timeouts: short ones keep the
        # ten kills within the suite's time budget (the calls themselves take milliseconds).
        calls={"short_call_seconds": 6, "heartbeat_seconds": 5},
    )
    try:
        result = await drive(handle, timeout=500, on_status=watch_evictions)
    finally:
        watcher.cancel()
        sub.close()
        observer.stop()

    assert result.outcome == "completed", result.message
    assert len(kills) >= 10, f"only {len(kills)} kill points were reached: {kills}; missed {list(pending.values())}"
    evictions = successful_evictions(sim.requests)
    assert evictions and max(evictions.values()) == 1, f"pods evicted twice: {[p for p, n in evictions.items() if n > 1]}"
    assert dict(observer.cordons) == {n: 1 for n in nodes}, f"cordons per node: {dict(observer.cordons)}"
    assert observer.max_in_flight <= 2
    for node in sim.store.list("nodes"):
        ann = node["metadata"]["annotations"]
        assert not (node.get("spec") or {}).get("unschedulable"), f"{node['metadata']['name']} left cordoned"
        assert ann[MCO + "state"] == "Done" and ann[MCO + "currentConfig"] == ann[MCO + "desiredConfig"]
        assert "lockkeeper.io/cordoned-by" not in ann
