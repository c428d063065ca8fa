"""The floor of a MachineConfig window's orchestration overhead on this machine (prints figures;
asserts nothing).

Issue 16 asks 100 nodes at time scale 0.1 to take at most 1.05 times the ideal, and
``rollout_overhead.py`` measures 1.09 to 1.13. This benchmark measures what the least Temporal
work per node gives on the same machine, with the node run's own activities unchanged: one
workflow per place of the window (:class:`PlaceFloorWorkflow`) rolls its share of the nodes one
after another, each with the two calls a node run makes on its normal path
(``drain_when_asked`` with ``set_desired_config``, then ``wait_for_node_done`` writing the drain
hand-off). Per node that is two workflow tasks and two eager activities, against a node run's
three tasks, its child start and end and the rollout's own task per node.

It is a floor, not a design: no lease, no skip/abort/pause, no status, no blocked-drain gate,
and the nodes are dealt to the places round-robin in advance, so a slow node holds up its place
(the MachineConfig window gives a free place the next node). A pass that does not empty the node
fails the place. Same scenario, server and worker settings as ``rollout_overhead.py``; prints
the wall time against the ideal, the places' workflow tasks and the cluster's view
(:mod:`benchmarks.cluster_view`).

Usage: ``python benchmarks/window_floor.py [--nodes 100] [--max-unavailable 10]
[--reboot-seconds 20] [--drain-seconds 2] [--files-seconds 1] [--pods-per-node 1]
[--time-scale 0.1]``. The worker runs in a child process (``--worker``, internal).
"""

from __future__ import annotations

import argparse
import asyncio
import math
import sys
import tempfile
import time
import uuid
from datetime import timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from temporalio import workflow  # noqa: E402
from temporalio.common import RetryPolicy  # noqa: E402

with workflow.unsafe.imports_passed_through():
    from activities.cluster.models import DrainInput  # noqa: E402
    from activities.machineconfig.models import (  # noqa: E402
        DrainWhenAskedInput,
        DrainWhenAskedResult,
        WaitForNodeDoneInput,
        WaitForNodeDoneResult,
    )

MCO = "machineconfiguration.openshift.io/"
CALL = timedelta(seconds=120)
RETRY = RetryPolicy(maximum_attempts=3)


@workflow.defn(name="PlaceFloorWorkflow", sandboxed=False)
class PlaceFloorWorkflow:
    """Roll ``nodes`` to ``target`` one after another with the node run's two normal-path calls."""

    @workflow.run
    async def run(self, target: str, owner: str, nodes: list[str]) -> int:
        for node in nodes:
            drained: DrainWhenAskedResult = await workflow.execute_activity(
                "drain_when_asked",
                DrainWhenAskedInput(node=node, target=target, owner=owner, timeout_seconds=60,
                                    drain=DrainInput(node=node, wait_seconds=30), set_desired_config=True),
                result_type=DrainWhenAskedResult, start_to_close_timeout=CALL, heartbeat_timeout=timedelta(seconds=10),
                retry_policy=RETRY,
            )
            if not (drained.asked and drained.drain is not None and drained.drain.done):
                raise RuntimeError(f"node {node}: the drain call came back without an emptied node: {drained}")
            while True:
                done: WaitForNodeDoneResult = await workflow.execute_activity(
                    "wait_for_node_done",
                    WaitForNodeDoneInput(node=node, target=target, owner=owner, timeout_seconds=60, hand_off_drain=True),
                    result_type=WaitForNodeDoneResult, start_to_close_timeout=CALL, heartbeat_timeout=timedelta(seconds=10),
                    retry_policy=RETRY,
                )
                if done.outcome == "done":
                    break
                if done.outcome != "timed_out":
                    raise RuntimeError(f"node {node}: {done.outcome}")
        return len(nodes)


def worker_main() -> None:
    """``--worker``: lockkeeper's worker (settings from the environment) with the floor workflow."""
    from workers.settings import load_settings
    from workers.worker import configure_logging, run_worker

    settings = load_settings()
    configure_logging(settings.log_level, settings.log_format)
    asyncio.run(run_worker(settings, workflows=[PlaceFloorWorkflow], process_gc=True))


async def main(args: argparse.Namespace) -> None:
    from benchmarks.cluster_view import ClusterClock, describe, describe_steps
    from clustersim import ClusterSim
    from benchmarks.rollout_overhead import pool_scenario
    from lockkeeper.devserver import DevServer
    from lockkeeper.procs import WorkerProcess
    from workers.client import connect
    from workers.gctune import tune_gc
    from workers.settings import Settings

    class FloorWorker(WorkerProcess):
        async def start(self, *, wait_ready: bool = True) -> None:
            from lockkeeper.devserver import popen_child

            offset = self.log_path.stat().st_size if self.log_path.exists() else 0
            self._proc = popen_child([sys.executable, __file__, "--worker"], env=self.environment(), log_path=self.log_path)
            await self._wait_ready(offset)

    scale = args.time_scale
    scenario = pool_scenario(args, "floor")
    with tempfile.TemporaryDirectory(prefix="lk-floor-") as tmp:
        async with DevServer(Path(tmp) / "temporal", headless=True) as server, ClusterSim(scenario, time_scale=scale) as sim:
            sim.store.pod_termination_seconds = args.drain_seconds
            queue = f"floor-{uuid.uuid4().hex[:6]}"
            worker = FloorWorker(address=server.address, kubeconfig=sim.kubeconfig_path, task_queue=queue,
                                 log_path=Path(tmp) / "worker.log")
            await worker.start()
            tune_gc()  # this process is the simulator's API server, as in rollout_overhead.py
            client = await connect(Settings(temporal_address=server.address))
            pool = sim.store.get("machineconfigpools.machineconfiguration.openshift.io", "worker")
            target = pool["spec"]["configuration"]["name"]
            names = sorted(n["metadata"]["name"] for n in sim.store.list("nodes")
                           if n["metadata"].get("annotations", {}).get(MCO + "currentConfig") != target)
            places = [names[k::args.max_unavailable] for k in range(args.max_unavailable)]
            clock = ClusterClock()
            sub = sim.store.subscribe(["nodes"])

            async def follow() -> None:
                async for ev in sub:
                    old = ((ev.old or {}).get("metadata") or {}).get("annotations")
                    clock.observe(ev.object["metadata"]["name"], ev.object["metadata"].get("annotations"), old, time.time())

            follower = asyncio.get_running_loop().create_task(follow())
            run_id = uuid.uuid4().hex[:6]
            started, started_at = time.monotonic(), time.time()
            handles = [
                await client.start_workflow(PlaceFloorWorkflow.run, args=[target, f"floor-{run_id}", nodes],
                                            id=f"floor-{run_id}-{k}", task_queue=queue)
                for k, nodes in enumerate(places) if nodes
            ]
            rolled = sum(await asyncio.gather(*(h.result() for h in handles)))
            actual = time.monotonic() - started
            follower.cancel()
            sub.close()
            tasks = []
            for h in handles:
                opened = None
                async for ev in h.fetch_history_events():
                    if ev.HasField("workflow_task_started_event_attributes"):
                        opened = ev.event_time.ToDatetime()
                    elif ev.HasField("workflow_task_completed_event_attributes") and opened is not None:
                        tasks.append((ev.event_time.ToDatetime() - opened).total_seconds() * 1000)
            await worker.stop()
    per_node = (args.drain_seconds + args.files_seconds + args.reboot_seconds) * scale
    waves = math.ceil(args.nodes / args.max_unavailable)
    ideal = waves * per_node
    print(f"window floor: {rolled} nodes in {len(handles)} places, one workflow per place, two calls per node")
    print(f"ideal time (waves {waves} x per-node {per_node:.2f}s): {ideal:.1f}s; actual {actual:.1f}s; ratio {actual / ideal:.3f}")
    print(f"place workflow tasks: {len(tasks)} ({len(tasks) / max(rolled, 1):.1f}/node), mean {sum(tasks) / max(len(tasks), 1):.0f} ms,"
          f" max {max(tasks, default=0):.0f} ms")
    view = clock.breakdown(started=started_at, finished=started_at + actual, window=args.max_unavailable, cluster_seconds=per_node)
    for line in [*describe(view, waves=waves), *describe_steps(clock)] if view else ["cluster's view: no node both began and ended"]:
        print(line)


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    from benchmarks.rollout_overhead import add_pool_arguments

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    # Issue 16's 100-node flags by default.
    add_pool_arguments(p, reboot=20, drain=2, files=1, pods=1, scale=0.1)
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.nodes < 1 or args.max_unavailable < 1 or args.time_scale <= 0:
        p.error("--nodes and --max-unavailable must be at least 1, --time-scale above 0")
    return args


if __name__ == "__main__":
    parsed = parse()
    if parsed.worker:
        worker_main()
    else:
        asyncio.run(main(parsed))
