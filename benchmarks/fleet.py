"""Fleet: 50 concurrent MachineConfig rollouts of 10-node pools on one worker, then on two
(prints figures; asserts nothing).

One clustersim with ``--rollouts`` pools of ``--pool-size`` nodes (generated scenario, fixed
drain and reboot times compressed by ``--time-scale``), a real Temporal dev server, and
lockkeeper worker processes on one task queue. Every rollout rolls its own pool (maxUnavailable
``--max-unavailable``), all started at once. Prints, per setup: completion of all rollouts, wall
time against the ideal of one pool, the workers' peak resident memory (VmHWM of each worker
process and its children, from /proc; target under 1 GiB), the reaction latency p50/p99 (daemon
annotation -> lockkeeper's next write on that node, as in rollout_overhead.py) and, with two
workers, how many node runs each worker's workflow tasks served (both must take work).

    python benchmarks/fleet.py [--rollouts 50] [--pool-size 10] [--time-scale 0.1]
"""

from __future__ import annotations

import argparse
import asyncio
import math
import sys
import tempfile
import time
import uuid
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from benchmarks.cluster_view import note_drain_ask, pct  # noqa: E402
from temporalio.api.enums.v1 import EventType  # noqa: E402

from clustersim import ClusterSim  # noqa: E402
from clustersim.scenario import generate_scenario  # noqa: E402
from lockkeeper.devserver import DevServer  # noqa: E402
from lockkeeper.procs import WorkerProcess  # noqa: E402
from workers.client import connect  # noqa: E402
from workers.settings import Settings  # noqa: E402
from workflows.machineconfig.models import MachineConfigRolloutInput, MachineConfigRolloutResult  # noqa: E402


def tree_hwm_kib(pid: int) -> int:
    """Peak resident memory (VmHWM, KiB) of ``pid`` plus its direct children (Linux /proc)."""
    pids = [pid]
    try:
        for task in Path(f"/proc/{pid}/task").iterdir():
            children = (task / "children").read_text().split()
            pids += [int(c) for c in children]
    except OSError:
        pass
    total = 0
    for p in dict.fromkeys(pids):
        try:
            for line in Path(f"/proc/{p}/status").read_text().splitlines():
                if line.startswith("VmHWM:"):
                    total += int(line.split()[1])
        except OSError:
            continue
    return total


async def fleet(server: DevServer, tmp: Path, args: argparse.Namespace, workers: int) -> None:
    pools = {f"pool{i:02d}": args.pool_size for i in range(args.rollouts)}
    nodes = args.rollouts * args.pool_size
    scenario = generate_scenario(
        nodes=nodes, pods=nodes, pools=pools, name="fleet", reboot_seconds=args.reboot_seconds,
        write_files_seconds=args.files_seconds, pod_start_seconds=1, namespaces=5, pods_per_deployment=1,
    )
    scale = args.time_scale
    async with ClusterSim(scenario, time_scale=scale) as sim:
        sim.store.pod_termination_seconds = args.drain_seconds
        queue = f"fleet-{uuid.uuid4().hex[:6]}"
        procs = [
            WorkerProcess(address=server.address, kubeconfig=sim.kubeconfig_path, task_queue=queue,
                          log_path=tmp / f"worker-{queue}-{i}.log")
            for i in range(workers)
        ]
        for w in procs:
            await w.start()
        client = await connect(Settings(temporal_address=server.address))
        asks: dict[tuple[str, str], float] = {}
        sub = sim.store.subscribe(["nodes"])

        async def follow() -> None:
            async for ev in sub:
                note_drain_ask(asks, ev.object["metadata"]["name"], ev.object["metadata"].get("annotations"),
                               ((ev.old or {}).get("metadata") or {}).get("annotations"), time.time())

        follower = asyncio.get_running_loop().create_task(follow())
        sim.requests.clear()
        started = time.monotonic()
        handles = await asyncio.gather(*(
            client.start_workflow(
                "MachineConfigRolloutWorkflow",
                MachineConfigRolloutInput(
                    cluster="fleet", pools=[pool], max_unavailable=args.max_unavailable, approvals={"requested_by": "benchmark"},
                    drain={"backoff_initial_seconds": 1, "wait_seconds": 30},
                    daemon={"drain_deadline_seconds": 3600 * scale, "uncordon_deadline_seconds": 600 * scale},
                    **({} if args.local_calls_above is None else {"local_calls_above": args.local_calls_above}),
                ),
                id=f"fleet-{queue}-{pool}", task_queue=queue, result_type=MachineConfigRolloutResult,
            )
            for pool in pools
        ))
        results = await asyncio.gather(*(asyncio.wait_for(h.result(), args.timeout) for h in handles), return_exceptions=True)
        wall = time.monotonic() - started
        follower.cancel()
        sub.close()
        hwm = [tree_hwm_kib(w._proc.pid) if w._proc else 0 for w in procs]  # noqa: SLF001 - a benchmark reads the pid

        patches = sorted((e.time, e.name) for e in sim.requests.entries(verb="patch", resource="nodes") if e.code < 300)
        latencies = []
        for (node, kind), asked in asks.items():
            nxt = next((t for t, n in patches if n == node and t >= asked), None)
            if nxt is not None and kind in ("drain", "uncordon"):
                latencies.append(nxt - asked)

        served: Counter[str] = Counter()
        if workers > 1:
            async for wf in client.list_workflows(f"WorkflowType = 'NodeRolloutWorkflow' AND WorkflowId STARTS_WITH 'fleet-{queue}-'"):
                hist = await client.get_workflow_handle(wf.id, run_id=wf.run_id).fetch_history()
                ids = {e.workflow_task_started_event_attributes.identity for e in hist.events
                       if e.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_STARTED}
                for ident in ids:
                    served[ident] += 1
        for w in procs:
            await w.stop()

    completed = sum(1 for r in results if not isinstance(r, BaseException) and r.outcome == "completed")
    per_node = (args.drain_seconds + args.files_seconds + args.reboot_seconds) * scale
    ideal = math.ceil(args.pool_size / args.max_unavailable) * per_node
    print(f"--- {args.rollouts} rollouts x {args.pool_size} nodes, {workers} worker(s) ---")
    print(f"completed: {completed}/{args.rollouts}" + ("" if completed == args.rollouts else
          f" (first problem: {next((r for r in results if isinstance(r, BaseException) or r.outcome != 'completed'), None)!r:.200})"))
    print(f"wall {wall:.1f}s against one pool's ideal {ideal:.1f}s ({wall / ideal:.2f}x)")
    print("worker peak RSS: " + ", ".join(f"{k / 1024:.0f} MiB" for k in hwm) + " (target < 1024 MiB each)")
    print(f"reaction latency n={len(latencies)}: p50 {pct(latencies, 0.5) * 1000:.0f} ms, p99 {pct(latencies, 0.99) * 1000:.0f} ms")
    if workers > 1:
        print("node runs with workflow tasks on each worker: " + ", ".join(f"{k}: {v}" for k, v in sorted(served.items())))


async def main(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory(prefix="lk-fleet-") as tmp:
        async with DevServer(Path(tmp) / "temporal", headless=True) as server:
            for workers in (1, 2):
                await fleet(server, Path(tmp), args, workers)


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rollouts", type=int, default=50)
    p.add_argument("--pool-size", type=int, default=10)
    p.add_argument("--max-unavailable", type=int, default=2)
    p.add_argument("--reboot-seconds", type=float, default=20.0)
    p.add_argument("--drain-seconds", type=float, default=2.0)
    p.add_argument("--files-seconds", type=float, default=1.0)
    p.add_argument("--time-scale", type=float, default=0.1)
    p.add_argument("--local-calls-above", type=int, default=None,
                   help="each rollout's local_calls_above (default: the rollout's own, 500 nodes)")
    p.add_argument("--timeout", type=float, default=900.0, help="seconds to wait for each rollout")
    asyncio.run(main(p.parse_args()))
