"""Benchmark: the R5 fan-out (``switch_vxlan_port``) on generated clusters of 10, 100 and 500 nodes.

Each size is the ``r5-vxlan-port`` scenario with its node list replaced by N nodes (3 masters,
the rest compute), one SDN pod and one probe pod per node, every node's firewall already open
for both ports (the barrier's result), and no simulated SSH hosts or master APIs (the fan-out
execs into the SDN pods through the real API server, which is all it needs). The fan-out
activity runs in this process against the simulator over real HTTP and websockets.

Prints, per size: the fan-out window (first ``set`` start to last ``set`` end, on the
activity's one clock), the whole activity's duration (check, switch, verify), and from the
simulator's probe mesh the outage per ordered node pair (max and mean, converted from simulated
to real seconds) and the time any pair was down. Figures only; nothing is asserted.

Usage: ``.venv/bin/python benchmarks/vxlan_fanout.py [--sizes 10,100,500] [--scale 0.05]``
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from pathlib import Path
from typing import Any

import yaml

from activities.kube.gateway import KubeGateway
from activities.vxlan_port.activities import VxlanActivities
from activities.vxlan_port.models import FanoutInput, ResolveTargetsInput
from clustersim.scenario import Scenario
from clustersim.sim import ClusterSim

SCENARIO = Path(__file__).resolve().parent.parent / "clustersim" / "scenarios" / "r5-vxlan-port.yaml"
NEW, OLD = 4889, 4789


def scenario(nodes: int) -> Scenario:
    """``r5-vxlan-port`` with ``nodes`` nodes, without hosts/masters, firewalls open for both ports."""
    doc = yaml.safe_load(SCENARIO.read_text())
    template = doc["nodes"]
    names = [f"ocp-master-{i:02d}" for i in range(1, 4)] + [f"ocp-node-{i:03d}" for i in range(1, nodes - 2)]
    doc["nodes"] = [{**template[0 if n.startswith("ocp-master") else 3], "name": n} for n in names[:nodes]]
    doc["name"] = f"r5-vxlan-{nodes}"
    for key in ("hosts", "masters"):
        doc.pop(key, None)
    doc["sdn"]["firewall"] = {n: [OLD, NEW] for n in names[:nodes]}
    # The SDN pods run the image without the port health check, as after phase C (the stock
    # image is listed as custom): a health-check restart is not what this measures.
    doc["sdn"]["custom_images"] = ["registry.redhat.io/openshift3/ose-node:v3.11"]
    return Scenario.model_validate(doc)


async def one(nodes: int, scale: float) -> dict[str, Any]:
    async with ClusterSim(scenario(nodes), time_scale=scale) as sim:
        sdn = sim.components["sdn"]
        deadline = time.monotonic() + 600
        while not (len(sdn.nodes) == nodes and all(n.sdn == "running" for n in sdn.nodes.values())):
            if time.monotonic() > deadline:
                raise TimeoutError(f"{nodes} SDN pods not running")
            await asyncio.sleep(0.2)
        gw = await asyncio.to_thread(KubeGateway.from_kubeconfig, sim.kubeconfig_path)
        acts = VxlanActivities(lambda: gw)
        targets = await acts.resolve_sdn_targets(ResolveTargetsInput(nodes=sorted(sdn.nodes)))
        t0 = time.monotonic()
        res = await acts.switch_vxlan_port(FanoutInput(targets=targets, port=NEW, deadline_seconds=600, command_timeout_seconds=120))
        took = time.monotonic() - t0
        probe = sdn.probe_report()
        per_pair = [sum((s["end"] or probe["now"]) - s["start"] for s in spans) * scale for spans in probe["pairs"].values()]
        pairs = nodes * (nodes - 1)
        return {
            "nodes": nodes, "failed": len(res.failed), "window_seconds": res.window_seconds, "activity_s": took,
            "pairs_with_outage": len(per_pair), "pairs": pairs,
            "pair_outage_max_s": max(per_pair, default=0.0),
            "pair_outage_mean_s": (sum(per_pair) / pairs) if pairs else 0.0,
            "pair_outage_median_s": statistics.median(per_pair) if per_pair else 0.0,
            "any_pair_down_s": probe["total_outage_seconds"] * scale,
        }


async def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="10,100,500")
    ap.add_argument("--scale", type=float, default=0.05, help="simulator time scale (real s per simulated s)")
    args = ap.parse_args()
    print(f"{'nodes':>6} {'failed':>6} {'window_seconds':>9} {'activity_s':>10} {'pairs_down':>12} "
          f"{'pair_max_s':>10} {'pair_mean_s':>11} {'pair_median_s':>13} {'any_down_s':>10}")
    for n in (int(x) for x in args.sizes.split(",")):
        r = await one(n, args.scale)
        print(f"{r['nodes']:>6} {r['failed']:>6} {r['window_seconds']:>9.3f} {r['activity_s']:>10.3f} "
              f"{r['pairs_with_outage']:>5}/{r['pairs']:<6} {r['pair_outage_max_s']:>10.3f} {r['pair_outage_mean_s']:>11.4f} "
              f"{r['pair_outage_median_s']:>13.3f} {r['any_pair_down_s']:>10.3f}", flush=True)


if __name__ == "__main__":
    asyncio.run(main())
