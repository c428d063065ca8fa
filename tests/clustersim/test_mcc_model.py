"""The machine-config-controller model: selection rules (pure) and the running component
(maxUnavailable per pool, paused pools, the drain side of the handshake, the kill fault)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from clustersim.mcc.model import node_unavailable, pick_candidates, resolve_max_unavailable
from clustersim.sim import ClusterSim

MCO = "machineconfiguration.openshift.io/"
MCP = "machineconfigpools.machineconfiguration.openshift.io"
NET_OP = "networks.operator.openshift.io"


def _node(name: str, *, cur: str = "a", des: str = "a", state: str = "Done", ready: bool = True,
          zone: str = "z1", created: str = "2024-01-01T00:00:00Z", cordoned: bool = False) -> dict[str, Any]:
    return {"metadata": {"name": name, "creationTimestamp": created,
                         "labels": {"topology.kubernetes.io/zone": zone},
                         "annotations": {MCO + "currentConfig": cur, MCO + "desiredConfig": des, MCO + "state": state}},
            "spec": {"unschedulable": True} if cordoned else {},
            "status": {"conditions": [{"type": "Ready", "status": "True" if ready else "False"}]}}


def _pool(target: str = "b", max_unavailable: Any = 1, paused: bool = False) -> dict[str, Any]:
    return {"spec": {"configuration": {"name": target}, "maxUnavailable": max_unavailable, "paused": paused}}


@pytest.mark.parametrize(("value", "size", "expected"), [
    (None, 5, 1), (2, 5, 2), ("2", 5, 2), ("50%", 5, 2), ("10%", 5, 1), (0, 5, 1), ("100%", 4, 4)])
def test_max_unavailable_resolution(value: Any, size: int, expected: int) -> None:
    assert resolve_max_unavailable(value, size) == expected


def test_unavailable_counts_updating_notready_and_cordoned_nodes() -> None:
    assert not node_unavailable(_node("n"))
    assert node_unavailable(_node("n", des="b"))
    assert node_unavailable(_node("n", state="Working"))
    assert node_unavailable(_node("n", ready=False))
    assert node_unavailable(_node("n", cordoned=True))


def test_candidates_fill_capacity_in_zone_then_age_order() -> None:
    nodes = [_node("c", zone="z2"), _node("b", zone="z1", created="2024-02-01T00:00:00Z"), _node("a", zone="z1")]
    assert pick_candidates(_pool(max_unavailable=2), nodes) == ["a", "b"]
    busy = [_node("x", des="b", state="Working"), *nodes]
    assert pick_candidates(_pool(max_unavailable=2), busy) == ["a"], "a node already updating uses capacity"
    assert pick_candidates(_pool(max_unavailable=1), busy) == []


def test_paused_pool_gets_nothing() -> None:
    assert pick_candidates(_pool(paused=True, max_unavailable=3), [_node("a"), _node("b")]) == []


def test_done_nodes_are_not_candidates() -> None:
    assert pick_candidates(_pool(target="a"), [_node("a")]) == []


async def _until(pred: Any, timeout: float = 60.0) -> None:
    loop = asyncio.get_running_loop()
    end = loop.time() + timeout
    while not pred():
        if loop.time() > end:
            raise AssertionError("condition not reached in time")
        await asyncio.sleep(0.05)


def _pool_updated(sim: ClusterSim, name: str) -> bool:
    pool = sim.store.get(MCP, name)
    conds = {c["type"]: c["status"] for c in pool["status"].get("conditions") or []}
    return conds.get("Updated") == "True" and pool["status"]["configuration"]["name"] == pool["spec"]["configuration"]["name"]


def _rendered_ovn(sim: ClusterSim, pool: str) -> bool:
    sources = [s["name"] for s in sim.store.get(MCP, pool)["spec"]["configuration"]["source"]]
    return any(s.endswith("-ovn") for s in sources)


async def test_controller_rolls_every_pool_within_max_unavailable_and_drains() -> None:
    async with ClusterSim("r1-sdn-to-ovn", time_scale=0.02) as sim:
        in_flight: dict[str, set[str]] = {}
        peak: dict[str, int] = {}
        sub = sim.store.subscribe(["nodes"])

        async def watch() -> None:
            async for ev in sub:
                a = ev.object["metadata"].get("annotations") or {}
                pool = next(r for r in ("master", "infra", "worker") if f"node-role.kubernetes.io/{r}" in ev.object["metadata"]["labels"])
                busy = a.get(MCO + "desiredConfig") != a.get(MCO + "currentConfig")
                s = in_flight.setdefault(pool, set())
                (s.add if busy else s.discard)(ev.object["metadata"]["name"])
                peak[pool] = max(peak.get(pool, 0), len(s))

        task = asyncio.create_task(watch())
        sim.store.mutate(NET_OP, "cluster", None, lambda o: o["spec"].__setitem__("migration", {"networkType": "OVNKubernetes"}))
        await _until(lambda: all(_rendered_ovn(sim, p) for p in ("master", "infra", "worker")))
        await _until(lambda: all(_pool_updated(sim, p) for p in ("master", "infra", "worker")))
        task.cancel()
        sub.close()
        assert peak == {"master": 1, "infra": 1, "worker": 1}, "maxUnavailable 1 per pool, pools in parallel"
        mcc = sim.components["mcc"]
        assert len(mcc.handed_out) == 8
        drained = {n for n, d in mcc.drains if d.startswith("drain-")}
        assert len(drained) == 8 and all(not (n.get("spec") or {}).get("unschedulable") for n in sim.store.list("nodes"))
        evictions = sim.requests.count(verb="create", subresource="eviction")
        assert evictions == 0, "the controller drains in-process, not through lockkeeper's API path"


async def test_paused_pool_is_left_alone_until_unpaused() -> None:
    async with ClusterSim("r1-sdn-to-ovn", time_scale=0.02) as sim:
        sim.store.mutate(MCP, "worker", None, lambda o: o["spec"].__setitem__("paused", True))
        sim.store.mutate(NET_OP, "cluster", None, lambda o: o["spec"].__setitem__("migration", {"networkType": "OVNKubernetes"}))
        await _until(lambda: all(_rendered_ovn(sim, p) for p in ("master", "infra", "worker")))
        await _until(lambda: _pool_updated(sim, "master") and _pool_updated(sim, "infra"))
        assert not _pool_updated(sim, "worker")
        assert not any(n.startswith("qsu-worker") for n, _ in sim.components["mcc"].handed_out)
        sim.store.mutate(MCP, "worker", None, lambda o: o["spec"].__setitem__("paused", False))
        await _until(lambda: _pool_updated(sim, "worker"))


async def test_kill_fault_stops_the_rollout_mid_way() -> None:
    async with ClusterSim("r1-sdn-to-ovn", time_scale=0.02, component_sections={"mcc": {"kill_after_nodes": 3}}) as sim:
        sim.store.mutate(NET_OP, "cluster", None, lambda o: o["spec"].__setitem__("migration", {"networkType": "OVNKubernetes"}))
        mcc = sim.components["mcc"]
        await _until(lambda: not mcc.running)
        await asyncio.sleep(2.0)  # several reboot times: nothing more happens
        assert len(mcc.handed_out) == 3
        assert not any(_pool_updated(sim, p) for p in ("master", "infra", "worker"))
        stuck = [n["metadata"]["name"] for n in sim.store.list("nodes")
                 if n["metadata"]["annotations"].get(MCO + "desiredDrain", "").startswith("drain-")
                 and n["metadata"]["annotations"].get(MCO + "lastAppliedDrain") != n["metadata"]["annotations"][MCO + "desiredDrain"]]
        assert stuck, "daemons wait for a drain nobody does (R1)"
        mcc.revive()
        await _until(lambda: all(_pool_updated(sim, p) for p in ("master", "infra", "worker")))
