"""Helpers for the end-to-end tests: a real dev server, clustersim and worker processes.

``ClusterObserver`` watches clustersim's own store (the simulator's record of what happened,
not lockkeeper's logs) and derives the facts the crash matrix asserts: how many nodes were in
flight at once, how often each node was cordoned, which pods were evicted.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from temporalio.client import Client, WorkflowHandle

from clustersim.scenario import generate_scenario
from lockkeeper.live import client_of, merge_live_progress
from workflows.kit.models import ApproveInput, GateState
from workflows.machineconfig.models import MachineConfigRolloutInput, MachineConfigRolloutResult, RolloutStatus

MCO = "machineconfiguration.openshift.io/"
APPROVER = "e2e-approver"


class ClusterObserver:
    """Follows node events in a ClusterSim store and records rollout facts.

    ``max_in_flight``: the largest number of nodes that were at once between "desiredConfig
    differs from currentConfig" and "back at Done and schedulable" (what maxUnavailable bounds).
    ``cordons``: per node, how many times spec.unschedulable went False -> True.
    """

    def __init__(self, store: Any) -> None:
        self.store = store
        self.max_in_flight = 0
        self.cordons: Counter[str] = Counter()
        self.in_flight: set[str] = set()
        self._task: asyncio.Task[None] | None = None
        self._sub: Any = None

    @staticmethod
    def _busy(node: dict[str, Any]) -> bool:
        ann = node["metadata"].get("annotations") or {}
        return (
            ann.get(MCO + "desiredConfig") != ann.get(MCO + "currentConfig")
            or ann.get(MCO + "state") not in ("Done", None)
            or bool((node.get("spec") or {}).get("unschedulable"))
            and "lockkeeper.io/cordoned-by" in ann
        )

    def start(self) -> None:
        for node in self.store.list("nodes"):
            if self._busy(node):
                self.in_flight.add(node["metadata"]["name"])
        self._sub = self.store.subscribe(["nodes"])
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def _run(self) -> None:
        async for ev in self._sub:
            name = ev.object["metadata"]["name"]
            old_unsched = bool(((ev.old or {}).get("spec") or {}).get("unschedulable"))
            new_unsched = bool((ev.object.get("spec") or {}).get("unschedulable"))
            if new_unsched and not old_unsched and ev.old is not None:
                self.cordons[name] += 1
            if ev.type != "DELETED" and self._busy(ev.object):
                self.in_flight.add(name)
            else:
                self.in_flight.discard(name)
            self.max_in_flight = max(self.max_in_flight, len(self.in_flight))

    def stop(self) -> None:
        if self._sub is not None:
            self._sub.close()
        if self._task is not None:
            self._task.cancel()


def successful_evictions(requests: Any) -> Counter[str]:
    """Pod ``namespace/name`` -> number of evictions the API server accepted (201)."""
    return Counter(
        f"{e.namespace}/{e.name}" for e in requests.entries(verb="create", subresource="eviction") if e.code == 201
    )


def write_requests(requests: Any) -> list[Any]:
    """Every mutating request the simulator received."""
    return [e for e in requests.entries() if e.verb in ("create", "update", "patch", "delete", "deletecollection")]


def max_overlap(windows: list[tuple[float, float]]) -> int:
    """Most intervals open at one instant (an interval ending when another starts does not overlap)."""
    edges = sorted([(a, 1) for a, _ in windows] + [(b, -1) for _, b in windows], key=lambda x: (x[0], x[1]))
    best = cur = 0
    for _, step in edges:
        cur += step
        best = max(best, cur)
    return best


def worker_pool_scenario(nodes: int, name: str) -> Any:
    """A generated clustersim scenario: one ``worker`` pool of ``nodes`` nodes, a pod per node in
    two namespaces (one per Deployment), reboots of 20 s, file writes and pod starts of 1 s
    (simulated seconds, before the simulator's time scale)."""
    return generate_scenario(nodes=nodes, pods=nodes, pools={"worker": nodes}, name=name, reboot_seconds=20,
                             write_files_seconds=1, pod_start_seconds=1, namespaces=2, pods_per_deployment=1)


def fast_timings(scale: float) -> dict[str, float]:
    """Rollout input fields for tests on clustersim at ``scale``: short drain back-off and wait
    (seconds), and the machine-config-daemon's drain (1 h) and uncordon (10 min) deadlines
    compressed by ``scale`` like the simulator's own clock."""
    return dict(drain={"backoff_initial_seconds": 1, "backoff_max_seconds": 5, "wait_seconds": 10},
                daemon={"drain_deadline_seconds": 3600 * scale, "uncordon_deadline_seconds": 600 * scale})


def merged(*parts: dict[str, Any], **more: Any) -> dict[str, Any]:
    """Rollout input fields: ``parts`` then ``more``, later ones winning; a nested group
    (``drain``, ``daemon``, ``approvals``, ``gates``, ``calls``) given twice is merged key by key."""
    out: dict[str, Any] = {}
    for part in (*parts, more):
        for key, value in part.items():
            both = isinstance(value, dict) and isinstance(out.get(key), dict)
            out[key] = {**out[key], **value} if both else value
    return out


async def start_rollout(client: Client, task_queue: str, **fields: Any) -> WorkflowHandle[Any, Any]:
    """Start a MachineConfigRolloutWorkflow with a fresh ID; ``fields`` go into its input (the
    requester ``e2e-requester`` unless ``approvals`` names one)."""
    fields = merged({"approvals": {"requested_by": "e2e-requester"}}, fields)
    wf_id = f"mcrollout-e2e-{uuid.uuid4().hex[:8]}"
    return await client.start_workflow(
        "MachineConfigRolloutWorkflow",
        MachineConfigRolloutInput(**fields),
        id=wf_id,
        task_queue=task_queue,
        result_type=MachineConfigRolloutResult,
    )


async def status(handle: WorkflowHandle[Any, Any]) -> RolloutStatus:
    """The rollout's status as ``lockkeeper status`` shows it (running node runs' steps merged in)."""
    st = await handle.query("status", result_type=RolloutStatus)
    await merge_live_progress(client_of(handle), st)
    return st


async def drive(
    handle: WorkflowHandle[Any, Any],
    *,
    auto_approve: bool = True,
    timeout: float = 240.0,
    on_status: Any = None,
) -> MachineConfigRolloutResult:
    """Wait for the rollout's result, approving every waiting gate as ``e2e-approver``.

    ``on_status(status)`` (async) is called on every poll; it may kill workers, inject faults...
    Raises TimeoutError with the last status when the rollout does not finish in ``timeout`` s.
    """
    deadline = time.monotonic() + timeout
    result_task = asyncio.ensure_future(handle.result())
    last: RolloutStatus | None = None
    try:
        while not result_task.done():
            if time.monotonic() > deadline:
                raise TimeoutError(f"rollout {handle.id} not finished; last status: {last and last.model_dump_json(indent=1)}")
            try:
                last = await status(handle)
            except Exception:  # noqa: BLE001 - the worker may be down right now; queries then fail
                last = None
            if last is not None:
                if on_status is not None:
                    await on_status(last)
                if auto_approve:
                    for gate in last.gates:
                        if gate.state == GateState.WAITING:
                            try:
                                await handle.execute_update(
                                    "approve", ApproveInput(gate_id=gate.id, identity=APPROVER, comment="e2e"),
                                )
                            except Exception:  # noqa: BLE001 - raced with another decision; next poll sees it
                                pass
            await asyncio.wait({result_task}, timeout=0.2)
        return result_task.result()
    finally:
        if not result_task.done():
            result_task.cancel()


def node_annotations(store: Any, name: str) -> dict[str, str]:
    return store.get("nodes", name)["metadata"].get("annotations") or {}


def pools_updated(store: Any) -> dict[str, bool]:
    """Pool name -> condition Updated is True (computed by clustersim's pool controller)."""
    out = {}
    for pool in store.list("machineconfigpools.machineconfiguration.openshift.io"):
        conds = {c["type"]: c["status"] for c in (pool.get("status") or {}).get("conditions") or []}
        out[pool["metadata"]["name"]] = conds.get("Updated") == "True" and conds.get("Updating") != "True"
    return out


@dataclass
class ActivityRun:
    """One scheduled activity of a workflow's history: its ``name``, the ``attempts`` it started
    (the server records the last attempt's number; 0 when it never started), how it ``ended``
    (``completed``, ``failed``, ``timed_out``, ``canceled``, or ``open``), whether its failure
    was ``non_retryable``, and the ``retry`` policy it was scheduled with (the history's proto:
    ``initial_interval``, ``backoff_coefficient``, ``maximum_interval``, ``maximum_attempts``).
    ``error_type``: the failure's application error type (``""`` unless failed).
    ``scheduled``/``closed``: the event IDs (``closed`` 0 while open)."""

    name: str
    scheduled: int
    retry: Any = field(repr=False)
    attempts: int = 0
    ended: str = "open"
    closed: int = 0
    non_retryable: bool = False
    error_type: str = ""

    @property
    def final(self) -> bool:
        """Failed for good: its error was non-retryable, or of a type its retry policy does not retry."""
        return self.ended == "failed" and (self.non_retryable or self.error_type in self.retry.non_retryable_error_types)


async def activity_runs(handle: WorkflowHandle[Any, Any]) -> list[ActivityRun]:
    """Every activity the workflow of ``handle`` scheduled, in order, read from its history (what
    a run's timing stands for: how often each call was tried, and with which retry policy)."""
    runs: dict[int, ActivityRun] = {}
    async for ev in handle.fetch_history_events():
        if ev.HasField("activity_task_scheduled_event_attributes"):
            a = ev.activity_task_scheduled_event_attributes
            runs[ev.event_id] = ActivityRun(name=a.activity_type.name, scheduled=ev.event_id, retry=a.retry_policy)
        elif ev.HasField("activity_task_started_event_attributes"):
            a = ev.activity_task_started_event_attributes
            runs[a.scheduled_event_id].attempts = a.attempt
        else:
            for attr, ended in (("activity_task_completed_event_attributes", "completed"),
                                 ("activity_task_failed_event_attributes", "failed"),
                                 ("activity_task_timed_out_event_attributes", "timed_out"),
                                 ("activity_task_canceled_event_attributes", "canceled")):
                if ev.HasField(attr):
                    a = getattr(ev, attr)
                    run = runs[a.scheduled_event_id]
                    run.ended, run.closed = ended, ev.event_id
                    if ended == "failed":
                        info = a.failure.application_failure_info
                        run.non_retryable, run.error_type = info.non_retryable, info.type
    return list(runs.values())


async def forget_dead_worker(client: Client, task_queue: str) -> int:
    """After a worker of ``task_queue`` was SIGKILLed: reset the sticky task queue of every
    workflow still running there (``ResetStickyTaskQueue``, what the server does by itself once
    the dead worker's sticky queue times out, 10 s later, or what a worker's graceful shutdown
    asks for), so their next workflow task goes to the normal queue at once and a new worker
    takes it (replaying the history, as after the timeout). Returns how many were reset."""
    from temporalio.api.common.v1 import WorkflowExecution
    from temporalio.api.workflowservice.v1 import ResetStickyTaskQueueRequest
    from temporalio.service import RPCError

    n = 0
    async for wf in client.list_workflows(f'TaskQueue = "{task_queue}" AND ExecutionStatus = "Running"'):
        try:
            await client.workflow_service.reset_sticky_task_queue(ResetStickyTaskQueueRequest(
                namespace=client.namespace, execution=WorkflowExecution(workflow_id=wf.id, run_id=wf.run_id)))
            n += 1
        except RPCError:  # ended meanwhile
            pass
    return n


async def assert_failed_at_once(handle: WorkflowHandle[Any, Any], activity: str | None = None) -> list[ActivityRun]:
    """Assert what "the workflow failed fast" stands for, from its history: no activity was
    retried (each ran one attempt), and the last one scheduled (``activity`` when given) failed
    for good (:attr:`ActivityRun.final`) and ended the run (nothing scheduled after it). Returns
    the runs."""
    runs = await activity_runs(handle)
    assert runs, "no activity was scheduled"
    last = runs[-1]
    assert activity is None or last.name == activity, runs
    assert last.final, (last.error_type, runs)
    assert all(r.attempts == 1 for r in runs), runs
    return runs


async def listed(client: Client, query: str, timeout: float = 15.0) -> list[Any]:
    """The workflows ``query`` (a visibility query) lists, waiting up to ``timeout`` seconds
    for at least one (visibility follows the history by a moment)."""
    deadline = time.monotonic() + timeout
    while True:
        found = [wf async for wf in client.list_workflows(query)]
        if found or time.monotonic() > deadline:
            return found
        await asyncio.sleep(0.2)
