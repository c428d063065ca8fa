"""Cost of the simulator's snapshots and diffs (clustersim.snapshots; prints figures only).

1. A 7-node scenario with hosts, masters and the SDN model (``r5-vxlan-port``, agents running):
   ``--count`` snapshots taken over HTTP one after the other (wall time per ``POST
   /_sim/snapshots``, and the capture's own event-loop time), then a diff of each against the
   world now (wall time per ``GET .../diff``), and the Python heap each snapshot keeps
   (tracemalloc).
2. A generated ``--nodes``-node store with ``--pods`` pods (no agents, no hosts): the capture's
   event-loop time, the comparison time (in a worker thread), the longest stall of the event loop
   during a diff (a ticker sleeping 1 ms records its largest gap; the client parses the answer
   on the same loop, so this includes its share), and a diff after 100 node
   label changes and 1,000 pods replaced by Ready pods of the same owners under new names.

    python benchmarks/sim_snapshot.py [--count 50] [--nodes 2000] [--pods 20000]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
import tracemalloc
from typing import Any

import aiohttp

from clustersim.sim import ClusterSim
from clustersim.snapshots import client


def _ms(values: list[float]) -> str:
    return (f"median {statistics.median(values):.2f} ms, p90 {sorted(values)[int(len(values) * 0.9)]:.2f} ms, "
            f"max {max(values):.2f} ms")


async def _settle(sim: ClusterSim) -> None:
    from clustersim.agents.logic import pod_ready

    for _ in range(400):
        sdn = sim.components.get("sdn")
        if all(pod_ready(p) for p in sim.store.list_refs("pods")) and all(
                n.port_at_start is not None for n in getattr(sdn, "nodes", {}).values()):
            return
        await asyncio.sleep(0.05)


async def small(count: int) -> None:
    async with ClusterSim("r5-vxlan-port", time_scale=0.05) as sim:
        await _settle(sim)
        async with aiohttp.ClientSession() as http:
            takes, captures, ids = [], [], []
            tracemalloc.start()
            heap0 = tracemalloc.get_traced_memory()[0]
            for i in range(count):
                t0 = time.perf_counter()
                info = await client.take_info(sim.url, f"b{i}", session=http)
                takes.append((time.perf_counter() - t0) * 1000)
                captures.append(info.capture_ms)
                ids.append(info.id)
            heap1 = tracemalloc.get_traced_memory()[0]
            tracemalloc.stop()
            diffs, compares = [], []
            for sid in ids:
                t0 = time.perf_counter()
                d = await client.diff(sim.url, sid, session=http)
                diffs.append((time.perf_counter() - t0) * 1000)
                compares.append(d.compare_ms)
            info0 = (await client.list_snapshots(sim.url, session=http))[0]
        print(f"7 nodes ({info0.objects} API objects, {info0.hosts} hosts, masters, SDN), {count} snapshots:")
        print(f"  POST /_sim/snapshots round trip: {_ms(takes)}")
        print(f"  capture on the event loop:       {_ms(captures)}")
        print(f"  GET .../diff round trip:         {_ms(diffs)}")
        print(f"  comparison (worker thread):      {_ms(compares)}")
        print(f"  heap kept per snapshot:          {(heap1 - heap0) / count / 1024:.1f} KiB")


async def _ticker(stop: asyncio.Event, gaps: list[float]) -> None:
    last = time.perf_counter()
    while not stop.is_set():
        await asyncio.sleep(0.001)
        now = time.perf_counter()
        gaps.append((now - last) * 1000)
        last = now


async def _timed_diff(url: str, sid: str, http: Any) -> tuple[Any, float, list[float]]:
    """A diff against snapshot ``sid``: (the diff, its round trip in ms, the event loop's gaps in
    ms while it ran, as :func:`_ticker` records them)."""
    stop, gaps = asyncio.Event(), []
    tick = asyncio.create_task(_ticker(stop, gaps))
    t0 = time.perf_counter()
    d = await client.diff(url, sid, session=http)
    wall = (time.perf_counter() - t0) * 1000
    stop.set()
    await tick
    return d, wall, gaps


async def big(nodes: int, pods: int) -> None:
    from clustersim.scenario import generate_scenario

    async with ClusterSim(None) as sim:
        sim.store.load(generate_scenario(nodes, pods).build_objects())
        async with aiohttp.ClientSession() as http:
            tracemalloc.start()
            heap0 = tracemalloc.get_traced_memory()[0]
            infos = [await client.take_info(sim.url, session=http) for _ in range(5)]
            heap = (tracemalloc.get_traced_memory()[0] - heap0) / 5
            tracemalloc.stop()
            sid = infos[-1].id
            d, wall, gaps = await _timed_diff(sim.url, sid, http)
            print(f"{nodes} nodes, {infos[0].objects} API objects (no hosts):")
            print(f"  capture on the event loop: {_ms([i.capture_ms for i in infos])} "
                  f"(under tracemalloc); heap kept per snapshot {heap / 1024 / 1024:.1f} MiB")
            print(f"  diff (no change): round trip {wall:.0f} ms, comparison {d.compare_ms:.0f} ms, "
                  f"capture {d.after.capture_ms:.1f} ms; longest event-loop stall {max(gaps):.1f} ms")
            for name in [f"worker-{i:04d}" for i in range(100)]:
                sim.store.mutate("nodes", name, None, lambda o: o["metadata"]["labels"].__setitem__("x", "1"))
            replaced = 0
            for pod in list(sim.store.list_refs("pods"))[:1000]:
                m: dict[str, Any] = pod["metadata"]
                sim.store.delete("pods", m["name"], m["namespace"], grace_period_seconds=0)
                new = dict(pod)  # the replacement is Running and Ready, as after a drain
                new["metadata"] = {k: v for k, v in m.items() if k not in ("uid", "resourceVersion")}
                new["metadata"]["name"] = m["name"] + "-r"
                sim.store.create("pods", new)
                replaced += 1
            d, wall, gaps = await _timed_diff(sim.url, sid, http)
            print(f"  diff after 100 label changes and {replaced} pod replacements: {len(d.objects)} objects, "
                  f"{len(d.pods)} pod groups; round trip {wall:.0f} ms, comparison {d.compare_ms:.0f} ms; "
                  f"longest event-loop stall {max(gaps):.1f} ms")


async def main(count: int, nodes: int, pods: int) -> None:
    await small(count)
    await big(nodes, pods)


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--count", type=int, default=50)
    ap.add_argument("--nodes", type=int, default=2000)
    ap.add_argument("--pods", type=int, default=20000)
    a = ap.parse_args()
    asyncio.run(main(a.count, a.nodes, a.pods))
