"""Benchmark of the simulated API server on a 1,000-node / 20,000-pod cluster (prints figures only).

Measures: store load time, requests/s for GET node, PATCH node annotation (strategic merge) and
LIST pods by spec.nodeName (aiohttp client, concurrency 8, same process and loop as the server,
as in the tests), and watch delivery latency p50/p99 (PATCH response received -> the MODIFIED event
read from an open watch on nodes). No agents run, so only the API is measured.

    python benchmarks/sim_api.py [--nodes 1000] [--pods 20000] [--seconds 3]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import time
from collections.abc import Awaitable, Callable

import aiohttp

from clustersim.sim import ClusterSim


def _populate(sim: ClusterSim, nodes: int, pods: int) -> None:
    from clustersim.scenario import generate_scenario

    t0 = time.perf_counter()
    objects = generate_scenario(nodes, pods).build_objects()
    t1 = time.perf_counter()
    sim.store.load(objects)
    t2 = time.perf_counter()
    print(f"generate_scenario + build_objects: {t1 - t0:.2f} s; Store.load of {len(objects)} objects: "
          f"{t2 - t1:.2f} s")


async def _rate(name: str, seconds: float, concurrency: int, op: Callable[[int], Awaitable[None]]) -> None:
    done = 0
    deadline = time.perf_counter() + seconds

    async def worker(w: int) -> None:
        nonlocal done
        i = w
        while time.perf_counter() < deadline:
            await op(i)
            done += 1
            i += concurrency

    start = time.perf_counter()
    await asyncio.gather(*(worker(w) for w in range(concurrency)))
    elapsed = time.perf_counter() - start
    print(f"{name:<40} {done / elapsed:9.0f} req/s  ({done} requests, concurrency {concurrency})")


async def main(nodes: int, pods: int, seconds: float, concurrency: int) -> None:
    async with ClusterSim(None) as sim:
        _populate(sim, nodes, pods)
        print(f"cluster: {sim.store.count('nodes')} nodes, {sim.store.count('pods')} pods")
        node_names = [k[1] for k in sim.store.iter_keys("nodes")]
        hdr = {"Content-Type": "application/strategic-merge-patch+json"}
        conn = aiohttp.TCPConnector(limit=concurrency * 2)
        async with aiohttp.ClientSession(base_url=sim.url, connector=conn) as http:

            async def get_node(i: int) -> None:
                async with http.get(f"/api/v1/nodes/{node_names[i % len(node_names)]}") as r:
                    await r.read()
                    assert r.status == 200

            async def patch_node(i: int) -> None:
                body = json.dumps({"metadata": {"annotations": {"bench/i": str(i)}}})
                async with http.patch(f"/api/v1/nodes/{node_names[i % len(node_names)]}", data=body,
                                      headers=hdr) as r:
                    await r.read()
                    assert r.status == 200

            async def list_pods(i: int) -> None:
                params = {"fieldSelector": f"spec.nodeName={node_names[i % len(node_names)]}"}
                async with http.get("/api/v1/pods", params=params) as r:
                    await r.read()
                    assert r.status == 200

            await _rate("GET node", seconds, concurrency, get_node)
            await _rate("PATCH node annotation (SMP)", seconds, concurrency, patch_node)
            await _rate("LIST pods fieldSelector=spec.nodeName", seconds, concurrency, list_pods)

            # Watch latency: one watch on all nodes; sequential PATCHes; time until each event arrives.
            latencies: list[float] = []
            params = {"watch": "true", "resourceVersion": str(sim.store.resource_version)}
            async with http.get("/api/v1/nodes", params=params) as watch:
                for i in range(500):
                    name = node_names[i % len(node_names)]
                    body = json.dumps({"metadata": {"annotations": {"bench/w": str(i)}}})
                    async with http.patch(f"/api/v1/nodes/{name}", data=body, headers=hdr) as r:
                        await r.read()
                        sent = time.perf_counter()
                    while True:
                        line = await watch.content.readline()
                        ev = json.loads(line)
                        if ev["object"]["metadata"].get("annotations", {}).get("bench/w") == str(i):
                            break
                    latencies.append((time.perf_counter() - sent) * 1000)
            latencies.sort()
            p99 = latencies[int(len(latencies) * 0.99) - 1]
            print(f"watch delivery after PATCH response: p50 {statistics.median(latencies):.2f} ms, "
                  f"p99 {p99:.2f} ms, max {latencies[-1]:.2f} ms ({len(latencies)} events)")


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=1000)
    ap.add_argument("--pods", type=int, default=20000)
    ap.add_argument("--seconds", type=float, default=3.0)
    ap.add_argument("--concurrency", type=int, default=8)
    args = ap.parse_args()
    asyncio.run(main(args.nodes, args.pods, args.seconds, args.concurrency))
