"""Orchestration overhead of a MachineConfig rollout (prints figures; asserts nothing).

Runs a real Temporal dev server, clustersim with a generated pool of ``--nodes`` nodes (fixed
simulated reboot and drain times), and a lockkeeper worker in a child process, then rolls the
pool with ``max_unavailable``. Prints (issue 16's figures):

- completion (yes/no, within ``--timeout``) and the nodes done;
- ideal time: batches × per-node cluster time (drain + files + reboot, from the scenario's
  fixed timings and ``--time-scale``), the actual time, and their ratio (target ≤ 1.05 at 100);
- the parent's history over every run of its continue-as-new chain: events and bytes per node,
  the number of continue-as-new, the signals it received per node; the children's mean events;
- the largest workflow task (WorkflowTaskStarted -> Completed event times), parent and children;
- reaction latency p50/p99: from a daemon annotation change (desiredDrain=drain-X or
  uncordon-X, seen in clustersim's store) to lockkeeper's next write on that node (the cordon or
  uncordon PATCH in clustersim's request record). Target p99 < 250 ms;
- where the time beyond the ideal goes, from the cluster's view (:mod:`benchmarks.cluster_view`):
  the start, each node's handshake less the cluster's own time, and the handover from a node's
  Done to the next node's first write in its place in the window;
- node completions per second, and how the status query answered while the rollout ran;
- the API requests per node, by verb and resource (clustersim's request record);
- where a node run's time goes (the mean time between each pair of successive events of its
  history, the largest six), and the parent's view of a node (start command to completion, and
  completion to the next start command);
- the CPU seconds of the dev server, each worker process and this process (simulator and
  benchmark) over the run (up to the result, not the reading of the histories after it), to show
  which one sets the pace.

Usage: ``python benchmarks/rollout_overhead.py [--nodes 100] [--max-unavailable 10]
[--reboot-seconds 300] [--drain-seconds 30] [--time-scale 0.2] [--split-worker]
[--worker-setting NAME=VALUE ...] [--server-config KEY=VALUE ...]``. ``--split-worker`` runs the
workflows and the activities in two worker processes (``LOCKKEEPER_WORKER_ROLE``);
``--worker-setting`` passes a worker setting (``workflow_task_pollers=20``); ``--server-config``
a dev server dynamic config value.

The simulator compresses the cluster's own time by ``--time-scale`` but lockkeeper's overhead
(Temporal round trips, 100 to 150 ms per node) is real time, so the ratio depends on the scale:
for 100 nodes with max_unavailable 10 and ``--reboot-seconds 20 --drain-seconds 2
--files-seconds 1 --pods-per-node 1`` on the 2-core machine, 1.014 at 1.0 and 1.09 to 1.11 at
0.1 (docs/architecture.md, "Scale, as measured", has the latest figures).
"""

from __future__ import annotations

import argparse
from collections import Counter
import asyncio
from dataclasses import dataclass, field
from typing import Any
import json
import math
import os
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from temporalio.api.enums.v1 import EventType, TimeoutType  # noqa: E402
from temporalio.client import Client  # noqa: E402

from benchmarks.cluster_view import ClusterClock, describe, describe_steps, note_drain_ask, pct  # noqa: E402
from clustersim import ClusterSim  # noqa: E402
from clustersim.scenario import generate_scenario  # noqa: E402
from workers.client import connect  # noqa: E402
from workers.gctune import tune_gc  # noqa: E402
from lockkeeper.devserver import DevServer  # noqa: E402
from lockkeeper.procs import WorkerProcess  # noqa: E402
from workers.settings import Settings  # noqa: E402
from workflows.machineconfig.models import MachineConfigRolloutInput, MachineConfigRolloutResult, RolloutStatus  # noqa: E402


@dataclass
class HistoryFigures:
    """Totals over the workflow runs a visibility query lists."""

    runs: int = 0
    events: int = 0
    bytes: int = 0
    signals: int = 0
    max_task_ms: float = 0.0
    events_per_run: list[int] = field(default_factory=list)
    #: Event type name -> count over every run (the breakdown of where the events go).
    by_type: dict[str, int] = field(default_factory=dict)
    #: Sum of workflow task durations (started -> completed), ms.
    task_ms_total: float = 0.0
    tasks: int = 0
    #: The longest workflow tasks: (ms, run index, "N x COMMAND_TYPE, ..." recorded right after,
    #: the task's WorkflowTaskStarted event ID in its run: 3 is the run's first task).
    slowest: list[tuple[float, int, str, int]] = field(default_factory=list)
    #: Workflow tasks by what they recorded ("1 x MARKER_RECORDED, ..."): [count, total ms, max ms].
    task_kinds: dict[str, list[float]] = field(default_factory=dict)
    #: Signal name -> count.
    signal_names: dict[str, int] = field(default_factory=dict)
    #: "PREVIOUS -> EVENT" -> seconds summed over every run: where a run's time goes (an activity's
    #: completion is named after the activity, as ``ACTIVITY_TASK_COMPLETED drain_when_asked``).
    steps: dict[str, float] = field(default_factory=dict)
    #: Node children (NodeRolloutWorkflow): seconds from their start command to their completion
    #: in this history, and from a node child's completion to the next node child's start command.
    child_spans: list[float] = field(default_factory=list)
    handovers: list[float] = field(default_factory=list)
    #: Event times (Unix seconds) of the first run's start, the first node child's start command,
    #: the last node child's completion and the last run's end: the rollout's own time around its nodes.
    marks: dict[str, float] = field(default_factory=dict)
    #: Activity name -> attempts beyond the first (ACTIVITY_TASK_STARTED ``attempt`` - 1 summed),
    #: and the last failures' causes (a heartbeat timeout, an error type) -> count.
    retries: dict[str, int] = field(default_factory=dict)
    retry_causes: dict[str, int] = field(default_factory=dict)


def rollout_fields(args: argparse.Namespace) -> dict[str, object]:
    """The rollout input's extra fields from ``--rollout-input NAME=VALUE`` (VALUE as JSON when it
    parses, else a string), checked against MachineConfigRolloutInput before anything starts."""
    fields: dict[str, object] = {}
    for item in args.rollout_input:
        name, sep, value = item.partition("=")
        if not sep or name not in MachineConfigRolloutInput.model_fields:
            raise SystemExit(f"--rollout-input wants NAME=VALUE with NAME a MachineConfigRolloutInput field, got {item!r}")
        try:
            fields[name] = json.loads(value)
        except ValueError:
            fields[name] = value
    MachineConfigRolloutInput(**fields)  # a bad value fails here, with pydantic's message
    return fields


def worker_env(args: argparse.Namespace) -> dict[str, str]:
    """The worker's extra settings from the flags (``--max-concurrent-activities``, ``--worker-setting``)."""
    env = {}
    if args.max_concurrent_activities:
        env["LOCKKEEPER_MAX_CONCURRENT_ACTIVITIES"] = str(args.max_concurrent_activities)
    for item in args.worker_setting:
        name, sep, value = item.partition("=")
        if not sep or not name:
            raise SystemExit(f"--worker-setting wants NAME=VALUE, got {item!r}")
        env[f"LOCKKEEPER_{name.upper().replace('-', '_')}"] = value
    return env


#: ``--server-db``: how the dev server keeps its state (DevServer options).
SERVER_DB: dict[str, dict[str, Any]] = {
    "wal": {},  # DevServer's default (lockkeeper.devserver.FAST_SQLITE), as the demo and the tests
    "rollback": {"sqlite_pragmas": ()},  # SQLite's defaults, as `temporal server start-dev --db-filename`
    "memory": {"persist": False},  # `temporal server start-dev` without --db-filename
}


async def history_figures(client: Client, query: str, *, per_run: bool = False) -> HistoryFigures:
    """Events, bytes (protobuf size), WorkflowExecutionSignaled events and the longest workflow
    task (started -> completed event times) of every run ``query`` lists."""
    out = HistoryFigures()
    async for wf in client.list_workflows(query):
        hist = await client.get_workflow_handle(wf.id, run_id=wf.run_id).fetch_history()
        out.runs += 1
        out.events += len(hist.events)
        if per_run:
            out.events_per_run.append(len(hist.events))
        started: dict[int, float] = {}
        activities: dict[int, str] = {}
        events = list(hist.events)
        prev: tuple[float, str] | None = None
        initiated: dict[str, float] = {}
        last_done: float | None = None
        for i, e in enumerate(events):
            out.bytes += e.ByteSize()
            t = e.event_time.seconds + e.event_time.nanos / 1e9
            name = EventType.Name(e.event_type).removeprefix("EVENT_TYPE_")
            out.by_type[name] = out.by_type.get(name, 0) + 1
            label = name
            if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
                activities[e.event_id] = e.activity_task_scheduled_event_attributes.activity_type.name
            elif e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED:
                label += " " + activities.get(e.activity_task_completed_event_attributes.scheduled_event_id, "?")
            elif e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED and e.activity_task_started_event_attributes.attempt > 1:
                a = e.activity_task_started_event_attributes
                name_ = activities.get(a.scheduled_event_id, "?")
                out.retries[name_] = out.retries.get(name_, 0) + a.attempt - 1
                last = a.last_failure
                if last.HasField("timeout_failure_info"):
                    cause = TimeoutType.Name(last.timeout_failure_info.timeout_type).removeprefix("TIMEOUT_TYPE_")
                elif last.HasField("application_failure_info"):
                    cause = last.application_failure_info.type
                else:
                    cause = last.message[:40]
                out.retry_causes[f"{name_}: {cause}"] = out.retry_causes.get(f"{name_}: {cause}", 0) + 1
            if i == 0:
                out.marks["started"] = min(out.marks.get("started", t), t)
            out.marks["ended"] = max(out.marks.get("ended", t), t)
            if e.event_type == EventType.EVENT_TYPE_START_CHILD_WORKFLOW_EXECUTION_INITIATED:
                wid = e.start_child_workflow_execution_initiated_event_attributes.workflow_id
                if e.start_child_workflow_execution_initiated_event_attributes.workflow_type.name == "NodeRolloutWorkflow":
                    out.marks["first node"] = min(out.marks.get("first node", t), t)
                    initiated[wid] = t
                    if last_done is not None:
                        out.handovers.append(t - last_done)
                        last_done = None
            elif e.event_type == EventType.EVENT_TYPE_CHILD_WORKFLOW_EXECUTION_COMPLETED:
                wid = e.child_workflow_execution_completed_event_attributes.workflow_execution.workflow_id
                if wid in initiated:
                    out.child_spans.append(t - initiated.pop(wid))
                    last_done = t
                    out.marks["last node"] = max(out.marks.get("last node", t), t)
            if prev is not None:
                step = f"{prev[1]} -> {label}"
                out.steps[step] = out.steps.get(step, 0.0) + t - prev[0]
            prev = (t, name)
            if e.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED:
                out.signals += 1
                sig = e.workflow_execution_signaled_event_attributes.signal_name
                out.signal_names[sig] = out.signal_names.get(sig, 0) + 1
            elif e.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_STARTED:
                started[e.event_id] = t
            elif e.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED:
                begun = started.get(e.workflow_task_completed_event_attributes.started_event_id)
                if begun is not None:
                    out.max_task_ms = max(out.max_task_ms, (t - begun) * 1000)
                    out.task_ms_total += (t - begun) * 1000
                    out.tasks += 1
                    after: dict[str, int] = {}
                    for f in events[i + 1 : i + 5001]:
                        if f.event_type in (EventType.EVENT_TYPE_WORKFLOW_TASK_SCHEDULED, EventType.EVENT_TYPE_WORKFLOW_TASK_STARTED):
                            break
                        k = EventType.Name(f.event_type).removeprefix("EVENT_TYPE_")
                        after[k] = after.get(k, 0) + 1
                    what = ", ".join(f"{v} x {k}" for k, v in sorted(after.items(), key=lambda kv: -kv[1])[:3])
                    started_id = e.workflow_task_completed_event_attributes.started_event_id
                    out.slowest = sorted([*out.slowest, ((t - begun) * 1000, out.runs, what, started_id)], reverse=True)[:3]
                    kind = out.task_kinds.setdefault(what or "nothing", [0, 0.0, 0.0])
                    kind[0] += 1
                    kind[1] += (t - begun) * 1000
                    kind[2] = max(kind[2], (t - begun) * 1000)
    return out


async def failed_node_runs(client: Client, show: int = 3) -> tuple[int, list[str]]:
    """Node runs that ended FAILED (not a result with a bad outcome: the run itself), and the
    failure of the first ``show`` of them (workflow ID: message, cause), from their histories."""
    ids = [wf.id async for wf in client.list_workflows("WorkflowType = 'NodeRolloutWorkflow' AND ExecutionStatus = 'Failed'")]
    texts: list[str] = []
    for wf_id in ids[:show]:
        history = await client.get_workflow_handle(wf_id).fetch_history()
        last = history.events[-1]
        failure = last.workflow_execution_failed_event_attributes.failure
        cause = f" (cause: {failure.cause.message})" if failure.HasField("cause") else ""
        texts.append(f"{wf_id}: {failure.message}{cause}")
    return len(ids), texts


def add_pool_arguments(p: argparse.ArgumentParser, *, nodes: int = 100, max_unavailable: int = 10, reboot: float = 300.0,
                       drain: float = 30.0, files: float = 2.0, pods: int = 2, scale: float = 0.2) -> None:
    """The generated pool's flags (``--nodes`` .. ``--time-scale``), with a script's own defaults
    (shared by ``window_floor.py``, so both measure the same pool)."""
    p.add_argument("--nodes", type=int, default=nodes)
    p.add_argument("--max-unavailable", type=int, default=max_unavailable)
    p.add_argument("--reboot-seconds", type=float, default=reboot, help="simulated reboot time")
    p.add_argument("--drain-seconds", type=float, default=drain, help="simulated pod termination time")
    p.add_argument("--files-seconds", type=float, default=files, help="simulated time the daemon writes files")
    p.add_argument("--pods-per-node", type=int, default=pods)
    p.add_argument("--time-scale", type=float, default=scale)


def pool_scenario(args: argparse.Namespace, name: str) -> Any:
    """One generated pool ``worker`` of ``args.nodes`` nodes with the flags' fixed timings."""
    return generate_scenario(
        nodes=args.nodes, pods=args.nodes * args.pods_per_node, pools={"worker": args.nodes}, name=name,
        reboot_seconds=args.reboot_seconds, write_files_seconds=args.files_seconds, pod_start_seconds=1,
        namespaces=5, pods_per_deployment=max(1, args.pods_per_node),
    )


def cpu_seconds(pid: int | None) -> float:
    """User + system CPU seconds of ``pid`` so far (Linux ``/proc/<pid>/stat``; 0 when gone)."""
    if pid is None:
        return 0.0
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def main(args: argparse.Namespace) -> None:
    scale = args.time_scale
    rollout_fields(args)  # refuse a bad --rollout-input before anything starts
    if any("=" not in item for item in args.server_config):
        raise SystemExit(f"--server-config wants KEY=VALUE, got {args.server_config}")
    scenario = pool_scenario(args, "overhead")
    with tempfile.TemporaryDirectory(prefix="lk-bench-") as tmp:
        async with DevServer(Path(tmp) / "temporal", headless=True, **SERVER_DB[args.server_db],
                             dynamic_config=dict(item.split("=", 1) for item in args.server_config)) as server:
            async with ClusterSim(scenario, time_scale=scale) as sim:
                sim.store.pod_termination_seconds = args.drain_seconds
                queue = f"bench-{uuid.uuid4().hex[:6]}"
                # --split-worker: one process for the workflows (and their local calls), one for
                # the activities (LOCKKEEPER_WORKER_ROLE); else one process for both.
                roles = ["workflows", "activities"] if args.split_worker else ["all"]
                workers = [
                    WorkerProcess(address=server.address, kubeconfig=sim.kubeconfig_path, task_queue=queue,
                                  log_path=Path(tmp) / f"worker-{role}.log",
                                  env={**worker_env(args), "LOCKKEEPER_WORKER_ROLE": role})
                    for role in roles
                ]
                await asyncio.gather(*(w.start() for w in workers))
                if not args.default_gc:
                    tune_gc()  # this process is the simulator's API server: as the worker does (workers/gctune.py)
                client = await connect(Settings(temporal_address=server.address))

                # Daemon annotation changes, as clustersim's store commits them: (node, value) -> time.
                asks: dict[tuple[str, str], float] = {}
                clock = ClusterClock()  # each node's begin and Done, for where the time goes
                sub = sim.store.subscribe(["nodes"])

                async def follow() -> None:
                    async for ev in sub:
                        new_ann = ev.object["metadata"].get("annotations")
                        old_ann = ((ev.old or {}).get("metadata") or {}).get("annotations")
                        clock.observe(ev.object["metadata"]["name"], new_ann, old_ann, time.time())
                        note_drain_ask(asks, ev.object["metadata"]["name"], new_ann, old_ann, time.time())

                follower = asyncio.get_running_loop().create_task(follow())
                # The simulator's own latency: how late this process's event loop (the API server,
                # its agents and the benchmark's follower) wakes a 50 ms sleep.
                loop_lags: list[float] = []

                async def probe() -> None:
                    while True:
                        t0 = time.monotonic()
                        await asyncio.sleep(0.05)
                        loop_lags.append(time.monotonic() - t0 - 0.05)

                prober = asyncio.get_running_loop().create_task(probe())
                sim.requests.clear()
                def cpu_now() -> dict[str, float]:
                    return {"dev server": cpu_seconds(server.pid), **{f"worker {r}": cpu_seconds(w.pid) for r, w in zip(roles, workers)},
                            "simulator + benchmark": time.process_time()}

                cpu_start = cpu_now()
                started, started_at = time.monotonic(), time.time()
                handle = await client.start_workflow(
                    "MachineConfigRolloutWorkflow",
                    MachineConfigRolloutInput(
                        cluster="bench", pools=["worker"], max_unavailable=args.max_unavailable,
                        approvals={"requested_by": "benchmark"}, drain={"backoff_initial_seconds": 1, "wait_seconds": 30},
                        daemon={"drain_deadline_seconds": 3600 * scale, "uncordon_deadline_seconds": 600 * scale},
                        **({} if args.local_calls_above is None else {"local_calls_above": args.local_calls_above}),
                        **rollout_fields(args),
                    ),
                    id=f"bench-{uuid.uuid4().hex[:8]}", task_queue=queue, result_type=MachineConfigRolloutResult,
                )
                # Poll status all along (every 2 s): the live view must keep answering.
                status_ok = status_failed = 0
                status_errors: list[str] = []
                result_task = asyncio.ensure_future(handle.result())
                ideal_guess = math.ceil(args.nodes / args.max_unavailable) * (args.drain_seconds + args.files_seconds + args.reboot_seconds) * scale
                limit = args.timeout or max(600.0, 10 * ideal_guess)
                while not result_task.done() and time.monotonic() - started < limit:
                    try:
                        st = await handle.query("status", result_type=RolloutStatus)
                        status_ok += 1 if len(st.nodes) >= args.nodes or st.phase == "planning" else 0
                    except Exception as err:  # noqa: BLE001 - counted and printed, the run goes on
                        status_failed += 1
                        status_errors.append(str(err)[:120])
                    await asyncio.wait({result_task}, timeout=2.0)
                result = result_task.result() if result_task.done() and not result_task.exception() else None
                if not result_task.done():
                    result_task.cancel()
                actual = time.monotonic() - started
                finished_at = started_at + actual
                cpu = {k: v - cpu_start[k] for k, v in cpu_now().items()}  # the run's, not the figures' reading
                follower.cancel()
                prober.cancel()
                sub.close()

                # API requests lockkeeper sent, by verb and resource (the simulator's record).
                api_calls = Counter(
                    f"{e.verb} {e.resource}{'/' + e.subresource if e.subresource else ''}" for e in sim.requests.entries()
                )
                api_recorded, api_kept = sum(api_calls.values()), sim.requests.maxlen
                api_refused = Counter(f"{e.verb} {e.resource} {e.code}" for e in sim.requests.entries() if e.code >= 300)
                # Reaction: the first node write (PATCH) by lockkeeper after each daemon ask.
                patches = sorted(
                    (e.time, e.name) for e in sim.requests.entries(verb="patch", resource="nodes") if e.code < 300
                )
                latencies: list[float] = []
                by_kind: dict[str, list[float]] = {}
                worst: list[tuple[float, str, str, float]] = []  # (latency, kind, node, seconds into the run)
                for (node, kind), asked in asks.items():
                    nxt = next((t for t, n in patches if n == node and t >= asked), None)
                    if nxt is not None and kind in ("drain", "uncordon"):
                        latencies.append(nxt - asked)
                        by_kind.setdefault(kind, []).append(nxt - asked)
                        worst.append((nxt - asked, kind, node, asked - started_at))
                worst = sorted(worst, reverse=True)[:5]

                # Every run of the parent (continue-as-new chain) and every node child.
                parent = await history_figures(client, f"WorkflowId = '{handle.id}'")
                children = await history_figures(
                    client, "WorkflowType = 'NodeRolloutWorkflow'", per_run=True
                )
                # Lease workflows of this rollout (pool and node scopes of cluster "bench").
                leases = await history_figures(client, "WorkflowType = 'LeaseWorkflow'", per_run=True)
                failed_runs = await failed_node_runs(client)
                done_nodes = result.summary.done if result else 0
                await asyncio.gather(*(w.stop() for w in workers))
                if args.keep:
                    keep = Path(args.keep)
                    keep.mkdir(parents=True, exist_ok=True)
                    for role in roles:
                        (keep / f"worker-{role}.log").write_bytes((Path(tmp) / f"worker-{role}.log").read_bytes())
                    async for wf in client.list_workflows(f"WorkflowId = '{handle.id}'"):
                        hist = await client.get_workflow_handle(wf.id, run_id=wf.run_id).fetch_history()
                        (keep / f"parent-{wf.run_id}.json").write_text(hist.to_json())
                    # One node run and one lease, to see what a node costs event by event.
                    for kind, query in (
                        ("child", "WorkflowType = 'NodeRolloutWorkflow'"),
                        ("lease", "WorkflowType = 'LeaseWorkflow'"),
                    ):
                        async for wf in client.list_workflows(query, limit=1):
                            hist = await client.get_workflow_handle(wf.id, run_id=wf.run_id).fetch_history()
                            (keep / f"{kind}-{wf.run_id}.json").write_text(hist.to_json())

    batches = math.ceil(args.nodes / args.max_unavailable)
    per_node = (args.drain_seconds + args.files_seconds + args.reboot_seconds) * scale
    ideal = batches * per_node
    n = args.nodes
    print(f"rollout: {n} nodes, max_unavailable={args.max_unavailable}, completed={'yes' if result and result.outcome == 'completed' else 'NO'}"
          f" (outcome {result.outcome if result else 'none within ' + str(int(limit)) + 's'}, {done_nodes} nodes done)")
    print(f"per-node cluster time: {per_node:.2f}s real (drain {args.drain_seconds}s + files {args.files_seconds}s"
          f" + reboot {args.reboot_seconds}s simulated, time scale {scale})")
    print(f"ideal time (batches {batches} x per-node): {ideal:.1f}s")
    print(f"actual time: {actual:.1f}s")
    print(f"ratio actual/ideal: {actual / ideal:.3f}   (target <= 1.05)")
    child_mean = statistics.mean(children.events_per_run) if children.events_per_run else float("nan")
    print(f"parent history: {parent.events} events in {parent.runs} run(s) (continue-as-new {max(parent.runs - 1, 0)}),"
          f" {parent.events / n:.1f} events/node, {parent.bytes / n / 1024:.1f} KiB/node")
    print(f"largest workflow task: parent {parent.max_task_ms:.0f} ms, children {children.max_task_ms:.0f} ms (target < 1000 ms)")
    print(f"signals to the parent: {parent.signals} = {parent.signals / n:.2f}/node")
    print(f"child history: mean {child_mean:.1f} events (max {max(children.events_per_run, default=0)},"
          f" {len(children.events_per_run)} children); parent + child per node {parent.events / n + (child_mean if children.events_per_run else 0):.1f}"
          f" (targets: parent <= 10, total <= 40)")
    print(f"parent workflow tasks: {parent.tasks}, total {parent.task_ms_total / 1000:.1f} s,"
          f" mean {parent.task_ms_total / max(parent.tasks, 1):.0f} ms")
    for ms, run, what, started_id in parent.slowest:
        print(f"  slow parent task: {ms:.0f} ms (run {run}, started at event {started_id}), then {what or 'nothing'}")
    for what, (count, total, most) in sorted(children.task_kinds.items(), key=lambda kv: -kv[1][2])[:4]:
        print(f"  node-run tasks then {what}: {count / max(children.runs, 1):.2f}/run, mean {total / count:.0f} ms, max {most:.0f} ms")
    print(f"signals to the parent by name: {parent.signal_names}")
    top = sorted(parent.by_type.items(), key=lambda kv: -kv[1])[:8]
    print("parent events by type (per node): " + ", ".join(f"{k} {v / n:.2f}" for k, v in top))
    # A timed-out workflow task (a sticky task not picked up in time, a task past its deadline)
    # or a failed one is followed by a task that replays the whole history: name them.
    lost = {who: {k: v for k, v in figures.by_type.items() if k in ("WORKFLOW_TASK_TIMED_OUT", "WORKFLOW_TASK_FAILED")}
            for who, figures in (("rollout", parent), ("node runs", children))}
    print(f"node runs' activity attempts beyond the first: {children.retries or 'none'}; last failures: {children.retry_causes or 'none'}")
    print("workflow tasks timed out or failed: " + "; ".join(f"{who} {counts or 'none'}" for who, counts in lost.items()))
    m = parent.marks
    if {"started", "first node", "last node", "ended"} <= m.keys():
        print(f"rollout around its nodes: {(m['first node'] - m['started']) * 1000:.0f} ms from its start to the first node's"
              f" start command (plan, leases), {(m['ended'] - m['last node']) * 1000:.0f} ms from the last node's completion to its end")
    if parent.child_spans:
        print(f"node in the parent: start command to completion mean {statistics.mean(parent.child_spans) * 1000:.0f} ms;"
              f" completion to the next start command mean {statistics.mean(parent.handovers or [0]) * 1000:.0f} ms,"
              f" p99 {pct(parent.handovers, 0.99) * 1000:.0f} ms")
    if children.runs:
        steps = sorted(children.steps.items(), key=lambda kv: -kv[1])[:6]
        print(f"node run's time (mean {sum(children.steps.values()) / children.runs * 1000:.0f} ms), largest steps: "
              + ", ".join(f"{k} {v / children.runs * 1000:.0f} ms" for k, v in steps))
    view = clock.breakdown(started=started_at, finished=finished_at, window=args.max_unavailable, cluster_seconds=per_node)
    for line in [*describe(view, waves=batches), *describe_steps(clock)] if view else ["cluster's view: no node both began and ended"]:
        print(line)
    print(f"lease workflows: {leases.runs} runs, {leases.events} events ({leases.events / n:.1f}/node),"
          f" signals {leases.signals}")
    print(f"all events per node (parent + children + leases): {(parent.events + sum(children.events_per_run) + leases.events) / n:.1f}")
    print(f"node completions per second: {done_nodes / actual:.2f}")
    print(f"node runs that failed (the run, not its node): {failed_runs[0]}" + "".join(f"\n  {t}" for t in failed_runs[1]))
    print(f"API requests per node: {api_recorded / n:.1f} ("
          + ", ".join(f"{k} {v / n:.2f}" for k, v in api_calls.most_common())
          + (f"; the record keeps only the last {api_kept}" if api_recorded >= api_kept else "") + ")")
    print("API answers not 2xx: " + (", ".join(f"{k} x {v}" for k, v in api_refused.most_common()) or "none"))
    print("CPU seconds over the run: " + ", ".join(f"{k} {v:.0f} ({v / actual:.0%} of a core)" for k, v in cpu.items()))
    print(f"simulator's event loop lag (a 50 ms sleep woken late), n={len(loop_lags)}: p50 {pct(loop_lags, 0.5) * 1000:.0f} ms,"
          f" p99 {pct(loop_lags, 0.99) * 1000:.0f} ms, max {max(loop_lags, default=0.0) * 1000:.0f} ms")
    print(f"status query during the run: {status_ok} full answers, {status_failed} failures"
          + (f" (first: {status_errors[0]})" if status_errors else ""))
    print(f"reaction latency (daemon annotation -> next lockkeeper write), n={len(latencies)}:"
          f" p50 {pct(latencies, 0.5) * 1000:.0f} ms, p99 {pct(latencies, 0.99) * 1000:.0f} ms (target p99 < 250 ms)")
    for kind, values in sorted(by_kind.items()):
        print(f"  {kind} asked -> next write, n={len(values)}: p50 {pct(values, 0.5) * 1000:.0f} ms, p90 {pct(values, 0.9) * 1000:.0f} ms,"
              f" p99 {pct(values, 0.99) * 1000:.0f} ms, max {max(values) * 1000:.0f} ms")
    print("  slowest reactions: " + ", ".join(f"{lat * 1000:.0f} ms ({kind} of {node}, {at:.0f} s in)" for lat, kind, node, at in worst))


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_pool_arguments(p)
    p.add_argument("--split-worker", action="store_true",
                   help="run the workflows and the activities in two worker processes (LOCKKEEPER_WORKER_ROLE)")
    p.add_argument("--worker-setting", action="append", default=[], metavar="NAME=VALUE",
                   help="a worker setting (workers.settings.Settings), e.g. workflow_task_pollers=20; repeatable")
    p.add_argument("--rollout-input", action="append", default=[], metavar="NAME=VALUE",
                   help="a MachineConfigRolloutInput field (VALUE as JSON), e.g. window_node_leases_above=0; repeatable")
    p.add_argument("--keep", default="", help="directory to keep the worker log, the parent's histories and one node run's and one lease's in")
    p.add_argument("--server-config", action="append", default=[], metavar="KEY=VALUE",
                   help="a dev server dynamic config value (matching.numTaskqueueReadPartitions=1)")
    p.add_argument("--server-db", choices=sorted(SERVER_DB), default="wal",
                   help="the dev server's store: wal (an SQLite file with a write-ahead log, as the demo and the "
                        "tests), rollback (an SQLite file with SQLite's defaults) or memory (nothing on disk)")
    p.add_argument("--default-gc", action="store_true",
                   help="keep CPython's default GC thresholds in this process (the simulator); the worker tunes its own")
    p.add_argument("--max-concurrent-activities", type=int, default=0,
                   help="the worker's activity slots and threads (0: the worker's default)")
    p.add_argument("--local-calls-above", type=int, default=None,
                   help="the rollout's local_calls_above (default: the rollout's own, 500 nodes)")
    p.add_argument("--timeout", type=float, default=0.0, help="give up waiting after this many seconds (0: 10x ideal, at least 600)")
    asyncio.run(main(p.parse_args()))
