"""An in-memory fake cluster for workflow tests: nodes, a scripted machine-config-daemon, and
fake activities registered under the real activity names (workflows call activities by name).

The daemon follows the handshake of DESIGN.md synchronously on each annotation write, except the
reboot, which lasts ``reboot_polls`` wait_for_node calls (with a short real sleep each) so that
node runs overlap and the sliding window can be observed. Every call is recorded in ``calls``;
``max_in_flight`` is the largest number of nodes that were simultaneously between "desiredConfig
set to a new config" and "Done at it" — the rollout's real unavailability.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from datetime import UTC, datetime, timedelta
from typing import Any

from temporalio import activity
from temporalio.client import Client
from temporalio.exceptions import ApplicationError
from temporalio.worker import Worker

from activities.cluster.models import (
    ANN_CURRENT_CONFIG,
    ANN_DESIRED_CONFIG,
    ANN_DESIRED_DRAIN,
    ANN_LAST_APPLIED_DRAIN,
    BlockedPod,
    CordonInput,
    CordonResult,
    DeleteAllPodsInput,
    DeleteAllPodsResult,
    DrainInput,
    DrainReport,
    DrainResult,
    ListPodsToDeleteInput,
    ListPodsToDeleteResult,
    NodeInfo,
    PDBReport,
    PendingPodReport,
    PodRef,
    PodsReadyInput,
    PodsReadyResult,
    ReadNodeInput,
    RecordEventInput,
    SetNodeAnnotationsInput,
    UncordonInput,
    UncordonResult,
)
from activities.leases.activities import find_held_leases
from activities.preflight.models import (
    CHECK_PRECONDITIONS,
    CheckPreconditionsInput,
    CheckPreconditionsResult,
    PreconditionResult,
    PreconditionState,
)
from activities.machineconfig.handshake import plainly_waiting
from activities.machineconfig.models import (
    DrainWhenAskedInput,
    DrainWhenAskedResult,
    PoolInfo,
    PoolNodesInput,
    PoolNodesPage,
    PreflightInput,
    PreflightResult,
    WaitForNodeDoneInput,
    WaitForNodeDoneResult,
    WaitForNodeInput,
    WaitForNodeResult,
    drain_value,
    node_page,
    uncordon_value,
)
from workflows import WORKFLOWS

T0 = datetime(2024, 5, 1, tzinfo=UTC)
MUTATING = {
    "set_node_annotations", "cordon_node", "uncordon_node", "answer_uncordon", "drain_node", "delete_all_pods", "set_network_type",
}


def old_config(pool: str) -> str:
    return f"rendered-{pool}-old"


def new_config(pool: str) -> str:
    return f"rendered-{pool}-new"


def r2_block_report(node: str) -> DrainReport:
    """R2's blocked drain: the router pod, its PDB, and the Pending replacement."""
    return DrainReport(
        blocked_pods=[
            BlockedPod(
                namespace="openshift-ingress",
                name=f"router-default-{node}",
                message="Cannot evict pod as it would violate the pod's disruption budget.",
                pdbs=[PDBReport(namespace="openshift-ingress", name="router-default", min_available=1,
                                current_healthy=1, desired_healthy=1, disruptions_allowed=0, expected_pods=1)],
            )
        ],
        pending_replacements=[
            PendingPodReport(namespace="openshift-ingress", name="router-default-new",
                             message="0/4 nodes are available: 1 node(s) were unschedulable, 3 node(s) didn't match node selector.")
        ],
    )


class FakeCluster:
    """Nodes by pool; knobs to inject faults: ``degrade_on_config`` (node -> reason: the daemon
    degrades when asked for the new config, until the entry is removed), ``drain_blocked``
    (node -> DrainReport: evictions refused with 429 until removed), ``ovnkube_polls`` /
    ``workloads_polls`` (check_pods_ready answers not-ready this many times first);
    ``slow_drain_request``: the daemon asks for the drain only on its next reaction after the
    desiredConfig write (as a real daemon does), not within the write. ``drain_call_started``
    (node -> asyncio.Event) is set when a ``drain_when_asked`` call for the node starts, which
    then waits for ``drain_call_go`` (node -> asyncio.Event) before writing anything: a call that
    is slow to its first write and, like a real one between heartbeats, does not see a cancel."""

    def __init__(self, pools: dict[str, int], *, zones: tuple[str, ...] = ("a", "b"), reboot_polls: int = 2) -> None:
        self.pools: dict[str, list[str]] = {}
        self.nodes: dict[str, NodeInfo] = {}
        for pool, count in pools.items():
            self.pools[pool] = []
            for i in range(count):
                name = f"{pool}-{i}"
                self.pools[pool].append(name)
                cfg = old_config(pool)
                self.nodes[name] = NodeInfo(
                    name=name, pool=pool, zone=zones[i % len(zones)], created=T0 + timedelta(hours=i),
                    current_config=cfg, desired_config=cfg, state="Done", desired_drain=uncordon_value(cfg),
                    last_applied_drain=uncordon_value(cfg), ready=True,
                )
        self.reboot_polls = reboot_polls
        self.rebooting: dict[str, int] = {}
        self.degrade_on_config: dict[str, str] = {}
        self.drain_blocked: dict[str, DrainReport] = {}
        self.ovnkube_polls = 0
        self.workloads_polls = 0
        self.calls: list[tuple[str, Any]] = []
        self.events: list[RecordEventInput] = []
        self.updating: set[str] = set()
        self.max_in_flight = 0
        self.deleted_pods = 0
        self.slow_drain_request = False
        self.drain_call_started: dict[str, asyncio.Event] = {}
        self.drain_call_go: dict[str, asyncio.Event] = {}

    # --- inspection ---------------------------------------------------------------------------

    def called(self, name: str) -> list[Any]:
        return [arg for n, arg in self.calls if n == name]

    def hand_offs(self, node: str) -> list[str]:
        """The lastAppliedDrain values written on ``node``, in order (set_node_annotations, or
        the uncordon answered by wait_for_node_done)."""
        out = []
        for name, arg in self.calls:
            if getattr(arg, "node", None) != node:
                continue
            if name == "set_node_annotations" and ANN_LAST_APPLIED_DRAIN in arg.annotations:
                out.append(arg.annotations[ANN_LAST_APPLIED_DRAIN])
            elif name == "answer_uncordon":
                out.append(uncordon_value(arg.target))
        return out

    def mutating_calls(self) -> list[str]:
        return [n for n, _ in self.calls if n in MUTATING]

    def set_node(self, name: str, **fields: Any) -> None:
        self.nodes[name] = self.nodes[name].model_copy(update=fields)

    def at_target(self, name: str) -> bool:
        n = self.nodes[name]
        return n.current_config == new_config(n.pool) and n.state == "Done"

    # --- daemon -------------------------------------------------------------------------------

    def _track(self) -> None:
        self.updating = {
            n.name for n in self.nodes.values()
            if n.desired_config != n.current_config or n.state != "Done"
        }
        self.max_in_flight = max(self.max_in_flight, len(self.updating))

    def _daemon_react(self, name: str, *, on_write: bool = False) -> None:
        n = self.nodes[name]
        if n.desired_config != n.current_config:
            target = n.desired_config
            if name in self.degrade_on_config:
                if n.state != "Degraded":
                    self.set_node(name, state="Degraded", reason=self.degrade_on_config[name])
            elif on_write and self.slow_drain_request and n.state == "Done":
                pass  # asks on its next reaction (a wait's tick)
            elif n.state in ("Done", "Degraded") and n.last_applied_drain != drain_value(target):
                self.set_node(name, state="Working", reason="", desired_drain=drain_value(target))
            n = self.nodes[name]
            if n.last_applied_drain == drain_value(target) and n.desired_drain == drain_value(target):
                if name not in self.rebooting:
                    self.rebooting[name] = self.reboot_polls
                    self.set_node(name, state="Rebooting", ready=False)
            if n.last_applied_drain == uncordon_value(target) and n.desired_drain == uncordon_value(target):
                self.set_node(name, current_config=target, state="Done", reason="")
        elif n.state != "Done" and n.state != "Degraded":
            self.set_node(name, state="Done", desired_drain=n.last_applied_drain)
        elif n.state == "Degraded" and name not in self.degrade_on_config:
            self.set_node(name, state="Done", reason="")
        self._track()

    def _tick(self, name: str) -> None:
        if name in self.rebooting:
            self.rebooting[name] -= 1
            if self.rebooting[name] <= 0:
                del self.rebooting[name]
                target = self.nodes[name].desired_config
                self.set_node(name, ready=True, state="Working", desired_drain=uncordon_value(target))
        self._daemon_react(name)

    # --- activities ---------------------------------------------------------------------------

    def activities(self) -> list[Callable]:
        fake = self

        def rec(name: str, arg: Any) -> None:
            fake.calls.append((name, arg))

        @activity.defn(name="preflight_machineconfig_rollout")
        async def preflight(inp: PreflightInput) -> PreflightResult:
            rec("preflight_machineconfig_rollout", inp)
            pools = inp.pools or list(self.pools)
            out = []
            for p in pools:
                if p not in self.pools:
                    raise ApplicationError(f"MachineConfigPool {p} not found", type="UnknownPool", non_retryable=True)
                nodes = [self.nodes[n].model_copy() for n in self.pools[p]]
                info = PoolInfo(name=p, target_config=inp.target_configs.get(p, new_config(p)), nodes=nodes)
                if inp.page_size is not None and len(nodes) > inp.page_size:  # as the real one: first page by name
                    first = node_page(nodes, after="", limit=inp.page_size)
                    info = info.model_copy(update={"nodes": first.nodes, "more_after": first.more_after, "node_count": len(nodes)})
                out.append(info)
            return PreflightResult(pools=out, network_type="OpenShiftSDN")

        @activity.defn(name="list_pool_nodes")
        async def list_pool_nodes(inp: PoolNodesInput) -> PoolNodesPage:
            rec("list_pool_nodes", inp)
            return node_page([self.nodes[n].model_copy() for n in self.pools[inp.pool]], after=inp.after, limit=inp.limit)

        @activity.defn(name="read_node")
        async def read_node(inp: ReadNodeInput) -> NodeInfo:
            rec("read_node", inp)
            if inp.node not in self.nodes:
                raise ApplicationError(f"node {inp.node} not found", type="NodeNotFound", non_retryable=True)
            return self.nodes[inp.node].model_copy()

        @activity.defn(name="set_node_annotations")
        async def set_node_annotations(inp: SetNodeAnnotationsInput) -> NodeInfo:
            rec("set_node_annotations", inp)
            fields = {ANN_DESIRED_CONFIG: "desired_config", ANN_LAST_APPLIED_DRAIN: "last_applied_drain",
                      ANN_DESIRED_DRAIN: "desired_drain", ANN_CURRENT_CONFIG: "current_config"}
            self.set_node(inp.node, **{fields[k]: v for k, v in inp.annotations.items()})
            self._daemon_react(inp.node, on_write=True)
            return self.nodes[inp.node].model_copy()

        @activity.defn(name="wait_for_node")
        async def wait_for_node(inp: WaitForNodeInput) -> WaitForNodeResult:
            rec("wait_for_node", inp)
            self._tick(inp.node)
            n = self.nodes[inp.node]
            values = {ANN_DESIRED_DRAIN: n.desired_drain, ANN_LAST_APPLIED_DRAIN: n.last_applied_drain,
                      ANN_CURRENT_CONFIG: n.current_config, ANN_DESIRED_CONFIG: n.desired_config}
            if inp.kind == "config_done":
                matched = n.current_config == inp.value and n.state == "Done"
            else:
                matched = values.get(inp.annotation) == inp.value
            matched = matched or any(values.get(a) == v for a, v in inp.any_of)
            if matched:
                return WaitForNodeResult(node=n.model_copy(), matched=True)
            if n.degraded:
                return WaitForNodeResult(node=n.model_copy(), matched=False, degraded=True)
            await asyncio.sleep(0.02)  # a real watch would block here; keep the loop gentle
            return WaitForNodeResult(node=n.model_copy(), matched=False, timed_out=True)

        @activity.defn(name="wait_for_node_done")
        async def wait_for_node_done(inp: WaitForNodeDoneInput) -> WaitForNodeDoneResult:
            """As the real one: writes the drain hand-off it is given (recorded as the
            ``set_node_annotations`` it makes) and answers the uncordon request (recorded as
            ``answer_uncordon``)."""
            rec("wait_for_node_done", inp)
            self._tick(inp.node)
            n = self.nodes[inp.node]
            answered_at, unc, handed_at = None, None, None
            drain_v = drain_value(inp.target)
            if inp.hand_off_drain and n.desired_drain == drain_v and n.last_applied_drain not in (drain_v, uncordon_value(inp.target)):
                n = await set_node_annotations(
                    SetNodeAnnotationsInput(node=inp.node, annotations={ANN_LAST_APPLIED_DRAIN: drain_v}, read_first=False)
                )
                handed_at = datetime.now(UTC)
            if n.desired_drain == uncordon_value(inp.target) and n.last_applied_drain != uncordon_value(inp.target):
                rec("answer_uncordon", inp)
                if n.unschedulable and n.cordoned_by == inp.owner:
                    self.set_node(inp.node, unschedulable=False, cordoned_by=None)
                    unc = UncordonResult(uncordoned=True)
                elif n.unschedulable:
                    unc = UncordonResult(uncordoned=False, left_cordoned_reason=f"cordoned by {n.cordoned_by}")
                else:
                    unc = UncordonResult(uncordoned=True)
                self.set_node(inp.node, last_applied_drain=uncordon_value(inp.target))
                self._daemon_react(inp.node)
                answered_at = datetime.now(UTC)
                n = self.nodes[inp.node]
            if n.current_config == inp.target and n.state == "Done":
                outcome = "done"
            elif n.desired_drain == drain_value(inp.target) and n.last_applied_drain != drain_value(inp.target):
                outcome = "drain_requested"
            elif n.degraded:
                outcome = "degraded"
            else:
                await asyncio.sleep(0.02)
                outcome = "timed_out"
            return WaitForNodeDoneResult(
                node=n.model_copy(), outcome=outcome, uncordon_answered_at=answered_at, uncordon=unc, drain_handed_off_at=handed_at
            )

        @activity.defn(name="drain_when_asked")
        async def drain_when_asked(inp: DrainWhenAskedInput) -> DrainWhenAskedResult:
            """As the real one: waits (one tick) for the drain request, then cordons and drains
            through the fakes below (recorded as cordon_node and drain_node too). With
            ``set_desired_config`` it first writes desiredConfig (recorded as set_node_annotations)
            and returns ``first_look_only`` for a node that does not plainly wait, as the real one."""
            rec("drain_when_asked", inp)
            if inp.node in self.drain_call_go:
                self.drain_call_started.setdefault(inp.node, asyncio.Event()).set()
                await asyncio.shield(self.drain_call_go[inp.node].wait())
            if inp.set_desired_config:
                first = await set_node_annotations(
                    SetNodeAnnotationsInput(node=inp.node, annotations={ANN_DESIRED_CONFIG: inp.target}, read_first=False)
                )
                if not plainly_waiting(first, inp):
                    return DrainWhenAskedResult(node=first, asked=False, first_look_only=True)
            self._tick(inp.node)
            n = self.nodes[inp.node]
            if n.desired_drain == drain_value(inp.target) and n.last_applied_drain != drain_value(inp.target):
                cordon = await cordon_node(CordonInput(node=inp.node, owner=inp.owner))
                drain = await drain_node(inp.drain.model_copy(update={"node": inp.node}))
                return DrainWhenAskedResult(
                    node=self.nodes[inp.node].model_copy(), asked=True, matched=True, cordon=cordon, drain=drain,
                    drain_seconds=0.1,
                )
            if n.desired_drain == uncordon_value(inp.target) or n.current_config == inp.target:
                return DrainWhenAskedResult(node=n.model_copy(), asked=False, matched=True)
            if n.degraded:
                return DrainWhenAskedResult(node=n.model_copy(), asked=False, degraded=True)
            await asyncio.sleep(0.02)
            return DrainWhenAskedResult(node=n.model_copy(), asked=False, timed_out=True)

        @activity.defn(name="cordon_node")
        async def cordon_node(inp: CordonInput) -> CordonResult:
            rec("cordon_node", inp)
            n = self.nodes[inp.node]
            if n.unschedulable:
                return CordonResult(cordoned_by_us=n.cordoned_by == inp.owner, was_unschedulable=True)
            self.set_node(inp.node, unschedulable=True, cordoned_by=inp.owner)
            return CordonResult(cordoned_by_us=True, was_unschedulable=False)

        @activity.defn(name="uncordon_node")
        async def uncordon_node(inp: UncordonInput) -> UncordonResult:
            rec("uncordon_node", inp)
            n = self.nodes[inp.node]
            if n.unschedulable and n.cordoned_by == inp.owner:
                self.set_node(inp.node, unschedulable=False, cordoned_by=None)
                return UncordonResult(uncordoned=True)
            if not n.unschedulable:
                return UncordonResult(uncordoned=False)
            return UncordonResult(uncordoned=False, left_cordoned_reason=f"cordoned by {n.cordoned_by or 'somebody else'}")

        @activity.defn(name="drain_node")
        async def drain_node(inp: DrainInput) -> DrainResult:
            rec("drain_node", inp)
            if inp.node in self.drain_blocked:
                report = self.drain_blocked[inp.node]
                return DrainResult(done=False, remaining=[f"{p.namespace}/{p.name}" for p in report.blocked_pods],
                                   blocked=report)
            return DrainResult(done=True, evicted=[f"default/app-{inp.node}"])

        @activity.defn(name="record_node_event")
        async def record_node_event(inp: RecordEventInput) -> None:
            rec("record_node_event", inp)
            self.events.append(inp)

        @activity.defn(name="check_pods_ready")
        async def check_pods_ready(inp: PodsReadyInput) -> PodsReadyResult:
            rec("check_pods_ready", inp)
            if inp.namespace == "openshift-ovn-kubernetes":
                if self.ovnkube_polls > 0:
                    self.ovnkube_polls -= 1
                    return PodsReadyResult(ready=False, total=len(self.nodes), nodes_missing=[next(iter(self.nodes))])
                return PodsReadyResult(ready=True, total=len(self.nodes))
            if self.workloads_polls > 0:
                self.workloads_polls -= 1
                return PodsReadyResult(ready=False, total=10, not_ready=["default/app-1"])
            return PodsReadyResult(ready=True, total=10)

        @activity.defn(name="list_pods_to_delete")
        async def list_pods_to_delete(inp: ListPodsToDeleteInput) -> ListPodsToDeleteResult:
            rec("list_pods_to_delete", inp)
            return ListPodsToDeleteResult(pods=[PodRef(namespace="default", name=f"app-{n}", uid=f"uid-{n}") for n in range(10)])

        @activity.defn(name="delete_all_pods")
        async def delete_all_pods(inp: DeleteAllPodsInput) -> DeleteAllPodsResult:
            rec("delete_all_pods", inp)
            self.deleted_pods = len(inp.pods) if inp.pods is not None else 10
            return DeleteAllPodsResult(deleted=self.deleted_pods)

        return [preflight, list_pool_nodes, read_node, set_node_annotations, wait_for_node, wait_for_node_done, drain_when_asked, cordon_node,
                uncordon_node,
                drain_node, record_node_event, check_pods_ready, list_pods_to_delete, delete_all_pods,
                find_held_leases]  # the real one: it asks the (test) Temporal server, nothing of the cluster


@asynccontextmanager
async def rollout_worker(client: Client, fake: FakeCluster, task_queue: str) -> AsyncIterator[Worker]:
    """A worker for ``task_queue`` running lockkeeper's workflows and ``fake``'s activities."""
    async with Worker(client, task_queue=task_queue, workflows=WORKFLOWS, activities=fake.activities()) as worker:
        yield worker


def preflight_activity(failing: dict[str, str] | None = None) -> Callable:
    """A ``check_preconditions`` stand-in: every precondition ``ok``, but those whose kind or
    subject is a key of ``failing`` (its value the detail). ``calls`` on the function holds every
    input it got."""
    failing = failing or {}

    @activity.defn(name=CHECK_PRECONDITIONS)
    async def check_preconditions(inp: CheckPreconditionsInput) -> CheckPreconditionsResult:
        check_preconditions.calls.append(inp)  # type: ignore[attr-defined]
        out = []
        for p in inp.preconditions:
            why = failing.get(p.kind) or failing.get(p.subject())
            out.append(PreconditionResult(precondition=p, state=PreconditionState.FAILED if why else PreconditionState.OK,
                                          detail=why or "ok (test stand-in)", checked_at=datetime.now(UTC)))
        return CheckPreconditionsResult(results=out)

    check_preconditions.calls = []  # type: ignore[attr-defined]
    return check_preconditions
