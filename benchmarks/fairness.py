"""Fairness on a shared worker (issue 40; prints figures, asserts nothing).

One dev server, one clustersim with a generated pool ``worker`` of ``--nodes`` nodes and a small
pool ``infra``, one lockkeeper worker (default settings: 200 activity slots). A MachineConfig
rollout of ``worker`` (cluster label ``bench``, maxUnavailable ``--max-unavailable``) runs;
``--urgent-after`` seconds in, a drain of ``infra-0000`` starts on cluster label ``other`` (the
drain is priority 1, as an etcd backup or restore: see ``ProcedureSpec.priority``). The worker
serves one cluster's kubeconfig, so "another cluster" is a cluster label (the fairness key and the
lease scopes) on the same simulator.

Prints:

- the urgent run's start to its first regular activity's start, and the largest scheduled→started
  wait of its regular activities (its history; local activities take no slot of the queue);
- the worker's activity slots in use (``temporal_worker_task_slots_used`` of the activity worker,
  from its Prometheus endpoint), sampled every 2 s: the most and the mean from the urgent start
  to the end of the measure;
- the rollout's node runs started by then.

``--no-hand-off`` runs the worker with ``LOCKKEEPER_HAND_OFF_WAITS=false``: each node's reboot
wait then holds an activity slot (the comparison for "no slot held for a wait").

``--no-priority`` starts both without a priority (the server's default 3, no fairness key): the
comparison. Priority is ordered within each task queue partition (the dev server has four);
``--one-partition`` gives the dev server one. The rollout is terminated once the urgent run's
first activity has started and ``--after`` more seconds passed (its end is not measured here).

    python benchmarks/fairness.py [--nodes 2000] [--max-unavailable 500] [--time-scale 1.0]
        [--urgent-after 60] [--no-priority] [--no-hand-off] [--one-partition]
"""

from __future__ import annotations

import argparse
import asyncio
import re
import sys
import tempfile
import time
import urllib.request
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from rollout_overhead import add_pool_arguments  # noqa: E402
from temporalio.api.enums.v1 import EventType  # noqa: E402

from clustersim import ClusterSim  # noqa: E402
from clustersim.scenario import generate_scenario  # noqa: E402
from lockkeeper.devserver import DevServer, free_port  # noqa: E402
from lockkeeper.procs import WorkerProcess  # noqa: E402
from lockkeeper.starter import run_priority  # noqa: E402
from workers.client import connect  # noqa: E402
from workers.settings import Settings  # noqa: E402
from workflows.drain.models import NodeDrainInput  # noqa: E402
from workflows.kit.spec import spec_by_name  # noqa: E402
from workflows.machineconfig.models import MachineConfigRolloutInput  # noqa: E402
from workflows.registry import PROCEDURES  # noqa: E402

SLOTS = re.compile(r'^temporal_worker_task_slots_used\{[^}]*worker_type="ActivityWorker"[^}]*\}\s+([0-9.e+]+)', re.M)


def slots_used(port: int) -> float | None:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2) as r:
            text = r.read().decode()
    except OSError:
        return None
    found = SLOTS.findall(text)
    return sum(float(v) for v in found) if found else None


async def first_activity(handle: object) -> tuple[float | None, float | None]:
    """(start → first regular activity started, largest scheduled → started) in seconds."""
    started = None
    scheduled: dict[int, float] = {}
    first, worst = None, None
    async for e in handle.fetch_history_events():  # type: ignore[attr-defined]
        t = e.event_time.ToDatetime().timestamp()
        if e.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED:
            started = t
        elif e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
            scheduled[e.event_id] = t
        elif e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED:
            sid = e.activity_task_started_event_attributes.scheduled_event_id
            wait = t - scheduled.get(sid, t)
            worst = wait if worst is None else max(worst, wait)
            if first is None and started is not None:
                first = t - started
    return first, worst


async def main(args: argparse.Namespace) -> None:
    scenario = generate_scenario(
        nodes=args.nodes + 3, pods=args.nodes * args.pods_per_node, pools={"worker": args.nodes, "infra": 3}, name="fair",
        reboot_seconds=args.reboot_seconds, write_files_seconds=args.files_seconds, pod_start_seconds=1,
        namespaces=5, pods_per_deployment=max(1, args.pods_per_node),
    )
    scale = args.time_scale
    server_config = {"matching.numTaskqueueReadPartitions": "1", "matching.numTaskqueueWritePartitions": "1"} if args.one_partition else {}
    rollout_spec, drain_spec = spec_by_name(PROCEDURES, "machineconfig-rollout"), spec_by_name(PROCEDURES, "drain")
    prio = (lambda spec, cluster: None) if args.no_priority else run_priority
    with tempfile.TemporaryDirectory(prefix="lk-fair-") as tmp:
        async with DevServer(Path(tmp) / "temporal", headless=True, dynamic_config=server_config) as server:
            async with ClusterSim(scenario, time_scale=scale) as sim:
                sim.store.pod_termination_seconds = args.drain_seconds
                queue, metrics = f"fair-{uuid.uuid4().hex[:6]}", free_port()
                worker = WorkerProcess(address=server.address, kubeconfig=sim.kubeconfig_path, task_queue=queue,
                                       log_path=Path(tmp) / "worker.log", env={"LOCKKEEPER_METRICS_PORT": str(metrics),
                                            "LOCKKEEPER_HAND_OFF_WAITS": "false" if args.no_hand_off else "true"})
                await worker.start()
                client = await connect(Settings(temporal_address=server.address))
                t0 = time.monotonic()
                rollout = await client.start_workflow(
                    rollout_spec.workflow_type,
                    MachineConfigRolloutInput(
                        cluster="bench", pools=["worker"], max_unavailable=args.max_unavailable, approvals={"requested_by": "benchmark"},
                        drain={"backoff_initial_seconds": 1, "wait_seconds": 30},
                        daemon={"drain_deadline_seconds": 3600 * scale, "uncordon_deadline_seconds": 600 * scale},
                    ),
                    id=f"fair-rollout-{uuid.uuid4().hex[:6]}", task_queue=queue, priority=prio(rollout_spec, "bench"),
                )
                samples: list[float] = []
                while time.monotonic() - t0 < args.urgent_after:
                    await asyncio.sleep(2)
                    used = slots_used(metrics)
                    print(f"  {time.monotonic() - t0:5.0f} s: activity slots in use {used}", flush=True)
                urgent = await client.start_workflow(
                    drain_spec.workflow_type,
                    NodeDrainInput(node="infra-0000", cluster="other", approvals={"requested_by": "benchmark"}, drain={"wait_seconds": 30}),
                    id=f"fair-drain-{uuid.uuid4().hex[:6]}", task_queue=queue, priority=prio(drain_spec, "other"),
                )
                t_urgent = time.monotonic()
                first = None
                while time.monotonic() - t_urgent < args.limit:
                    await asyncio.sleep(2)
                    used = slots_used(metrics)
                    if used is not None:
                        samples.append(used)
                    first, worst = await first_activity(urgent)
                    print(f"  {time.monotonic() - t0:5.0f} s: activity slots in use {used}; urgent first activity {first}", flush=True)
                    if first is not None and time.monotonic() - t_urgent >= args.after:
                        break
                first, worst = await first_activity(urgent)
                children = 0
                async for _ in client.list_workflows(f'WorkflowType = "NodeRolloutWorkflow" AND TaskQueue = "{queue}"'):
                    children += 1
                print(f"nodes {args.nodes}, maxUnavailable {args.max_unavailable}, time scale {scale}, "
                      f"priority {'off' if args.no_priority else 'on'}, waits handed off {'no' if args.no_hand_off else 'yes'}, partitions {'1' if args.one_partition else 'default'}")
                print(f"urgent drain: start -> first activity started {first if first is None else f'{first:.2f} s'}; "
                      f"largest scheduled->started {worst if worst is None else f'{worst:.2f} s'}")
                if samples:
                    print(f"activity slots in use after the urgent start: max {max(samples):.0f}, mean {sum(samples) / len(samples):.0f} "
                          f"({len(samples)} samples)")
                print(f"node runs started by then: {children}")
                for h in (urgent, rollout):
                    try:
                        await h.terminate(reason="benchmark measured")
                    except Exception:  # noqa: BLE001 - already closed
                        pass
                await worker.stop()


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_pool_arguments(p, nodes=2000, max_unavailable=500, reboot=20.0, drain=2.0, files=1.0, pods=1, scale=1.0)
    p.add_argument("--urgent-after", type=float, default=60.0)
    p.add_argument("--after", type=float, default=10.0, help="seconds to sample after the urgent run's first activity")
    p.add_argument("--limit", type=float, default=300.0, help="give up waiting for the urgent run's first activity")
    p.add_argument("--no-priority", action="store_true")
    p.add_argument("--no-hand-off", action="store_true", help="reboot waits hold a slot (LOCKKEEPER_HAND_OFF_WAITS=false)")
    p.add_argument("--one-partition", action="store_true")
    asyncio.run(main(p.parse_args()))
