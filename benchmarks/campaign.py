"""Campaign: one MachineConfig rollout per simulated cluster, in waves (issue 38; prints figures,
asserts nothing).

``--clusters`` clustersim processes' worth of clusters (each its own ClusterSim in this process,
one generated pool ``worker`` of ``--nodes`` nodes), one lockkeeper worker process per cluster
on the cluster's own task queue (``LOCKKEEPER_CLUSTER`` + ``LOCKKEEPER_CLUSTER_QUEUES``, only that
cluster's kubeconfig), a host-only central worker for the campaign, a real Temporal dev server.
The campaign runs waves ``--waves`` with ``--max-clusters-in-flight``, no wave gate. Prints the
completion, the wall time against the ideal (waves × the slowest cluster's own time, from its
child's start and end), each worker's peak resident memory (VmHWM, target under 1 GiB), the
largest number of clusters in flight seen in the campaign's history (child started / closed
events) and its history size per cluster (target under 20).

    python benchmarks/campaign.py [--clusters 20] [--nodes 100] [--waves 1,25%,rest] [--max-clusters-in-flight 5]

Run at the issue's 20 × 100 on two cores shared with other work (figures and the command in
docs/scale-history.md, "Campaign"): it completes with every worker under 150 MiB, at most the
cap in flight, and 7.4 events per cluster in the campaign's history, since the children report
only their milestones (the last line counts the reports; ``--no-child-reports`` shows the
history without them).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from fleet import tree_hwm_kib  # noqa: E402
from temporalio.api.enums.v1 import EventType  # noqa: E402

from clustersim import ClusterSim  # noqa: E402
from clustersim.scenario import generate_scenario  # noqa: E402
from lockkeeper.devserver import DevServer  # noqa: E402
from lockkeeper.procs import WorkerProcess  # noqa: E402
from workers.client import connect  # noqa: E402
from workers.settings import Settings, cluster_task_queue  # noqa: E402
from workflows.campaign.models import CampaignInput, CampaignResult  # noqa: E402
from workflows.machineconfig.models import MachineConfigRolloutInput  # noqa: E402

STARTED = EventType.EVENT_TYPE_CHILD_WORKFLOW_EXECUTION_STARTED
CLOSED = {EventType.EVENT_TYPE_CHILD_WORKFLOW_EXECUTION_COMPLETED, EventType.EVENT_TYPE_CHILD_WORKFLOW_EXECUTION_FAILED,
          EventType.EVENT_TYPE_CHILD_WORKFLOW_EXECUTION_TERMINATED, EventType.EVENT_TYPE_CHILD_WORKFLOW_EXECUTION_CANCELED,
          EventType.EVENT_TYPE_CHILD_WORKFLOW_EXECUTION_TIMED_OUT}

TASK_EVENTS = {EventType.EVENT_TYPE_WORKFLOW_TASK_SCHEDULED, EventType.EVENT_TYPE_WORKFLOW_TASK_STARTED,
               EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED}


async def main(args: argparse.Namespace) -> None:
    scale = args.time_scale
    names = [f"c{i:02d}" for i in range(args.clusters)]
    with tempfile.TemporaryDirectory(prefix="lk-campaign-") as tmp:
        async with DevServer(Path(tmp) / "temporal", headless=True) as server:
            queue = f"campaign-{uuid.uuid4().hex[:6]}"
            sims = {}
            for n in names:
                scenario = generate_scenario(nodes=args.nodes, pods=args.nodes, pools={"worker": args.nodes}, name=n,
                                             reboot_seconds=args.reboot_seconds, write_files_seconds=1, pod_start_seconds=1,
                                             namespaces=2, pods_per_deployment=1)
                sims[n] = ClusterSim(scenario, time_scale=scale)
                await sims[n].start()
            procs = [WorkerProcess(address=server.address, kubeconfig=None, task_queue=queue, log_path=Path(tmp) / "central.log",
                                   env={"LOCKKEEPER_HOST_ONLY": "true"})]
            procs += [WorkerProcess(address=server.address, kubeconfig=sims[n].kubeconfig_path, task_queue=queue,
                                    log_path=Path(tmp) / f"worker-{n}.log",
                                    env={"LOCKKEEPER_CLUSTER": n, "LOCKKEEPER_CLUSTER_QUEUES": "true"}) for n in names]
            try:
                for w in procs:
                    await w.start()
                client = await connect(Settings(temporal_address=server.address))
                shared = MachineConfigRolloutInput(
                    pools=["worker"], max_unavailable=args.max_unavailable, approvals={"requested_by": "benchmark"},
                    drain={"backoff_initial_seconds": 1, "wait_seconds": 30},
                    daemon={"drain_deadline_seconds": 3600 * scale, "uncordon_deadline_seconds": 600 * scale},
                ).model_dump(mode="json", exclude={"cluster"})
                # As `lockkeeper start campaign` sets them from the procedure's input model: the
                # rollout's requester is approvals.requested_by, and it reports to the campaign.
                fields = MachineConfigRolloutInput.model_fields
                inp = CampaignInput(
                    procedure="machineconfig-rollout", workflow_type="MachineConfigRolloutWorkflow", input=shared,
                    reports=args.child_reports and "report_to" in fields, nested_approvals="approvals" in fields,
                    clusters=[{"name": n, "task_queue": cluster_task_queue(queue, n)} for n in names], waves=args.waves,
                    max_clusters_in_flight=args.max_clusters_in_flight, approve_each="none", approvals={"requested_by": "benchmark"},
                )
                started = time.monotonic()
                handle = await client.start_workflow("CampaignWorkflow", inp, id=f"campaign-{queue}", task_queue=queue,
                                                     result_type=CampaignResult)
                res = await asyncio.wait_for(handle.result(), args.timeout)
                wall = time.monotonic() - started
                hwm = [tree_hwm_kib(w._proc.pid) if w._proc else 0 for w in procs]  # noqa: SLF001 - a benchmark reads the pid
                events = [e async for e in handle.fetch_history_events()]
            finally:
                for w in procs:
                    await w.stop()
                for s in sims.values():
                    await s.stop()
    in_flight = peak = 0
    for e in events:
        if e.event_type == STARTED:
            in_flight += 1
            peak = max(peak, in_flight)
        elif e.event_type in CLOSED:
            in_flight -= 1
    own = [(c.ended_at - c.started_at).total_seconds() for c in res.clusters if c.started_at and c.ended_at]
    plan = inp.wave_plan()
    waves = len(plan)
    ideal = waves * max(own) if own else float("nan")
    cap = args.max_clusters_in_flight or args.clusters
    rounds = sum(-(-len(w) // cap) for w in plan)  # a wave larger than the cap takes several rounds
    print(f"--- campaign of {args.clusters} clusters x {args.nodes} nodes, waves {args.waves}, "
          f"max {args.max_clusters_in_flight} in flight ---")
    print(f"outcome {res.outcome}: {res.counts} ({res.message})")
    print(f"wall {wall:.1f}s against the ideal {ideal:.1f}s ({waves} waves x the slowest cluster's {max(own or [0]):.1f}s; "
          f"{wall / ideal:.2f}x); with the cap, {rounds} rounds: {rounds * max(own or [0]):.1f}s")
    print(f"central worker peak RSS {hwm[0] / 1024:.0f} MiB; cluster workers: "
          + ", ".join(f"{k / 1024:.0f}" for k in hwm[1:]) + " MiB (target < 1024 MiB each)")
    print(f"clusters in flight (from the history): at most {peak} (cap {args.max_clusters_in_flight})")
    signals = sum(1 for e in events if e.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED)
    tasks = sum(1 for e in events if e.event_type in TASK_EVENTS)
    print(f"campaign history: {len(events)} events, {len(events) / args.clusters:.1f} per cluster (target < 20); "
          f"{signals} signals (the children's reports: {signals / args.clusters:.1f} per cluster), {tasks} workflow-task events")


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--clusters", type=int, default=20)
    p.add_argument("--nodes", type=int, default=100)
    p.add_argument("--waves", default="1,25%,rest")
    p.add_argument("--max-clusters-in-flight", type=int, default=5)
    p.add_argument("--max-unavailable", type=int, default=10)
    p.add_argument("--reboot-seconds", type=float, default=20.0)
    p.add_argument("--time-scale", type=float, default=0.1)
    p.add_argument("--timeout", type=float, default=3600.0)
    p.add_argument("--no-child-reports", dest="child_reports", action="store_false",
                   help="Start the children without report_to (what the report channel costs the campaign's history; "
                        "the fleet status then shows no child's step or gate)")
    asyncio.run(main(p.parse_args()))
