"""Benchmark of the SDN probe mesh at 100 nodes (prints figures only, asserts nothing).

Measures:
1. the pure mesh (clustersim.sdn.probe): one full re-evaluation (N(N-1) ordered pairs), one node
   change (2(N-1) pairs), a fan-out switching every node's port one by one, and building the report;
2. the running SdnComponent in a ClusterSim with N nodes and ``pods_per_node`` pods (agents on, no
   hosts): CPU used per real second while idle (the input poll re-reads N endpoints per tick, never
   N² pairs), and the real time to switch every node's port and to serve GET /_sim/network/probe.

    python benchmarks/sim_probe.py [--nodes 100] [--time-scale 0.01] [--idle 3]
"""

from __future__ import annotations

import argparse
import asyncio
import time

import aiohttp

from clustersim.sdn.probe import Endpoint, ProbeMesh
from clustersim.sim import ClusterSim


def pure_mesh(n: int) -> None:
    mesh = ProbeMesh()
    names = [f"node-{i:03d}" for i in range(n)]
    for name in names:
        mesh.nodes[name] = Endpoint()
    t0 = time.perf_counter()
    mesh.update_all(0.0)
    t1 = time.perf_counter()
    mesh.nodes[names[0]].port = 4889
    mesh.update_node(names[0], 1.0)
    t2 = time.perf_counter()
    for i, name in enumerate(names[1:], start=1):
        mesh.nodes[name].port = 4889
        mesh.update_node(name, 1.0 + i * 0.001)
    t3 = time.perf_counter()
    rep = mesh.report(2.0)
    t4 = time.perf_counter()
    print(f"pure mesh, {n} nodes ({n * (n - 1)} ordered pairs):")
    print(f"  full re-evaluation:           {1e3 * (t1 - t0):8.2f} ms")
    print(f"  one node changed (2(N-1)):    {1e3 * (t2 - t1):8.3f} ms")
    print(f"  switch all nodes one by one:  {1e3 * (t3 - t2):8.2f} ms  ({mesh.evaluations} evaluations in all)")
    print(f"  report ({len(rep['pairs'])} pairs with outages): {1e3 * (t4 - t3):8.2f} ms")


async def component(n: int, time_scale: float, idle: float, pods_per_node: int) -> None:
    from clustersim.scenario import generate_scenario

    sc = generate_scenario(n, n * pods_per_node, {"worker": n})
    # Without hosts the section's firewall stands for iptables: both ports open, as after R5 step 3.
    sc.sdn = {"probe_interval": 0.5, "firewall": {node.name: [4789, 4889] for node in sc.nodes}}
    async with ClusterSim(sc, time_scale=time_scale) as sim:
        sdn = sim.components["sdn"]
        await asyncio.sleep(0.5)
        c0, w0 = time.process_time(), time.perf_counter()
        await asyncio.sleep(idle)
        c1, w1 = time.process_time(), time.perf_counter()
        print(f"SdnComponent in a ClusterSim, {n} nodes, {n * pods_per_node} pods, time scale {time_scale}:")
        print(f"  idle CPU (agents + input poll every {max(0.02, time_scale * 0.5) * 1e3:.0f} ms real): "
              f"{100 * (c1 - c0) / (w1 - w0):.1f} % of one core")
        t0 = time.perf_counter()
        for name in list(sdn.nodes):  # type: ignore[attr-defined]
            sdn.set_port(name, 4889)  # type: ignore[attr-defined]
        t1 = time.perf_counter()
        async with aiohttp.ClientSession() as s:
            t2 = time.perf_counter()
            async with s.get(f"{sim.url}/_sim/network/probe") as r:
                body = await r.read()
            t3 = time.perf_counter()
        rep = sdn.probe_report()  # type: ignore[attr-defined]
        print(f"  switch every node's port:     {1e3 * (t1 - t0):8.2f} ms real "
              f"(total outage {rep['total_outage_seconds']:.3f} simulated s)")
        print(f"  GET /_sim/network/probe:      {1e3 * (t3 - t2):8.2f} ms ({len(body) / 1024:.0f} KiB)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=100)
    ap.add_argument("--time-scale", type=float, default=0.01)
    ap.add_argument("--idle", type=float, default=3.0, help="real seconds of idle CPU measurement")
    ap.add_argument("--pods-per-node", type=int, default=5)
    args = ap.parse_args()
    pure_mesh(args.nodes)
    asyncio.run(component(args.nodes, args.time_scale, args.idle, args.pods_per_node))


if __name__ == "__main__":
    main()
