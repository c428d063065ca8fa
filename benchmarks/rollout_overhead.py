"""Orchestration overhead of a MachineConfig rollout (prints figures; asserts nothing).

Runs a real Temporal dev server, clustersim with a generated pool of ``--nodes`` nodes (fixed
simulated reboot and drain times), and a lockkeeper worker in a child process, then rolls the
pool with ``max_unavailable``. Prints:

- ideal time: batches × per-node cluster time (drain + files + reboot, from the scenario's
  fixed timings and ``--time-scale``), the actual time, and their ratio (target ≤ 1.05);
- history events per node: the parent's history length / nodes, and the children's mean;
- reaction latency p50/p99: from a daemon annotation change (desiredDrain=drain-X or
  uncordon-X, seen in clustersim's store) to lockkeeper's next write on that node (the cordon or
  uncordon PATCH in clustersim's request record). Target p99 < 1 s.

Usage: ``python benchmarks/rollout_overhead.py [--nodes 100] [--max-unavailable 10]
[--reboot-seconds 300] [--drain-seconds 30] [--time-scale 0.2]``

The simulator compresses the cluster's own time by ``--time-scale`` but lockkeeper's overhead
(Temporal round trips, a fixed few hundred milliseconds per node) is real time, so the ratio
depends on the scale: measured 1.16 at 0.05 (about 3 minutes) and 1.035 at the default 0.2
(about 11 minutes) on the 2-core machine, for 100 nodes with max_unavailable 10.
"""

from __future__ import annotations

import argparse
import asyncio
import math
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from clustersim import ClusterSim  # noqa: E402
from clustersim.scenario import generate_scenario  # noqa: E402
from lockkeeper.client import connect  # noqa: E402
from lockkeeper.devserver import DevServer  # noqa: E402
from lockkeeper.procs import WorkerProcess  # noqa: E402
from lockkeeper.settings import Settings  # noqa: E402
from workflows.models import MachineConfigRolloutInput, MachineConfigRolloutResult  # noqa: E402

MCO = "machineconfiguration.openshift.io/"


def _pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, math.ceil(q * len(ordered)) - 1))]


async def main(args: argparse.Namespace) -> None:
    scale = args.time_scale
    scenario = generate_scenario(
        nodes=args.nodes, pods=args.nodes * args.pods_per_node, pools={"worker": args.nodes}, name="overhead",
        reboot_seconds=args.reboot_seconds, write_files_seconds=args.files_seconds, pod_start_seconds=1,
        namespaces=5, pods_per_deployment=max(1, args.pods_per_node),
    )
    with tempfile.TemporaryDirectory(prefix="lk-bench-") as tmp:
        async with DevServer(Path(tmp) / "temporal", headless=True) as server:
            async with ClusterSim(scenario, time_scale=scale) as sim:
                sim.store.pod_termination_seconds = args.drain_seconds
                queue = f"bench-{uuid.uuid4().hex[:6]}"
                worker = WorkerProcess(address=server.address, kubeconfig=sim.kubeconfig_path, task_queue=queue,
                                       log_path=Path(tmp) / "worker.log")
                await worker.start()
                client = await connect(Settings(temporal_address=server.address))

                # Daemon annotation changes, as clustersim's store commits them: (node, value) -> time.
                asks: dict[tuple[str, str], float] = {}
                sub = sim.store.subscribe(["nodes"])

                async def follow() -> None:
                    async for ev in sub:
                        new = (ev.object["metadata"].get("annotations") or {}).get(MCO + "desiredDrain")
                        old = (((ev.old or {}).get("metadata") or {}).get("annotations") or {}).get(MCO + "desiredDrain")
                        if new and new != old:
                            asks.setdefault((ev.object["metadata"]["name"], new.split("-")[0]), time.time())

                follower = asyncio.get_running_loop().create_task(follow())
                sim.requests.clear()
                started = time.monotonic()
                handle = await client.start_workflow(
                    "MachineConfigRolloutWorkflow",
                    MachineConfigRolloutInput(
                        cluster="bench", pools=["worker"], max_unavailable=args.max_unavailable,
                        requested_by="benchmark", drain_backoff_initial_seconds=1, drain_wait_seconds=30,
                        daemon_drain_deadline_seconds=3600 * scale, daemon_uncordon_deadline_seconds=600 * scale,
                    ),
                    id=f"bench-{uuid.uuid4().hex[:8]}", task_queue=queue, result_type=MachineConfigRolloutResult,
                )
                result = await handle.result()
                actual = time.monotonic() - started
                follower.cancel()
                sub.close()

                # Reaction: the first node write (PATCH) by lockkeeper after each daemon ask.
                patches = sorted(
                    (e.time, e.name) for e in sim.requests.entries(verb="patch", resource="nodes") if e.code < 300
                )
                latencies: list[float] = []
                for (node, kind), asked in asks.items():
                    nxt = next((t for t, n in patches if n == node and t >= asked), None)
                    if nxt is not None and kind in ("drain", "uncordon"):
                        latencies.append(nxt - asked)

                parent_events = len((await handle.fetch_history()).events)
                child_events: list[int] = []
                async for wf in client.list_workflows(f"WorkflowType = 'NodeRolloutWorkflow' AND WorkflowId STARTS_WITH '{handle.id}/'"):
                    child_events.append(len((await client.get_workflow_handle(wf.id, run_id=wf.run_id).fetch_history()).events))
                await worker.stop()

    batches = math.ceil(args.nodes / args.max_unavailable)
    per_node = (args.drain_seconds + args.files_seconds + args.reboot_seconds) * scale
    ideal = batches * per_node
    print(f"rollout: {args.nodes} nodes, max_unavailable={args.max_unavailable}, outcome={result.outcome}")
    print(f"per-node cluster time: {per_node:.2f}s real (drain {args.drain_seconds}s + files {args.files_seconds}s"
          f" + reboot {args.reboot_seconds}s simulated, time scale {scale})")
    print(f"ideal time (batches {batches} x per-node): {ideal:.1f}s")
    print(f"actual time: {actual:.1f}s")
    print(f"ratio actual/ideal: {actual / ideal:.3f}   (target <= 1.05)")
    print(f"history events: parent {parent_events} total = {parent_events / args.nodes:.1f}/node;"
          f" child mean {statistics.mean(child_events) if child_events else float('nan'):.1f}"
          f" (max {max(child_events) if child_events else 0}, {len(child_events)} children)")
    print(f"reaction latency (daemon annotation -> next lockkeeper write), n={len(latencies)}:"
          f" p50 {_pct(latencies, 0.5) * 1000:.0f} ms, p99 {_pct(latencies, 0.99) * 1000:.0f} ms (target p99 < 1000 ms)")


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--nodes", type=int, default=100)
    p.add_argument("--max-unavailable", type=int, default=10)
    p.add_argument("--reboot-seconds", type=float, default=300.0, help="simulated reboot time")
    p.add_argument("--drain-seconds", type=float, default=30.0, help="simulated pod termination time")
    p.add_argument("--files-seconds", type=float, default=2.0, help="simulated time the daemon writes files")
    p.add_argument("--pods-per-node", type=int, default=2)
    p.add_argument("--time-scale", type=float, default=0.2)
    asyncio.run(main(p.parse_args()))
