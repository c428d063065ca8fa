"""The MachineConfig rollout's leases (:mod:`workflows.kit.lease`): its pools for the whole run,
and its nodes either all up front or, for a large plan, each only while it is in the node window.

A plan of at most ``window_node_leases_above`` nodes leases its pools and every planned node up
front (all started in one workflow task). A larger plan leases its pools for the whole run and
probes its nodes' scopes with one ``find_held_leases`` activity (Temporal caps a workflow's
pending children at 2,000: one lease per planned node up front failed a 2,000-node start); each
node run is then its node's lease (started with the lease's workflow ID, answering ``contend``
and ``holder``), so the rollout's history records no lease start, release or completion per
node. A node that ends degraded or failed is leased again by the rollout, which keeps it until
the end (a skip may still roll it back). After a continue-as-new the next run takes again the
pools and the nodes it still needs (:meth:`workflows.kit.lease.Leases.retake`); between the two
runs the scopes are free for an instant: a procedure that takes one then makes the next run fail
with LeaseHeld, never share the scope.

A component of :class:`workflows.machineconfig.workflow.MachineConfigRolloutWorkflow` with its
own state; it reads the node window (:class:`workflows.kit.batches.NodeBatches`: the board's
node statuses, the children's results, the window's tasks). Workflow code only (deterministic).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import timedelta

from temporalio import workflow
from temporalio.exceptions import WorkflowAlreadyStartedError

with workflow.unsafe.imports_passed_through():
    from workflows.kit import calls as acts
    from workflows.kit.batches import NodeBatches, WindowCarry
    from workflows.kit.lease import Leases
    from workflows.kit.models import FINAL_NODE_PHASES, NodePhase
    from workflows.kit.scopes import node_scope, pool_scope, scope_workflow_id
    from workflows.machineconfig.models import NodeRolloutInput, RolloutPlan
    from workflows.machineconfig.node import NodeRolloutWorkflow

#: How often the rollout asks again for a degraded node's lease still held by the node run's own
#: lease while it closes (a second apart).
KEEP_LEASE_TRIES = 10

#: Node phases whose lease the rollout keeps until it ends (it may still roll the node back).
_KEEP_LEASE_PHASES = frozenset({NodePhase.DEGRADED, NodePhase.FAILED})


class RolloutLeases:
    """Taking, retaking and releasing the rollout's leases (see the module doc). ``leases``: the
    run's :class:`Leases`; ``window_above``: ``window_node_leases_above``; ``touch``: the
    procedure's status refresh (after a node's warning)."""

    def __init__(self, leases: Leases, batches: NodeBatches, *, cluster: str, window_above: int,
                 timeouts: acts.Timeouts, touch: Callable[[], None]) -> None:
        self.leases, self.batches, self.cluster = leases, batches, cluster
        self.window_above, self.timeouts, self.touch = window_above, timeouts, touch
        #: Node runs lease their own nodes (a plan above ``window_above``).
        self.in_window = False

    async def take(self, plan: RolloutPlan, carry: WindowCarry | None = None) -> None:
        """Lease every pool (``lease/{cluster}/{pool}``) and, for a plan in the window, probe its
        nodes (one ``find_held_leases`` call), else lease every planned node (all started at
        once); probe the cluster-wide lease. After a continue-as-new (``carry``) take again the
        pools and the nodes not final yet (in the window: those we may still roll back), before
        anything starts. A scope held by another procedure fails us with LeaseHeld naming it."""
        pools = {pool_scope(self.cluster, pp.name): f"pool/{pp.name}" for pp in plan.pools}
        nodes = {n: node_scope(self.cluster, n) for pp in plan.pools for n in pp.nodes}
        self.in_window = plan.node_count > self.window_above
        if carry is not None:
            def wanted(phase: NodePhase) -> bool:
                return phase in _KEEP_LEASE_PHASES if self.in_window else phase not in FINAL_NODE_PHASES
            keep = [scope for n, scope in nodes.items() if n in carry.nodes and wanted(carry.nodes[n].phase)]
            await self.leases.retake([*pools, *keep], input_scope=pools)
        elif self.in_window:
            await self.leases.acquire(list(pools), input_scope=pools, probe_cluster=True, concurrent=True)
            await self.leases.probe_by_activity(list(nodes.values()), timeouts=self.timeouts)
        else:
            await self.leases.acquire([*pools, *nodes.values()], input_scope=pools, probe_cluster=True, concurrent=True)

    def scope_for_run(self, node: str) -> str | None:
        """The scope the node run leases itself: None when the rollout leases its nodes up front
        or holds this one already (kept from a degraded or failed attempt that is now retried)."""
        scope = node_scope(self.cluster, node)
        return scope if self.in_window and scope not in self.leases.held else None

    async def start_run(self, child_input: NodeRolloutInput, run_id: str, summary: str) -> workflow.ChildWorkflowHandle:
        """Start the node run ``child_input`` with ID ``run_id``, or with its node's lease ID when
        ``child_input.lease_scope``. Raises the LeaseHeld refusal naming the holder (asked with
        ``contend``) when that lease ID runs already."""
        lease = child_input.lease_scope
        try:
            return await workflow.start_child_workflow(
                NodeRolloutWorkflow.run,
                child_input,
                id=scope_workflow_id(lease) if lease else run_id,
                parent_close_policy=workflow.ParentClosePolicy.TERMINATE,
                static_summary=summary,
            )
        except WorkflowAlreadyStartedError as err:
            if not lease:
                raise
            raise await self.leases.refusal(lease) from err

    def node_finished(self, node: str) -> None:
        """A node's child ended: release its lease (not for a degraded or failed node, which a
        skip may still roll back) without holding the window up. When node runs hold their own
        leases, the rollout takes a degraded or failed node's lease instead (its run's ended)."""
        scope = node_scope(self.cluster, node)
        keep = self.batches.nodes[node].phase in _KEEP_LEASE_PHASES
        if self.in_window and keep and scope not in self.leases.held:
            self.batches.tasks.append(asyncio.create_task(self._keep_node_lease(node, scope)))
            return
        if not self.in_window or scope not in self.leases.held or keep:
            return
        self.batches.tasks.append(asyncio.create_task(self.leases.release_scope(scope)))

    async def _keep_node_lease(self, node: str, scope: str) -> None:
        """Lease a degraded/failed node whose run's lease just ended. Refused while the run's
        lease still closes: try again a second later, :data:`KEEP_LEASE_TRIES` times, and only
        then ask who holds it (asking a closing lease may go unanswered). Held by another
        procedure (it took the node in that instant): the node's status warns, naming it, that
        a skip's rollback is no longer protected."""
        for _ in range(KEEP_LEASE_TRIES):
            if not await self.leases.acquire_some([scope]):
                return
            await workflow.sleep(timedelta(seconds=1))
        if not await self._lost_to_another(node, scope):
            self._warn(node, "node lease not retaken: the node run's lease did not close")

    async def _lost_to_another(self, node: str, scope: str) -> bool:
        """Ask who holds ``scope``; another procedure than this rollout: warn on ``node``, True."""
        err = await self.leases.refusal(scope)
        holder = str(err.details[0]) if err.details else ""
        if holder == self.leases.holder:
            return False
        self._warn(node, f"node lease lost after the node run ended: {err.message}")
        return True

    def _warn(self, node: str, warning: str) -> None:
        self.batches.nodes[node].warning = warning
        self.touch()
